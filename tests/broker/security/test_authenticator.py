"""The SASL authenticator without sockets (issue 30): frames in, steps out, the time given.

A full PLAIN exchange (KIP-152's SaslAuthenticate, and the raw tokens of a v0 handshake), a
SCRAM-SHA-512 exchange, Kafka's answer to a bad password and to an unknown mechanism, a
request before authentication, and KIP-368's session that ends unless re-authenticated, as
the same principal."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authenticator import (
    SASL_MAX_RECEIVE,
    Answer,
    Authenticator,
    Close,
    Dispatch,
    Token,
)
from broker.security.credentials import CredentialCache
from broker.security.settings import SaslSettings
from kafkaclient.security.password import Password
from kafkaclient.security.scram import ScramClient, make_credential
from tests.broker.wire_client import encode_request, request

SETTINGS = SaslSettings(mechanisms=("PLAIN", "SCRAM-SHA-512"),
                        plain_users={"bob": Password("bob-pw"), "carl": Password("carl-pw")})


def frame(body: Any, correlation_id: int = 1) -> bytes:
    return encode_request(body, correlation_id)[4:]  # the size prefix is the reader's


def authenticator(settings: SaslSettings = SETTINGS) -> Authenticator:
    cache = CredentialCache()
    cache.update("alice", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "alice-pw")
                           .encode()})
    return Authenticator(settings, cache, peer="127.0.0.1:1", listener="SASL_PLAINTEXT")


def handshake(auth: Authenticator, mechanism: str, now: float = 0.0) -> Answer:
    step = auth.receive(frame(request(17, 1, mechanism=mechanism)), now)
    assert isinstance(step, Answer)
    return step


def authenticate(auth: Authenticator, token: bytes, now: float = 0.0) -> Answer:
    step = auth.receive(frame(request(36, 2, auth_bytes=token), correlation_id=7), now)
    assert isinstance(step, Answer)
    assert step.correlation_id == 7 and step.api_key == 36 and step.api_version == 2
    return step


def metadata() -> bytes:
    return frame(request(3, 12, topics=(), allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False))


def test_a_full_plain_exchange() -> None:
    auth = authenticator()
    assert auth.max_receive == SASL_MAX_RECEIVE
    assert isinstance(auth.receive(frame(request(18, 3, client_software_name="t",
                                                 client_software_version="1")), 0.0), Dispatch)
    answer = handshake(auth, "PLAIN")
    assert answer.response.error_code == ErrorCode.none and not answer.close
    assert answer.response.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    done = authenticate(auth, b"\0bob\0bob-pw")
    assert done.response.error_code == ErrorCode.none and not done.close
    assert done.response.session_lifetime.total_seconds() == 0
    assert auth.authenticated and auth.principal == "User:bob" and auth.deadline is None
    assert auth.max_receive is None
    assert isinstance(auth.receive(metadata(), 10_000.0), Dispatch)


def test_plain_after_a_v0_handshake_is_raw_tokens() -> None:
    auth = authenticator()
    answer = auth.receive(frame(request(17, 0, mechanism="PLAIN")), 0.0)
    assert isinstance(answer, Answer) and answer.response.error_code == ErrorCode.none
    step = auth.receive(b"\0bob\0bob-pw", 0.0)
    assert step == Token(token=b"")
    assert auth.principal == "User:bob"


def test_a_scram_exchange() -> None:
    auth = authenticator()
    handshake(auth, "SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-pw")
    first = authenticate(auth, client.first())
    assert first.response.error_code == ErrorCode.none and not auth.authenticated
    final = authenticate(auth, client.final(bytes(first.response.auth_bytes)))
    assert final.response.error_code == ErrorCode.none
    client.verify(bytes(final.response.auth_bytes))
    assert auth.principal == "User:alice"


def test_a_bad_password_is_answered_then_closed() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    refused = authenticate(auth, b"\0bob\0wrong")
    assert refused.close and not auth.authenticated
    assert refused.response.error_code == ErrorCode.sasl_authentication_failed
    assert refused.response.error_message == ("Authentication failed: Invalid username or "
                                              "password")
    scram = authenticator()
    handshake(scram, "SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "not-alice-pw")
    first = authenticate(scram, client.first())
    refused = authenticate(scram, client.final(bytes(first.response.auth_bytes)))
    assert refused.close and refused.response.error_code == ErrorCode.sasl_authentication_failed
    assert refused.response.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512")


def test_an_unknown_mechanism_is_answered_then_closed() -> None:
    answer = handshake(authenticator(), "GSSAPI")
    assert answer.close
    assert answer.response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert answer.response.mechanisms == ("PLAIN", "SCRAM-SHA-512")


def test_a_request_before_authentication_closes() -> None:
    auth = authenticator()
    assert isinstance(auth.receive(metadata(), 0.0), Close)
    handshaken = authenticator()
    handshake(handshaken, "PLAIN")
    assert isinstance(handshaken.receive(metadata(), 0.0), Close)  # the handshake alone
    assert isinstance(handshaken.receive(frame(request(18, 3, client_software_name="t",
                                                      client_software_version="1")), 0.0),
                      Close)  # ApiVersions only before the handshake
    assert isinstance(authenticator().receive(b"\0\x03", 0.0), Close)  # no header
    assert not auth.authenticated and not handshaken.authenticated


def test_a_session_expires_unless_re_authenticated() -> None:
    auth = authenticator(SaslSettings(mechanisms=("PLAIN",), reauth_ms=1000,
                                      plain_users=SETTINGS.plain_users))
    handshake(auth, "PLAIN", now=100.0)
    done = authenticate(auth, b"\0bob\0bob-pw", now=100.0)
    assert done.response.session_lifetime.total_seconds() == 1.0
    assert auth.deadline == 101.0
    assert isinstance(auth.receive(metadata(), 100.9), Dispatch)
    again = handshake(auth, "PLAIN", now=100.9)  # re-authentication, in order with the rest
    assert again.response.error_code == ErrorCode.none and not again.close
    assert isinstance(auth.receive(metadata(), 100.95), Dispatch)  # the old session still
    renewed = authenticate(auth, b"\0bob\0bob-pw", now=100.95)
    assert renewed.response.error_code == ErrorCode.none and auth.deadline == 101.95
    assert isinstance(auth.receive(metadata(), 101.5), Dispatch)  # past the first's end
    assert isinstance(auth.receive(metadata(), 102.0), Close)  # past the second's


def test_re_authentication_keeps_the_principal() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    authenticate(auth, b"\0bob\0bob-pw")
    handshake(auth, "PLAIN")
    refused = authenticate(auth, b"\0carl\0carl-pw")
    assert refused.close
    assert refused.response.error_code == ErrorCode.sasl_authentication_failed
    assert refused.response.error_message == ("Cannot change principals during "
                                              "re-authentication from User:bob: User:carl")
    stray = authenticate(authenticated(), b"\0bob\0bob-pw")  # no handshake first
    assert stray.close and stray.response.error_code == ErrorCode.illegal_sasl_state


def authenticated() -> Authenticator:
    auth = authenticator()
    handshake(auth, "PLAIN")
    authenticate(auth, b"\0bob\0bob-pw")
    return auth
