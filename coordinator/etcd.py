"""The etcd backend: ZooKeeper's node semantics on etcd's flat, revisioned key space.

``etcd://h1:2379,h2:2379/prefix``: the node ``/a/b`` is the key ``/prefix/a/b`` (see
:mod:`coordinator.etcd_txn` for the layout and how ops become transactions). The session is a
lease (:mod:`coordinator.etcd_session`), ephemeral nodes are keys attached to it, watches share
one stream (:mod:`coordinator.etcd_watch`) and the hosts are tried in order on connection
failure (:mod:`coordinator.etcd_conn`). Every gRPC error is translated there, once.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from operator import attrgetter
from typing import Any

import grpc
from etcd3 import etcdrpc

from coordinator import paths
from coordinator.base import Coordinator
from coordinator.errors import (
    ClosedError,
    ConnectionFailed,
    ConnectionLoss,
    CoordinatorError,
    MultiFailed,
    NodeExists,
    NoNode,
    OperationTimeout,
    RequestTooLarge,
    SessionExpired,
)
from coordinator.etcd_conn import Connection, Security, is_connection_error, translate
from coordinator.etcd_session import LeaseKeeper
from coordinator.etcd_txn import (
    MAX_REQUEST_BYTES,
    MAX_TXN_OPS,
    ROOT_STAT,
    Keys,
    NeedKeys,
    Simulation,
    TxnBudget,
    TxnPlan,
    TxnSnapshot,
    absorb,
    capabilities_for,
    checked_capabilities,
    direct_plan,
    initial_needs,
    limits_from_environment,
    snapshot_request,
    stat_of,
)
from coordinator.etcd_watch import WatchManager
from coordinator.model import (
    Check,
    Create,
    Delete,
    Op,
    OpResult,
    SessionState,
    SetData,
    Stat,
    Watch,
)
from coordinator.url import CoordinatorURL


def _range_into(raw: bytes, index: dict[bytes, int], out: list[Any], stat: type[Stat]
                ) -> bool:
    """Put each key-value of the serialized RangeResponse ``raw`` whose key is in ``index``
    into ``out`` at its position, as (value, Stat); return the response's ``more``. The
    reference of ``coordinator._etcd_native.range_into``, which does the same in C
    (:data:`NATIVE_RANGE`); ValueError when ``raw`` does not parse, either way."""
    try:
        resp = etcdrpc.RangeResponse.FromString(raw)
    except Exception as exc:  # protobuf's DecodeError, which says what it found
        raise ValueError(f"a Range response does not parse: {exc}") from None
    get = index.get
    new_stat = tuple.__new__
    for kv in resp.kvs:
        at = get(kv.key)
        if at is not None:  # (Stat's own constructor is a Python call: tuple's is not)
            out[at] = (kv.value, new_stat(stat, (kv.version - 1, kv.create_revision,
                                                 kv.mod_revision, kv.lease)))
    return bool(resp.more)


try:  # the same in C, built by the install where a C compiler is at hand (pyproject.toml)
    from coordinator._etcd_native import range_into
except ImportError:
    range_into = _range_into
NATIVE_RANGE = range_into is not _range_into
"""Whether range scans read their responses with ``coordinator._etcd_native`` (else with
protobuf, :func:`_range_into`)."""

GET_MANY_IN_FLIGHT = 16
SCAN_MIN = 1024  # siblings read together before a range scan is considered
SCAN_PART = 2048  # wanted keys per range request of a scan (its range ends at the next part)
SCAN_IN_FLIGHT = 8  # range requests of one scan in flight
SCAN_DENSITY_ALL = 3.0  # keys in a part's range per wanted key, for one scan of it all
CHILD_PAGE = 65536  # keys per page when a children listing reads a range through
CHILD_FIRST_HINTED = 16  # keys in a segment's first page when a listing is cut at likely names
CHILD_SKIPS = 2  # requests jumping over large subtrees before a listing reads the rest instead


_kv_key = attrgetter("key")

TLS_ENVIRONMENT = {"ca_file": "PARTCTL_ETCD_SSL_CAFILE", "cert_file": "PARTCTL_ETCD_SSL_CERTFILE",
                   "key_file": "PARTCTL_ETCD_SSL_KEYFILE"}
"""The environment variables that give the TLS files when the caller does not (partctl's
tools); a broker gives them from ``etcd.ssl.*``."""


class EtcdCoordinator(Coordinator):
    """A session on an etcd cluster; see the module docstring."""

    capabilities = capabilities_for(MAX_TXN_OPS, MAX_REQUEST_BYTES)
    default_port = 2379

    def __init__(self, parsed: CoordinatorURL, *, timeout: float, session_timeout: float,
                 max_txn_ops: int = MAX_TXN_OPS,
                 max_request_bytes: int = MAX_REQUEST_BYTES,
                 security: Security | None = None) -> None:
        capabilities = checked_capabilities(max_txn_ops, max_request_bytes)
        super().__init__(parsed.raw)
        self.capabilities = capabilities
        self._keys = Keys(parsed.root)
        self._timeout = timeout
        self.session_timeout = session_timeout
        self._max_txn_ops = max_txn_ops
        self._max_request_bytes = max_request_bytes
        self._state = SessionState.CONNECTED
        self._state_lock = threading.Lock()
        self._conn = Connection(parsed.hosts, request_timeout=timeout, security=security)
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="partctl-etcd")
        try:
            self._conn.connect(timeout, probe=self._keys.key("/"))
            self._keeper = LeaseKeeper(self._conn, session_timeout, self._on_session_state)
            try:
                self._keeper.grant()
            except CoordinatorError as exc:
                raise ConnectionFailed(
                    f"etcd at {self._conn.describe_hosts()} did not grant a session lease: {exc}"
                ) from exc
        except BaseException:
            self._closed = True
            self._executor.shutdown(wait=False)
            self._conn.close()
            self._dispatcher.stop(wait=False)
            raise
        self._keeper.start()
        self._watches = WatchManager(self)

    @classmethod
    def from_url(cls, parsed: CoordinatorURL, *, timeout: float = 10.0,
                 session_timeout: float = 10.0, **options: Any) -> EtcdCoordinator:
        """Connect to the first host that answers; options: ``max_txn_ops`` and
        ``max_request_bytes`` when the server runs with other limits than etcd's defaults
        (each defaults to its variable in :data:`LIMITS_ENVIRONMENT`, else etcd's default);
        ``credentials`` (a user of etcd's auth store); ``ca_file`` for TLS, with ``cert_file``
        and ``key_file`` for a client certificate (PEM paths; each defaults to its variable
        in :data:`TLS_ENVIRONMENT`); ``token_max_age``, seconds before a new auth token is
        asked for (default 60)."""
        unknown = set(options) - {"max_txn_ops", "max_request_bytes", "credentials", "ca_file",
                                  "cert_file", "key_file", "token_max_age"}
        if unknown:
            raise TypeError(f"unknown etcd coordinator options: {', '.join(sorted(unknown))}")
        limits_from_environment(options)
        tls = {name: options.pop(name, None) or os.environ.get(env) or None
               for name, env in TLS_ENVIRONMENT.items()}
        security = Security(**tls, credentials=options.pop("credentials", None),
                            token_max_age=options.pop("token_max_age", 60.0))
        if (security.cert_file is None) != (security.key_file is None):
            raise ConnectionFailed("an etcd client certificate needs both cert_file and key_file")
        if security.cert_file is not None and security.ca_file is None:
            raise ConnectionFailed("an etcd client certificate needs ca_file (TLS)")
        security.channel_credentials()  # an unreadable file is refused before any thread starts
        return cls(parsed, timeout=timeout, session_timeout=session_timeout, security=security,
                   **options)

    # --- session -------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        return self._keeper.lease_id

    def _on_session_state(self, state: SessionState) -> None:
        with self._state_lock:
            if self._closed or state is self._state:
                return
            self._state = state
        self._notify_state(state)

    def _close(self) -> None:
        with self._state_lock:
            self._state = SessionState.CLOSED
        self._watches.close()
        self._keeper.stop()
        self._keeper.revoke(timeout=min(self._timeout, 2.0))
        self._executor.shutdown(wait=False)
        self._conn.close()

    # --- calls ---------------------------------------------------------------------------

    def _rpc(self, method: str, request: Any, what: str, *, retry: bool = False) -> Any:
        """One unary KV call; reads (``retry``) try each host once on connection failure."""
        self._check_open()
        attempts = len(self._conn.hosts) if retry else 1
        for attempt in range(attempts):
            generation = self._conn.generation
            try:
                return getattr(self._conn.kv, method)(request, self._timeout)
            except (grpc.RpcError, ValueError) as exc:
                lost = is_connection_error(exc) or isinstance(exc, ValueError)
                if lost:
                    self._conn.failed(generation)
                if self._closed:
                    raise ClosedError(f"coordinator {self.url} is closed") from exc
                if not lost or attempt == attempts - 1:
                    raise translate(exc, f"{what} via {self._conn.address}") from exc
        raise AssertionError("unreachable")

    def _read_key(self, key: bytes) -> tuple[Any, int]:
        resp = self._rpc("Range", etcdrpc.RangeRequest(key=key), "read", retry=True)
        return (resp.kvs[0] if resp.kvs else None), resp.header.revision

    # --- reads ---------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, Stat]:
        paths.validate(path)
        self._check_open()
        if path == "/":
            return b"", ROOT_STAT
        kv, _ = self._read_key(self._keys.key(path))
        if kv is None:
            raise NoNode(path)
        return kv.value, stat_of(kv)

    def exists(self, path: str) -> Stat | None:
        paths.validate(path)
        self._check_open()
        if path == "/":
            return ROOT_STAT
        kv, _ = self._read_key(self._keys.key(path))
        return None if kv is None else stat_of(kv)

    def children(self, path: str) -> list[str]:
        paths.validate(path)
        names, _ = self._children_at(path)
        if names is None:
            raise NoNode(path)
        return names

    def children_hinted(self, path: str, likely: Iterable[str]) -> list[str]:
        """:meth:`children`, reading around the subtrees of the ``likely`` names rather than
        through them (see :meth:`_children_at`)."""
        paths.validate(path)
        names, _ = self._children_at(path, likely)
        if names is None:
            raise NoNode(path)
        return names

    def _children_at(self, path: str, likely: Iterable[str] = ()) -> tuple[list[str] | None, int]:
        """Sorted direct children (None if the node is absent) and the revision read at.

        Keys-only pages of the descendant range, all at one revision. A key below a child ``c``
        means c's subtree follows, so the cursor moves past it (to ``.../c0``). etcd 3.4 counts
        the whole rest of the range for every limited request, so jumping over a subtree with
        a new request costs about as much as a fifth of reading the rest: a few such jumps
        (few children with big subtrees, as below ``/``) beat reading everything, many do not
        (the topics, each with thousands of partition nodes). After :data:`CHILD_SKIPS` jumps
        over large rests a segment's listing reads its rest in big pages instead.

        The subtrees of ``likely`` names (a name that is no child, or none, changes nothing
        but the cost) are never read: the range is cut into the segments between them, each
        listed on its own (their first pages in read-only txns of max-txn-ops ranges), so
        that every request walks one segment, not the rest of the range.
        """
        start, end = self._keys.children_range(path)
        cut = len(start)
        lows, highs = [start], []
        # by subtree, not by name: "a-" sorts after "a", its subtree before a's ("-" < "/")
        for child in sorted((start + n.encode() for n in set(likely) if n and "/" not in n),
                            key=lambda k: k + b"/"):
            highs.append(child + b"/")
            lows.append(child + b"0")
        highs.append(end)
        segments = list(zip(lows, highs, strict=True))
        limit = 512 if len(segments) == 1 else CHILD_FIRST_HINTED
        step = self._max_txn_ops
        names: list[str] = []
        revision = 0
        for at in range(0, len(segments), step - 1):
            batch = segments[at:at + step - 1]
            txn = etcdrpc.TxnRequest()
            add = txn.success.add
            if at == 0 and path != "/":
                add().request_range.CopyFrom(
                    etcdrpc.RangeRequest(key=self._keys.key(path), keys_only=True))
            for lo, hi in batch:
                add().request_range.CopyFrom(etcdrpc.RangeRequest(
                    key=lo, range_end=hi, keys_only=True, limit=limit, revision=revision))
            resp = self._rpc("Txn", txn, "children", retry=True)
            responses = list(resp.responses)
            if at == 0:
                revision = resp.header.revision
                if path != "/" and not responses.pop(0).response_range.kvs:
                    return None, revision
            for (lo, hi), r in zip(batch, responses, strict=True):
                self._list_segment(r.response_range, lo, hi, cut, revision, names)
        return names, revision

    def _list_segment(self, resp: Any, lo: bytes, hi: bytes, cut: int, revision: int,
                      names: list[str]) -> None:
        """The direct children in [lo, hi) after the segment's first page ``resp``."""
        start = lo[:cut]
        cursor = lo
        jumps = 0
        while True:
            skipped = False
            kvs = resp.kvs
            i, n = 0, len(kvs)
            while i < n:
                key = kvs[i].key
                if key < cursor:  # inside a subtree being passed over: bisect to its end
                    i = bisect_left(kvs, cursor, i, n, key=_kv_key)
                    continue
                rest = key[cut:]
                slash = rest.find(b"/")
                if slash < 0:
                    names.append(rest.decode())
                    cursor = key + b"\x00"
                    i += 1
                else:  # below a child already listed (its key sorts before its subtree)
                    cursor = start + rest[:slash] + b"0"
                    skipped = True
            if not resp.more or cursor >= hi:
                return
            if resp.kvs:
                cursor = max(cursor, resp.kvs[-1].key + b"\x00")
            large = resp.count - len(resp.kvs) > CHILD_PAGE // 8
            if skipped and (not large or jumps < CHILD_SKIPS):
                jumps += large
                limit = 8
            else:
                limit = CHILD_PAGE
            resp = self._rpc("Range", etcdrpc.RangeRequest(
                key=cursor, range_end=hi, keys_only=True, limit=limit, revision=revision),
                "children", retry=True)

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Many nodes, read the cheapest way the store allows.

        When the wanted keys fill most of the range that covers them (Kafka's partition states
        under ``/brokers/topics``: one state key beside each partition key), that range is read
        in narrow parts; otherwise siblings wanted by the thousand are scanned per parent, and
        the rest read by read-only txns of max-txn-ops ranges, pipelined.
        """
        paths.validate_all(paths_)
        self._check_open()
        out: list[tuple[bytes, Stat] | None] = [None] * len(paths_)
        keyed: list[tuple[int, bytes]]
        if "/" in paths_:
            key = self._keys.key
            keyed = []
            for i, p in enumerate(paths_):
                if p == "/":
                    out[i] = (b"", ROOT_STAT)
                else:
                    keyed.append((i, key(p)))
        else:  # (Keys.key, a million times over: the loop's calls were a fifth of the read)
            prefix = self._keys.prefix
            keyed = list(enumerate([prefix + p.encode() for p in paths_]))
        if len(keyed) >= SCAN_MIN:
            keyed = self._scan(keyed, out, density=SCAN_DENSITY_ALL)
        by_parent: dict[bytes, list[tuple[int, bytes]]] = {}
        for i, k in keyed:
            by_parent.setdefault(k[:k.rfind(b"/")], []).append((i, k))
        singles: list[tuple[int, bytes]] = []
        for group in by_parent.values():
            singles.extend(self._scan(group, out) if len(group) >= SCAN_MIN else group)
        self._get_batched(singles, out)
        return out

    def _scan(self, group: list[tuple[int, bytes]], out: list[Any],
              density: float = 2.0) -> list[tuple[int, bytes]]:
        """Read the group's key range in parts of SCAN_PART wanted keys, each part whole if it
        holds at most ``density`` keys per wanted one; returns the wanted keys of the parts
        that hold more (nothing of them kept), for the caller to read one by one. The first
        part is read alone: when it holds more, so are all the others taken to (none is read).

        Every request's range ends at its part's end: etcd 3.4 walks a limited request's whole
        range (to count it) however few keys it returns, so pages of one wide range cost the
        square of its size, and a count of it a walk of its own. The parts are read at one
        revision (a consistent snapshot), SCAN_IN_FLIGHT at a time, so that decoding one
        overlaps the server reading the next.
        """
        index: dict[bytes, int] = {}
        repeats: list[tuple[int, bytes]] = []
        for i, k in group:
            if k in index:
                repeats.append((i, k))
            else:
                index[k] = i
        keys = sorted(index)
        hi = keys[-1] + b"\x00"
        revision = self._rpc("Range", etcdrpc.RangeRequest(key=keys[0], count_only=True),
                             "get_many", retry=True).header.revision
        parts = [(j, min(j + SCAN_PART, len(keys))) for j in range(0, len(keys), SCAN_PART)]
        generation = self._conn.generation
        sparse: list[tuple[int, bytes]] = []

        def page(lo: int, up: int) -> Any:
            end = keys[up] if up < len(keys) else hi
            with self._conn.translating("get_many", generation):
                return self._conn.range_bytes.future(etcdrpc.RangeRequest(
                    key=keys[lo], range_end=end, limit=int(density * (up - lo)) + 1,
                    revision=revision), self._timeout)

        waiting = deque(parts)
        in_flight: deque[tuple[int, int, Any]] = deque()
        probing = len(parts) > 1
        while waiting or in_flight:
            while waiting and len(in_flight) < (1 if probing else SCAN_IN_FLIGHT):
                lo, up = waiting.popleft()
                in_flight.append((lo, up, page(lo, up)))
            lo, up, call = in_flight.popleft()
            with self._conn.translating("get_many", generation):
                raw = call.result()
            try:
                more = range_into(raw, index, out, Stat)
            except ValueError as exc:
                raise ConnectionLoss(f"get_many: {exc}") from None
            if more:  # sparse here: its keys are read one by one, and nothing of it kept
                for k in keys[lo:up]:
                    out[index[k]] = None
                sparse.extend((index[k], k) for k in keys[lo:up])
                if probing:
                    # The first part, read alone, is sparse: the wanted keys are scattered
                    # (a few partitions among a million), and each part's request would walk
                    # its whole range to be thrown away. The rest are read one by one.
                    for start, end in waiting:
                        sparse.extend((index[k], k) for k in keys[start:end])
                    waiting.clear()
            probing = False
        if sparse:
            skipped = {k for _, k in sparse}
            sparse.extend((i, k) for i, k in repeats if k in skipped)
            repeats = [(i, k) for i, k in repeats if k not in skipped]
        for i, k in repeats:
            out[i] = out[index[k]]
        return sparse

    def _get_batched(self, wanted: list[tuple[int, bytes]], out: list[Any]) -> None:
        step = self._max_txn_ops
        in_flight: list[tuple[list[tuple[int, bytes]], Any, int]] = []

        def collect(batch: list[tuple[int, bytes]], call: Any, generation: int) -> None:
            with self._conn.translating("get_many", generation):
                resp = call.result()
            for (i, _), r in zip(batch, resp.responses, strict=True):
                kvs = r.response_range.kvs
                if kvs:
                    kv = kvs[0]
                    out[i] = (kv.value, stat_of(kv))

        for start in range(0, len(wanted), step):
            batch = wanted[start:start + step]
            req = etcdrpc.TxnRequest()
            add = req.success.add
            for _, k in batch:
                add().request_range.key = k
            generation = self._conn.generation
            with self._conn.translating("get_many", generation):
                call = self._conn.kv.Txn.future(req, self._timeout)
            in_flight.append((batch, call, generation))
            if len(in_flight) >= GET_MANY_IN_FLIGHT:
                collect(*in_flight.pop(0))
        for item in in_flight:
            collect(*item)

    # --- writes --------------------------------------------------------------------------

    def _check_size(self, request: Any) -> None:
        size = request.ByteSize()
        if size > self._max_request_bytes:
            raise RequestTooLarge(
                f"multi of {size} bytes; etcd takes at most {self._max_request_bytes} bytes")

    def _simulated(self, ops: Sequence[Op]) -> list[OpResult]:
        """Read the involved keys at one revision, simulate, commit guarded; retry on races."""
        deadline = time.monotonic() + self._timeout
        limit = len(ops) + 1
        while True:
            snap = TxnSnapshot()
            need, ranges = initial_needs(ops, self._keys)
            self._read_snapshot(snap, need, ranges, limit)
            while True:
                try:
                    sim = Simulation(ops, self._keys, self.session_id, snap)
                    break
                except NeedKeys as more:
                    self._read_snapshot(snap, more.keys, [], limit)
            plan = sim.commit_plan()
            self._check_size(plan.request)
            resp = self._rpc("Txn", plan.request, "multi")
            if resp.succeeded:
                return plan.results(resp)
            if time.monotonic() > deadline:
                raise OperationTimeout("multi kept conflicting with concurrent writers")

    def _read_snapshot(self, snap: TxnSnapshot, keys: list[bytes],
                       ranges: list[tuple[bytes, bytes]], limit: int) -> None:
        step = self._max_txn_ops
        items: list[tuple[bytes, bytes | None]] = [(k, None) for k in keys]
        items += ranges
        for i in range(0, len(items), step):
            group = items[i:i + step]
            gkeys = [k for k, e in group if e is None]
            granges = [(k, e) for k, e in group if e is not None]
            req = snapshot_request(gkeys, granges, limit, snap.revision)
            absorb(snap, gkeys, granges, self._rpc("Txn", req, "read", retry=True))

    def _multi_sync(self, ops: Sequence[Op]) -> list[OpResult]:
        """Run a multi; if its ephemeral creates find the lease gone, start the new session at
        once (as the keep-alive would shortly) and run it again: etcd applied nothing."""
        return self._renewing(self._multi_once, ops)

    def _renewing(self, run: Any, ops: Sequence[Op]) -> list[OpResult]:
        lease = self.session_id
        try:
            return run(ops)
        except SessionExpired:
            if not self._keeper.replace_if_expired(lease):
                raise
        return run(ops)

    def _multi_once(self, ops: Sequence[Op]) -> list[OpResult]:
        self._check_open()
        plan = direct_plan(ops, self._keys, self.session_id)
        if plan is not None:
            self._check_size(plan.request)
            resp = self._rpc("Txn", plan.request, "write")
            if resp.succeeded:
                return plan.results(resp)
        return self._simulated(ops)  # also explains why the direct txn failed

    def _single(self, op: Op) -> OpResult:
        try:
            return self._multi_sync([op])[0]
        except MultiFailed as failure:
            raise failure.cause from None

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False, make_parents: bool = False) -> str:
        paths.validate(path)
        if make_parents:
            for ancestor in paths.ancestors(path):
                if self.exists(ancestor) is None:
                    try:
                        self._single(Create(path=ancestor))
                    except NodeExists:
                        pass
        result = self._single(Create(path=path, data=bytes(data), ephemeral=ephemeral,
                                     sequential=sequential))
        assert isinstance(result, str)
        return result

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        paths.validate(path)
        result = self._single(SetData(path=path, data=bytes(data), version=version))
        assert isinstance(result, Stat)
        return result

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        paths.validate(path)
        self._check_open()
        if recursive:
            self._delete_tree(path)
            return
        self._single(Delete(path=path, version=version))

    def multi_async(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        """Independent ops go out at once as one txn (``.future``, so several are in flight);
        dependent ones, and any txn whose compares failed, take the simulated path."""
        self._check_open()
        ops = list(ops)
        future: Future[list[OpResult]] = Future()
        try:
            for op in ops:
                paths.validate(op.path)
            plan = direct_plan(ops, self._keys, self.session_id)
            if plan is None:
                self._executor.submit(self._run_simulated, ops, future)
                return future
            self._check_size(plan.request)
            generation = self._conn.generation
            call = self._conn.kv.Txn.future(plan.request, self._timeout)
        except CoordinatorError as exc:
            future.set_exception(exc)
            return future
        except (ValueError, RuntimeError) as exc:  # channel closed in a failover; pool closed
            error = (ClosedError(f"coordinator {self.url} is closed") if self._closed
                     else ConnectionLoss("multi: channel closed during failover"))
            error.__cause__ = exc
            future.set_exception(error)
            return future
        call.add_done_callback(lambda c: self._finish(c, plan, ops, future, generation))
        return future

    def _finish(self, call: Any, plan: TxnPlan, ops: list[Op], future: Future[list[OpResult]],
                generation: int) -> None:
        try:
            with self._conn.translating("multi", generation):
                resp = call.result()
        except SessionExpired:  # new session, then again (nothing applied)
            self._simulate_later(ops, future, whole=True)
            return
        except CoordinatorError as error:
            future.set_exception(error)
            return
        if resp.succeeded:
            future.set_result(plan.results(resp))
        else:
            self._simulate_later(ops, future)

    def _simulate_later(self, ops: list[Op], future: Future[list[OpResult]],
                        whole: bool = False) -> None:
        """:meth:`_run_simulated` on the pool (off gRPC's callback thread)."""
        try:
            self._executor.submit(self._run_simulated, ops, future, whole)
        except RuntimeError as exc:  # executor shut down: closed meanwhile
            error = ClosedError(f"coordinator {self.url} is closed")
            error.__cause__ = exc
            future.set_exception(error)

    def _run_simulated(self, ops: list[Op], future: Future[list[OpResult]],
                       whole: bool = False) -> None:
        try:
            future.set_result(self._renewing(self._multi_once if whole else self._simulated, ops))
        except CoordinatorError as exc:
            future.set_exception(exc)
        except Exception as exc:  # a bug must reach the caller, not die in a pool thread
            error = CoordinatorError(f"multi failed unexpectedly: {exc!r}")
            error.__cause__ = exc
            future.set_exception(error)

    def _chunks(self, ops: Sequence[Op], guard: Check | None) -> Iterable[list[int]]:
        """Chunks as large as one etcd txn allows: up to max-txn-ops sets, fewer creates."""
        budget = TxnBudget(self._max_txn_ops, self.capabilities.max_multi_bytes,
                           len(self._keys.prefix))

        def fresh() -> None:
            budget.reset()
            if guard is not None:
                budget.add(guard)

        fresh()
        chunk: list[int] = []
        for i, op in enumerate(ops):
            if not budget.take(op):
                if chunk:
                    yield chunk
                    chunk = []
                    fresh()
                if not budget.take(op):
                    raise RequestTooLarge(
                        f"op on {op.path} is about {budget.op_bytes(op)} bytes; etcd takes at "
                        f"most {self.capabilities.max_multi_bytes} bytes in one request")
            chunk.append(i)
        if chunk:
            yield chunk

    # --- watches -------------------------------------------------------------------------

    def _add_watch(self, kind: str, path: str, callback: Callable[..., None]) -> Watch:
        return self._watches.add(kind, path, callback)


__all__ = ["EtcdCoordinator", "capabilities_for"]
