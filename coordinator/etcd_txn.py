# mypy: disable-error-code="union-attr"
# (the hot loops dispatch on type(op) once per op, which mypy does not narrow by)
"""ZooKeeper ops as etcd transactions: the key layout, the compares, and the read-simulate-commit
path for multis whose ops depend on each other.

Layout: the node ``/a/b`` is the key ``<prefix>/a/b``; the root is implicit (it always exists,
version 0, no data). Hidden bookkeeping lives beside the tree, under ``<prefix>\\x00meta/``, so
``children()`` and tools reading Kafka's layout under ``<prefix>/`` never see it. The only such
keys are sequential counters, ``<prefix>\\x00meta/seq<parent path>``, whose value is the next
suffix. A node's version is the key's etcd ``version`` - 1; a key's lease never changes during
its life (sets keep it), so a node's create_revision pins whether it is ephemeral.

Two ways to run a multi:

- Independent ops (distinct paths, no op on the parent of another, nothing sequential and no
  root) map straight to compares and puts: no read before the write. This is the bulk path.
- Otherwise (and to explain any failed transaction) the involved keys are read at one revision,
  the ops are simulated in order against that snapshot (so later ops see earlier ones), and the
  net writes are committed in one transaction whose compares pin everything that was read. If a
  compare fails, someone wrote in between: read again and retry.

etcd refuses two writes to one key in a transaction, so a multi that writes a key twice (create
then set) is committed as its net effect: one put, one etcd version step. Ops inside the multi
see ZooKeeper versions; the Stat returned and stored afterwards counts the one put.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from etcd3 import etcdrpc

from coordinator import paths
from coordinator.errors import (
    BadVersion,
    CoordinatorError,
    InvalidPath,
    MultiFailed,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
)
from coordinator.model import (
    Capabilities,
    Check,
    Create,
    Delete,
    Op,
    OpResult,
    SetData,
    Stat,
)

EQUAL = etcdrpc.Compare.EQUAL
GREATER = etcdrpc.Compare.GREATER
LESS = etcdrpc.Compare.LESS
VERSION = etcdrpc.Compare.VERSION
CREATE = etcdrpc.Compare.CREATE
MOD = etcdrpc.Compare.MOD
LEASE = etcdrpc.Compare.LEASE

ROOT_STAT = Stat(version=0, create_id=0, modify_id=0, ephemeral_owner=0)

MAX_TXN_OPS = 128  # etcd's --max-txn-ops default
MAX_REQUEST_BYTES = 3 << 19  # etcd's --max-request-bytes default, 1.5 MiB
REQUEST_MARGIN = 128 << 10  # room for keys, compares and framing beyond the data
LIMITS_ENVIRONMENT = {"max_txn_ops": "PARTCTL_ETCD_MAX_TXN_OPS",
                      "max_request_bytes": "PARTCTL_ETCD_MAX_REQUEST_BYTES"}
"""The environment variables that give the servers' raised limits when the caller does not;
a broker gives them from ``etcd.max.txn.ops`` and ``etcd.max.request.bytes``."""


def capabilities_for(max_txn_ops: int, max_request_bytes: int) -> Capabilities:
    """Any multi of max_txn_ops // 3 ops fits: an op costs at most three compares (a create:
    key absent, parent present and persistent, or a sequential counter)."""
    return Capabilities(name="etcd", max_multi_ops=max_txn_ops // 3,
                        max_multi_bytes=max_request_bytes - REQUEST_MARGIN,
                        listing_reads_subtrees=True)


def checked_capabilities(max_txn_ops: object, max_request_bytes: object) -> Capabilities:
    """:func:`capabilities_for` limits a client was given, refused (ValueError) where no
    transaction could work under them."""
    if not isinstance(max_txn_ops, int) or max_txn_ops < 3:
        raise ValueError(f"max_txn_ops must be an int of at least 3 (a create's compares), "
                         f"not {max_txn_ops!r}")
    if not isinstance(max_request_bytes, int) or max_request_bytes < 2 * REQUEST_MARGIN:
        raise ValueError(f"max_request_bytes must be an int of at least {2 * REQUEST_MARGIN}, "
                         f"not {max_request_bytes!r}")
    return capabilities_for(max_txn_ops, max_request_bytes)


def limits_from_environment(options: dict[str, Any]) -> None:
    """Fill the limits ``options`` lacks from :data:`LIMITS_ENVIRONMENT`; one clear line for a
    value that is not an integer."""
    for name, env in LIMITS_ENVIRONMENT.items():
        text = os.environ.get(env, "").strip()
        if name not in options and text:
            try:
                options[name] = int(text)
            except ValueError:
                raise ValueError(f"{env}={text[:40]!r}: not an integer") from None


class Keys:
    """Paths to etcd keys and back under one prefix."""

    __slots__ = ("prefix", "_plen", "meta")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode()
        self._plen = len(self.prefix)
        self.meta = self.prefix + b"\x00meta/"

    def key(self, path: str) -> bytes:
        return self.prefix + path.encode()

    def path(self, key: bytes) -> str:
        return key[self._plen:].decode()

    def children_range(self, path: str) -> tuple[bytes, bytes]:
        """[start, end) holding every descendant of ``path`` and nothing else ('/' + 1 == '0')."""
        base = self.prefix if path == "/" else self.key(path)
        return base + b"/", base + b"0"

    def counter(self, parent: str) -> bytes:
        return self.meta + b"seq" + (b"" if parent == "/" else parent.encode())


def stat_of(kv: Any) -> Stat:
    return Stat(kv.version - 1, kv.create_revision, kv.mod_revision, kv.lease)


def _compare(req: Any, key: bytes, target: int, result: int, value: int,
             range_end: bytes = b"") -> None:
    c = req.compare.add()
    c.key = key
    c.target = target
    c.result = result
    if target == VERSION:
        c.version = value
    elif target == CREATE:
        c.create_revision = value
    elif target == MOD:
        c.mod_revision = value
    else:
        c.lease = value
    if range_end:
        c.range_end = range_end


def _version_compare(req: Any, key: bytes, version: int) -> None:
    if version == -1:
        _compare(req, key, VERSION, GREATER, 0)
    else:
        _compare(req, key, VERSION, EQUAL, version + 1)


# --- the direct path -----------------------------------------------------------------------


@dataclass(slots=True)
class TxnPlan:
    """A transaction ready to send and how to turn its response into per-op results."""

    request: Any
    decode: list[tuple[int, Any]]  # per op: (kind, payload); see results()

    def results(self, response: Any) -> list[OpResult]:
        out: list[OpResult] = []
        revision = response.header.revision
        responses = response.responses
        for kind, payload in self.decode:
            if kind == _PATH:
                out.append(payload)
            elif kind == _PREV:
                prev = responses[payload].response_put.prev_kv
                out.append(Stat(prev.version, prev.create_revision, revision, prev.lease))
            elif kind == _STAT:
                version, create, lease = payload
                out.append(Stat(version=version, create_id=create or revision,
                                modify_id=revision, ephemeral_owner=lease))
            else:
                out.append(None)
        return out


_NONE, _PATH, _PREV, _STAT = 0, 1, 2, 3


def direct_plan(ops: Sequence[Op], keys: Keys, lease: int) -> TxnPlan | None:
    """The transaction for independent ops, or None when the ops need the simulated path.

    Ops are independent when their paths are distinct and, if any op creates or deletes, no op
    works on the parent of another (sets and checks of a node and its parent do not interact).
    Sets, the bulk of a mass election, are built inline: this runs once per op written.
    """
    seen: set[str] = set()
    structural = False
    for op in ops:
        path = op.path
        t = type(op)
        if path == "/" or path in seen or (t is Create and op.sequential):
            return None
        seen.add(path)
        if t is Create or t is Delete:
            structural = True
    if structural:
        for op in ops:
            if paths.parent(op.path) in seen:
                return None
    req = etcdrpc.TxnRequest()
    decode: list[tuple[int, Any]] = []
    parents: set[str] = set()
    prefix = keys.prefix
    add_compare = req.compare.add
    success = req.success
    add_success = success.add
    for op in ops:
        t = type(op)
        key = prefix + op.path.encode()
        if t is SetData:
            c = add_compare()
            c.key = key
            c.target = VERSION
            if op.version == -1:  # _version_compare, inline: exists (0 set, a oneof field)
                c.result = GREATER
                c.version = 0
            else:
                c.version = op.version + 1
            put = add_success().request_put
            put.key = key
            put.value = op.data
            put.ignore_lease = True
            put.prev_kv = True
            decode.append((_PREV, len(success) - 1))
        elif t is Check:
            _version_compare(req, key, op.version)
            decode.append((_NONE, None))
        elif t is Create:
            _compare(req, key, VERSION, EQUAL, 0)
            parent = paths.parent(op.path)
            if parent != "/" and parent not in parents:
                parents.add(parent)
                pkey = keys.key(parent)
                _compare(req, pkey, VERSION, GREATER, 0)
                _compare(req, pkey, LEASE, EQUAL, 0)
            put = add_success().request_put
            put.key = key
            put.value = op.data
            if op.ephemeral:
                put.lease = lease
            decode.append((_PATH, op.path))
        elif t is Delete:
            _version_compare(req, key, op.version)
            start, end = keys.children_range(op.path)
            _compare(req, start, CREATE, EQUAL, 0, end)
            add_success().request_delete_range.key = key
            decode.append((_NONE, None))
        else:
            raise TypeError(f"not a coordinator op: {op!r}")
    return TxnPlan(req, decode)


# --- the simulated path --------------------------------------------------------------------


class NeedKeys(Exception):  # noqa: N818 - control flow, never escapes this backend
    """The simulation needs keys the snapshot lacks (sequential names, found on the way)."""

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = keys


@dataclass(slots=True)
class _Node:
    value: bytes
    zk_version: int
    lease: int


class TxnSnapshot:
    """Keys (and descendant ranges) read at one revision; None marks an absent key."""

    def __init__(self) -> None:
        self.revision = 0
        self.kvs: dict[bytes, Any] = {}
        self.ranges: dict[bytes, tuple[set[bytes], bool, bytes]] = {}  # start -> (keys, more, end)


def initial_needs(ops: Sequence[Op], keys: Keys) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """Keys and descendant ranges a simulation of ``ops`` reads, before sequential names."""
    need: dict[bytes, None] = {}
    ranges: dict[bytes, bytes] = {}
    for op in ops:
        if op.path == "/":
            continue
        paths.validate(op.path)
        if type(op) is Create:
            parent = paths.parent(op.path)
            if parent != "/":
                need[keys.key(parent)] = None
            if op.sequential:
                need[keys.counter(parent)] = None
                continue
        need[keys.key(op.path)] = None
        if type(op) is Delete:
            start, end = keys.children_range(op.path)
            ranges[start] = end
    return list(need), list(ranges.items())


class Simulation:
    """Runs ops in order on a snapshot; ``commit_request()`` then builds the guarded txn."""

    def __init__(self, ops: Sequence[Op], keys: Keys, lease: int, snap: TxnSnapshot) -> None:
        self.keys = keys
        self.snap = snap
        self.lease = lease
        self.state: dict[bytes, _Node | None] = {}
        self.kids: dict[bytes, set[bytes]] = {}
        self.counters: dict[bytes, int] = {}
        self.written: dict[bytes, None] = {}
        self.results: list[tuple[int, Any]] = []
        for index, op in enumerate(ops):
            try:
                self.results.append(self._apply(op))
            except (NeedKeys, MultiFailed):
                raise
            except CoordinatorError as exc:
                raise MultiFailed(index, exc) from None

    def _get(self, key: bytes) -> _Node | None:
        if key in self.state:
            return self.state[key]
        if key not in self.snap.kvs:
            raise NeedKeys([key])
        kv = self.snap.kvs[key]
        node = None if kv is None else _Node(kv.value, kv.version - 1, kv.lease)
        self.state[key] = node
        return node

    def _kids_of(self, path: str) -> set[bytes] | None:
        """The known descendants of ``path`` if its range was read (None if not tracked)."""
        start = self.keys.children_range(path)[0]
        if start not in self.kids:
            got = self.snap.ranges.get(start)
            if got is None:
                return None
            self.kids[start] = set(got[0])
        return self.kids[start]

    def _apply(self, op: Op) -> tuple[int, Any]:
        path = op.path
        t = type(op)
        if path == "/":
            if t is Create:
                raise NodeExists(path)
            if t is Delete:
                raise NoNode(path)
            if t is SetData:
                raise InvalidPath(path, "the root node holds no data on etcd")
            _check_version(path, 0, op.version)
            return _NONE, None
        keys = self.keys
        if t is Create:
            parent = paths.parent(path)
            if parent != "/":
                pnode = self._get(keys.key(parent))
                if pnode is None:
                    raise NoNode(parent, f"parent does not exist: {parent}")
                if pnode.lease:
                    raise NoChildrenForEphemerals(parent)
            if op.sequential:
                ckey = keys.counter(parent)
                if ckey not in self.counters:
                    if ckey not in self.snap.kvs:
                        raise NeedKeys([ckey])
                    kv = self.snap.kvs[ckey]
                    self.counters[ckey] = int(kv.value) if kv is not None else 0
                n = self.counters[ckey]
                self.counters[ckey] = n + 1
                path = paths.sequential_name(path, n)
            key = keys.key(path)
            if self._get(key) is not None:
                raise NodeExists(path)
            self.state[key] = _Node(op.data, 0, self.lease if op.ephemeral else 0)
            self.written[key] = None
            kids = self._kids_of(parent) if parent != "/" else None
            if kids is not None:
                kids.add(key)
            return _PATH, path
        key = keys.key(path)
        node = self._get(key)
        if node is None:
            raise NoNode(path)
        _check_version(path, node.zk_version, op.version)
        if t is SetData:
            self.state[key] = _Node(op.data, node.zk_version + 1, node.lease)
            self.written[key] = None
            return _STAT, key
        if t is Delete:
            kids = self._kids_of(path)
            start, _end = keys.children_range(path)
            more = self.snap.ranges.get(start, (set(), False, b""))[1]
            if kids or more:
                raise NotEmpty(path)
            self.state[key] = None
            self.written[key] = None
            pkids = self._kids_of(paths.parent(path))
            if pkids is not None:
                pkids.discard(key)
            return _NONE, None
        return _NONE, None  # Check

    def commit_plan(self) -> TxnPlan:
        """The txn: compares pinning every key and range read, then the net writes."""
        req = etcdrpc.TxnRequest()
        snap = self.snap
        for key, kv in snap.kvs.items():
            if kv is None:
                _compare(req, key, VERSION, EQUAL, 0)
            else:
                _compare(req, key, MOD, EQUAL, kv.mod_revision)
        for start, (found, _more, end) in snap.ranges.items():
            if found:
                _compare(req, start, MOD, LESS, snap.revision + 1, end)
            else:
                _compare(req, start, CREATE, EQUAL, 0, end)
        success = req.success
        for key in self.written:
            node = self.state[key]
            orig = snap.kvs.get(key)
            if node is None:
                if orig is not None:
                    success.add().request_delete_range.key = key
                continue
            put = success.add().request_put
            put.key = key
            put.value = node.value
            if node.lease:
                put.lease = node.lease
        for ckey, value in self.counters.items():
            put = success.add().request_put
            put.key = ckey
            put.value = str(value).encode()
        decode: list[tuple[int, Any]] = []
        for kind, payload in self.results:
            if kind == _STAT:
                node = self.state[payload]
                orig = snap.kvs.get(payload)
                assert node is not None
                if orig is None:
                    decode.append((_STAT, (0, 0, node.lease)))
                else:
                    decode.append((_STAT, (orig.version, orig.create_revision, node.lease)))
            else:
                decode.append((kind, payload))
        return TxnPlan(req, decode)


def _check_version(path: str, actual: int, expected: int) -> None:
    if expected != -1 and expected != actual:
        raise BadVersion(path, f"version mismatch on {path}: expected {expected}, found {actual}")


def snapshot_request(keys: list[bytes], ranges: list[tuple[bytes, bytes]], limit: int,
                     revision: int = 0) -> Any:
    """One read-only txn: every key, and each descendant range (keys only, ``limit`` keys)."""
    req = etcdrpc.TxnRequest()
    for key in keys:
        r = req.success.add().request_range
        r.key = key
        r.revision = revision
    for start, end in ranges:
        r = req.success.add().request_range
        r.key = start
        r.range_end = end
        r.keys_only = True
        r.limit = limit
        r.revision = revision
    return req


def absorb(snap: TxnSnapshot, keys: list[bytes], ranges: list[tuple[bytes, bytes]],
           response: Any) -> None:
    """Record a snapshot_request response in ``snap``."""
    if not snap.revision:
        snap.revision = response.header.revision
    responses = response.responses
    for i, key in enumerate(keys):
        kvs = responses[i].response_range.kvs
        snap.kvs[key] = kvs[0] if kvs else None
    for j, (start, end) in enumerate(ranges):
        rr = responses[len(keys) + j].response_range
        snap.ranges[start] = ({kv.key for kv in rr.kvs}, rr.more, end)


class TxnBudget:
    """Counts a chunk's compares, success ops and bytes against etcd's per-txn limits.

    ``--max-txn-ops`` bounds the compares and each branch separately (not their sum), so a
    chunk of plain sets holds max-txn-ops ops while creates under distinct parents need three
    compares each (key absent, parent present, parent not ephemeral).
    """

    def __init__(self, max_ops: int, max_bytes: int, prefix_len: int) -> None:
        self.max_ops = max_ops
        self.max_bytes = max_bytes
        self.prefix_len = prefix_len
        self.reset()

    def reset(self) -> None:
        self.compares = self.success = self.bytes = 0
        self.parents: set[str] = set()
        self.counters: set[str] = set()

    def op_bytes(self, op: Op) -> int:
        return len(getattr(op, "data", b"")) + 3 * (self.prefix_len + len(op.path)) + 64

    def _cost(self, op: Op) -> tuple[int, int, str | None, str | None]:
        t = type(op)
        if t is Create:
            parent = paths.parent(op.path)
            compares, success = 1, 1
            new_parent = parent if parent != "/" and parent not in self.parents else None
            if new_parent is not None:
                compares += 2
            new_counter = parent if op.sequential and parent not in self.counters else None
            if new_counter is not None:
                compares += 1
                success += 1
            return compares, success, new_parent, new_counter
        if t is Delete:
            return 2, 1, None, None
        return 1, int(t is SetData), None, None

    def take(self, op: Op) -> bool:
        """Add ``op`` if it fits; the common case (a set or check) without bookkeeping."""
        t = type(op)
        if t is SetData or t is Check:
            size = len(op.data) if t is SetData else 0
            size += 3 * (self.prefix_len + len(op.path)) + 64
            if self.compares >= self.max_ops or self.bytes + size > self.max_bytes:
                return False
            self.compares += 1
            self.success += t is SetData
            self.bytes += size
            return self.success <= self.max_ops or self._undo(t, size)
        if not self.fits(op):
            return False
        self.add(op)
        return True

    def _undo(self, t: type, size: int) -> bool:
        self.compares -= 1
        self.success -= t is SetData
        self.bytes -= size
        return False

    def fits(self, op: Op) -> bool:
        compares, success, _, _ = self._cost(op)
        return (self.compares + compares <= self.max_ops
                and self.success + success <= self.max_ops
                and self.bytes + self.op_bytes(op) <= self.max_bytes)

    def add(self, op: Op) -> None:
        compares, success, parent, counter = self._cost(op)
        self.compares += compares
        self.success += success
        self.bytes += self.op_bytes(op)
        if parent is not None:
            self.parents.add(parent)
        if counter is not None:
            self.counters.add(counter)
