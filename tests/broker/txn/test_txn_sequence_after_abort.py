"""A producer that sends, in its next transaction, a batch with the sequence numbers of a batch
its aborted transaction wrote (same producer id and epoch): what the partition leader answers,
on partctl and on Apache Kafka 3.9.1, both with KIP-890's verification off so that raw batches
need no coordinator.

librdkafka does this: a batch whose Produce timed out goes back to its queue, abort_transaction
purges the queue and the next transaction's messages take the purged ones' sequence numbers,
though the timed-out request may have been written (fault harness, etcd seed 99). Kafka answers
the new batch as a duplicate of the aborted one: success, the old batch's offset, nothing
written, so the next commit commits nothing of it. partctl refuses it instead with
OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka takes as the transaction's failure (it aborts
it and bumps the epoch): a transactional batch is a duplicate only of one in the producer's
open transaction (``ProducerEntry.in_open_transaction``). A retry inside the transaction is
still answered as Kafka answers it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.broker.wire_client import RawClient
from tests.kafka.conftest import require_kafka
from tests.kafka.harness import KAFKA_3, KafkaCluster, start_kafka_zk
from tests.servers import Server
from tests.waiting import wait_until

from ..data.test_cluster_clients import Trio
from .test_txn_data_markers import (
    codes,
    fetch_all,
    leader_and_follower,
    markers,
    produce_transactional,
)
from .trios import UnverifiedTrio, two_partitions

pytestmark = pytest.mark.servers

TOPIC = "txn-seq-after-abort"


@pytest.fixture(scope="module")
def trio(unverified_trio: UnverifiedTrio) -> Iterator[Trio]:
    two_partitions(unverified_trio, TOPIC)
    yield unverified_trio


@pytest.fixture(scope="module")
def kafka(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[KafkaCluster]:
    """One Kafka 3.9.1 broker with verification off, a topic of one partition on it."""
    require_kafka(KAFKA_3)
    cluster = start_kafka_zk(tmp_path_factory.mktemp("kafka3-seq"), zookeeper_server,
                             extra={"transaction.partition.verification.enable": "false"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30) is None
        yield cluster
    finally:
        cluster.stop()


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _abort_then_reuse(leader: RawClient, partition: int, pid: int) -> tuple[object, list]:
    """Batch at sequence 0 (written), the abort marker, then a new batch at sequence 0: the
    new batch's answer and the partition's batches after it."""
    first = produce_transactional(leader, partition, pid, 0, topic=TOPIC, value=b"aborted")
    assert first.error_code == ErrorCode.none
    aborted = leader.call(markers((pid, 0, False, 0, [(TOPIC, [partition])])))
    assert codes(aborted) == {(pid, TOPIC, partition): ErrorCode.none}
    again = produce_transactional(leader, partition, pid, 0, topic=TOPIC, value=b"next txn")
    _hw, batches = fetch_all(leader, partition, TOPIC)
    return again, batches


def test_kafka_answers_the_reused_sequence_as_a_duplicate_of_the_aborted_batch(
        kafka: KafkaCluster) -> None:
    with RawClient(_address(kafka.bootstrap), timeout=30) as leader:
        wait_until(lambda: produce_transactional(
            leader, 0, 4000, 0, topic=TOPIC, transactional=False,
            transactional_id=None).error_code == ErrorCode.none,
            timeout=60, message="the topic's leader serving")
        again, batches = _abort_then_reuse(leader, 0, 4100)
    # the aborted batch's offset, and nothing written after the marker
    assert (again.error_code, again.base_offset) == (ErrorCode.none, 1)
    assert [(b.header.base_offset, b.header.is_control) for b in batches] == [
        (0, False), (1, False), (2, True)]


def test_partctl_refuses_a_sequence_reused_after_the_abort(trio: Trio) -> None:
    leader, follower = leader_and_follower(trio, 0, TOPIC)
    with leader, follower:
        again, batches = _abort_then_reuse(leader, 0, 4200)
        assert again.error_code == ErrorCode.out_of_order_sequence_number
        assert [b.header.is_control for b in batches] == [False, True]  # nothing written
        # the next sequence is the producer's next batch, in a transaction of its own
        assert produce_transactional(leader, 0, 4200, 1, topic=TOPIC).error_code == (
            ErrorCode.none)


def test_partctl_still_answers_a_retry_in_the_open_transaction_as_a_duplicate(
        trio: Trio) -> None:
    leader, follower = leader_and_follower(trio, 1, TOPIC)
    with leader, follower:
        first = produce_transactional(leader, 1, 4300, 0, topic=TOPIC, value=b"once")
        retry = produce_transactional(leader, 1, 4300, 0, topic=TOPIC, value=b"once")
        _hw, batches = fetch_all(leader, 1, TOPIC)
    assert first.error_code == retry.error_code == ErrorCode.none
    assert retry.base_offset == first.base_offset and len(batches) == 1
