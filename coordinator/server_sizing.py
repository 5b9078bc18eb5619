"""How large a ZooKeeper or etcd server a cluster of N partitions needs: the settings
:mod:`coordinator.servers` starts its servers with for a partition count, from figures measured
here (docs/coordinators.md, "Sizing ZooKeeper and etcd", says how to size one's own)."""

from __future__ import annotations

from typing import Literal

__all__ = ["Kind", "sized_for"]

Kind = Literal["zookeeper", "etcd"]

MIB = 1 << 20
ZK_HEAP_PER_PARTITION = 3 << 10
"""Heap a ZooKeeper server is given per partition: measured 1.9 KB of live heap per partition
after a full GC (100 brokers, 100,000 partitions in topics of 1,000, RF 3: two znodes per
partition, its node and its state, 185 MB live), with room above it for G1 and the requests in
flight."""
ZK_HEAP_BASE_MB = 256
ZK_JUTE_MAXBUFFER = 4 * MIB
"""jute.maxbuffer of the servers started here: the largest record a server takes in or reads back
from its transaction log. partctl's multis stay under the default 1 MiB (MULTI_BYTES_LIMIT), so
this is headroom for other clients' larger children lists and multis, not a need of partctl's."""
ETCD_QUOTA_PER_PARTITION = 4 << 10
"""Backend quota per partition: measured 330 B of bbolt database per partition right after the
cluster's bulk creation (100,000 partitions: dbSize 32.6 MB), each rewrite of a state adding a
revision until compaction; 4 KiB leaves room for about ten rewrites of every state."""
ETCD_QUOTA_MIN = 4 << 30


def sized_for(kind: Kind, partitions: int) -> dict[str, int]:
    """Keyword options of :func:`start_server` for a cluster of ``partitions`` partitions:
    ZooKeeper's heap (``heap_mb``: 256 MiB + 3 KiB per partition, at least 512 MiB) and
    ``jute_maxbuffer``; etcd's backend quota (``quota_bytes``: 4 KiB per partition, at least
    4 GiB, at most etcd's advised 8 GiB). docs/operations.md says how to size a server one runs
    oneself."""
    if kind == "zookeeper":
        heap = ZK_HEAP_BASE_MB + -(-partitions * ZK_HEAP_PER_PARTITION // MIB)
        return {"heap_mb": max(512, heap), "jute_maxbuffer": ZK_JUTE_MAXBUFFER}
    if kind == "etcd":
        return {"quota_bytes": min(8 << 30, max(ETCD_QUOTA_MIN,
                                                partitions * ETCD_QUOTA_PER_PARTITION))}
    raise ValueError(f"unknown server kind {kind!r} (expected zookeeper or etcd)")
