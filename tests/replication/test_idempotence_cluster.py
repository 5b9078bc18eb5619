"""Idempotent producers across replicas: what the leader answers (the Produce response's
fields, a retry's original offsets, refusals with Kafka's codes), followers that build the state
from what they replicate, so that a new leader answers a retry with its predecessor's offsets,
truncation that takes a follower's state back, and idle producers expiring."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from node import EmbeddedCluster, embedded_replica_config
from node.clients import ProduceError
from replication.config import ReplicaConfig
from replication.protocol import ACKS_ALL

from ._util import idempotent_batch
from .loopback import TRANSPORTS
from .test_replica_manager_cluster import TP, MiniCluster, make_batch, values_by_offset


def produce(cluster: MiniCluster, data: bytes, acks: int = ACKS_ALL):  # noqa: ANN201
    return cluster.leader_manager().produce(TP, data, acks=acks)


def test_the_answer_carries_what_a_produce_response_needs(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path)
    try:
        cluster.create()
        plain, _ = make_batch(2)
        assert produce(cluster, plain, acks=1).result(0).base_offset == 0
        result = produce(cluster, idempotent_batch(0, 3, timestamp=5_555), acks=1).result(0)
        assert (result.error, result.base_offset, result.last_offset) == (ErrorCode.NONE, 2, 4)
        assert (result.log_append_time, result.log_start_offset) == (-1, 0)
        assert not result.duplicate and result.error_message is None
        retry = produce(cluster, idempotent_batch(0, 3, timestamp=5_555), acks=1).result(0)
        assert (retry.error, retry.base_offset, retry.last_offset) == (ErrorCode.NONE, 2, 4)
        assert retry.duplicate and retry.log_append_time == 5_555  # Kafka's answer
        for data, code in [
            (idempotent_batch(9), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
            (idempotent_batch(3, epoch=-1), ErrorCode.INVALID_PRODUCER_EPOCH),
            (idempotent_batch(3) + idempotent_batch(4), ErrorCode.INVALID_RECORD),
        ]:
            refused = produce(cluster, data, acks=1).result(0)
            assert (refused.error, refused.error_message is not None) == (code, True)
            assert int(code) in (45, 47, 87) and refused.base_offset == -1
        assert cluster.log(1).log_end_offset == 5
    finally:
        cluster.shutdown()


def test_a_retry_of_an_uncommitted_batch_waits_for_the_original(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path)
    try:
        cluster.create()
        earlier, _ = cluster.produce(n=2)
        first = produce(cluster, idempotent_batch(0, 3))
        cluster.step()  # the followers copy offsets 0..4; the leader learns it next round
        later = produce(cluster, idempotent_batch(3, 1))
        retry = produce(cluster, idempotent_batch(0, 3))
        assert not (first.done() or retry.done() or later.done())
        cluster.step()  # HW 5: the original and its retry are committed, the later one not
        assert earlier.done() and first.result(0).base_offset == 2
        assert retry.done() and not later.done()
        assert retry.result(0).base_offset == 2 and retry.result(0).duplicate
        cluster.settle()
        assert later.result(0).base_offset == 5
        # once committed, a retry is answered at once, acks=all or not
        again = produce(cluster, idempotent_batch(0, 3))
        assert again.done() and again.result(0).base_offset == 2
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_new_leader_answers_a_retry_with_its_predecessors_offsets(tmp_path: Path,
                                                                   transport: str) -> None:
    cluster = MiniCluster(tmp_path, transport=transport)
    try:
        cluster.create()
        data = idempotent_batch(0, 3)
        first = produce(cluster, data)
        cluster.settle()
        assert first.result(0).base_offset == 0  # ... and the answer never reached the producer
        cluster.crash(1)
        assert cluster.leader() in (2, 3)
        retry = produce(cluster, data)
        cluster.settle()
        result = retry.result(0)
        assert (result.error, result.base_offset, result.duplicate) == (ErrorCode.NONE, 0, True)
        leader = cluster.log(cluster.leader())
        assert leader.log_end_offset == 3 and len(values_by_offset(leader)) == 3
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_batch_only_the_old_leader_had_is_taken_anew_and_truncated_away_there(
    tmp_path: Path, transport: str
) -> None:
    cluster = MiniCluster(tmp_path, transport=transport)
    try:
        cluster.create()
        produce(cluster, idempotent_batch(0, 2))
        cluster.settle()
        lost = idempotent_batch(2, 2)
        produce(cluster, lost, acks=1)  # on broker 1 only: nobody fetches it
        cluster.crash(1)
        new = cluster.leader()
        produce(cluster, make_batch(1)[0], acks=1)
        resent = produce(cluster, lost, acks=1).result(0)
        assert (resent.base_offset, resent.duplicate) == (3, False)
        cluster.start(1)  # follows: truncates its copy away, replicates the new leader's
        cluster.settle()
        assert cluster.log(1).producer_entries() == cluster.log(new).producer_entries()
        assert cluster.log(1).producer_entry(7).last_offset == 4  # type: ignore[union-attr]
        cluster.crash(new)  # broker 1 leads again and recognises the batch where it now is
        cluster.elect(prefer=1)
        assert cluster.leader() == 1
        again = produce(cluster, lost, acks=1).result(0)
        assert (again.base_offset, again.duplicate) == (3, True)
    finally:
        cluster.shutdown()


def test_idle_producers_expire_on_every_replica(tmp_path: Path) -> None:
    config = ReplicaConfig(producer_id_expiration_ms=60_000,
                           producer_id_expiration_check_interval_ms=10_000)
    cluster = MiniCluster(tmp_path, config=config)
    try:
        cluster.create()
        now = cluster.clock.now_ms()
        produce(cluster, idempotent_batch(0, 2, timestamp=now))
        cluster.settle()
        cluster.clock.advance(59_999)
        for rm in cluster.brokers.values():
            rm.tick()
        assert all(cluster.log(b).producer_entry(7) for b in cluster.brokers)
        cluster.clock.advance(10_000)
        for rm in cluster.brokers.values():
            rm.tick()
        assert not any(cluster.log(b).producer_entry(7) for b in cluster.brokers)
        # forgotten: its next batch is UNKNOWN_PRODUCER_ID (as Kafka 0.11 to 2.4 answered; the
        # client takes a new producer id), a batch from sequence 0 is taken
        refused = produce(cluster, idempotent_batch(9, 1, timestamp=now), acks=1).result(0)
        assert (refused.error, refused.base_offset) == (ErrorCode.UNKNOWN_PRODUCER_ID, -1)
        assert refused.error_message is not None and "no record of producer 7" in \
            refused.error_message
        taken = produce(cluster, idempotent_batch(0, 1, timestamp=now), acks=1).result(0)
        assert (taken.error, taken.base_offset) == (ErrorCode.NONE, 2)
    finally:
        cluster.shutdown()


def test_on_the_embedded_cluster_a_retry_after_failover_is_not_written_twice(
    tmp_path: Path
) -> None:
    with EmbeddedCluster(3, root=tmp_path,
                         replica_config=embedded_replica_config(min_insync_replicas=2)) as cluster:
        tp = cluster.create_topic("idempotent", partitions=1, replication_factor=3)[0]
        a = cluster.leader(tp)
        node = cluster.node(a)
        assert node.producer_ids is not None
        pid, epoch = node.producer_ids.init_producer_id()
        assert (pid, epoch) == (0, 0)  # the cluster's first block starts at 0
        data = idempotent_batch(0, 3, pid=pid, epoch=epoch)
        rm = cluster.replica_manager(a)
        assert rm is not None
        first = rm.produce(tp, data).result(15)
        assert first.error == ErrorCode.NONE
        cluster.crash(a)  # the producer never saw the answer
        b = cluster.wait_for_leader(tp, excluding=[a]).leader
        new = cluster.replica_manager(b)
        assert new is not None
        retry = new.produce(tp, data).result(15)
        assert (retry.error, retry.base_offset, retry.duplicate) == (
            ErrorCode.NONE, first.base_offset, True)
        following = new.produce(tp, idempotent_batch(3, 1, pid=pid)).result(15)
        assert following.base_offset == first.base_offset + 3
        records = cluster.consumer().read_all(tp)
        assert [r.offset for r in records] == [0, 1, 2, 3]  # no duplicate in the log
        other = cluster.node(b).producer_ids
        assert other is not None and other.init_producer_id().producer_id == 1_000


def test_the_embedded_producer_numbers_records_per_partition(tmp_path: Path) -> None:
    with EmbeddedCluster(3, root=tmp_path) as cluster:
        tps = cluster.create_topic("numbered", partitions=2, replication_factor=2)
        with cluster.producer() as producer:
            for n in (1, 2, 3):
                for tp in tps:
                    producer.produce(tp, [b"x"] * n)
            for tp in tps:
                leader = cluster.replica_manager(cluster.leader(tp))
                assert leader is not None
                partition = leader.partition(tp)
                assert partition is not None
                entry = partition.log.producer_entry(producer.producer_id)
                # sequences count records, from 0 in each partition: 0, 1..2, 3..5
                assert entry is not None
                assert [(b.first_seq, b.last_seq) for b in entry.batches] == [
                    (0, 0), (1, 2), (3, 5)]


def _entries(cluster: EmbeddedCluster, tp: TopicPartition, producer_id: int) -> list[object]:
    found = []
    for broker in cluster.replicas(tp):
        rm = cluster.replica_manager(broker)
        partition = rm.partition(tp) if rm is not None else None
        if partition is not None:
            found.append(partition.log.producer_entry(producer_id))
    return found


def test_the_embedded_producer_takes_a_new_epoch_when_a_partition_forgot_it(
    tmp_path: Path
) -> None:
    with EmbeddedCluster(3, root=tmp_path) as cluster:
        tp = cluster.create_topic("forgetful", partitions=1, replication_factor=3)[0]
        with cluster.producer(delivery_timeout_ms=10_000) as producer:
            producer.produce(tp, [b"a", b"b"])
            cluster.wait_for_caught_up(tp)
            # every replica forgets the producer, as producer.id.expiration.ms makes it
            far = time.time_ns() // 1_000_000 + 10 ** 9
            for broker in cluster.replicas(tp):
                rm = cluster.replica_manager(broker)
                assert rm is not None and rm.partition(tp) is not None
                assert rm.partition(tp).log.remove_expired_producers(far) == 1  # type: ignore
            assert _entries(cluster, tp, producer.producer_id) == [None] * 3
            # its next batch (sequence 2) is UNKNOWN_PRODUCER_ID: numbered afresh, it goes
            delivery = producer.produce(tp, [b"c"])
            assert (delivery.base_offset, producer.epoch_bumps) == (2, 1)
            producer.produce(tp, [b"d"])
        leader = cluster.replica_manager(cluster.leader(tp))
        assert leader is not None and leader.partition(tp) is not None
        entry = leader.partition(tp).log.producer_entry(producer.producer_id)  # type: ignore
        assert entry is not None and entry.epoch == 1
        assert [(b.first_seq, b.last_seq) for b in entry.batches] == [(0, 0), (1, 1)]
        assert [r.value for r in cluster.consumer().read_all(tp)] == [b"a", b"b", b"c", b"d"]


@pytest.mark.parametrize("first", [True, False], ids=["first-batch", "after-one"])
def test_a_batch_failed_for_good_leaves_no_gap_for_the_next(tmp_path: Path, first: bool
                                                            ) -> None:
    with EmbeddedCluster(3, root=tmp_path) as cluster:
        tp = cluster.create_topic("gappy", partitions=1, replication_factor=3)[0]
        with cluster.producer(delivery_timeout_ms=10_000) as producer:
            if not first:
                producer.produce(tp, [b"a"])
            with pytest.raises(ProduceError, match="MESSAGE_TOO_LARGE"):
                producer.produce(tp, [b"x" * (2 << 20)] * 2)
            # sequences 1..2 (or 0..1) were never written; the next batch gets a new epoch
            producer.produce(tp, [b"b"])
            assert producer.epoch_bumps == 1
        values = [r.value for r in cluster.consumer().read_all(tp)]
        assert values == ([b"b"] if first else [b"a", b"b"])
