"""A cluster in this process for CLI tests: three participants (the controller among them) with
recording brokers on a memory coordinator, and a topic ``t`` of 3 partitions."""

from __future__ import annotations

import uuid

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker
from tests.waiting import wait_until


class Cluster:
    """Three participants on a memory coordinator with a topic ``t`` of 3 partitions."""

    def __init__(self) -> None:
        self.url = f"memory://walk-{uuid.uuid4().hex[:10]}"
        self.network = InProcessNetwork()
        self.participants = [Participant(self.url, b, handler=RecordingBroker, rack=f"r{b % 2}",
                                         network=self.network).start() for b in (1, 2, 3)]
        self.client = coordinator.connect(self.url)
        self.md = MetadataClient(self.client)
        wait_until(lambda: self.md.controller() is not None, timeout=15)
        Admin(self.client).create_topic("t", assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
        keys = [TopicPartition("t", p) for p in range(3)]
        wait_until(lambda: all(self.md.partition_states(keys).values()), timeout=15)

    def close(self) -> None:
        for p in self.participants:
            p.close()
        self.client.close()
