"""The transaction coordinator of one real ``partctl broker`` with an ACL authorizer: Kafka's
ACL checks on TransactionalId, topic and group resources, KIP-890's ``verify_only``,
AddOffsetsToTxn adding the group's ``__consumer_offsets`` partition, and idle transactional
ids expired after ``transactional.id.expiration.ms``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

import coordinator
from broker.groups.records import partition_for
from broker.security import acl_store
from broker.security.acls import (
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from tests.broker.processes import BrokerProcess, create_topic, start_broker
from tests.broker.txn.txn_coord_wire import Described, describe_at
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server
from tests.waiting import wait_until

from .test_txn_data_markers import produce_transactional

pytestmark = pytest.mark.servers

SETTINGS = ("transaction.state.log.num.partitions=2\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "offsets.topic.num.partitions=2\n"
            "offsets.topic.replication.factor=1\n"
            "transactional.id.expiration.ms=2000\n"
            "transaction.remove.expired.transaction.cleanup.interval.ms=200\n"
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
            "allow.everyone.if.no.acl.found=true\n")
ME = "User:ANONYMOUS"
T = ResourceType.TRANSACTIONAL_ID


def acl(rtype: ResourceType, name: str, op: Operation, allow: bool) -> AclBinding:
    return AclBinding(pattern=ResourcePattern(resource_type=rtype, name=name,
                                              pattern_type=PatternType.LITERAL),
                      entry=AclEntry(principal=ME, host="*", operation=op,
                                     permission=Permission.ALLOW if allow else Permission.DENY))


@pytest.fixture(scope="module")
def broker(zookeeper_server: Server,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory: Path = tmp_path_factory.mktemp("txn-single")
    b = start_broker(directory, zookeeper_server, extra=SETTINGS)
    try:
        for topic in ("open", "forbidden"):
            create_topic(b, topic)
        client = coordinator.connect(b.coordinator_url, timeout=10)
        try:
            acl_store.add_acls(client, [
                acl(T, "denied", Operation.WRITE, False),
                acl(T, "hidden", Operation.WRITE, True),
                acl(T, "hidden", Operation.DESCRIBE, False),
                acl(ResourceType.TOPIC, "forbidden", Operation.WRITE, False),
                acl(ResourceType.GROUP, "closed-group", Operation.READ, False)])
        finally:
            client.close()
        wait_until(lambda: call(b, request(10, 3, key="denied", key_type=1)).error_code
                   == ErrorCode.transactional_id_authorization_failed, timeout=30,
                   interval=0.1, message="the ACLs followed")
        yield b
    finally:
        assert b.stop() == 0, b.log()[-3000:]


def call(broker: BrokerProcess, body: Any) -> Any:
    with RawClient(broker.address, timeout=30) as client:
        return client.call(body)


def ready(broker: BrokerProcess) -> None:
    """``__transaction_state`` and ``__consumer_offsets`` there and loaded."""
    for key_type, key in ((1, "visible"), (0, "g")):
        wait_until(lambda kt=key_type, k=key: call(broker, request(
            10, 3, key=k, key_type=kt)).error_code == ErrorCode.none, timeout=60,
            interval=0.2, message="a coordinator")
    wait_until(lambda: init(broker, "probe").error_code == ErrorCode.none, timeout=60,
               interval=0.2, message="the transaction coordinator loaded")


def init(broker: BrokerProcess, tid: str) -> Any:
    return call(broker, request(22, 4, transactional_id=tid,
                                transaction_timeout=timedelta(seconds=60),
                                producer_id=-1, producer_epoch=-1))


def add(broker: BrokerProcess, tid: str, answer: Any,
        partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    module = request_module(24, 3)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    result = call(broker, request(
        24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=answer.producer_id,
        v3_and_below_producer_epoch=answer.producer_epoch,
        v3_and_below_topics=tuple(module.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                  for t, ps in by_topic.items())))
    return {(t.name, r.partition_index): r.partition_error_code
            for t in result.results_by_topic_v3_and_below for r in t.results_by_partition}


def verify(broker: BrokerProcess, version: int, tid: str, answer: Any,
           partitions: list[tuple[str, int]], *, epoch: int | None = None
           ) -> dict[tuple[str, int], ErrorCode]:
    """AddPartitionsToTxn ``version`` (4 or 5, a broker's) with ``verify_only``: each
    partition's error."""
    module = request_module(24, version)
    topics = tuple(module.AddPartitionsToTxnTopic(name=t, partitions=(p,)) for t, p in partitions)
    result = call(broker, request(24, version, transactions=(module.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch if epoch is None else epoch, verify_only=True,
        topics=topics),)))
    assert result.error_code == ErrorCode.none
    return {(t.name, r.partition_index): r.partition_error_code
            for t in result.results_by_transaction[0].topic_results
            for r in t.results_by_partition}


def describe(broker: BrokerProcess, tid: str) -> Described:
    return describe_at(broker.address, tid)


