"""The client side of a secure listener, for a broker's own blocking connections (followers
fetching from leaders, the controller's channel, controlled shutdown): open the socket, wrap it
in TLS, and authenticate with SASL (SaslHandshake v1, then SaslAuthenticate rounds), as Kafka's
clients do after ApiVersions.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaclient.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkaclient.security.scram import ScramClient, ScramError
from kafkaclient.security.settings import ClientSecurity
from kafkaclient.security.tls import client_context

__all__ = ["AuthenticationFailed", "Connector", "SASL_AUTHENTICATE", "SASL_HANDSHAKE"]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class AuthenticationFailed(ConnectionError):
    """The TLS handshake or the SASL exchange failed; the message holds no secret."""


class Connector:
    """Opens connections as ``security`` says (the TLS context is built once, on first use)."""

    def __init__(self, security: ClientSecurity) -> None:
        self.security = security
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    @property
    def sasl(self) -> bool:
        return self.security.mechanism is not None

    def _ssl_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                assert self.security.ssl is not None
                self._context = client_context(self.security.ssl)
            return self._context

    def open(self, host: str, port: int, timeout: float) -> socket.socket:
        """A connected socket (TLS handshake done); OSError when it cannot be had."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.security.ssl is None:
            return sock
        try:
            wrapped = self._ssl_context().wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            sock.close()
            raise AuthenticationFailed(f"TLS handshake with {host}:{port} failed: "
                                       f"{exc.reason or exc}") from None
        except OSError:
            sock.close()
            raise
        return wrapped

    def authenticate(self, call: Callable[[Any], Any]) -> float | None:
        """Run the SASL exchange over ``call`` (request -> response on the connection);
        returns when the session must be renewed (a monotonic time, a little before the end the
        broker gave: KIP-368), None when it lasts as long as the connection or there is no SASL.
        :class:`AuthenticationFailed` when the broker refuses."""
        s = self.security
        if s.mechanism is None:
            return None
        assert s.username is not None and s.password is not None
        # SASL_HANDSHAKE v1 and SASL_AUTHENTICATE v1, imported when first used
        from kio.schema.sasl_authenticate.v1 import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest

        handshake = SaslHandshakeRequest(mechanism=s.mechanism)
        answer = call(handshake)
        if answer.error_code != ErrorCode.none:
            raise AuthenticationFailed(f"SaslHandshake for {s.mechanism}: "
                                       f"{ErrorCode(answer.error_code).name} (the broker "
                                       f"enables {', '.join(answer.mechanisms)})")
        lifetime = [0.0]

        def send(token: bytes) -> bytes:
            response = call(SaslAuthenticateRequest(auth_bytes=token))
            if response.error_code != ErrorCode.none:
                raise AuthenticationFailed(f"{s.mechanism} authentication as {s.username!r} "
                                           f"failed: {response.error_message or ''}".rstrip())
            lifetime[0] = response.session_lifetime.total_seconds()
            return bytes(response.auth_bytes)

        if s.mechanism == "PLAIN":
            send(b"\0" + s.username.encode() + b"\0" + s.password.reveal().encode())
        elif s.mechanism in SCRAM_MECHANISMS:
            client = ScramClient(s.mechanism, s.username, s.password.reveal())
            try:
                final = client.final(send(client.first()))
                client.verify(send(final))
            except ScramError as exc:
                raise AuthenticationFailed(f"{s.mechanism} as {s.username!r}: {exc}") from None
        if lifetime[0] <= 0:
            return None
        # renew at 85% of the lifetime, as Kafka's clients re-authenticate at 85-95%
        return time.monotonic() + lifetime[0] * 0.85
