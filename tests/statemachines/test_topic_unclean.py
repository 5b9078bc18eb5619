"""unclean.leader.election.enable per topic, on memory, ZooKeeper and etcd: the controller's
offline elections read each topic's override (else its own default); setting it to true on a
topic elects that topic's offline partitions out of sync at once, while another topic's stay
offline; a topic's false beats a controller default of true."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from coordinator import connect
from coordinator.admin import Admin
from coordinator.metadata import MetadataClient
from statemachines import InProcessNetwork, Participant
from statemachines.controller import ControllerConfig
from tests.recording_broker import RecordingBroker, change_isr
from tests.statemachines.conftest import tp
from tests.waiting import wait_until


class Brokers:
    def __init__(self, url: str, config: ControllerConfig | None = None) -> None:
        self.url = url
        self.config = config
        self.network = InProcessNetwork()
        self.participants: dict[int, Participant] = {}
        self.client = connect(url, session_timeout=4.0)
        self.admin = Admin(self.client)
        self.metadata = MetadataClient(self.client)

    def add(self, broker_id: int) -> Participant:
        p = Participant(self.url, broker_id, handler=RecordingBroker, network=self.network,
                        config=self.config, connect_options={"session_timeout": 4.0})
        self.participants[broker_id] = p.start()
        return p

    def start(self, broker_ids: tuple[int, ...] = (1, 2, 3)) -> Participant:
        """Start the brokers, the first alone until it is the active controller: each stands
        for election on its own event thread, so brokers started together race for it."""
        first = self.add(broker_ids[0])
        wait_until(lambda: first.controller.active, 20,
                   message=f"controller {broker_ids[0]}")
        for b in broker_ids[1:]:
            self.add(b)
        return first

    def kill(self, broker_id: int) -> None:
        self.participants.pop(broker_id).close()

    def state(self, topic: str):  # type: ignore[no-untyped-def]
        item = self.metadata.partition_states([tp(topic, 0)])[tp(topic, 0)]
        return None if item is None else item.value

    def close(self) -> None:
        for p in list(self.participants.values()):
            p.close()
        self.client.close()


@pytest.fixture(params=["memory", "zookeeper", "etcd"])
def url(request: pytest.FixtureRequest) -> str:
    name = f"t{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        return f"memory://{name}"
    server = request.getfixturevalue(f"{request.param}_server")
    return f"{request.param}://{server.address}/{name}"


def out_of_sync_offline(cluster: Brokers, topics: list[str]) -> None:
    """Brokers 1, 2, 3 (1 the controller); each topic one partition on [2, 3] whose ISR shrank
    to [2]; then broker 2 dies: no replica of the ISR is live, 3 is live but out of sync."""
    cluster.start()
    for t in topics:
        cluster.admin.create_topic(t, assignment={0: [2, 3]})
    for t in topics:
        wait_until(lambda t=t: cluster.state(t) is not None and cluster.state(t).leader == 2,
                   20, message=f"{t} led by 2")
        assert change_isr(cluster.metadata, tp(t, 0), [2])
    for t in topics:
        wait_until(lambda t=t: cluster.participants[1].controller.ctx.leaders[tp(t, 0)].isr
                   == (2,), 20, message=f"the controller sees {t}'s ISR [2]")
    cluster.kill(2)
    for t in topics:
        wait_until(lambda t=t: cluster.state(t).leader == -1, 20, message=f"{t} offline")


@pytest.fixture
def brokers(url: str) -> Iterator[Brokers]:
    cluster = Brokers(url)
    yield cluster
    cluster.close()


def test_setting_it_true_on_one_topic_elects_only_its_offline_partition(
        brokers: Brokers) -> None:
    out_of_sync_offline(brokers, ["a", "b"])
    brokers.admin.alter_topic_config("a", {"unclean.leader.election.enable": "true"})
    state = wait_until(lambda: (s := brokers.state("a")).leader == 3 and s, 20,
                       message="a elects 3 out of sync")
    assert state.isr == (3,)
    controller = brokers.participants[1].controller
    # what the metrics report: counted once the election's writes are done, just after the
    # state node this test saw
    wait_until(lambda: controller.stats.unclean_elections == 1, 20,
               message="the unclean election counted")
    assert controller.stats.elections.count >= 2  # the first leaders, a's unclean one
    assert tp("b", 0) in controller.ctx.leaderless
    assert brokers.state("b").leader == -1  # b keeps the controller's default: false
    # A later change elsewhere leaves b offline too.
    brokers.admin.alter_topic_config("b", {"retention.ms": "1000"})
    brokers.admin.alter_topic_config("a", {"retention.ms": "1000"})
    wait_until(lambda: controller.events.pending() == 0 and controller.events.wait_idle(5), 20)
    assert brokers.state("b").leader == -1


def test_the_override_is_read_at_the_election(brokers: Brokers) -> None:
    brokers.start()
    brokers.admin.create_topic("a", assignment={0: [2, 3]},
                               config={"unclean.leader.election.enable": "true"})
    brokers.admin.create_topic("b", assignment={0: [2, 3]})
    for t in ("a", "b"):
        wait_until(lambda t=t: brokers.state(t) is not None and brokers.state(t).leader == 2,
                   20, message=f"{t} led by 2")
        assert change_isr(brokers.metadata, tp(t, 0), [2])
        wait_until(lambda t=t: brokers.participants[1].controller.ctx.leaders[tp(t, 0)].isr
                   == (2,), 20, message=f"the controller sees {t}'s ISR [2]")
    brokers.kill(2)
    wait_until(lambda: brokers.state("a").leader == 3, 20, message="a elects 3 at once")
    wait_until(lambda: brokers.state("b").leader == -1, 20, message="b offline")


def test_a_topics_false_beats_a_controller_default_of_true(url: str) -> None:
    cluster = Brokers(url, ControllerConfig(unclean_leader_election_enable=True))
    try:
        cluster.start()
        cluster.admin.create_topic("a", assignment={0: [2, 3]})
        cluster.admin.create_topic("b", assignment={0: [2, 3]},
                                   config={"unclean.leader.election.enable": "false"})
        for t in ("a", "b"):
            wait_until(lambda t=t: cluster.state(t) is not None and cluster.state(t).leader == 2,
                       20)
            assert change_isr(cluster.metadata, tp(t, 0), [2])
            wait_until(lambda t=t: cluster.participants[1].controller.ctx.leaders[
                tp(t, 0)].isr == (2,), 20)
        cluster.kill(2)
        wait_until(lambda: cluster.state("a").leader == 3, 20, message="a: the default")
        wait_until(lambda: cluster.state("b").leader == -1, 20, message="b: its false")
    finally:
        cluster.close()
