"""Replica assignment for new topics and added partitions, by Kafka's rules (pure).

The aims, in Kafka's order: spread replicas evenly over brokers; spread the followers of the
partitions a broker leads over the other brokers; with rack information, put each partition's
replicas on distinct racks while racks remain.

How: the first replica of each partition goes round-robin over the broker list from a start
index; the followers sit at a shift from it that grows by one each time the round-robin wraps,
so the same leader gets different followers on the next lap. With racks, the broker list is
first interleaved by rack so that neighbours sit on different racks, and a follower candidate
is skipped while its rack (or the broker itself) already holds a replica and some rack (or
broker) holds none.

The random start index and shift keep topics from all piling their leaders on the first broker;
pass them explicitly (or a seeded `random.Random`) for a reproducible assignment.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "MAX_PARTITIONS",
    "IncompleteRackInfo",
    "InvalidPartitions",
    "InvalidReplicationFactor",
    "assign_replicas",
    "rack_alternated_brokers",
    "start_index_for_added_partitions",
]

MAX_PARTITIONS = 100_000
"""Partitions one topic may have. Kafka's ZooKeeper mode names no such number, but it keeps a
topic's whole assignment in one node, and so does partctl: past about 60,000 partitions at
replication factor 3 (one-digit broker ids) that node passes ZooKeeper's 1 MB (etcd's 1.5 MiB:
about 85,000), which topic creation checks as well. The cap refuses an absurd count
(``--partitions 100000000`` would build gigabytes of assignment in memory) before any work."""


class InvalidPartitions(ValueError):
    """The partition count is not positive, or more than MAX_PARTITIONS."""


class InvalidReplicationFactor(ValueError):
    """The replication factor is not positive or exceeds the number of brokers."""


class IncompleteRackInfo(ValueError):
    """Some brokers have a rack and others do not, and racks were not to be ignored."""


def assign_replicas(
    brokers: Mapping[int, str | None] | Iterable[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
    ignore_racks: bool = False,
) -> dict[int, list[int]]:
    """Assign `replication_factor` replicas to each of `partitions` partitions.

    `brokers` is either broker ids (rack-unaware) or a mapping of broker id to rack (`None` for
    no rack). If every broker has a rack the assignment is rack-aware; if none has, rack-unaware;
    a mix is an `IncompleteRackInfo` error unless `ignore_racks` (Kafka's disabled rack-aware
    mode). Broker order does not matter: ids are sorted, as Kafka sorts the registered brokers.

    `start_index` and `replica_shift` default to draws from `rng` (start index first); as in
    Kafka, a given `start_index` without a `replica_shift` fixes the shift to the same value.
    `start_partition_id` numbers the partitions from there, for partitions added to an
    existing topic (see `start_index_for_added_partitions`).

    Returns partition id -> replicas, the first being the preferred leader.
    """
    if partitions <= 0:
        raise InvalidPartitions(f"number of partitions must be larger than 0, got {partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactor(
            f"replication factor must be larger than 0, got {replication_factor}"
        )
    if start_partition_id < 0:
        raise InvalidPartitions(
            f"start partition id must not be negative, got {start_partition_id}"
        )
    if start_partition_id + partitions > MAX_PARTITIONS:
        raise InvalidPartitions(
            f"a topic has at most {MAX_PARTITIONS:,} partitions, asked for "
            f"{start_partition_id + partitions:,}"
        )

    racks: dict[int, str | None] = (
        dict(brokers) if isinstance(brokers, Mapping) else dict.fromkeys(brokers)
    )
    if replication_factor > len(racks):
        raise InvalidReplicationFactor(
            f"replication factor {replication_factor} larger than available brokers {len(racks)}"
        )

    with_rack = {b: r for b, r in racks.items() if r is not None}
    rack_aware = bool(with_rack) and not ignore_racks
    if rack_aware and len(with_rack) != len(racks):
        missing = sorted(b for b, r in racks.items() if r is None)
        raise IncompleteRackInfo(
            f"not all brokers have rack information for a rack-aware assignment: {missing}"
        )

    ordered = rack_alternated_brokers(with_rack) if rack_aware else sorted(racks)
    n = len(ordered)
    for name, value in (("start_index", start_index), ("replica_shift", replica_shift)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    if start_index is None:
        rng = rng or random.Random()
        start_index = rng.randrange(n)
        if replica_shift is None:
            replica_shift = rng.randrange(n)
    elif replica_shift is None:
        replica_shift = start_index

    if rack_aware:
        return _assign_rack_aware(
            ordered,
            with_rack,
            partitions,
            replication_factor,
            start_index,
            replica_shift,
            start_partition_id,
        )
    return _assign_rack_unaware(
        ordered, partitions, replication_factor, start_index, replica_shift, start_partition_id
    )


def _follower_index(first: int, shift: int, k: int, n: int) -> int:
    # The k-th follower candidate sits 1 + (shift + k) mod (n - 1) places after the first replica:
    # never on the first replica itself, and a different offset for each lap's shift.
    return (first + 1 + (shift + k) % (n - 1)) % n


def _shift_at(partition_id: int, start_partition_id: int, replica_shift: int, n: int) -> int:
    # The shift grows by one at every positive partition id that is a multiple of the broker
    # count (each time the round-robin wraps), counting from the first partition assigned now.
    wraps_before = (max(start_partition_id, 1) - 1) // n
    return replica_shift + partition_id // n - wraps_before


def _assign_rack_unaware(
    ordered: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_index: int,
    replica_shift: int,
    start_partition_id: int,
) -> dict[int, list[int]]:
    n = len(ordered)
    result: dict[int, list[int]] = {}
    for p in range(start_partition_id, start_partition_id + partitions):
        shift = _shift_at(p, start_partition_id, replica_shift, n)
        first = (p + start_index) % n
        replicas = [ordered[first]]
        replicas += [
            ordered[_follower_index(first, shift, k, n)] for k in range(replication_factor - 1)
        ]
        result[p] = replicas
    return result


def _assign_rack_aware(
    ordered: Sequence[int],
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    start_index: int,
    replica_shift: int,
    start_partition_id: int,
) -> dict[int, list[int]]:
    n = len(ordered)
    n_racks = len(set(racks.values()))
    result: dict[int, list[int]] = {}
    for p in range(start_partition_id, start_partition_id + partitions):
        shift = _shift_at(p, start_partition_id, replica_shift, n)
        first = (p + start_index) % n
        leader = ordered[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used_brokers = {leader}
        k = 0
        while len(replicas) < replication_factor:
            broker = ordered[_follower_index(first, shift * n_racks, k, n)]
            k += 1
            rack = racks[broker]
            if rack in used_racks and len(used_racks) < n_racks:
                continue  # some rack holds no replica yet: prefer it
            if broker in used_brokers and len(used_brokers) < n:
                continue  # some broker holds no replica yet: prefer it
            replicas.append(broker)
            used_racks.add(rack)
            used_brokers.add(broker)
        result[p] = replicas
    return result


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Broker ids interleaved by rack: one from each rack in rack-name order, then again.

    Within a rack brokers go in id order. A simple round-robin over this list then lands
    neighbouring replicas on different racks. Racks with fewer brokers simply drop out.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def start_index_for_added_partitions(
    brokers: Iterable[int], first_replica_of_partition_0: int
) -> int:
    """Where Kafka starts the round-robin for partitions added to an existing topic.

    The index, in sorted broker ids, of the first broker whose id is at least partition 0's
    preferred replica (0 if there is none), so new partitions line up with the existing ones.
    """
    for index, broker in enumerate(sorted(set(brokers))):
        if broker >= first_replica_of_partition_0:
            return index
    return 0