def test_acls_as_kafka_checks_them(broker: BrokerProcess) -> None:
    ready(broker)
    assert init(broker, "denied").error_code == ErrorCode.transactional_id_authorization_failed
    ok = init(broker, f"open-{uuid.uuid4().hex[:6]}")
    assert ok.error_code == ErrorCode.none
    tid = f"acl-{uuid.uuid4().hex[:6]}"
    mine = init(broker, tid)
    assert add(broker, tid, mine, [("forbidden", 0), ("open", 0)]) == {
        ("forbidden", 0): ErrorCode.topic_authorization_failed,
        ("open", 0): ErrorCode.operation_not_attempted}
    assert add(broker, tid, mine, [("__consumer_offsets", 0)]) == {
        ("__consumer_offsets", 0): ErrorCode.topic_authorization_failed}
    assert add(broker, tid, mine, [("nowhere", 0), ("open", 0)]) == {
        ("nowhere", 0): ErrorCode.unknown_topic_or_partition,
        ("open", 0): ErrorCode.operation_not_attempted}
    assert add(broker, "denied", mine, [("open", 0)]) == {
        ("open", 0): ErrorCode.transactional_id_authorization_failed}
    closed = call(broker, request(25, 3, transactional_id=tid, producer_id=mine.producer_id,
                                  producer_epoch=mine.producer_epoch, group_id="closed-group"))
    assert closed.error_code == ErrorCode.group_authorization_failed
    end = call(broker, request(26, 3, transactional_id="denied", producer_id=1,
                               producer_epoch=0, committed=True))
    assert end.error_code == ErrorCode.transactional_id_authorization_failed
    # DESCRIBE: an id the principal may write but not describe is neither described nor listed
    hidden = init(broker, "hidden")
    assert hidden.error_code == ErrorCode.none
    assert describe(broker, "hidden").error_code == \
        ErrorCode.transactional_id_authorization_failed
    listed = call(broker, request(66, 0))
    names = {s.transactional_id for s in listed.transaction_states}
    assert tid in names and "hidden" not in names


def test_verify_only_and_add_offsets(broker: BrokerProcess) -> None:
    ready(broker)
    tid = f"verify-{uuid.uuid4().hex[:6]}"
    mine = init(broker, tid)
    assert add(broker, tid, mine, [("open", 0)]) == {("open", 0): ErrorCode.none}
    assert verify(broker, 4, tid, mine, [("open", 0), ("forbidden", 0)]) == {
        ("open", 0): ErrorCode.none, ("forbidden", 0): ErrorCode.transaction_abortable}
    added = call(broker, request(25, 3, transactional_id=tid, producer_id=mine.producer_id,
                                 producer_epoch=mine.producer_epoch, group_id="g"))
    assert added.error_code == ErrorCode.none
    assert set(describe(broker, tid).topics) == {
        ("open", (0,)), ("__consumer_offsets", (partition_for("g", 2),))}
    fenced = call(broker, request(25, 1, transactional_id=tid, producer_id=mine.producer_id,
                                  producer_epoch=mine.producer_epoch + 1, group_id="g"))
    assert fenced.error_code == ErrorCode.invalid_producer_epoch  # version 1: no FENCED yet


def test_transactional_batches_need_a_transactional_id_the_principal_may_write(
        broker: BrokerProcess) -> None:
    """Kafka refuses the whole Produce, before any check of the partitions."""
    ready(broker)
    with RawClient(broker.address, timeout=30) as client:
        for tid in (None, "denied"):
            answer = produce_transactional(client, 0, 77, 0, topic="open",
                                           transactional_id=tid)
            assert answer.error_code == ErrorCode.transactional_id_authorization_failed
        plain = produce_transactional(client, 0, 77, 0, topic="open", transactional=False,
                                      transactional_id=None)
        assert plain.error_code == ErrorCode.none  # an idempotent batch needs no id


def test_idle_transactional_ids_expire(broker: BrokerProcess) -> None:
    ready(broker)
    idle, busy = f"idle-{uuid.uuid4().hex[:6]}", f"busy-{uuid.uuid4().hex[:6]}"
    assert init(broker, idle).error_code == ErrorCode.none
    started = init(broker, busy)
    assert add(broker, busy, started, [("open", 0)]) == {("open", 0): ErrorCode.none}
    wait_until(lambda: describe(broker, idle).error_code
               == ErrorCode.transactional_id_not_found, timeout=30, interval=0.2,
               message=f"{idle} expired")
    assert describe(broker, busy).transaction_state == "Ongoing"  # never while ongoing
    again = init(broker, idle)  # a new producer id: the old one was forgotten
    assert again.error_code == ErrorCode.none and again.producer_epoch == 0


def test_add_partitions_to_txn_v5_answers_as_v4(broker: BrokerProcess) -> None:
    """Version 5 (Kafka 3.9, KIP-890) is served, and answered as version 4: it only says the
    asking broker knows TRANSACTION_ABORTABLE, which the coordinator answers to both for a
    partition not in the transaction."""
    ready(broker)
    versions = call(broker, request(18, 3, client_software_name="t",
                                    client_software_version="1"))
    assert [(k.min_version, k.max_version) for k in versions.api_keys if k.api_key == 24] == [
        (0, 5)]
    tid = f"v5-{uuid.uuid4().hex[:6]}"
    mine = init(broker, tid)
    assert add(broker, tid, mine, [("open", 0)]) == {("open", 0): ErrorCode.none}
    asked = [("open", 0), ("forbidden", 0)]
    expected = {("open", 0): ErrorCode.none, ("forbidden", 0): ErrorCode.transaction_abortable}
    assert verify(broker, 5, tid, mine, asked) == verify(broker, 4, tid, mine, asked) == expected
    for version in (4, 5):  # a fenced epoch, a producer id the coordinator does not know
        assert verify(broker, version, tid, mine, [("open", 0)],
                      epoch=mine.producer_epoch + 1) == {("open", 0): ErrorCode.producer_fenced}
        assert verify(broker, version, "nobody", mine, [("open", 0)]) == {
            ("open", 0): ErrorCode.invalid_producer_id_mapping}
        assert verify(broker, version, tid, mine, [("nowhere", 0)]) == {
            ("nowhere", 0): ErrorCode.unknown_topic_or_partition}
