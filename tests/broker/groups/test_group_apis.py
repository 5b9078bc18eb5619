"""The group APIs' answers on the real server over a real replica manager in this process (the
test plays the controller, leading ``__consumer_offsets`` here): FindCoordinator, commits and
fetches that survive a reload from the log, the join/sync/heartbeat/leave cycle, static members,
and each API's error paths."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.groups import OFFSETS_TOPIC, GroupConfig, partition_for
from broker.groups.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_key,
    decode_value,
)
from coordinator.codecs import TopicPartition
from replication.records import decode_batch, read_batch_header
from tests.broker.harness import InProcessBroker
from tests.broker.wire_client import RawClient, request, request_module
from tests.waiting import wait_until

PARTITIONS = 3
CONFIG = GroupConfig(offsets_topic_num_partitions=PARTITIONS, group_min_session_timeout_ms=100,
                     group_initial_rebalance_delay_ms=0)
MS = timedelta(milliseconds=1)


def _start(log_dir: Path) -> InProcessBroker:
    b = InProcessBroker(log_dir, groups=CONFIG)
    for p in range(PARTITIONS):
        b.set_partition(OFFSETS_TOPIC, p)
    b.set_partition("t", 0)
    b.set_partition("t", 1)
    return b


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = _start(tmp_path / "logs")
    yield b
    b.close()


def _client(broker: InProcessBroker) -> RawClient:
    return RawClient(broker.address)


def commit(client: RawClient, group: str, offsets: dict[tuple[str, int], int], *,
           version: int = 8, generation: int = -1, member: str = "",
           metadata: str | None = "m") -> dict[tuple[str, int], ErrorCode]:
    m = request_module(8, version)
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(m.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_metadata=metadata,
            **({"committed_leader_epoch": 3} if version >= 6 else {})))
    body = request(8, version, group_id=group, generation_id_or_member_epoch=generation,
                   member_id=member, group_instance_id=None,
                   retention_time=timedelta(milliseconds=-1),
                   topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                for t, ps in topics.items()))
    response = client.call(body)
    return {(t.name, p.partition_index): p.error_code for t in response.topics
            for p in t.partitions}


def fetch(client: RawClient, group: str, partitions: list[tuple[str, int]] | None, *,
          version: int = 7) -> tuple[ErrorCode, dict[tuple[str, int], tuple[int, str, int]]]:
    m = request_module(9, version)
    topics = None
    if partitions is not None:
        by: dict[str, list[int]] = {}
        for t, p in partitions:
            by.setdefault(t, []).append(p)
        topics = tuple(m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps))
                       for t, ps in by.items())
    response = client.call(request(9, version, group_id=group, topics=topics,
                                   require_stable=False))
    return getattr(response, "error_code", ErrorCode.none), {
        (t.name, p.partition_index): (p.committed_offset, p.metadata,
                                      getattr(p, "committed_leader_epoch", -1))
        for t in response.topics for p in t.partitions}


def join(client: RawClient, group: str, member: str = "", *, version: int = 7,
         instance: str | None = None, session_ms: int = 10_000, rebalance_ms: int = 5_000,
         protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub"),),
         protocol_type: str = "consumer", send_only: bool = False) -> object:
    m = request_module(11, version)
    body = request(11, version, group_id=group, session_timeout=session_ms * MS,
                   rebalance_timeout=rebalance_ms * MS, member_id=member,
                   group_instance_id=instance, protocol_type=protocol_type,
                   protocols=tuple(m.JoinGroupRequestProtocol(name=n, metadata=d)
                                   for n, d in protocols), reason=None)
    if send_only:
        client.send(body)
        return None
    return client.call(body)


def receive_join(client: RawClient, version: int = 7) -> object:
    return client.receive(11, version)[1]


def sync(client: RawClient, group: str, member: str, generation: int,
         assignments: dict[str, bytes] | None = None, *, version: int = 5,
         instance: str | None = None, send_only: bool = False) -> object:
    m = request_module(14, version)
    body = request(14, version, group_id=group, generation_id=generation, member_id=member,
                   group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                   assignments=tuple(m.SyncGroupRequestAssignment(member_id=k, assignment=v)
                                     for k, v in (assignments or {}).items()))
    if send_only:
        client.send(body)
        return None
    return client.call(body)


def heartbeat(client: RawClient, group: str, member: str, generation: int, *,
              instance: str | None = None) -> ErrorCode:
    return client.call(request(12, 4, group_id=group, generation_id=generation,
                               member_id=member, group_instance_id=instance)).error_code


def leave(client: RawClient, group: str, members: list[tuple[str, str | None]]) -> object:
    m = request_module(13, 5)
    return client.call(request(13, 5, group_id=group, members=tuple(
        m.MemberIdentity(member_id=mid, group_instance_id=i, reason=None)
        for mid, i in members)))


def describe(client: RawClient, group: str) -> object:
    return client.call(request(15, 5, groups=(group,), include_authorized_operations=False)
                       ).groups[0]


def records_of(broker: InProcessBroker, group: str) -> list[tuple[object, object]]:
    """Every record of the group's partition of __consumer_offsets, decoded."""
    log = broker.replica_manager.partition(
        TopicPartition(OFFSETS_TOPIC, partition_for(group, PARTITIONS))).log
    data = log.read(0, 1 << 24).records
    out = []
    pos = 0
    while pos < len(data):
        header = read_batch_header(data, pos)
        for r in decode_batch(data, pos).records:
            key = decode_key(r.key)
            out.append((key, decode_value(key, r.value)))
        pos += header.size
    return out


