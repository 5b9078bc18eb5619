"""``partctl ui``: the cluster page, served by the standard library's threading HTTP server.

:class:`ClusterPage` is the application: a request (method, path, headers, body) in, a
:class:`Response` out, over one coordinator session; the request handler around it is a thin
shell. A page reads the cluster (partctl/cluster_view.py) and renders it with
partctl/webui/pages.py; a read less than ``cache_seconds`` old is reused, so that a page and its
picture cost one read. With ``refresh_in_background`` (what ``partctl ui`` runs) and a cluster
slow to read, an older read is served too while a thread reads the cluster again: a page of a
100,000-partition cluster then costs its rendering (milliseconds), not the read (a second or
more), and says when its view was read.

Read-only unless ``allow_actions``: then the pages show forms that POST a preferred election or
the cancellation of the reassignment in progress. A POST is served only when

- it comes from a page of this server: its ``Origin`` (else its ``Referer``) is this server's
  own address as the browser named it (the ``Host`` header), which a page of another site
  cannot forge (the cross-site request forgery check); and
- it carries HTTP Basic credentials of a user of the cluster, checked against that user's SCRAM
  credentials in the coordinator (``partctl users create``), as the brokers check a SASL/SCRAM
  login (failures from one address are slowed: :class:`~partctl.webui.access.LoginThrottle`).
  The command refuses ``--allow-actions`` on a cluster that has no such user; and
- that user may do it by the cluster's ACLs, as the brokers decide for the Kafka API that does
  the same (Alter on the Cluster for ElectLeaders and AlterPartitionReassignments; super
  users and ``allow.everyone.if.no.acl.found`` as the brokers have them:
  :mod:`partctl.webui.access`); else 403 saying what is missing.

With ``allowed_hosts`` (what ``partctl ui`` sets: ``--allowed-host``, by default the address
it listens on, localhost and 127.0.0.1 at its port) a request for any other ``Host`` is
refused (421), so that a site re-pointed at this address (DNS rebinding) reads nothing.

Every response forbids framing and scripts (Content-Security-Policy), and is not cached.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from partctl.cluster_view import ClusterView, read_cluster
from partctl.webui import pages
from partctl.webui.access import (
    ACTIONS,
    LoginThrottle,
    cluster_bindings,
    host_allowed,
    may,
)
from partctl.webui.access import (
    allowed_hosts as access_hosts,
)
from partctl.webui.pages import PageOptions

if TYPE_CHECKING:
    from coordinator.base import Coordinator

log = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
MAX_BODY = 64 * 1024
SLOW_READ = 0.25
"""Seconds: a cluster that takes longer to read is read in the background (see view())."""
STATE_CHANGE_LINES = 50
STATE_CHANGE_TAIL_BYTES = 256 * 1024
MAX_GROUPS = 100
"""Consumer groups whose lag the groups page works out (each costs requests to the brokers)."""
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    status: int
    body: bytes
    content_type: str = HTML
    headers: Mapping[str, str] = field(default_factory=dict)


class ClusterPage:
    """The application over one coordinator session (see the module's docstring)."""

    def __init__(self, client: Coordinator, *, refresh: float = 0, allow_actions: bool = False,
                 plan: str | None = None, state_change_log: str | None = None,
                 sizes: Mapping[tuple[str, int], int] | None = None, timeout: float = 5.0,
                 cache_seconds: float = 1.0, refresh_in_background: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 super_users: frozenset[str] = frozenset(), allow_if_no_acls: bool = False,
                 allowed_hosts: frozenset[tuple[str, int]] | None = None,
                 throttle: LoginThrottle | None = None) -> None:
        """``plan``: the text of a reassignment plan to picture; ``state_change_log``: a log
        file whose last lines are the "recent state changes"; ``sizes``: partition sizes for
        the bytes per broker; ``timeout``: for the brokers asked about consumer groups;
        ``super_users`` and ``allow_if_no_acls``: the brokers' ``super.users`` and
        ``allow.everyone.if.no.acl.found``, for the actions' ACL checks; ``allowed_hosts``:
        the (name, port) pairs a request's Host may name (None: any); ``throttle``: slows
        failed logins (default: :class:`LoginThrottle`'s)."""
        self.client = client
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls
        self.allowed_hosts = allowed_hosts
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self.allow_actions = allow_actions
        self.plan = plan
        self.state_change_log = state_change_log
        self.sizes = sizes
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.clock = clock
        self.options = PageOptions(refresh=refresh, actions=allow_actions,
                                   plan=plan is not None, plots=_have_matplotlib())
        self.refresh_in_background = refresh_in_background
        self._io = threading.Lock()
        """One coordinator request at a time (the session is shared by the request threads)."""
        self._state = threading.Lock()
        self._cached: tuple[float, ClusterView] | None = None
        self._refreshing = False
        self._read_seconds = 0.0
        self._closed = False

    # --- reading --------------------------------------------------------------------------

    def view(self) -> ClusterView:
        """The cluster as last read: read now when that is ``cache_seconds`` old or more, or,
        with ``refresh_in_background`` and a cluster that takes SLOW_READ or more to read,
        served as it is while a thread reads it again (each page says when its view was
        read)."""
        with self._state:
            cached = self._cached
            now = self.clock()
            if cached is not None and now - cached[0] < self.cache_seconds:
                return cached[1]
            if (cached is not None and self.refresh_in_background
                    and self._read_seconds >= SLOW_READ):
                if not self._refreshing:
                    self._refreshing = True
                    threading.Thread(target=self._refresh, name="partctl-ui-read",
                                     daemon=True).start()
                return cached[1]
        return self._read()

    def _read(self) -> ClusterView:
        with self._io:
            if self._closed:
                raise RuntimeError("the cluster page is closed")
            start = time.monotonic()
            view = read_cluster(self.client, sizes=self.sizes)
            took = time.monotonic() - start
        with self._state:
            self._cached, self._read_seconds = (self.clock(), view), took
        return view

    def _refresh(self) -> None:
        try:
            self._read()
        except Exception:  # the page goes on showing the last view, with its time
            if not self._closed:
                log.warning("partctl ui: reading the cluster failed", exc_info=True)
        finally:
            with self._state:
                self._refreshing = False

    def close(self) -> None:
        """No more reads: waits for one in progress (before the session is closed)."""
        self._closed = True
        with self._io:
            pass

    def _forget(self) -> None:
        with self._state:
            self._cached = None

    def state_changes(self) -> list[str] | None:
        """The last lines of the state-change log (a broker's or controller's
        ``partctl.state.change.log.file``, text or json); None without one."""
        if self.state_change_log is None:
            return None
        try:
            with open(self.state_change_log, "rb") as f:
                f.seek(0, io.SEEK_END)
                f.seek(max(0, f.tell() - STATE_CHANGE_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace").splitlines()
        except OSError as exc:
            return [f"cannot read {self.state_change_log}: {exc.strerror or exc}"]
        return [_log_line(line) for line in deque(tail, maxlen=STATE_CHANGE_LINES)]

    # --- requests -------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes = b"",
               client: str = "") -> Response:
        """One request; ``headers`` with lower-case names; ``client``: the address it came
        from (for the ACLs' host and the slowing of failed logins)."""
        if self.allowed_hosts is not None and not host_allowed(headers.get("host"),
                                                               self.allowed_hosts):
            log.info("partctl ui: refused a request from %s for host %r (not an allowed "
                     "host)", client, (headers.get("host") or "")[:100])
            return self._message(HTTPStatus.MISDIRECTED_REQUEST, "Wrong host",
                                 "this server does not answer for that host name (partctl ui "
                                 "--allowed-host)")
        url = urlsplit(target)
        query = parse_qs(url.query)
        try:
            if method in ("GET", "HEAD"):
                return self._get(url.path, query)
            if method == "POST":
                return self._post(url.path, headers, body, client)
            return self._message(HTTPStatus.METHOD_NOT_ALLOWED, "Not allowed",
                                 f"{method} is not served here")
        except Exception as exc:
            from partctl.errors import user_error

            problem = user_error(exc)
            if problem is None:
                raise
            return self._message(HTTPStatus.SERVICE_UNAVAILABLE, "Cannot read the cluster",
                                 str(problem))

    def _html(self, text: str, status: int = HTTPStatus.OK) -> Response:
        return Response(status=status, body=text.encode("utf-8"))

    def _message(self, status: int, title: str, text: str,
                 headers: Mapping[str, str] | None = None) -> Response:
        return Response(status=status, body=pages.message_page(title, text, self.options)
                        .encode("utf-8"), headers=headers or {})

    def _get(self, path: str, query: Mapping[str, list[str]]) -> Response:
        if path == "/":
            return self._html(pages.overview(self.view(), self.options,
                                             state_changes=self.state_changes()))
        if path == "/topic":
            name = (query.get("name") or [""])[0]
            text = pages.topic_page(self.view(), name, self.options)
            if text is None:
                return self._message(HTTPStatus.NOT_FOUND, "No such topic",
                                     f"topic {name!r} does not exist")
            return self._html(text)
        if path == "/groups":
            groups, error = self._groups()
            return self._html(pages.groups_page(groups, error, self.options))
        if path == "/plan" and self.plan is not None:
            return self._html(pages.plan_page(self._plan_problems(), self.options))
        if path == "/plot/current.png" and self.options.plots:
            return self._png(self._current_png)
        if path == "/plot/plan.png" and self.options.plots and self.plan is not None:
            return self._png(self._plan_png)
        return self._message(HTTPStatus.NOT_FOUND, "Not found", f"nothing at {path}")

    # --- pictures -------------------------------------------------------------------------

    def _png(self, draw: Callable[[io.BytesIO], None]) -> Response:
        buf = io.BytesIO()
        draw(buf)
        return Response(status=HTTPStatus.OK, body=buf.getvalue(), content_type="image/png")

    def _current_png(self, buf: io.BytesIO) -> None:
        from partctl.plot import plot_loads
        from partctl.render import BrokerLoad

        view = self.view()
        loads = [BrokerLoad(broker=b.id, rack=b.rack, replicas=(b.replicas, b.replicas),
                            leaders=(b.preferred, b.preferred),
                            bytes=(b.bytes, b.bytes) if b.bytes is not None else None,
                            leaving=False) for b in view.brokers]
        plot_loads(loads, buf, compare=False, title=f"{len(view.brokers)} brokers, "
                                                    f"{len(view.partitions)} partitions")

    def _snapshot_and_plan(self):
        from rebalancer.live_snapshot import snapshot_from_coordinator
        from rebalancer.plan import parse_plan

        assert self.plan is not None
        with self._io:
            snap = snapshot_from_coordinator(self.client, sizes=self.sizes)
        return snap, parse_plan(self.plan, snap)

    def _plan_problems(self) -> list[str]:
        from rebalancer.plan import PlanError
        from rebalancer.snapshot import SnapshotError

        try:
            self._snapshot_and_plan()
        except (PlanError, SnapshotError) as exc:
            return list(exc.problems)
        return []

    def _plan_png(self, buf: io.BytesIO) -> None:
        from partctl.plot import plot_loads
        from partctl.render import broker_loads

        snap, plan = self._snapshot_and_plan()
        plot_loads(broker_loads(snap, plan), buf, title=f"The plan: {len(plan.partitions)} "
                                                        f"partitions move")

    # --- consumer groups -------------------------------------------------------------------

    def _groups(self) -> tuple[list[pages.GroupLag] | None, str | None]:
        from coordinator.metadata import MetadataClient
        from kafkaclient.groups import LATEST, GroupAdmin, GroupAdminError, plaintext_addresses

        with self._io:
            servers = plaintext_addresses(MetadataClient(self.client).brokers())
        if not servers:
            return None, "no broker with a PLAINTEXT listener is registered"
        out = []
        try:
            with GroupAdmin(servers, timeout=self.timeout) as admin:
                for listed in admin.list_groups()[:MAX_GROUPS]:
                    committed = admin.committed(listed.group_id)
                    ends = admin.offsets(committed, LATEST) if committed else {}
                    lag = sum(max(0, end - committed[tp]) for tp, end in ends.items()
                              if end is not None)
                    out.append(pages.GroupLag(group=listed.group_id, state=listed.state,
                                              lag=lag if committed else None,
                                              partitions=len(committed)))
        except (GroupAdminError, OSError) as exc:
            return None, str(exc)
        return out, None

    # --- actions --------------------------------------------------------------------------

    def _post(self, path: str, headers: Mapping[str, str], body: bytes, client: str
              ) -> Response:
        if not self.allow_actions:
            return self._message(HTTPStatus.METHOD_NOT_ALLOWED, "Read-only",
                                 "this page is read-only (partctl ui --allow-actions)")
        if not same_origin(headers):
            return self._message(HTTPStatus.FORBIDDEN, "Refused",
                                 "the request does not come from this page (Origin/Referer)")
        user = self._login(headers.get("authorization"), client)
        if user is None:
            return self._message(HTTPStatus.UNAUTHORIZED, "Log in",
                                 "the actions need a user of the cluster (SCRAM credentials)",
                                 headers={"WWW-Authenticate":
                                          'Basic realm="partctl", charset="UTF-8"'})
        form = parse_qs(body.decode("utf-8", "replace"))
        actions = {"/actions/elect-preferred": lambda: self._elect(
                       (form.get("topic") or [""])[0] or None),
                   "/actions/cancel-reassignment": self._cancel}
        action, rule = actions.get(path), ACTIONS.get(path)
        if action is None or rule is None:
            return self._message(HTTPStatus.NOT_FOUND, "Not found", f"no action at {path}")
        with self._io:
            bindings = cluster_bindings(self.client)
        if not may(bindings, rule, user=user, host=client or "*",
                   super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls):
            log.info("partctl ui: User:%s from %s may not %s", user, client, rule.api)
            return self._message(
                HTTPStatus.FORBIDDEN, "Not allowed",
                f"User:{user} may not do this: it is Kafka's {rule.api}, which needs "
                f"{rule.operation.label} on the {rule.resource_type.label} resource "
                f"(partctl acls add --cluster --operation {rule.operation.label} "
                f"--allow-principal User:{user}, or a super user)")
        try:
            text = action()
        except Exception as exc:
            from partctl.errors import user_error

            problem = user_error(exc)
            if problem is None:
                raise
            return self._message(HTTPStatus.CONFLICT, "Not done", str(problem))
        self._forget()
        return self._message(HTTPStatus.OK, "Done", text)

    def _login(self, header: str | None, client: str) -> str | None:
        """The user whose credentials ``header`` carries; None (after the failed-login delay
        for ``client``) when it carries none that are right. No header: None at once (the
        browser asks again with the user's credentials)."""
        if not header:
            return None
        found: list[str] = []

        def verify() -> bool:
            user = self._authenticated(header)
            if user is not None:
                found.append(user)
            return user is not None

        if not self.throttle.check(client, verify):
            log.info("partctl ui: a failed login from %s", client)
            return None
        return found[0]

    def _authenticated(self, header: str) -> str | None:
        from coordinator.metadata import MetadataClient
        from kafkaclient.security.scram import MECHANISMS, ScramCredential, password_matches

        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not user:
            return None
        with self._io:
            node = MetadataClient(self.client).user_config(user)
        for mechanism in MECHANISMS:
            text = node.value.get(mechanism) if node is not None else None
            if text is None:
                continue
            try:
                credential = ScramCredential.decode(text)
            except ValueError:
                continue
            if password_matches(mechanism, credential, password):
                return user
        return None

    def _elect(self, topic: str | None) -> str:
        from coordinator.admin import Admin
        from coordinator.codecs import TopicPartition
        from coordinator.layout import validate_topic
        from partctl.errors import UserError

        if topic is not None:
            try:
                validate_topic(topic)
            except ValueError as exc:
                raise UserError(str(exc)) from None
        admin = Admin(self.client)
        with self._io:
            if topic is None:
                chosen = admin.elect_preferred()
            else:
                parts = admin.metadata.assignments([topic]).get(topic)
                if parts is None:
                    raise UserError(f"topic {topic!r} does not exist")
                chosen = admin.elect_preferred(
                    [TopicPartition(topic, p) for p in sorted(parts.value.partitions)])
        return f"Preferred elections requested for {len(chosen)} partitions."

    def _cancel(self) -> str:
        from partctl.render import render_cancel
        from rebalancer.verification import cancel_reassignment

        with self._io:
            report = cancel_reassignment(self.client, wait=0)
        return render_cancel(report)


def _log_line(line: str) -> str:
    """A line of the log as shown: a json-format record as its time and message, any other
    line as it is."""
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return line
        if isinstance(record, dict) and isinstance(record.get("message"), str):
            return f"{record.get('time', '')} {record['message']}".strip()
    return line


def _have_matplotlib() -> bool:
    """The pictures need the ``plot`` extra; without it the pages leave them out."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def same_origin(headers: Mapping[str, str]) -> bool:
    """The request's ``Origin`` (else ``Referer``) is this server as the browser addressed it
    (``Host``). A request with neither is refused: browsers send one with every form POST."""
    host = headers.get("host")
    if not host:
        return False
    origin = headers.get("origin")
    if origin is not None:
        return origin == f"http://{host}"
    referer = headers.get("referer")
    return referer is not None and referer.startswith(f"http://{host}/")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "partctl-ui"
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY or length < 0:
            self.send_error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            return
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        response = self.server.app.handle(self.command, self.path, headers, body,
                                          client=str(self.client_address[0]))
        self.send_response(response.status)
        for name, value in {**SECURITY_HEADERS, **response.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_HEAD = do_POST = _serve

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # the page is polled; a line per request is noise


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: ClusterPage) -> None:
        if ":" in address[0]:
            import socket

            self.address_family = socket.AF_INET6
        self.app = app
        super().__init__(address, _Handler)


def serve(app: ClusterPage, host: str, port: int, *,
          allowed_hosts: Sequence[str] | None = None) -> ThreadingHTTPServer:
    """Listen on ``host:port`` (port 0: a free one; see ``server_address``) and serve ``app``
    from a daemon thread; ``shutdown()`` and ``server_close()`` stop it. OSError when the
    address cannot be listened on. ``allowed_hosts`` (``NAME[:PORT]``; empty: the defaults of
    :func:`~partctl.webui.access.allowed_hosts`) become the app's Host allow-list; None
    leaves the app's as it is."""
    if allowed_hosts is not None:
        access_hosts(allowed_hosts, (host, port))  # a malformed one: ValueError, unbound
    server = _Server((host, port), app)
    if allowed_hosts is not None:
        app.allowed_hosts = access_hosts(allowed_hosts, (host, server.server_address[1]))
    threading.Thread(target=server.serve_forever, name="partctl-ui", daemon=True).start()
    return server
