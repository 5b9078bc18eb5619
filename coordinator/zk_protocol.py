"""ZooKeeper wire requests that kazoo lacks or that need a leaner codec, as kazoo request objects.

kazoo's connection sends any object with ``type``, ``serialize()`` and ``deserialize(buf, off)``
(see ``kazoo.protocol.serialization``), so these plug into ``KazooClient._call`` as kazoo's own
requests do (through :func:`coordinator.kazoo_patches.send`, which says what that relies on):

* :class:`MultiRead` (opcode 22, ZooKeeper 3.6+): a read-only multi of GetData requests, answered
  per op with data and stat or an error code. One round trip and one server pass for thousands of
  reads, which kazoo's per-request ``get_async`` pipeline cannot approach.
* :class:`MultiWrite` (opcode 14): the atomic multi, encoded in one pass straight from the
  coordinator's ops and decoded straight into its :class:`~coordinator.model.Stat`, skipping
  kazoo's per-op namedtuples (the bulk-write path runs 100k ops through here).

Wire format (jute, big-endian): a multi is a sequence of ``MultiHeader(int type, bool done,
int err)`` each followed by its op's record, closed by ``MultiHeader(-1, true, -1)``. In a
response an op that failed has ``type == -1`` followed by ``ErrorResponse(int err)``.
* :class:`AddWatch` (opcode 106, ZooKeeper 3.6+): a persistent (recursive) watch, which kazoo
  2.11 does not expose; its notifications arrive as ordinary watch events with the full path.
* :class:`RemoveWatches` (opcode 18): removes a session's watches on a path on the server; before
  ZooKeeper 3.9 only the type "any" removes a persistent watch.

Nodes are created with one of three encoded ACL vectors: open (world:anyone, all rights), or,
with Kafka's ``zookeeper.set.acl`` rule (:func:`secure_acl`), the creator's authenticated
identity (``auth:``) with all rights plus world:anyone READ, except under the sensitive roots
(:data:`SENSITIVE_ROOTS`: SCRAM credentials and ACLs), which only the creator may read.

This module imports no kazoo and holds no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from coordinator.model import Check, Create, Delete, Op, SetData, Stat

_header = struct.Struct("!iBi")
_int = struct.Struct("!i")
_stat = struct.Struct("!qqqqiiiqiiq")  # czxid mzxid ctime mtime version cversion aversion
#                                         ephemeralOwner dataLength numChildren pzxid
_END = _header.pack(-1, 1, -1)

OP_CREATE, OP_DELETE, OP_GETDATA, OP_SETDATA, OP_CHECK = 1, 2, 4, 5, 13
OP_MULTI, OP_MULTI_READ = 14, 22
OP_REMOVE_WATCHES, OP_ADD_WATCH = 18, 106
PERSISTENT, PERSISTENT_RECURSIVE = 0, 1
WATCHER_ANY = 3  # WatcherType.Any: data, children and (3.6+) persistent watches on the path
OP_ERROR = -1

PERM_READ, PERM_ALL = 1, 31


def _acl(perms: int, scheme: bytes, ident: bytes) -> bytes:
    return _int.pack(perms) + _int.pack(len(scheme)) + scheme + _int.pack(len(ident)) + ident


# world:anyone with all permissions, as one encoded ACL vector
_OPEN_ACL = _int.pack(1) + _acl(PERM_ALL, b"world", b"anyone")
#: The creator's identity with all rights, everyone else READ (Kafka's secure default).
CREATOR_ALL_WORLD_READ = _int.pack(2) + _acl(PERM_ALL, b"auth", b"") + _acl(PERM_READ, b"world",
                                                                            b"anyone")
#: The creator's identity only: nobody else may even read.
CREATOR_ONLY = _int.pack(1) + _acl(PERM_ALL, b"auth", b"")

#: Paths (under the chroot) that hold secrets or decide who may do what: with secure ACLs only
#: their creator may read them, the root and everything below it.
SENSITIVE_ROOTS = ("/config/users", "/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended",
                   "/kafka-acl-extended-changes")


def is_sensitive(path: str) -> bool:
    """Whether ``path`` (under the chroot) is, or lies under, one of :data:`SENSITIVE_ROOTS`."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def secure_acl(path: str) -> bytes:
    """The encoded ACL vector Kafka's ``zookeeper.set.acl`` gives a node at ``path``."""
    return CREATOR_ONLY if is_sensitive(path) else CREATOR_ALL_WORLD_READ


