"""Static membership (KIP-345) with librdkafka on the in-process broker: a static member that
restarts within its session timeout takes its place back, with its partitions, and the other
member never sees a rebalance; a dynamic group's member that leaves makes the other take all."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from broker.groups import OFFSETS_TOPIC, GroupConfig
from tests.broker.harness import InProcessBroker
from tests.waiting import wait_until

CONFIG = GroupConfig(offsets_topic_num_partitions=3, group_min_session_timeout_ms=100,
                     group_initial_rebalance_delay_ms=0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "logs", groups=CONFIG)
    for p in range(3):
        b.set_partition(OFFSETS_TOPIC, p)
    for p in range(4):
        b.set_partition("t", p)
    yield b
    b.close()


class Polling:
    """A subscribed consumer polled on a thread; every assignment and revocation it gets."""

    def __init__(self, bootstrap: str, group: str, instance: str | None) -> None:
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                "enable.auto.commit": False, "partition.assignment.strategy": "range"}
        if instance is not None:
            conf["group.instance.id"] = instance
        self.consumer = ck.Consumer(conf)
        self.events: list[tuple[str, tuple[int, ...]]] = []
        self.consumer.subscribe(
            ["t"], on_assign=lambda _c, ps: self.events.append(
                ("assign", tuple(sorted(p.partition for p in ps)))),
            on_revoke=lambda _c, ps: self.events.append(
                ("revoke", tuple(sorted(p.partition for p in ps)))))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def assigned(self) -> tuple[int, ...] | None:
        assigns = [e for e in self.events if e[0] == "assign"]
        return assigns[-1][1] if assigns else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_a_static_member_restarting_keeps_its_partitions_without_a_rebalance(
        broker: InProcessBroker) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    one = Polling(bootstrap, "static", "s1")
    two = Polling(bootstrap, "static", "s2")
    try:
        wait_until(lambda: one.assigned() and two.assigned()
                   and len(one.assigned() + two.assigned()) == 4, timeout=30,
                   message="both static members assigned")
        before = one.assigned()
        seen_by_two = list(two.events)
        one.close()  # a static member sends no LeaveGroup
        time.sleep(0.5)
        one = Polling(bootstrap, "static", "s1")
        wait_until(lambda: one.assigned() is not None, timeout=30, message="s1 back")
        assert one.assigned() == before
        time.sleep(1.5)  # several heartbeats of s2: a rebalance would show now
        assert two.events == seen_by_two
    finally:
        one.close()
        two.close()


def test_a_dynamic_member_leaving_hands_its_partitions_to_the_other(
        broker: InProcessBroker) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    one = Polling(bootstrap, "dynamic", None)
    two = Polling(bootstrap, "dynamic", None)
    try:
        wait_until(lambda: one.assigned() and two.assigned()
                   and len(one.assigned() + two.assigned()) == 4, timeout=30,
                   message="both members assigned")
        one.close()  # LeaveGroup: the other member rebalances at once, not after the session
        wait_until(lambda: two.assigned() == (0, 1, 2, 3), timeout=5,
                   message="the remaining member to take every partition")
    finally:
        two.close()
