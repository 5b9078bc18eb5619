"""The SCRAM nonce as Kafka 3.9 checks it (its ScramSaslServer accepts a client-final nonce
that ends with the server-first's): librdkafka before 2.6.1 (Debian 12's kcat, librdkafka
2.0.2) sends its own nonce again in front of the combined one, and logs in; a nonce that does
not end with the server's is refused as a SCRAM protocol failure, not as invalid credentials;
a wrong proof is still invalid credentials."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker.security.credentials import CredentialCache
from broker.security.sasl import SaslFailed, SaslSession
from broker.security.settings import SaslSettings
from kafkaclient.security.scram import (
    ScramCredentialsError,
    ScramError,
    ScramServer,
    make_credential,
)

MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "alice", "alice-pencil"
CLIENT_NONCE = "fyko+d2lbbFgONRv9qkxdawL"
SERVER_NONCE = "3rfcNHYJY1ZVvWVs7j"
COMBINED = CLIENT_NONCE + SERVER_NONCE
CLIENT_FIRST = f"n,,n={USER},r={CLIENT_NONCE}".encode()
SALT = b"0123456789abcdef0123456789abcdef"


def client_final(nonce: str, password: str = PASSWORD) -> bytes:
    """The client-final message a client sends with ``nonce`` in it, its proof computed (as
    RFC 5802 says) over the exchange with that very message."""
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    server_first = f"r={COMBINED},s={base64.b64encode(SALT).decode()},i=4096"
    auth = ",".join((CLIENT_FIRST.decode()[3:], server_first, without_proof)).encode()
    signature = hmac.new(stored_key, auth, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def server() -> ScramServer:
    credential = make_credential(MECHANISM, PASSWORD, salt=SALT)
    made = ScramServer(MECHANISM, {USER: credential}.get, nonce=lambda: SERVER_NONCE)
    assert made.step(CLIENT_FIRST) == (f"r={COMBINED},s={base64.b64encode(SALT).decode()},"
                                       "i=4096").encode()
    return made


def session() -> SaslSession:
    cache = CredentialCache()
    cache.update(USER, {MECHANISM: make_credential(MECHANISM, PASSWORD, salt=SALT).encode()})
    made = SaslSession(SaslSettings(mechanisms=(MECHANISM,)), cache)
    assert made.handshake(MECHANISM)
    made._scram._make_nonce = lambda: SERVER_NONCE  # type: ignore[union-attr]
    made.step(CLIENT_FIRST)
    return made


def test_the_exact_nonce_logs_in() -> None:
    exchange = server()
    assert exchange.step(client_final(COMBINED)).startswith(b"v=")
    assert exchange.complete and exchange.username == USER


def test_librdkafka_before_2_6_1_doubled_nonce_logs_in() -> None:
    doubled = CLIENT_NONCE + COMBINED  # r=<client nonce><client nonce><server nonce>
    assert doubled.startswith(CLIENT_NONCE + CLIENT_NONCE)
    exchange = server()
    answer = exchange.step(client_final(doubled))
    assert exchange.complete and exchange.username == USER
    salted = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), SALT, 4096)
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()
    auth = ",".join((CLIENT_FIRST.decode()[3:],
                     f"r={COMBINED},s={base64.b64encode(SALT).decode()},i=4096",
                     f"c=biws,r={doubled}")).encode()
    assert answer == b"v=" + base64.b64encode(hmac.new(server_key, auth, "sha512").digest())
    logged_in = session()
    logged_in.step(client_final(doubled))
    assert logged_in.principal == f"User:{USER}"


@pytest.mark.parametrize("nonce", [
    CLIENT_NONCE,                      # the client's alone
    COMBINED[:-1],                     # the server's cut short
    COMBINED + "x",                    # something after the server's
    CLIENT_NONCE + SERVER_NONCE[::-1],  # another server nonce
    "",
])
def test_a_nonce_not_ending_with_the_servers_is_a_protocol_failure(nonce: str) -> None:
    with pytest.raises(ScramError, match="nonce") as failure:
        server().step(client_final(nonce))
    assert not isinstance(failure.value, ScramCredentialsError)
    with pytest.raises(SaslFailed) as refused:
        session().step(client_final(nonce))
    assert "SCRAM protocol failure" in str(refused.value)
    assert "nonce" in str(refused.value) and "invalid credentials" not in str(refused.value)
    assert PASSWORD not in str(refused.value)


def test_a_wrong_password_with_the_doubled_nonce_is_invalid_credentials() -> None:
    final = client_final(CLIENT_NONCE + COMBINED, password="not-the-password")
    with pytest.raises(ScramCredentialsError):
        server().step(final)
    with pytest.raises(SaslFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        session().step(final)
