"""The etcd backend's connection: one gRPC channel at a time, failover over the URL's hosts, and
the one place where gRPC errors become coordinator errors.

A gRPC channel talks to one endpoint and never moves on by itself, so :class:`Connection`
keeps the list of hosts and, when a call finds the current one unavailable, builds a channel for
the next host (a fresh channel also skips gRPC's reconnect backoff). Callers read the stubs
through the connection each time, so they follow a failover without knowing about it.

Security (see docs/security-coordinators.md): TLS with a CA file and, for mutual TLS, a client
certificate and key; with :class:`~coordinator.credentials.Credentials`, every call carries an
auth token from etcd's ``Authenticate``, asked for on a channel's first call, again once it is
a minute old (etcd's tokens expire) and after etcd said it is no longer valid. The password
stays in the :class:`_TokenInterceptor`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import grpc
from etcd3 import etcdrpc

from coordinator.credentials import Credentials
from coordinator.errors import (
    ConnectionFailed,
    ConnectionLoss,
    CoordinatorError,
    NotAuthorized,
    OperationTimeout,
    RequestTooLarge,
    SessionExpired,
)

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]


def translate(exc: BaseException, what: str) -> CoordinatorError:
    """Map a gRPC (or closed-channel) error to the coordinator hierarchy; the caller chains it."""
    if isinstance(exc, CoordinatorError):
        return exc
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        code = exc.code()
        details = exc.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            return ConnectionLoss(f"{what}: etcd unavailable: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return OperationTimeout(f"{what}: no answer from etcd within the deadline")
        if code == grpc.StatusCode.CANCELLED:
            return ConnectionLoss(f"{what}: request cancelled (channel closed): {details}")
        if code == grpc.StatusCode.UNAUTHENTICATED and "invalid auth token" in details:
            # a simple token expires after a while unused; the next call asks for a new one
            return ConnectionLoss(f"{what}: etcd's auth token expired: {details}")
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED) or (
                "authentication failed" in details):
            return NotAuthorized(f"{what}: etcd refused the request: {details} (are the "
                                 f"coordinator credentials and the user's role right?)")
        if code == grpc.StatusCode.NOT_FOUND and "lease not found" in details:
            return SessionExpired(f"{what}: the session's lease is gone: {details}")
        if "too many operations" in details or "too large" in details or (
            code == grpc.StatusCode.RESOURCE_EXHAUSTED
        ):
            return RequestTooLarge(f"{what}: etcd refused the request: {details}")
        return CoordinatorError(f"{what}: etcd error {code.name}: {details}")
    if isinstance(exc, ValueError) and _names_a_closed_channel(str(exc)):
        return ConnectionLoss(f"{what}: channel closed during failover")
    return CoordinatorError(f"{what}: unexpected etcd client error: {exc!r}")


def _names_a_closed_channel(message: str) -> bool:
    """gRPC says so in more than one way ("Cannot invoke RPC on closed channel!", "Cannot
    invoke RPC: Channel closed!"), depending on where in the call the channel was found closed."""
    lowered = message.lower()
    return "channel" in lowered and "closed" in lowered


MEMBER_BUSY = frozenset({
    "etcdserver: request timed out",
    "etcdserver: request timed out, waiting for the applied index took too long",
})
"""Answers etcd gives with UNAVAILABLE when the member is up and reachable but behind (its
apply queue long, as under a bulk load of a million keys): the channel delivered them, so
they are no reason to replace it. Replacing it cancelled every call in flight on it (a bulk
write's whole pipeline, "request cancelled (channel closed)") because the lease keep-alive
was told the member was busy. The other "request timed out, possibly due to ..." answers name
a lost leader or connection, and do fail over."""


def member_busy(exc: BaseException) -> bool:
    """An UNAVAILABLE answer of a member that is up but behind (:data:`MEMBER_BUSY`)."""
    return (isinstance(exc, grpc.RpcError) and hasattr(exc, "code")
            and exc.code() == grpc.StatusCode.UNAVAILABLE
            and (exc.details() or "") in MEMBER_BUSY)


def is_connection_error(exc: BaseException) -> bool:
    """The channel (or the member behind it) failed the call: worth moving to the next host.
    A busy member's answer is not (:func:`member_busy`); it is still a ConnectionLoss to the
    caller (:func:`translate`), whose call's outcome is unknown."""
    return isinstance(exc, grpc.RpcError) and hasattr(exc, "code") and exc.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
    ) and not member_busy(exc)