# --- FindCoordinator --------------------------------------------------------------------------


def test_find_coordinator_names_this_broker_single_and_batched(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        single = c.call(request(10, 3, key="g", key_type=0))
        assert single.error_code is ErrorCode.none
        assert (single.node_id, single.host, single.port) == (1, "127.0.0.1", broker.port)
        batched = c.call(request(10, 4, key_type=0, coordinator_keys=("a", "b")))
        assert [(x.key, x.error_code, x.node_id) for x in batched.coordinators] == [
            ("a", ErrorCode.none, 1), ("b", ErrorCode.none, 1)]
        txn = c.call(request(10, 4, key_type=1, coordinator_keys=("tx",)))
        assert txn.coordinators[0].error_code is ErrorCode.coordinator_not_available
        bad = c.call(request(10, 4, key_type=7, coordinator_keys=("x",)))
        assert bad.coordinators[0].error_code is ErrorCode.invalid_request


def test_find_coordinator_without_the_offsets_topic_is_not_available(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path / "logs", groups=CONFIG)
    try:
        with _client(b) as c:
            answer = c.call(request(10, 3, key="g", key_type=0))
            assert answer.error_code is ErrorCode.coordinator_not_available
            assert answer.node_id == -1
    finally:
        b.close()


def test_a_group_not_led_here_is_not_coordinator(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path / "logs", groups=CONFIG)
    try:
        for p in range(PARTITIONS):
            b.set_partition(OFFSETS_TOPIC, p, leader=2, replicas=(1, 2))
        b.set_partition("t", 0)
        with _client(b) as c:
            assert c.call(request(10, 3, key="g", key_type=0)).node_id == 2
            assert commit(c, "g", {("t", 0): 5}) == {("t", 0): ErrorCode.not_coordinator}
            assert fetch(c, "g", [("t", 0)])[0] is ErrorCode.not_coordinator
            assert heartbeat(c, "g", "m", 1) is ErrorCode.not_coordinator
    finally:
        b.close()


def test_a_batched_leave_refused_for_its_group_is_one_top_level_error(tmp_path: Path) -> None:
    """LeaveGroup v3+ for a group this broker does not answer for, or with no group id, has
    the error at the top and no members (as Kafka answers), on a connection that stays open:
    the fuzzer found these logging a traceback and costing the connection."""
    b = InProcessBroker(tmp_path / "logs", groups=CONFIG)
    try:
        for p in range(PARTITIONS):
            b.set_partition(OFFSETS_TOPIC, p, leader=2, replicas=(1, 2))
        with _client(b) as c:
            elsewhere = leave(c, "g", [("m", None), ("n", "i")])
            assert (elsewhere.error_code, elsewhere.members) == (ErrorCode.not_coordinator, ())
            nameless = leave(c, "", [("m", None)])
            assert (nameless.error_code, nameless.members) == (ErrorCode.invalid_group_id, ())
    finally:
        b.close()


# --- OffsetCommit / OffsetFetch ---------------------------------------------------------------


def test_commits_are_fetched_and_survive_a_reload_from_the_log(tmp_path: Path) -> None:
    b = _start(tmp_path / "logs")
    try:
        with _client(b) as c:
            wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
            assert commit(c, "g", {("t", 0): 5, ("t", 1): 7}) == {
                ("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none}
            assert commit(c, "g", {("t", 0): 9}) == {("t", 0): ErrorCode.none}
            assert fetch(c, "g", [("t", 0), ("t", 1)]) == (
                ErrorCode.none, {("t", 0): (9, "m", 3), ("t", 1): (7, "m", 3)})
            assert fetch(c, "g", None)[1] == {("t", 0): (9, "m", 3), ("t", 1): (7, "m", 3)}
            # a partition never committed: -1, no error
            assert fetch(c, "other", [("t", 0)]) == (ErrorCode.none, {("t", 0): (-1, "", -1)})
        kinds = [(type(k).__name__, v.offset) for k, v in records_of(b, "g")]
        assert kinds == [("OffsetCommitKey", 5), ("OffsetCommitKey", 7),
                         ("OffsetCommitKey", 9)]
    finally:
        b.close()
    again = _start(tmp_path / "logs")
    try:
        with _client(again) as c:
            found = wait_until(lambda: (r := fetch(c, "g", [("t", 0), ("t", 1)]))[0]
                               is ErrorCode.none and r)
            assert found[1] == {("t", 0): (9, "m", 3), ("t", 1): (7, "m", 3)}
    finally:
        again.close()


def test_offset_fetch_multi_group_form(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: commit(c, "g1", {("t", 0): 1}) == {("t", 0): ErrorCode.none})
        commit(c, "g2", {("t", 1): 2})
        m = request_module(9, 8)
        response = c.call(request(9, 8, require_stable=False, groups=(
            m.OffsetFetchRequestGroup(group_id="g1", topics=None),
            m.OffsetFetchRequestGroup(group_id="g2", topics=(
                m.OffsetFetchRequestTopics(name="t", partition_indexes=(1,)),)),
            m.OffsetFetchRequestGroup(group_id="", topics=None))))
        got = {g.group_id: (g.error_code, [(t.name, p.partition_index, p.committed_offset)
                                            for t in g.topics for p in t.partitions])
               for g in response.groups}
        assert got == {"g1": (ErrorCode.none, [("t", 0, 1)]),
                       "g2": (ErrorCode.none, [("t", 1, 2)]),
                       "": (ErrorCode.invalid_group_id, [])}


def test_commit_request_errors(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
        assert commit(c, "g", {("nope", 0): 1, ("t", 9): 1, ("t", 0): 1}) == {
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            ("t", 9): ErrorCode.unknown_topic_or_partition, ("t", 0): ErrorCode.none}
        assert commit(c, "g", {("t", 0): 1}, metadata="x" * 5000) == {
            ("t", 0): ErrorCode.offset_metadata_too_large}
        assert commit(c, "", {("t", 0): 1}) == {("t", 0): ErrorCode.invalid_group_id}
        # a generation for a group that does not exist
        assert commit(c, "fresh", {("t", 0): 1}, generation=3, member="m") == {
            ("t", 0): ErrorCode.illegal_generation}
        assert fetch(c, "", [("t", 0)])[0] is ErrorCode.invalid_group_id
        # an old version: errors per partition, retention time kept as an expire timestamp
        assert commit(c, "old", {("t", 1): 4}, version=2) == {("t", 1): ErrorCode.none}
        code, found = fetch(c, "old", [("t", 1)], version=1)
        assert found == {("t", 1): (4, "m", -1)}


# --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------


def _join_new(c: RawClient, group: str, **kw: object) -> object:
    first = join(c, group, **kw)
    assert first.error_code is ErrorCode.member_id_required
    assert first.member_id
    return join(c, group, first.member_id, **kw)


def test_one_member_joins_syncs_heartbeats_and_leaves(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
        joined = _join_new(c, "g")
        assert joined.error_code is ErrorCode.none
        me = joined.member_id
        assert joined.leader == me and joined.generation_id == 1
        assert joined.protocol_name == "range"
        assert [(x.member_id, x.metadata) for x in joined.members] == [(me, b"sub")]
        synced = sync(c, "g", me, 1, {me: b"assignment"})
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"assignment")
        assert heartbeat(c, "g", me, 1) is ErrorCode.none
        assert heartbeat(c, "g", me, 0) is ErrorCode.illegal_generation
        assert heartbeat(c, "g", "who", 1) is ErrorCode.unknown_member_id
        assert commit(c, "g", {("t", 0): 3}, generation=1, member=me) == {
            ("t", 0): ErrorCode.none}
        assert commit(c, "g", {("t", 0): 3}, generation=0, member=me) == {
            ("t", 0): ErrorCode.illegal_generation}
        assert commit(c, "g", {("t", 0): 3}) == {("t", 0): ErrorCode.unknown_member_id}
        d = describe(c, "g")
        assert (d.group_state, d.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.member_assignment) for m in d.members] == [(me, b"assignment")]
        gone = leave(c, "g", [(me, None), ("who", None)])
        assert [x.error_code for x in gone.members] == [ErrorCode.none,
                                                        ErrorCode.unknown_member_id]
        wait_until(lambda: describe(c, "g").group_state == "Empty")
        stored = [v for k, v in records_of(broker, "g") if isinstance(k, GroupMetadataKey)]
        assert stored[0].members[0].assignment == b"assignment"
        assert stored[-1].members == () and stored[-1].generation == 2


def test_a_second_member_triggers_a_rebalance_both_get_the_new_generation(
        broker: InProcessBroker) -> None:
    with _client(broker) as a, _client(broker) as b:
        wait_until(lambda: fetch(a, "g", [("t", 0)])[0] is ErrorCode.none)
        first = _join_new(a, "g")
        one = first.member_id
        sync(a, "g", one, 1, {one: b"all"})
        second = join(b, "g")
        two = second.member_id
        join(b, "g", two, send_only=True)  # parked until the first member rejoins
        assert heartbeat(a, "g", one, 1) is ErrorCode.rebalance_in_progress
        rejoined = join(a, "g", one)
        assert rejoined.generation_id == 2 and rejoined.leader == one
        assert {x.member_id for x in rejoined.members} == {one, two}
        follower = receive_join(b)
        assert follower.generation_id == 2 and follower.members == ()
        sync(b, "g", two, 2, send_only=True)  # parked until the leader's assignment
        assert sync(a, "g", one, 2, {one: b"x", two: b"y"}).assignment == b"x"
        assert b.receive(14, 5)[1].assignment == b"y"
        # the follower stops heartbeating: its session expires, the leader rebalances alone
        assert heartbeat(a, "g", one, 2) is ErrorCode.none


def test_session_expiry_removes_a_member_and_rebalances(broker: InProcessBroker) -> None:
    with _client(broker) as a, _client(broker) as b:
        wait_until(lambda: fetch(a, "g", [("t", 0)])[0] is ErrorCode.none)
        one = _join_new(a, "g", session_ms=400).member_id
        sync(a, "g", one, 1, {one: b"all"})
        two_id = join(b, "g", session_ms=400).member_id
        join(b, "g", two_id, session_ms=400, send_only=True)
        a_join = join(a, "g", one, session_ms=400)
        assert a_join.generation_id == 2
        receive_join(b)
        sync(a, "g", one, 2, {one: b"x", two_id: b"y"})
        # b never syncs nor heartbeats; a keeps heartbeating
        def rebalanced() -> bool:
            return heartbeat(a, "g", one, 2) is ErrorCode.rebalance_in_progress
        wait_until(rebalanced, timeout=5, interval=0.1)
        again = join(a, "g", one, session_ms=400)
        assert again.generation_id == 3 and [m.member_id for m in again.members] == [one]


def test_join_errors(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
        assert join(c, "").error_code is ErrorCode.invalid_group_id
        assert join(c, "g", session_ms=10).error_code is ErrorCode.invalid_session_timeout
        assert join(c, "g", "ghost").error_code is ErrorCode.unknown_member_id
        assert join(c, "g", protocols=()).error_code is ErrorCode.inconsistent_group_protocol
        member = _join_new(c, "g").member_id
        other = join(c, "g", protocol_type="connect")
        assert other.error_code is ErrorCode.inconsistent_group_protocol
        other = join(c, "g", protocols=(("roundrobin", b""),))
        assert other.error_code is ErrorCode.inconsistent_group_protocol
        assert sync(c, "g", member, 7).error_code is ErrorCode.illegal_generation
        assert sync(c, "g", "ghost", 1).error_code is ErrorCode.unknown_member_id
        assert sync(c, "nogroup", "ghost", 1).error_code is ErrorCode.unknown_member_id
        assert heartbeat(c, "nogroup", "m", 1) is ErrorCode.unknown_member_id
        assert leave(c, "nogroup", [("m", None)]).members[0].error_code is \
            ErrorCode.unknown_member_id
        v0 = c.call(request(13, 0, group_id="g", member_id="ghost"))
        assert v0.error_code is ErrorCode.unknown_member_id


def test_static_member_rejoining_takes_its_place_without_a_rebalance(
        broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
        first = join(c, "g", instance="i-1", version=9)
        assert first.error_code is ErrorCode.none  # static members need no member id round
        old = first.member_id
        sync(c, "g", old, 1, {old: b"mine"}, instance="i-1")
        again = join(c, "g", instance="i-1", version=9)
        assert again.error_code is ErrorCode.none and again.generation_id == 1
        assert again.member_id != old and again.skip_assignment
        assert heartbeat(c, "g", old, 1, instance="i-1") is ErrorCode.fenced_instance_id
        assert sync(c, "g", again.member_id, 1, instance="i-1").assignment == b"mine"
        assert describe(c, "g").group_state == "Stable"
        left = leave(c, "g", [("", "i-1")])
        assert left.members[0].error_code is ErrorCode.none
        wait_until(lambda: describe(c, "g").group_state == "Empty")


# --- ListGroups / DescribeGroups / DeleteGroups / OffsetDelete --------------------------------


def test_list_describe_delete_and_offset_delete(broker: InProcessBroker) -> None:
    with _client(broker) as c:
        wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
        member = _join_new(c, "live").member_id
        sync(c, "live", member, 1, {member: b""})
        commit(c, "live", {("t", 0): 1, ("t", 1): 1}, generation=1, member=member)
        commit(c, "idle", {("t", 0): 5, ("t", 1): 6})
        listed = c.call(request(16, 5, states_filter=(), types_filter=()))
        assert {(g.group_id, g.group_state) for g in listed.groups} == {
            ("live", "Stable"), ("idle", "Empty")}
        only = c.call(request(16, 4, states_filter=("stable",)))
        assert [g.group_id for g in only.groups] == ["live"]
        assert describe(c, "missing").group_state == "Dead"
        deleted = c.call(request(42, 2, groups_names=("live", "idle", "missing", "")))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("live", ErrorCode.non_empty_group), ("idle", ErrorCode.none),
            ("missing", ErrorCode.group_id_not_found), ("", ErrorCode.invalid_group_id)]
        assert fetch(c, "idle", [("t", 0)])[1] == {("t", 0): (-1, "", -1)}
        tombstones = [k for k, v in records_of(broker, "idle") if v is None]
        assert set(tombstones) == {OffsetCommitKey("idle", "t", 0),
                                   OffsetCommitKey("idle", "t", 1), GroupMetadataKey("idle")}
        m = request_module(47, 0)
        body = request(47, 0, group_id="live", topics=(m.OffsetDeleteRequestTopic(
            name="t", partitions=(m.OffsetDeleteRequestPartition(partition_index=0),
                                  m.OffsetDeleteRequestPartition(partition_index=5))),))
        answer = c.call(body)
        # the member's subscription ("sub") does not parse as a consumer subscription
        assert answer.error_code is ErrorCode.none
        assert [(p.partition_index, p.error_code) for p in answer.topics[0].partitions] == [
            (0, ErrorCode.group_subscribed_to_topic), (5, ErrorCode.unknown_topic_or_partition)]
        leave(c, "live", [(member, None)])
        wait_until(lambda: describe(c, "live").group_state == "Empty")
        answer = c.call(body)
        assert [(p.partition_index, p.error_code) for p in answer.topics[0].partitions] == [
            (0, ErrorCode.none), (5, ErrorCode.unknown_topic_or_partition)]
        assert fetch(c, "live", [("t", 0), ("t", 1)])[1] == {
            ("t", 0): (-1, "", -1), ("t", 1): (1, "m", 3)}
        # "nope" lives on another offsets partition, which may still be loading
        asked = request(47, 0, group_id="nope", topics=())
        wait_until(lambda: c.call(asked).error_code is not ErrorCode.coordinator_load_in_progress)
        assert c.call(asked).error_code is ErrorCode.group_id_not_found


# --- timing: expiry, the initial delay, resignation -------------------------------------------


def _subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 naming ``topics``."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def test_offsets_expire_after_the_retention(tmp_path: Path) -> None:
    config = GroupConfig(offsets_topic_num_partitions=PARTITIONS,
                         group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0,
                         offsets_retention_ms=600, offsets_retention_check_interval_ms=100)
    b = InProcessBroker(tmp_path / "logs", groups=config)
    try:
        for p in range(PARTITIONS):
            b.set_partition(OFFSETS_TOPIC, p)
        b.set_partition("t", 0)
        b.set_partition("u", 0)
        with _client(b) as c:
            wait_until(lambda: commit(c, "simple", {("t", 0): 4}) == {("t", 0): ErrorCode.none})
            member = _join_new(c, "active", protocols=(("range", _subscription("t")),)
                               ).member_id
            sync(c, "active", member, 1, {member: b""})
            # an active consumer group keeps the offsets of the topics it subscribes to
            commit(c, "active", {("t", 0): 1, ("u", 0): 2}, generation=1, member=member)
            wait_until(lambda: fetch(c, "simple", [("t", 0)])[1][("t", 0)][0] == -1,
                       timeout=5, message="the simple group's offset to expire")
            wait_until(lambda: fetch(c, "active", [("u", 0)])[1][("u", 0)][0] == -1,
                       timeout=5, message="the unsubscribed topic's offset to expire")
            for _ in range(5):
                heartbeat(c, "active", member, 1)
                assert fetch(c, "active", [("t", 0)])[1][("t", 0)][0] == 1
        assert (GroupMetadataKey("simple"), None) in records_of(b, "simple")
        assert (OffsetCommitKey("active", "u", 0), None) in records_of(b, "active")
    finally:
        b.close()


def test_the_initial_delay_gathers_the_first_members_into_one_generation(
        tmp_path: Path) -> None:
    config = GroupConfig(offsets_topic_num_partitions=PARTITIONS,
                         group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=500)
    b = InProcessBroker(tmp_path / "logs", groups=config)
    try:
        for p in range(PARTITIONS):
            b.set_partition(OFFSETS_TOPIC, p)
        with _client(b) as first, _client(b) as second:
            wait_until(lambda: fetch(first, "g", None)[0] is ErrorCode.none)
            one = join(first, "g").member_id
            two = join(second, "g").member_id
            join(first, "g", one, send_only=True)
            join(second, "g", two, send_only=True)
            answers = [receive_join(first), receive_join(second)]
            assert [(a.error_code, a.generation_id) for a in answers] == [(ErrorCode.none, 1)] * 2
            assert {m.member_id for a in answers for m in a.members} == {one, two}
    finally:
        b.close()


def test_losing_leadership_answers_parked_joins_and_then_not_coordinator(
        broker: InProcessBroker) -> None:
    with _client(broker) as a, _client(broker) as b:
        wait_until(lambda: fetch(a, "g", [("t", 0)])[0] is ErrorCode.none)
        commit(a, "g", {("t", 0): 1})
        one = _join_new(a, "g").member_id
        sync(a, "g", one, 1, {one: b""})
        two = join(b, "g").member_id
        join(b, "g", two, send_only=True)  # parked: the first member has not rejoined
        p = partition_for("g", PARTITIONS)
        broker.set_partition(OFFSETS_TOPIC, p, leader=2, leader_epoch=1, replicas=(1, 2))
        assert receive_join(b).error_code is ErrorCode.not_coordinator
        assert heartbeat(a, "g", one, 1) is ErrorCode.not_coordinator
        assert fetch(a, "g", [("t", 0)])[0] is ErrorCode.not_coordinator
        # leading again (a later epoch): the group is loaded from the log once more
        broker.set_partition(OFFSETS_TOPIC, p, leader_epoch=2, replicas=(1, 2), isr=(1,))
        found = wait_until(lambda: (r := fetch(a, "g", [("t", 0)]))[0] is ErrorCode.none and r)
        assert found[1] == {("t", 0): (1, "m", 3)}
        assert heartbeat(a, "g", one, 1) is ErrorCode.none  # the stored generation is back


def test_a_later_epoch_of_the_same_leadership_keeps_the_groups_in_memory(
        broker: InProcessBroker) -> None:
    """The offsets partition's leader epoch goes up while this broker goes on leading it (the
    controller shrank its ISR): its groups stay loaded, a join parked in a rebalance is still
    parked and completes, as Kafka's coordinator, which hears only of partitions it newly
    leads, keeps them. (partctl used to reload the partition, answering the parked join
    NOT_COORDINATOR and forgetting whatever was only in memory.)"""
    with _client(broker) as a, _client(broker) as b:
        wait_until(lambda: fetch(a, "g", [("t", 0)])[0] is ErrorCode.none)
        one = _join_new(a, "g").member_id
        sync(a, "g", one, 1, {one: b""})
        two = join(b, "g").member_id
        join(b, "g", two, send_only=True)  # parked until the first member rejoins
        p = partition_for("g", PARTITIONS)
        loading = broker.groups.manager.loading
        broker.set_partition(OFFSETS_TOPIC, p, leader_epoch=1, replicas=(1, 2), isr=(1,))
        broker.set_partition(OFFSETS_TOPIC, p, leader_epoch=2, replicas=(1, 2), isr=(1, 2),
                             partition_epoch=1)
        assert loading(p) is False  # held and loaded throughout
        assert heartbeat(a, "g", one, 1) is ErrorCode.rebalance_in_progress
        assert join(a, "g", one).generation_id == 2
        answer = receive_join(b)
        assert (answer.error_code, answer.generation_id) == (ErrorCode.none, 2)


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(
        broker: InProcessBroker) -> None:
    with _client(broker) as a, _client(broker) as b:
        wait_until(lambda: fetch(a, "g", [("t", 0)])[0] is ErrorCode.none)
        one = _join_new(a, "g", rebalance_ms=600).member_id
        sync(a, "g", one, 1, {one: b""})
        two = join(b, "g", rebalance_ms=600).member_id
        join(b, "g", two, rebalance_ms=600, send_only=True)
        assert join(a, "g", one, rebalance_ms=600).generation_id == 2
        assert receive_join(b).generation_id == 2
        sync(a, "g", one, 2, {one: b"x", two: b"y"})
        # b keeps heartbeating but never syncs: its session alone would keep it
        assert heartbeat(b, "g", two, 2) is ErrorCode.none
        wait_until(lambda: heartbeat(b, "g", two, 2) is ErrorCode.unknown_member_id,
                   timeout=5, interval=0.1, message="b removed")
        assert heartbeat(a, "g", one, 2) is ErrorCode.rebalance_in_progress
        assert join(a, "g", one, rebalance_ms=600).generation_id == 3


def test_a_commit_is_acknowledged_only_once_the_isr_has_it(tmp_path: Path) -> None:
    config = GroupConfig(offsets_topic_num_partitions=1, offsets_commit_timeout_ms=500)
    b = InProcessBroker(tmp_path / "logs", groups=config)
    try:
        # broker 2 is in the ISR but never fetches: acks=all cannot complete
        b.set_partition(OFFSETS_TOPIC, 0, replicas=(1, 2), isr=(1, 2))
        b.set_partition("t", 0)
        with _client(b) as c:
            wait_until(lambda: fetch(c, "g", [("t", 0)])[0] is ErrorCode.none)
            assert commit(c, "g", {("t", 0): 5}) == {("t", 0): ErrorCode.coordinator_not_available}
            assert fetch(c, "g", [("t", 0)])[1] == {("t", 0): (-1, "", -1)}
            # the ISR shrinks to this broker (a new partition epoch): commits go through
            b.set_partition(OFFSETS_TOPIC, 0, replicas=(1, 2), isr=(1,), partition_epoch=1)
            assert commit(c, "g", {("t", 0): 6}) == {("t", 0): ErrorCode.none}
            assert fetch(c, "g", [("t", 0)])[1] == {("t", 0): (6, "m", 3)}
    finally:
        b.close()
