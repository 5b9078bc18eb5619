"""Value types of the coordination protocol: stats, operations, events, session states."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class Stat(NamedTuple):
    """What a versioned read returns beside the data.

    ``version`` counts the sets of the node's data since its creation, from 0 (ZooKeeper's
    dataVersion; on etcd the key's version minus one). ``create_id`` is unique per creation and
    increasing across the store (czxid, create_revision, or the memory store's counter): a broker
    registration's create_id is its broker epoch. ``ephemeral_owner`` is the owning session (or
    lease) id, 0 for a persistent node.

    A named tuple, not a dataclass: bulk reads build one per node, 100,000 at a time, and a
    tuple is the cheapest typed value to build.
    """

    version: int
    create_id: int
    modify_id: int
    ephemeral_owner: int = 0

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check
"""An operation of an atomic multi."""

OpResult = str | Stat | None
"""Per op: the created path for Create, the new Stat for SetData, None for Delete and Check."""


def op_size(op: Op) -> int:
    """A conservative estimate of an op's encoded size, for chunking bulk writes by bytes."""
    data = getattr(op, "data", b"")
    return 48 + len(op.path.encode()) + len(data)


class SessionState(enum.Enum):
    """Session states with fixed reactions (see kazoo's states).

    CONNECTED: writes may go ahead. SUSPENDED: the connection dropped but the session may still
    live; stop writing until CONNECTED again. LOST: the session expired and its ephemerals are
    gone; anything that depended on them (controllership, registrations) must be redone. A
    backend that reconnects after LOST reports CONNECTED again with a new session id.
    CLOSED: closed by the caller; final.
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class DataEvent:
    """The state of a watched node: its data and stat, or None for both when it does not exist.

    Watches report states, not diffs: the first event gives the state when the watch was set,
    each later one a newer state. Rapid changes may be coalesced into the latest state (as
    ZooKeeper's one-shot watches do); no change is ever lost, and stats only move forward.
    """

    path: str
    data: bytes | None
    stat: Stat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildrenEvent:
    """The sorted children of a watched node, or None when the node does not exist."""

    path: str
    children: list[str] | None


class TreeChange(NamedTuple):
    """One change at or below a tree watch's root: the node's data and stat after it, or None
    for both when the node was deleted. ``revision`` is the store's ordering id of the change
    (etcd revision, ZooKeeper zxid, memory counter); 0 where the store does not tell it
    (a ZooKeeper delete).

    A named tuple for the same reason as :class:`Stat`: a mass election makes 100,000.
    """

    path: str
    data: bytes | None
    stat: Stat | None
    revision: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeEvent:
    """A batch of changes at or below ``path``, in store order.

    ``resync``: changes may have been missed up to here (ZooKeeper session loss or reconnect,
    etcd compaction); the consumer re-reads the subtree, and every change after it is reported
    again. ``changes`` is then empty. ``revision`` is the last change's ordering id (or, for
    a resync, the best one known; 0 if none).

    On ZooKeeper, whose notifications carry no data, a change's data is read after the
    notification and may be newer than the change itself (never older): like a data watch,
    rapid changes of one node may be coalesced into its latest state.
    """

    path: str
    changes: list[TreeChange]
    revision: int
    resync: bool = False


WatchEvent = DataEvent | ChildrenEvent | TreeEvent


class Watch(Protocol):
    """A handle on a persistent watch; events keep coming until ``cancel()``."""

    def cancel(self) -> None: ...


DataCallback = Callable[[DataEvent], None]
ChildrenCallback = Callable[[ChildrenEvent], None]
TreeCallback = Callable[[TreeEvent], None]
SessionListener = Callable[[SessionState], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What differs between backends, declared rather than discovered by exceptions.

    ``max_multi_ops``: ops per atomic multi (None = no count limit); ``max_multi_bytes``: the
    encoded size one multi request may have; ``sequential_digits``: width of sequential suffixes;
    ``listing_reads_subtrees``: a children listing reads through the children's subtrees (etcd's
    flat key space) unless told the likely names (:meth:`Coordinator.children_hinted`).
    """

    name: str
    max_multi_ops: int | None
    max_multi_bytes: int
    sequential_digits: int = 10
    listing_reads_subtrees: bool = False
