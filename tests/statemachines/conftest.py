"""A controller test bed on the memory coordinator: participants (broker + controller candidate,
each with its own session) driven event by event, deterministically, by ``pump()``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from statemachines.controller import ControllerConfig
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


class Cluster:
    def __init__(self, url: str | None = None, *, threaded: bool = False,
                 config: ControllerConfig | None = None) -> None:
        self.url = url or f"memory://ctl-{uuid.uuid4().hex[:12]}"
        self.threaded = threaded
        self.config = config or ControllerConfig()
        self.network = InProcessNetwork()
        self.participants: dict[int, Participant] = {}
        self.retired: list[Participant] = []
        self.admin_client = coordinator.connect(self.url)
        self.admin = Admin(self.admin_client)
        self.metadata = MetadataClient(self.admin_client)

    def add(self, broker_id: int, *, rack: str | None = None,
            config: ControllerConfig | None = None, pump: bool = True) -> Participant:
        p = Participant(self.url, broker_id, handler=RecordingBroker, rack=rack,
                        network=self.network, config=config or self.config,
                        threaded=self.threaded)
        self.participants[broker_id] = p
        p.start()
        if pump:
            self.pump()
        return p

    def pump(self, rounds: int = 200) -> None:
        """Deliver watch events and process every queued controller event until quiet."""
        for _ in range(rounds):
            for c in [self.admin_client, *(p.coordinator for p in self.participants.values())]:
                c.sync()
            if self.threaded:
                idle = all(p.controller.events.wait_idle(10)
                           for p in self.participants.values())
                if idle and all(p.controller.events.pending() == 0
                                for p in self.participants.values()):
                    for c in [p.coordinator for p in self.participants.values()]:
                        c.sync()
                    if all(p.controller.events.pending() == 0
                           for p in self.participants.values()):
                        return
                continue
            done = sum(p.controller.events.run_pending() for p in self.participants.values())
            if done == 0:
                return
        raise AssertionError("controllers did not settle")

    def active(self) -> Participant:
        actives = [p for p in self.participants.values() if p.controller.active]
        assert len(actives) == 1, f"active controllers: {[p.id for p in actives]}"
        return actives[0]

    def kill(self, broker_id: int) -> Participant:
        """The broker's process dies: its session closes, its registration goes."""
        p = self.participants.pop(broker_id)
        p.close()
        self.retired.append(p)
        self.pump()
        return p

    def bounce(self, broker_id: int) -> None:
        """The broker's session expires and it registers again: a new broker epoch."""
        self.participants[broker_id].coordinator.expire_session()  # type: ignore[attr-defined]
        self.pump()

    def state(self, t: str, p: int):  # type: ignore[no-untyped-def]
        item = self.metadata.partition_states([tp(t, p)])[tp(t, p)]
        assert item is not None
        return item.value

    def close(self) -> None:
        for p in [*self.participants.values()]:
            p.close()
        self.admin_client.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.close()


@pytest.fixture
def three(cluster: Cluster) -> Cluster:
    """Brokers 1, 2, 3 (1 is the controller); topic t: 3 partitions, RF 3, preferred 1, 2, 3."""
    for b in (1, 2, 3):
        cluster.add(b)
    cluster.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    cluster.pump()
    return cluster
