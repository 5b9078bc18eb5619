"""The KIP-848 APIs' answers on the real server over a real replica manager in this process
(the test plays the controller): ConsumerGroupHeartbeat's reconciliation as members come and
go (revoke before assign), fencing by epoch, session and revocation timeouts, leaving, static
members, the group reloaded from ``__consumer_offsets``, and the bad input Kafka refuses: wrong
epochs, unknown members, unknown assignors, malformed requests, classic and consumer mixed."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.groups import OFFSETS_TOPIC, GroupConfig
from broker.groups.consumer_coordinator import ConsumerGroups
from broker.groups.consumer_records import (
    CURRENT_ASSIGNMENT,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetMemberValue,
)
from broker.security.acls import Operation, ResourceType
from broker.wire_schemas import ConsumerGroupHeartbeatRequestV1
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, request, request_module
from tests.waiting import wait_until

from .test_group_apis import commit, join, records_of

PARTITIONS = 3
T = uuid.UUID(int=0xA1)
U = uuid.UUID(int=0xB2)
MS = timedelta(milliseconds=1)


def _start(log_dir: Path, **config: object) -> InProcessBroker:
    settings: dict = dict(offsets_topic_num_partitions=PARTITIONS,
                          group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0,
                          consumer_session_timeout_ms=5_000,
                          consumer_heartbeat_interval_ms=200)
    settings.update(config)
    b = InProcessBroker(log_dir, groups=GroupConfig(**settings))
    for p in range(PARTITIONS):
        b.set_partition(OFFSETS_TOPIC, p)
    for p in range(4):
        b.set_partition("t", p)
    for p in range(2):
        b.set_partition("u", p)
    b.metadata.set_topic_ids({"t": T, "u": U})
    return b


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = _start(tmp_path / "logs")
    yield b
    b.close()


def hb(c: RawClient, group: str, member: str = "", epoch: int = 0, *,
       topics: tuple[str, ...] | None = ("t",), owned: dict | None = None,
       rebalance_ms: int | None = None, assignor: str | None = None,
       instance: str | None = None) -> object:
    m = request_module(68, 0)
    parts = None if owned is None else tuple(
        m.TopicPartitions(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in owned.items())
    if epoch == 0 and parts is None:
        parts = ()
    if rebalance_ms is None:  # given when joining, -1 (unchanged) afterwards, as clients do
        rebalance_ms = 5_000 if epoch == 0 else -1
    return c.call(request(68, 0, group_id=group, member_id=member, member_epoch=epoch,
                          instance_id=instance, rack_id=None,
                          rebalance_timeout=rebalance_ms * MS, subscribed_topic_names=topics,
                          server_assignor=assignor, topic_partitions=parts))


def parts(response: object) -> dict[uuid.UUID, set[int]] | None:
    if response.assignment is None:
        return None
    return {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions}


def ready(c: RawClient, group: str) -> object:
    return wait_until(lambda: (r := hb(c, group)).error_code is ErrorCode.none and r,
                      timeout=10)


def test_a_second_member_gets_partitions_only_after_the_first_revokes_them(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = ready(c, "g")
        assert a.member_epoch == 1 and parts(a) == {T: {0, 1, 2, 3}}
        assert a.heartbeat_interval == 200 * MS
        b = hb(c, "g")
        assert b.error_code is ErrorCode.none and b.member_epoch == 2
        assert parts(b) in (None, {}), "nothing is free yet: the first member holds it all"
        # the first member is told to revoke half; its epoch stays until it has
        a2 = hb(c, "g", a.member_id, 1, topics=None, owned={T: {0, 1, 2, 3}})
        kept = parts(a2)
        assert a2.member_epoch == 1 and kept is not None and len(kept[T]) == 2
        a3 = hb(c, "g", a.member_id, 1, topics=None, owned=kept)
        assert a3.member_epoch == 2
        b2 = hb(c, "g", b.member_id, 2, topics=None, owned={})
        assert parts(b2) == {T: {0, 1, 2, 3} - kept[T]} and b2.member_epoch == 2
        described = c.call(request(69, 0, group_ids=("g", "nope"),
                                   include_authorized_operations=False))
        g, nope = described.groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (
            ErrorCode.none, "Stable", 2, "uniform")
        assert {m.member_id for m in g.members} == {a.member_id, b.member_id}
        assert nope.error_code is ErrorCode.group_id_not_found


def test_epochs_members_and_assignors_are_checked(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = ready(c, "g")
        assert hb(c, "g", a.member_id, 7, topics=None).error_code is \
            ErrorCode.fenced_member_epoch
        assert hb(c, "g", "who", 1, topics=None).error_code is ErrorCode.unknown_member_id
        assert hb(c, "none-such", "who", 1).error_code is ErrorCode.group_id_not_found
        bad = hb(c, "g", assignor="sticky")
        assert bad.error_code is ErrorCode.unsupported_assignor and "sticky" in \
            bad.error_message
        for kwargs in ({"epoch": 3, "member": ""}, {"rebalance_ms": -1},
                       {"topics": None}, {"epoch": -3, "member": "x"},
                       {"epoch": -2, "member": a.member_id}):
            answer = hb(c, "g", **kwargs)
            assert answer.error_code is ErrorCode.invalid_request, kwargs
            assert answer.error_message
        assert hb(c, "", "x", 1).error_code is ErrorCode.invalid_request
        # the member is untouched by all that
        assert hb(c, "g", a.member_id, 1, topics=None).error_code is ErrorCode.none


def test_classic_and_consumer_groups_do_not_mix(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        ready(c, "modern")
        joined = join(c, "modern", version=7)
        assert joined.error_code is ErrorCode.inconsistent_group_protocol
        with RawClient(broker.address) as classic:  # a classic member, its join parked
            first = join(classic, "old", version=7)
            assert first.error_code is ErrorCode.member_id_required
            join(classic, "old", first.member_id, version=7, send_only=True)
            time.sleep(0.2)
            assert hb(c, "old").error_code is ErrorCode.group_id_not_found
        listed = c.call(request(16, 5, states_filter=(), types_filter=("consumer",)))
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
            ("modern", "consumer", "consumer")]
        described = c.call(request(15, 5, groups=("modern",),
                                   include_authorized_operations=False))
        assert (described.groups[0].error_code, described.groups[0].group_state) == (
            ErrorCode.none, "Dead")


def test_offset_commits_carry_the_member_epoch(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = ready(c, "g")
        ok = commit(c, "g", {("t", 0): 5}, version=9, generation=1, member=a.member_id)
        assert ok == {("t", 0): ErrorCode.none}
        assert commit(c, "g", {("t", 0): 6}, version=9, generation=0,
                      member=a.member_id) == {("t", 0): ErrorCode.stale_member_epoch}
        assert commit(c, "g", {("t", 0): 6}, version=9, generation=1,
                      member="who") == {("t", 0): ErrorCode.unknown_member_id}
        assert commit(c, "g", {("t", 0): 6}, version=8, generation=1,
                      member=a.member_id) == {("t", 0): ErrorCode.unsupported_version}
        # an admin's commit (no member) into a group with members
        assert commit(c, "g", {("t", 0): 6}, version=9) == {
            ("t", 0): ErrorCode.unknown_member_id}
        m = request_module(9, 9)
        fetched = c.call(request(9, 9, groups=(m.OffsetFetchRequestGroup(
            group_id="g", member_id=a.member_id, member_epoch=1, topics=(
                m.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),)),),
            require_stable=False))
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5
        stale = c.call(request(9, 9, groups=(m.OffsetFetchRequestGroup(
            group_id="g", member_id=a.member_id, member_epoch=9, topics=None),),
            require_stable=False))
        assert stale.groups[0].error_code is ErrorCode.stale_member_epoch


def test_a_member_leaves_and_the_empty_group_can_be_deleted(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = ready(c, "g")
        assert commit(c, "g", {("t", 1): 3}, version=9, generation=1,
                      member=a.member_id)[("t", 1)] is ErrorCode.none
        b = hb(c, "g")
        deleted = c.call(request(42, 2, groups_names=("g",)))
        assert deleted.results[0].error_code is ErrorCode.non_empty_group
        left = hb(c, "g", b.member_id, -1, topics=None)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        # the first member gets everything back
        again = hb(c, "g", a.member_id, 1, topics=None, owned=parts(a))
        assert again.member_epoch == 3 and parts(again) in (None, {T: {0, 1, 2, 3}})
        assert hb(c, "g", a.member_id, -1, topics=None).member_epoch == -1
        deleted = c.call(request(42, 2, groups_names=("g",)))
        assert deleted.results[0].error_code is ErrorCode.none
        assert hb(c, "g", a.member_id, 3, topics=None).error_code is \
            ErrorCode.group_id_not_found
    last = {}
    for key, value in records_of(broker, "g"):
        last[key] = value
    consumer = {k: v for k, v in last.items()
                if isinstance(k, ConsumerGroupKey | ConsumerMemberKey)}
    assert consumer and all(v is None for v in consumer.values()), \
        "every consumer group record ends in a tombstone"


def test_a_silent_member_is_fenced_at_its_session_timeout(tmp_path: Path) -> None:
    session_s = 1.0
    b = _start(tmp_path / "logs", consumer_session_timeout_ms=int(session_s * 1000))
    try:
        with RawClient(b.address) as c:
            a = ready(c, "g")
            silent_since = time.monotonic()
            other = hb(c, "g")
            epoch = other.member_epoch

            def the_other_heartbeats() -> bool:
                """The other keeps its session (a beat every 0.15 s, well inside it) and sees
                the group move on (epoch 3) once the silent member is gone."""
                nonlocal epoch
                answer = hb(c, "g", other.member_id, epoch, topics=None, owned={})
                assert answer.error_code is ErrorCode.none
                epoch = answer.member_epoch
                return epoch == 3

            wait_until(the_other_heartbeats, timeout=15, interval=0.15,
                       message="the silent member fenced")
            assert time.monotonic() - silent_since >= session_s  # not before its timeout
            assert hb(c, "g", a.member_id, 1, topics=None).error_code is \
                ErrorCode.unknown_member_id
            now = hb(c, "g", other.member_id, epoch, topics=None, owned={})
            assert now.member_epoch == 3 and parts(now) in (None, {T: {0, 1, 2, 3}})
            assert parts(hb(c, "g", other.member_id, epoch, topics=None)) is None
    finally:
        b.close()


def test_a_member_that_does_not_revoke_in_time_is_fenced(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = wait_until(lambda: (r := hb(c, "g", rebalance_ms=300)).error_code
                       is ErrorCode.none and r, timeout=10)
        b = hb(c, "g")
        told = hb(c, "g", a.member_id, 1, topics=None, owned={T: {0, 1, 2, 3}})
        assert len(parts(told)[T]) == 2
        time.sleep(0.6)  # it keeps all four past its rebalance timeout
        assert hb(c, "g", a.member_id, 1, topics=None).error_code is \
            ErrorCode.unknown_member_id
        assert parts(hb(c, "g", b.member_id, 2, topics=None, owned={})) == {T: {0, 1, 2, 3}}


def test_a_static_member_comes_back_to_its_partitions(broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = wait_until(lambda: (r := hb(c, "g", instance="i1")).error_code
                       is ErrorCode.none and r, timeout=10)
        assert hb(c, "g", instance="i1").error_code is ErrorCode.unreleased_instance_id
        away = hb(c, "g", a.member_id, -2, topics=None, instance="i1")
        assert (away.error_code, away.member_epoch) == (ErrorCode.none, -2)
        back = hb(c, "g", instance="i1")
        assert back.error_code is ErrorCode.none and back.member_id != a.member_id
        assert back.member_epoch == 1 and parts(back) == {T: {0, 1, 2, 3}}


def test_topics_created_and_regex_subscriptions_change_the_target(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        body = ConsumerGroupHeartbeatRequestV1(
            group_id="g", member_id="me-1", member_epoch=0, rebalance_timeout=5_000 * MS,
            subscribed_topic_names=None, subscribed_topic_regex="t|u|v",
            topic_partitions=())
        def call(body: object) -> object:  # v1's answer is laid out as v0's
            c.send(body)
            return c.receive(68, 0)[1]

        first = wait_until(lambda: (r := call(body)).error_code is ErrorCode.none and r,
                           timeout=10)
        assert first.member_id == "me-1" and parts(first) == {T: {0, 1, 2, 3}, U: {0, 1}}
        broker.set_partition("v", 0)
        v = uuid.UUID(int=0xC3)
        broker.metadata.set_topic_ids({"v": v})
        then = hb(c, "g", "me-1", 1, topics=None, owned=parts(first))
        assert then.member_epoch == 2 and parts(then) == {T: {0, 1, 2, 3}, U: {0, 1}, v: {0}}
        bad = ConsumerGroupHeartbeatRequestV1(
            group_id="g", member_id="me-2", member_epoch=0, rebalance_timeout=5_000 * MS,
            subscribed_topic_names=None, subscribed_topic_regex="(", topic_partitions=())
        assert call(bad).error_code is ErrorCode.invalid_request


class _TopicAcls:
    """An authorizer that allows everything but Describe on the topics not in ``describable``
    (and records who asked about which topic)."""

    def __init__(self, *describable: str) -> None:
        self.describable = set(describable)
        self.asked: set[tuple[str, str]] = set()

    def authorized(self, principal: str, peer: str, operation: Operation,
                   resource_type: ResourceType, name: str = "") -> bool:
        if resource_type is not ResourceType.TOPIC or operation is not Operation.DESCRIBE:
            return True
        self.asked.add((principal, name))
        return name in self.describable


def test_a_regex_subscribes_only_to_the_topics_its_principal_may_describe(
        broker: InProcessBroker) -> None:
    """Kafka filters what a regex resolves to by the member's Describe: ``t|u`` with Describe
    on ``t`` only is assigned ``t`` alone; Describe granted on ``u`` counts from the next
    heartbeat, and taken away from ``t`` the member has ``t`` revoked."""
    acls = _TopicAcls("t")
    broker.server.services = dataclasses.replace(broker.server.services, authorizer=acls)
    with RawClient(broker.address) as c:
        body = ConsumerGroupHeartbeatRequestV1(
            group_id="g", member_id="me-1", member_epoch=0, rebalance_timeout=5_000 * MS,
            subscribed_topic_names=None, subscribed_topic_regex="t|u", topic_partitions=())

        def call(body: object) -> object:  # v1's answer is laid out as v0's
            c.send(body)
            return c.receive(68, 0)[1]

        first = wait_until(lambda: (r := call(body)).error_code is ErrorCode.none and r,
                           timeout=10)
        assert first.member_epoch == 1 and parts(first) == {T: {0, 1, 2, 3}}
        assert ("User:ANONYMOUS", "u") in acls.asked
        same = hb(c, "g", "me-1", 1, topics=None, owned=parts(first))
        assert same.member_epoch == 1 and parts(same) is None
        acls.describable.add("u")
        grown = hb(c, "g", "me-1", 1, topics=None, owned=parts(first))
        assert grown.member_epoch == 2 and parts(grown) == {T: {0, 1, 2, 3}, U: {0, 1}}
        acls.describable.discard("t")
        shrunk = hb(c, "g", "me-1", 2, topics=None, owned=parts(grown))
        assert shrunk.member_epoch == 2 and parts(shrunk) == {U: {0, 1}}  # t to revoke
        done = hb(c, "g", "me-1", 2, topics=None, owned={U: {0, 1}})
        assert done.member_epoch == 3


@pytest.mark.parametrize("authorizing", [True, False])
def test_a_regex_member_loaded_under_an_authorizer_keeps_to_what_it_holds(
        authorizing: bool) -> None:
    """Its principal unknown until it heartbeats, a member loaded from the records keeps its
    regex to the topics it holds, has pending or is targeted; without an authorizer it is not
    narrowed."""
    loop = asyncio.new_event_loop()
    manager = type("Manager", (), {"loop": loop, "config": GroupConfig()})()
    groups = ConsumerGroups(manager)  # type: ignore[arg-type]
    groups.authorizing = authorizing
    v = uuid.UUID(int=0xC3)
    metadata = MemberMetadataValue(
        instance_id=None, rack_id=None, client_id="c", client_host="/h",
        subscribed_topic_names=(), subscribed_topic_regex="t|u|v", rebalance_timeout_ms=5_000,
        server_assignor=None)
    records = [
        (ConsumerGroupKey(PARTITION_METADATA, "g"),
         PartitionMetadataValue(((T, "t", 4), (U, "u", 2), (v, "v", 1)))),
        (ConsumerMemberKey(MEMBER_METADATA, "g", "m"), metadata),
        (ConsumerMemberKey(TARGET_MEMBER, "g", "m"), TargetMemberValue(((T, (0, 1)),))),
        (ConsumerMemberKey(CURRENT_ASSIGNMENT, "g", "m"), CurrentAssignmentValue(
            member_epoch=3, previous_member_epoch=2, state=1, assigned=(),
            pending_revocation=((U, (1,)),))),
    ]
    try:
        assert groups.loaded(0, records) == ["g"]  # type: ignore[arg-type]
        member = groups.get("g").members["m"]  # type: ignore[union-attr]
        assert member.regex_topics == (frozenset({"t", "u"}) if authorizing else None)
    finally:
        groups.unloaded(0)
        loop.close()


def test_members_keep_their_epochs_and_partitions_across_a_reload(tmp_path: Path) -> None:
    b = _start(tmp_path / "logs")
    try:
        with RawClient(b.address) as c:
            a = ready(c, "g")
            other = hb(c, "g", assignor="range")
            told = parts(hb(c, "g", a.member_id, 1, topics=None, owned=parts(a)))
            settled = hb(c, "g", a.member_id, 1, topics=None, owned=told)
            assert settled.member_epoch == 2
            assert commit(c, "g", {("t", 0): 11}, version=9, generation=2,
                          member=a.member_id)[("t", 0)] is ErrorCode.none
    finally:
        b.close()
    again = _start(tmp_path / "logs")
    try:
        with RawClient(again.address) as c:
            still = wait_until(lambda: (r := hb(c, "g", a.member_id, 2, topics=None))
                               .error_code is ErrorCode.none and r, timeout=10)
            assert still.member_epoch == 2
            desc = c.call(request(69, 0, group_ids=("g",),
                                  include_authorized_operations=False)).groups[0]
            assert desc.assignor_name == "range" and desc.group_epoch == 2
            mine = {m.member_id: m for m in desc.members}
            assert set(mine) == {a.member_id, other.member_id}
            assert {p for t in mine[a.member_id].assignment.topic_partitions
                    for p in t.partitions} == told[T]
            assert commit(c, "g", {("t", 0): 12}, version=9, generation=2,
                          member=a.member_id)[("t", 0)] is ErrorCode.none
    finally:
        again.close()


def test_a_consumer_group_with_members_keeps_its_offsets_past_retention(
        broker: InProcessBroker) -> None:
    with RawClient(broker.address) as c:
        a = ready(c, "g")
        assert commit(c, "g", {("t", 0): 5}, version=9, generation=1,
                      member=a.member_id)[("t", 0)] is ErrorCode.none
        later = broker.groups.manager.now_ms() + 30 * 24 * 3600 * 1000
        broker.loop.call_soon_threadsafe(_expire_at, broker, later)
        time.sleep(0.2)
        m = request_module(9, 9)
        fetched = c.call(request(9, 9, groups=(m.OffsetFetchRequestGroup(
            group_id="g", member_id=a.member_id, member_epoch=1, topics=(
                m.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),)),),
            require_stable=False))
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5


def _expire_at(broker: InProcessBroker, now_ms: int) -> None:
    manager = broker.groups.manager
    real = manager.now_ms
    manager.now_ms = lambda: now_ms
    try:
        manager.expire_offsets()
    finally:
        manager.now_ms = real