def open_acl(path: str) -> bytes:
    """The encoded ACL vector of a node anyone may change (ZooKeeper's OPEN_ACL_UNSAFE)."""
    return _OPEN_ACL

_CREATE_HEAD = _header.pack(OP_CREATE, 0, -1)
_DELETE_HEAD = _header.pack(OP_DELETE, 0, -1)
_SETDATA_HEAD = _header.pack(OP_SETDATA, 0, -1)
_CHECK_HEAD = _header.pack(OP_CHECK, 0, -1)
_GETDATA_HEAD = _header.pack(OP_GETDATA, 0, -1)

#: Fixed bytes of a multi request beside its ops: length, xid, type and the closing header.
FRAME_BYTES = 4 + 4 + 4 + _header.size


class OpError:
    """A per-op error code inside a multi response (0 = rolled back, -2 = not reached)."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __repr__(self) -> str:
        return f"OpError({self.code})"


def stat_at(buf: bytes, offset: int) -> Stat:
    czxid, mzxid, _, _, version, _, _, owner, _, _, _ = _stat.unpack_from(buf, offset)
    return Stat(version, czxid, mzxid, owner)


_FIXED_BYTES = {  # header + path length [+ data length + ACLs + flags | version]
    Create: _header.size + 4 + 4 + len(_OPEN_ACL) + 4,
    SetData: _header.size + 4 + 4 + 4,
    Delete: _header.size + 4 + 4,
    Check: _header.size + 4 + 4,
}


def encoded_op_size(op: Op, root: str, acl: Callable[[str], bytes] = open_acl) -> int:
    """The exact encoded size of ``op`` inside a multi, chroot included, a create's ACL as
    ``acl`` gives it."""
    path = op.path
    size = _FIXED_BYTES[type(op)] + len(root) + (
        len(path) if path.isascii() else len(path.encode())
    )
    if type(op) is SetData:
        size += len(op.data)
    elif type(op) is Create:
        size += len(op.data)
        if acl is not open_acl:
            size += len(acl(path)) - len(_OPEN_ACL)
    return size


class MultiWrite:
    """An atomic multi (opcode 14) of coordinator ops under a chroot.

    The response decodes to one item per op: the created path (still chrooted; kazoo's
    connection strips the chroot from str results of opcode 14), a :class:`Stat` for SetData,
    None for Delete and Check, or an :class:`OpError`.
    """

    type = OP_MULTI
    __slots__ = ("acl", "ops", "root")

    def __init__(self, ops: Sequence[Op], root: str,
                 acl: Callable[[str], bytes] = open_acl) -> None:
        self.ops = ops
        self.root = root
        self.acl = acl

    def __repr__(self) -> str:
        return f"MultiWrite({len(self.ops)} ops)"

    def serialize(self) -> bytes:
        root = self.root
        pack_int = _int.pack
        parts: list[bytes] = []
        add = parts.append
        acl = self.acl
        for op in self.ops:
            path = (root + op.path).encode() if root else op.path.encode()
            if type(op) is SetData:
                add(_SETDATA_HEAD)
                add(pack_int(len(path)))
                add(path)
                add(pack_int(len(op.data)))
                add(op.data)
                add(pack_int(op.version))
            elif type(op) is Create:
                add(_CREATE_HEAD)
                add(pack_int(len(path)))
                add(path)
                add(pack_int(len(op.data)))
                add(op.data)
                add(acl(op.path))
                add(pack_int((1 if op.ephemeral else 0) | (2 if op.sequential else 0)))
            elif type(op) is Check:
                add(_CHECK_HEAD)
                add(pack_int(len(path)))
                add(path)
                add(pack_int(op.version))
            elif type(op) is Delete:
                add(_DELETE_HEAD)
                add(pack_int(len(path)))
                add(path)
                add(pack_int(op.version))
            else:
                raise TypeError(f"not a coordinator op: {op!r}")
        add(_END)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[str | Stat | OpError | None]:
        out: list[str | Stat | OpError | None] = []
        unpack_header = _header.unpack_from
        unpack_int = _int.unpack_from
        while True:
            kind, done, err = unpack_header(buf, offset)
            offset += 9
            if done:
                return out
            if kind == OP_SETDATA:
                out.append(stat_at(buf, offset))
                offset += 68
            elif kind == OP_CREATE:
                length = unpack_int(buf, offset)[0]
                offset += 4
                out.append(bytes(buf[offset:offset + length]).decode())
                offset += length
            elif kind == OP_ERROR:
                out.append(OpError(unpack_int(buf, offset)[0]))
                offset += 4
            else:  # delete, check: no body
                out.append(None)


class MultiRead:
    """A read-only multi (opcode 22) of GetData requests for absolute (chrooted) paths.

    Decodes to one item per path: ``(data, Stat)``, or an int error code (-101 for no node).
    ``response_bytes`` is set after decoding, so callers can size the next batch.
    """

    type = OP_MULTI_READ
    __slots__ = ("paths", "response_bytes")

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths
        self.response_bytes = 0

    def __repr__(self) -> str:
        return f"MultiRead({len(self.paths)} paths)"

    def serialize(self) -> bytes:
        pack_int = _int.pack
        parts: list[bytes] = []
        add = parts.append
        for path in self.paths:
            raw = path.encode()
            add(_GETDATA_HEAD)
            add(pack_int(len(raw)))
            add(raw)
            add(b"\x00")  # no watch
        add(_END)
        return b"".join(parts)

    def deserialize(self, buf: bytes, offset: int) -> list[tuple[bytes, Stat] | int]:
        start = offset
        out: list[tuple[bytes, Stat] | int] = []
        add = out.append
        unpack_header = _header.unpack_from
        unpack_int = _int.unpack_from
        unpack_stat = _stat.unpack_from
        while True:
            kind, done, err = unpack_header(buf, offset)
            offset += 9
            if done:
                break
            if kind == OP_GETDATA:
                length = unpack_int(buf, offset)[0]
                offset += 4
                if length < 0:
                    data = b""
                else:
                    data = bytes(buf[offset:offset + length])
                    offset += length
                czxid, mzxid, _, _, version, _, _, owner, _, _, _ = unpack_stat(buf, offset)
                offset += 68
                add((data, Stat(version, czxid, mzxid, owner)))
            elif kind == OP_ERROR:
                add(unpack_int(buf, offset)[0])
                offset += 4
            else:
                raise ValueError(f"unexpected op type {kind} in a multiRead response")
        self.response_bytes = offset - start
        return out

    @staticmethod
    def request_size(path: str) -> int:
        return _header.size + 4 + len(path.encode()) + 1


class _PathAndInt:
    """A request of a path and an int whose answer has no body beyond the reply header (an
    error there is raised by kazoo's connection)."""

    type = 0
    __slots__ = ("path", "value")

    def __init__(self, path: str, value: int) -> None:
        self.path = path
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, {self.value})"

    def serialize(self) -> bytes:
        raw = self.path.encode()
        return _int.pack(len(raw)) + raw + _int.pack(self.value)

    @staticmethod
    def deserialize(buf: bytes, offset: int) -> bool:
        return True


class AddWatch(_PathAndInt):
    """addWatch (opcode 106): ``AddWatchRequest(ustring path, int mode)``."""

    type = OP_ADD_WATCH
    __slots__ = ()

    def __init__(self, path: str, mode: int = PERSISTENT_RECURSIVE) -> None:
        super().__init__(path, mode)


class RemoveWatches(_PathAndInt):
    """removeWatches (opcode 18): ``RemoveWatchesRequest(ustring path, int type)``
    (NoWatcherError when the session had none there)."""

    type = OP_REMOVE_WATCHES
    __slots__ = ()

    def __init__(self, path: str, watcher_type: int = WATCHER_ANY) -> None:
        super().__init__(path, watcher_type)
