"""KIP-848 consumer groups of confluent-kafka (``group.protocol=consumer``) on three broker
processes: the brokers assign, the members reconcile through ConsumerGroupHeartbeat.

Three members (processes of their own) consume a topic a producer keeps writing to, committing
after each message. One member is closed (it leaves: its partitions move to the others), then
the broker coordinating the group is SIGKILLed (another loads the group's records from
``__consumer_offsets`` and takes over: the members keep their epochs and partitions). In the end
every message written was consumed, the committed offsets reach the end of every partition and
no committed offset a watcher read ever moved backwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.data.test_cluster_clients import Producing, create, serving
from tests.broker.processes import coordinator_url
from tests.servers import Server
from tests.waiting import wait_until

from .test_group_clients import (
    PACE,
    PARTITIONS,
    SETTINGS,
    TOPIC,
    GroupTrio,
    Member,
    Watcher,
    commits_reach_the_end,
    coordinator_of,
    everything_consumed_in_order,
    progress,
    wind_down,
)

pytestmark = pytest.mark.servers

KIP848_SETTINGS = ("group.consumer.session.timeout.ms=6000\n"
                   "group.consumer.heartbeat.interval.ms=500\n")


class ConsumerTrio(GroupTrio):
    def settings(self) -> str:
        return SETTINGS + KIP848_SETTINGS


@pytest.fixture
def trio(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConsumerTrio]:
    server: Server = request.getfixturevalue("zookeeper_server")
    with serving(ConsumerTrio(coordinator_url(server), tmp_path, {})) as cluster:
        yield cluster


def owners(trio: GroupTrio, group: str) -> dict[str, set[int]]:
    """Member id -> the partitions of TOPIC it holds, from ConsumerGroupDescribe (through the
    admin client's describe_consumer_groups)."""
    admin: AdminClient = trio.admin()
    found = admin.describe_consumer_groups([group])[group].result(10)
    return {m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in found.members}


@pytest.mark.parametrize("assignor", ["uniform", pytest.param("range", marks=pytest.mark.long)])
def test_consumer_protocol_group_survives_a_leave_and_a_coordinator_kill(
        trio: GroupTrio, tmp_path: Path, assignor: str) -> None:
    group = f"g848-{assignor}"
    create(trio, TOPIC, PARTITIONS, num_partitions=PARTITIONS, replication_factor=3)
    producing = Producing(trio.bootstrap, TOPIC, PARTITIONS, rate=PACE)
    members: list[Member] = []
    watcher = None
    try:
        for name in "abc":
            members.append(Member(name, "confluent", trio.bootstrap, group,
                                  f"consumer:{assignor}", tmp_path))
        progress(members, 300, timeout=90)
        wait_until(lambda: sorted(len(p) for p in owners(trio, group).values()) == [2, 2, 2],
                   timeout=30, message="six partitions spread two by two")
        watcher = Watcher(trio.bootstrap, group)
        members[0].stop()  # closes: the member leaves (epoch -1)
        wait_until(lambda: sorted(len(p) for p in owners(trio, group).values()) == [3, 3],
                   timeout=30, message="the leaver's partitions moved")
        progress(members, 300)
        coordinator = coordinator_of(trio, group)
        before = owners(trio, group)
        trio.brokers[coordinator].kill()
        before_failover = watcher.latest()
        progress(members, 300, timeout=90)
        after = owners(trio, group)
        assert set(after) == set(before), "members kept their ids across the failover"
        trio.start(coordinator)
        progress(members, 200, timeout=90)
        ends = commits_reach_the_end(producing, watcher)
    finally:
        wind_down(producing, members, watcher)
    everything_consumed_in_order(members, producing, watcher, ends, before_failover)
