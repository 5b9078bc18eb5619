"""A SASL listener's authentication of one connection, as Kafka's SaslServerAuthenticator does
it, with no I/O of its own: the connection feeds it each request frame (and the time) and
does what it answers (:mod:`broker.server` is the shell that reads and writes).

Before the session is complete only ApiVersions (before the handshake), SaslHandshake v0 or v1
and then the mechanism's tokens are accepted: in SaslAuthenticate requests (v0 to v2) after a
v1 handshake, in raw frames (a size and the token, nothing else) after a v0 one (KIP-152 made
the tokens Kafka requests). Any other request, an unknown mechanism or a failed
authentication closes the connection, after the answer saying why where Kafka sends one.
Frames before authentication are limited to :data:`SASL_MAX_RECEIVE` bytes.

With ``connections.max.reauth.ms`` (KIP-368) a session lasts that long, which SaslAuthenticate
tells the client; it re-authenticates on the same connection (SaslHandshake v1 and
SaslAuthenticate, answered in order with its other requests) as the same principal, and a
request other than those two after the session's end closes the connection.

:meth:`Authenticator.receive` answers each frame with one step: :class:`Dispatch` (an ordinary
request: hand it to the API registry as :attr:`Authenticator.principal`), :class:`Answer` (a
kio response to send, then perhaps close), :class:`Token` (a raw token to send, after a v0
handshake) or :class:`Close`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.credentials import CredentialCache
from broker.security.sasl import SaslFailed, SaslSession
from broker.security.settings import SaslSettings
from broker.wire import FrameError, parse_request, peek, response_module
from kafkaclient.messages import build

__all__ = [
    "API_VERSIONS",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SASL_MAX_RECEIVE",
    "Answer",
    "Authenticator",
    "Close",
    "Dispatch",
    "Step",
    "Token",
]

log = logging.getLogger(__name__)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_SASL_KEYS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)

SASL_MAX_RECEIVE = 524_288
"""Kafka's sasl.server.max.receive.size: the largest frame read before authentication."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """An ordinary request: handle it through the API registry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """Send ``response`` (a kio response) to the request of the header given; with ``close``,
    close the connection once it is sent."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    response: Any
    close: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Token:
    """Send ``token`` framed by its size alone (the exchange after a v0 SaslHandshake)."""

    token: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """Close the connection without an answer (the reason is logged)."""

    reason: str


Step = Dispatch | Answer | Token | Close

DISPATCH = Dispatch()