@dataclass(frozen=True, slots=True)
class Security:
    """How to reach etcd: TLS files (PEM paths, read when a channel is made) and the user."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    credentials: Credentials | None = None
    token_max_age: float = 60.0
    """Seconds a token is used before a new one is asked for: well within etcd's
    ``--auth-token-ttl`` (300 s by default), so a token never expires between two calls."""

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials, None for a plaintext channel; :class:`ConnectionFailed` naming a
        file that cannot be read."""
        if self.ca_file is None:
            return None
        pem = [_read(path) if path else None
               for path in (self.ca_file, self.key_file, self.cert_file)]
        return grpc.ssl_channel_credentials(*pem)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConnectionFailed(f"cannot read the etcd TLS file {path}: "
                               f"{exc.strerror or exc}") from None


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class _CallDetails(_Details, grpc.ClientCallDetails):
    """A call's details with the auth token added to its metadata."""


class _TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                        grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds etcd's auth token to every call on one channel, authenticating on the first.

    An error of ``Authenticate`` (etcd unreachable, a wrong password) is the call's error."""

    def __init__(self, channel: grpc.Channel, credentials: Credentials, timeout: float,
                 max_age: float) -> None:
        self._auth = etcdrpc.AuthStub(channel)
        self._credentials = credentials
        self._timeout = timeout
        self._max_age = max_age
        self._lock = threading.Lock()
        self._token: str | None = None
        self._since = 0.0

    def __repr__(self) -> str:
        return f"<etcd token for {self._credentials.user}>"

    def _token_now(self) -> str:
        with self._lock:
            now = time.monotonic()
            if self._token is None or now - self._since > self._max_age:
                creds = self._credentials
                self._token = self._auth.Authenticate(
                    etcdrpc.AuthenticateRequest(name=creds.user, password=creds.password),
                    self._timeout).token
                self._since = now
            return self._token

    def _with_token(self, details: grpc.ClientCallDetails) -> _CallDetails:
        metadata = [*(details.metadata or ()), ("token", self._token_now())]
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None),
                            getattr(details, "compression", None))

    def _forget_rejected(self, call: Any) -> None:
        """Ask for a new token after etcd rejected this one (expired, or etcd restarted)."""
        try:
            if call.code() == grpc.StatusCode.UNAUTHENTICATED:
                with self._lock:
                    self._token = None
        except Exception:  # a call that failed in this interceptor has nothing to say
            pass

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        outcome = continuation(self._with_token(details), request)
        outcome.add_done_callback(self._forget_rejected)
        return outcome

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._with_token(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._with_token(details), requests)


class _Endpoint:
    """One host's channel (TLS and token as :class:`Security` says) and its stubs."""

    def __init__(self, host: str, port: int, security: Security, timeout: float) -> None:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        tls = security.channel_credentials()
        self.raw = (grpc.secure_channel(target, tls, options=GRPC_OPTIONS) if tls is not None
                    else grpc.insecure_channel(target, options=GRPC_OPTIONS))
        self.channel: grpc.Channel = self.raw
        if security.credentials is not None:
            self.channel = grpc.intercept_channel(
                self.raw, _TokenInterceptor(self.raw, security.credentials, timeout,
                                            security.token_max_age))
        self.kvstub = etcdrpc.KVStub(self.channel)
        self.leasestub = etcdrpc.LeaseStub(self.channel)
        # KV.Range answering the response's bytes, for a scan to read them itself
        self.range_bytes = self.channel.unary_unary(
            "/etcdserverpb.KV/Range",
            request_serializer=etcdrpc.RangeRequest.SerializeToString,
            response_deserializer=None)

    def close(self) -> None:
        self.raw.close()


