"""A compacted topic on an embedded cluster: the leader's cleaner runs in the background, a
follower that was down while the leader compacted fetches the gapped log and ends with the same
latest value per key, at the same offsets, as every other replica; a keyless produce is
refused with INVALID_RECORD."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from node import EmbeddedCluster, embedded_replica_config
from replication.cleaner import CleanerConfig
from replication.log import Log
from replication.protocol import ACKS_ALL
from replication.records import Record, decode_batch, encode_batch
from tests.waiting import wait_until


def latest_per_key(log: Log) -> tuple[dict[bytes | None, tuple[int, bytes | None]], list[int]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    offsets: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        if not got.records:
            break
        pos = 0
        while pos < len(got.records):
            batch = decode_batch(got.records, pos)
            for r in batch.records:
                out[r.key] = (r.offset, r.value)
                offsets.append(r.offset)
            pos += batch.header.size
        offset = got.next_offset
    return out, offsets


def produce(cluster: EmbeddedCluster, tp: TopicPartition, key: bytes | None, value: bytes
            ) -> ErrorCode:
    rm = cluster.replica_manager(cluster.leader(tp))
    assert rm is not None
    batch = encode_batch([Record(key=key, value=value, timestamp=1_000)])
    return rm.produce(tp, batch, acks=ACKS_ALL, timeout_ms=10_000).result(15).error


def test_a_follower_copies_a_compacted_leader_through_its_gaps(tmp_path: Path) -> None:
    config = replace(embedded_replica_config(), cleaner=CleanerConfig(backoff_ms=50))
    with EmbeddedCluster(3, root=tmp_path, replica_config=config) as cluster:
        (tp,) = cluster.create_topic("c", assignment={0: [1, 2, 3]}, timeout=30, config={
            "cleanup.policy": "compact", "segment.bytes": "400",
            "min.cleanable.dirty.ratio": "0.01"})
        assert produce(cluster, tp, None, b"no key") is ErrorCode.INVALID_RECORD
        for i in range(5):
            assert produce(cluster, tp, b"k%d" % i, b"first") is ErrorCode.NONE
        cluster.wait_for_caught_up(tp, timeout=20)
        leader = cluster.leader(tp)
        late = next(b for b in (1, 2, 3) if b != leader)
        cluster.crash(late)
        for i in range(300):
            assert produce(cluster, tp, b"k%d" % (i % 10), b"v%d" % i) is ErrorCode.NONE
        leader_log = cluster.replica_manager(leader).partition(tp).log
        wait_until(lambda: len(latest_per_key(leader_log)[1]) < 100, 30,
                   message="the leader's cleaner compacts its log")
        cluster.restart(late)
        wait_until(lambda: (p := cluster.replica_manager(late).partition(tp)) is not None
                   and p.log.log_end_offset == leader_log.log_end_offset, 30,
                   message="the late follower catches up")
        late_log = cluster.replica_manager(late).partition(tp).log
        late_latest, late_offsets = latest_per_key(late_log)
        # the gaps may all lie before the first record kept (the cleaner can have removed
        # everything below a contiguous tail): the records do not fill the log's offsets
        assert late_offsets != list(range(late_log.log_start_offset, late_log.log_end_offset)), \
            "the late follower's log has the leader's gaps"
        for broker in (1, 2, 3):
            log = cluster.replica_manager(broker).partition(tp).log
            latest, _offsets = latest_per_key(log)
            assert latest == late_latest, f"broker {broker} reads the same latest values"
        assert late_latest[b"k3"] == (5 + 293, b"v293")
