"""The server side of SASL on a listener: PLAIN and SCRAM, one session per connection.

A session is told the mechanism the client chose (SaslHandshake), then fed the client's tokens
(SaslAuthenticate, or raw frames after a version 0 handshake) until it is complete; it then
names the principal (``User:<name>``). A failure is :class:`SaslFailed` carrying Kafka's
message for it (no secret in it): an unknown SCRAM user or a wrong proof is "invalid
credentials", a SCRAM message that breaks the protocol (malformed, a nonce that does not
match) a "SCRAM protocol failure" naming what was wrong; the connection is closed after that
answer.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from broker.security.credentials import CredentialCache
from broker.security.settings import ListenerSecurity, SaslSettings
from kafkaclient.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkaclient.security.scram import (
    ScramCredential,
    ScramCredentialsError,
    ScramError,
    ScramServer,
)
from kafkaclient.security.tls import server_context

__all__ = ["ListenerAuth", "SaslFailed", "SaslSession", "listener_auth"]


class SaslFailed(Exception):
    """Authentication failed; the message is what the client is told."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerAuth:
    """A listener's security as the server applies it: the TLS context (None: plaintext),
    the SASL settings (None: no SASL), and where SCRAM credentials are looked up."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    credentials: CredentialCache | None = None


class SaslSession:
    """One connection's authentication."""

    def __init__(self, settings: SaslSettings, credentials: CredentialCache | None) -> None:
        self.settings = settings
        self.credentials = credentials
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    @property
    def enabled(self) -> tuple[str, ...]:
        return self.settings.mechanisms

    def handshake(self, mechanism: str) -> bool:
        """Choose ``mechanism``; False when this listener does not enable it."""
        if mechanism not in self.settings.mechanisms:
            return False
        self.mechanism = mechanism
        if mechanism in SCRAM_MECHANISMS:
            credentials = self.credentials

            def lookup(user: str) -> ScramCredential | None:
                return credentials.lookup(mechanism, user) if credentials is not None else None

            self._scram = ScramServer(mechanism, lookup)
        return True

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def step(self, token: bytes) -> bytes:
        """The answer to the client's ``token``; :attr:`complete` once authenticated."""
        if self.mechanism == "PLAIN":
            return self._plain(token)
        assert self._scram is not None
        try:
            answer = self._scram.step(token)
        except ScramCredentialsError as exc:
            raise SaslFailed(f"Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {self.mechanism}") from exc
        except ScramError as exc:  # the client broke the protocol: said as such (no secret)
            raise SaslFailed(f"Authentication failed: SCRAM protocol failure with SASL "
                             f"mechanism {self.mechanism}: {exc}") from exc
        if self._scram.complete:
            self.principal = f"User:{self._scram.username}"
        return answer

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user_bytes, password = parts
        try:
            user = user_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: the username is not UTF-8") from None
        if not user:
            raise SaslFailed("Authentication failed: username not specified")
        if authzid and authzid != user_bytes:
            raise SaslFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        expected = self.settings.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.reveal().encode("utf-8"),
                                                       password):
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.principal = f"User:{user}"
        return b""


def listener_auth(listeners: Mapping[str, ListenerSecurity],
                  credentials: CredentialCache | None) -> dict[str, ListenerAuth]:
    """What the server applies per listener: TLS contexts built (the key and trust stores
    read now: :class:`~kafkaclient.security.tls.TlsError` naming the key when one cannot be), SASL
    settings, the credentials SCRAM looks users up in."""
    return {name: ListenerAuth(
        name=name, protocol=sec.protocol,
        ssl_context=server_context(sec.ssl) if sec.ssl is not None else None,
        sasl=sec.sasl, credentials=credentials) for name, sec in listeners.items()}