class _Translating:
    """The context of :meth:`Connection.translating`: a class, not a generator-based context
    manager, because it wraps every chunk of a bulk write."""

    __slots__ = ("_conn", "_what", "_generation")

    def __init__(self, conn: Connection, what: str, generation: int) -> None:
        self._conn = conn
        self._what = what
        self._generation = generation

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> Literal[False]:
        if exc is None or not isinstance(exc, (grpc.RpcError, ValueError)):
            return False
        if is_connection_error(exc):
            self._conn.failed(self._generation)
        raise translate(exc, self._what) from exc


class Connection:
    """The current endpoint's channel and stubs; ``failed()`` moves to the next host."""

    def __init__(self, hosts: tuple[tuple[str, int], ...], request_timeout: float,
                 security: Security | None = None) -> None:
        if not hosts:
            raise ConnectionFailed("an etcd URL needs at least one host")
        self.hosts = hosts
        self.request_timeout = request_timeout
        self.security = security or Security()
        self._lock = threading.Lock()
        self._index = 0
        self.generation = 0
        self._client: Any = self._new_client(0)
        self._closed = False

    def _new_client(self, index: int) -> _Endpoint:
        host, port = self.hosts[index]
        return _Endpoint(host, port, self.security, self.request_timeout)

    @property
    def address(self) -> str:
        host, port = self.hosts[self._index]
        return f"{host}:{port}"

    def describe_hosts(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.hosts)

    # Stubs are read through the connection for every call, so they follow a failover.
    @property
    def kv(self) -> Any:
        return self._client.kvstub

    @property
    def range_bytes(self) -> Any:
        """KV.Range, its response left serialized (see :func:`coordinator.etcd._range_into`)."""
        return self._client.range_bytes

    @property
    def lease(self) -> Any:
        return self._client.leasestub

    def watch_stub(self) -> Any:
        return etcdrpc.WatchStub(self._client.channel)

    def translating(self, what: str, generation: int) -> _Translating:
        """A context for sending or collecting gRPC calls made on the channel of
        ``generation``: a gRPC error (or the ValueError of a channel closed under the call)
        leaves it as the coordinator error :func:`translate` makes of it, chained, after a
        failover to the next host when the connection was to blame.

        Wrap a batch's call, never each op: this is on the bulk read and write paths."""
        return _Translating(self, what, generation)

    def stream_broke(self, exc: grpc.RpcError, generation: int) -> bool:
        """A long-lived stream (keep-alive, watch) of ``generation`` ended with ``exc``: fail
        over when the connection is to blame (unavailable, cancelled, or a deadline passed)
        and say so; False for an error of the server's, which the caller logs before opening
        the stream again on the same host."""
        if is_connection_error(exc) or exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            self.failed(generation)
            return True
        return False

    def failed(self, generation: int) -> None:
        """The channel of ``generation`` failed: switch to the next host (once per generation)."""
        with self._lock:
            if generation != self.generation or self._closed:
                return
            old = self._client
            self._index = (self._index + 1) % len(self.hosts)
            self._client = self._new_client(self._index)
            self.generation += 1
        _close_quietly(old)

    def connect(self, timeout: float, probe: bytes = b"\x00") -> None:
        """Find a host that answers a read of the key ``probe`` (one the user may read), in URL
        order, within ``timeout`` seconds; else ConnectionFailed (saying the timeout). An
        error that is not the connection's (a wrong password, a role without that key) is
        raised at once, translated."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            generation = self.generation
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                self.kv.Range(etcdrpc.RangeRequest(key=probe, count_only=True),
                              min(remaining, max(self.request_timeout, 0.1)))
                return
            except grpc.RpcError as exc:
                if not is_connection_error(exc) and not member_busy(exc) and exc.code() != (
                        grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise translate(exc, f"etcd at {self.address}") from exc
                last = exc
                self.failed(generation)
                if self._index == 0:
                    time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        detail = f": {last.details()}" if isinstance(last, grpc.RpcError) else ""
        raise ConnectionFailed(
            f"could not reach etcd at {self.describe_hosts()} within {timeout:g}s{detail}"
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client = self._client
        _close_quietly(client)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # closing a broken channel may complain; there is nothing to do about it
        pass