class Authenticator:
    """One connection's SASL state on a listener with ``settings``: pending, then
    authenticated as :attr:`principal` until :attr:`deadline` (monotonic seconds; None: for
    the connection's life), re-authenticating meanwhile if the client starts to."""

    def __init__(self, settings: SaslSettings, credentials: CredentialCache | None, *,
                 peer: str = "", listener: str = "") -> None:
        self.settings = settings
        self.credentials = credentials
        self.peer = peer
        self.listener = listener
        self.principal: str | None = None
        """Who the client authenticated as (``User:<name>``); None until then."""
        self.mechanism: str | None = None
        self.deadline: float | None = None
        """When the session ends (monotonic seconds; None: with the connection)."""
        self._session = SaslSession(settings, credentials)
        self._handshake: int | None = None
        """The version of the first exchange's SaslHandshake (None: none yet)."""
        self._reauth: SaslSession | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def max_receive(self) -> int | None:
        """The largest frame to read now: :data:`SASL_MAX_RECEIVE` before authentication,
        None (the server's own limit) after."""
        return None if self.authenticated else SASL_MAX_RECEIVE

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now > self.deadline

    def receive(self, frame: bytes, now: float) -> Step:
        """What to do with ``frame``, the connection's next request, received at ``now``."""
        if not self.authenticated:
            return self._first(frame, now)
        try:
            key, version, _ = peek(frame)
        except FrameError:
            return Close(reason="no header")
        if key in _SASL_KEYS:
            return self._again(frame, key, version, now)
        if self.expired(now):
            log.info("closing %s: its SASL session expired (connections.max.reauth.ms)",
                     self.peer)
            return Close(reason="session expired")
        return DISPATCH

    # -- the first exchange --------------------------------------------------------------------

    def _first(self, frame: bytes, now: float) -> Step:
        session = self._session
        if self._handshake == 0:  # a v0 handshake: raw tokens, framed by their size alone
            try:
                token = session.step(frame)
            except SaslFailed as exc:
                log.info("closing %s: SASL %s authentication failed: %s", self.peer,
                         session.mechanism, exc)
                return Close(reason=str(exc))
            if session.complete:
                self._complete(session, now)
            return Token(token=token)
        try:
            key, version, _ = peek(frame)
        except FrameError:
            return Close(reason="no header")
        if key == API_VERSIONS and self._handshake is None:
            return DISPATCH
        if key == SASL_HANDSHAKE and self._handshake is None and version in (0, 1):
            parsed = self._parse(frame, key, version)
            if isinstance(parsed, Close):
                return parsed
            header, request = parsed
            known = session.handshake(request.mechanism)
            answer = self._answer(header, key, version, build(
                response_module(key, version).SaslHandshakeResponse,
                error_code=ErrorCode.none if known else ErrorCode.unsupported_sasl_mechanism,
                mechanisms=session.enabled), close=not known)
            if not known:
                log.info("closing %s: SASL mechanism %r is not enabled on %s", self.peer,
                         request.mechanism[:64], self.listener)
            else:
                self._handshake = version
            return answer
        if key == SASL_AUTHENTICATE and self._handshake == 1 and 0 <= version <= 2:
            parsed = self._parse(frame, key, version)
            if isinstance(parsed, Close):
                return parsed
            header, request = parsed
            module = response_module(key, version)
            try:
                token = session.step(bytes(request.auth_bytes))
            except SaslFailed as exc:
                log.info("closing %s: SASL %s authentication failed: %s", self.peer,
                         session.mechanism, exc)
                return self._answer(header, key, version, build(
                    module.SaslAuthenticateResponse,
                    error_code=ErrorCode.sasl_authentication_failed,
                    error_message=str(exc), auth_bytes=b""), close=True)
            if session.complete:
                self._complete(session, now)
            return self._answer(header, key, version, build(
                module.SaslAuthenticateResponse, error_code=ErrorCode.none,
                error_message=None, auth_bytes=token,
                session_lifetime=self._lifetime(session)))
        log.info("closing %s: api key %d v%d before SASL authentication on %s",
                 self.peer, key, version, self.listener)
        return Close(reason=f"api key {key} before authentication")

    # -- re-authentication (KIP-368) -----------------------------------------------------------

    def _again(self, frame: bytes, key: int, version: int, now: float) -> Step:
        """SaslHandshake (v1) and SaslAuthenticate on an authenticated connection: the
        principal must stay the same; a failure answers, then closes."""
        parsed = self._parse(frame, key, version)
        if isinstance(parsed, Close):
            return parsed
        header, request = parsed
        module = response_module(key, version)
        if key == SASL_HANDSHAKE:
            session = SaslSession(self.settings, self.credentials)
            known = version >= 1 and session.handshake(request.mechanism)
            self._reauth = session if known else None
            return self._answer(header, key, version, build(
                module.SaslHandshakeResponse,
                error_code=ErrorCode.none if known else ErrorCode.unsupported_sasl_mechanism,
                mechanisms=session.enabled), close=not known)
        reauth = self._reauth
        if reauth is None or reauth.complete:
            return self._answer(header, key, version, build(
                module.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                error_message="SaslAuthenticate without a SaslHandshake", auth_bytes=b""),
                close=True)
        try:
            token = reauth.step(bytes(request.auth_bytes))
            if reauth.complete and reauth.principal != self.principal:
                raise SaslFailed(f"Cannot change principals during re-authentication from "
                                 f"{self.principal}: {reauth.principal}")
        except SaslFailed as exc:
            log.info("closing %s: SASL re-authentication failed: %s", self.peer, exc)
            return self._answer(header, key, version, build(
                module.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                error_message=str(exc), auth_bytes=b""), close=True)
        if reauth.complete:
            self._complete(reauth, now)
            self._reauth = None
        return self._answer(header, key, version, build(
            module.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
            auth_bytes=token, session_lifetime=self._lifetime(reauth)))

    # -- helpers -------------------------------------------------------------------------------

    def _parse(self, frame: bytes, key: int, version: int) -> tuple[Any, Any] | Close:
        try:
            return parse_request(frame, key, version)
        except FrameError as exc:
            log.info("closing %s: %s", self.peer, exc)
            return Close(reason=str(exc))

    @staticmethod
    def _answer(header: Any, key: int, version: int, response: Any, *,
                close: bool = False) -> Answer:
        return Answer(api_key=key, api_version=version, correlation_id=header.correlation_id,
                      client_id=header.client_id, response=response, close=close)

    def _lifetime(self, session: SaslSession) -> timedelta:
        """The session lifetime to tell the client once ``session`` is complete:
        ``connections.max.reauth.ms`` (KIP-368), 0 (no expiry) without it."""
        return timedelta(milliseconds=self.settings.reauth_ms if session.complete else 0)

    def _complete(self, session: SaslSession, now: float) -> None:
        assert session.principal is not None
        self.principal = session.principal
        self.mechanism = session.mechanism
        lifetime = self.settings.reauth_ms
        self.deadline = now + lifetime / 1000 if lifetime > 0 else None
        log.debug("%s authenticated as %s with %s", self.peer, self.principal,
                  session.mechanism)
