"""End to end on real ZooKeeper and etcd: several participants, each with its own session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from coordinator import connect
from coordinator.admin import Admin
from coordinator.metadata import MetadataClient
from interbroker.requests import UpdateMetadataRequest
from statemachines import InProcessNetwork, Participant
from statemachines.controller import ControllerConfig, StandBackoff
from tests.recording_broker import RecordingBroker, change_isr
from tests.servers import Server
from tests.statemachines.conftest import tp
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


class RealCluster:
    def __init__(self, url: str) -> None:
        self.url = url
        self.network = InProcessNetwork()
        self.participants: dict[int, Participant] = {}
        self.client = connect(url)
        self.admin = Admin(self.client)
        self.metadata = MetadataClient(self.client)

    def add(self, broker_id: int, config: ControllerConfig | None = None) -> Participant:
        p = Participant(self.url, broker_id, handler=RecordingBroker, network=self.network,
                        config=config, connect_options={"session_timeout": 4.0})
        self.participants[broker_id] = p.start()
        return p

    def kill(self, broker_id: int) -> None:
        self.participants.pop(broker_id).close()

    def active(self) -> Participant:
        def one() -> Participant | None:
            actives = [p for p in self.participants.values() if p.controller.active]
            return actives[0] if len(actives) == 1 else None

        return wait_until(one, timeout=20, message="one active controller")

    def leader(self, topic: str, partition: int) -> int | None:
        item = self.metadata.partition_states([tp(topic, partition)])[tp(topic, partition)]
        return None if item is None else item.value.leader

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        item = self.metadata.partition_states([tp(topic, partition)])[tp(topic, partition)]
        return () if item is None else item.value.isr

    def close(self) -> None:
        for p in list(self.participants.values()):
            p.close()
        self.client.close()


def _zookeeper_url(server: Server, name: str) -> str:
    """A URL chrooted at a fresh ``/name`` (a chroot must exist before a session uses it)."""
    from kazoo.client import KazooClient

    root = KazooClient(hosts=server.address)
    root.start(timeout=10)
    root.ensure_path("/" + name)
    root.stop()
    root.close()
    return f"zookeeper://{server.address}/{name}"


@pytest.fixture(params=["zookeeper", "etcd"])
def real(request: pytest.FixtureRequest) -> Iterator[RealCluster]:
    name = "t" + uuid.uuid4().hex[:12]
    if request.param == "zookeeper":
        url = _zookeeper_url(request.getfixturevalue("zookeeper_server"), name)
    else:
        server: Server = request.getfixturevalue("etcd_server")
        url = f"etcd://{server.address}/{name}"
    cluster = RealCluster(url)
    yield cluster
    cluster.close()


def _start(c: RealCluster, brokers: int = 3, config: ControllerConfig | None = None) -> None:
    for b in range(1, brokers + 1):
        c.add(b, config)
    wait_until(lambda: set(c.active().controller.ctx.brokers) == set(range(1, brokers + 1)),
               timeout=20, message="controller sees every broker")
    # The admin's own session may be on another member of an ensemble, one that has not
    # applied the last registration yet (a read there is not ordered after other sessions'
    # writes): the topic's assignment names every broker, which it checks.
    wait_until(lambda: set(c.admin.metadata.broker_ids()) == set(range(1, brokers + 1)),
               timeout=20, message="the admin sees every broker")
    c.admin.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    for p, leader in enumerate((1, 2, 3)):
        wait_until(lambda p=p, leader=leader: c.leader("t", p) == leader, timeout=20,
                   message=f"t-{p} led by {leader}")


def test_failover_to_a_standby(real: RealCluster) -> None:
    _start(real)
    first = real.active()
    real.kill(first.id)
    new = real.active()
    assert new.id != first.id and new.controller.epoch == 2
    lost = first.id - 1
    wait_until(lambda: real.leader("t", lost) not in (None, first.id), timeout=20,
               message="partition re-elected")
    for p in real.participants.values():
        wait_until(lambda p=p: any(r.controller_epoch == 2 for r in
                                   p.handler.received(UpdateMetadataRequest)), timeout=20)


def test_broker_loss(real: RealCluster) -> None:
    _start(real)
    real.kill(3)
    wait_until(lambda: real.leader("t", 2) == 1, timeout=20, message="t-2 moves to 1")
    wait_until(lambda: 3 not in real.isr("t", 0), timeout=20, message="ISR shrink")
    assert real.leader("t", 0) == 1


def test_reassignment(real: RealCluster) -> None:
    _start(real, brokers=4)
    real.admin.reassign({tp("t", 0): [4, 2]})
    wait_until(lambda: real.metadata.assignments(["t"])["t"].value.partitions[0] == (4, 2, 1, 3),
               timeout=20, message="phase A")
    leader = real.leader("t", 0)
    assert leader is not None
    assert change_isr(real.participants[leader].metadata, tp("t", 0), [1, 2, 3, 4])
    wait_until(lambda: real.metadata.assignments(["t"])["t"].value.partitions[0] == (4, 2),
               timeout=20, message="reassignment done")
    wait_until(lambda: real.leader("t", 0) == 4 and set(real.isr("t", 0)) == {2, 4},
               timeout=20)
    wait_until(lambda: real.metadata.reassignment() is None, timeout=20)


def test_a_cancelled_reassignment_never_empties_the_isr(real: RealCluster) -> None:
    """Issue 14 #6 on real servers (see the memory test of the same scenario): the replicas
    a rewritten request drops leave the ISR one at a time, and the last member stays."""
    from coordinator import layout
    from coordinator.codecs import encode_reassignment

    real.add(5)  # the controller: it stays put when broker 1 dies
    wait_until(lambda: real.active().id == 5, timeout=20)
    for b in (1, 2, 3, 4):
        real.add(b)
    wait_until(lambda: set(real.active().controller.ctx.brokers) == {1, 2, 3, 4, 5},
               timeout=20, message="controller sees every broker")
    m0 = tp("m", 0)
    real.admin.create_topic("m", assignment={0: [1]})
    wait_until(lambda: real.leader("m", 0) == 1, timeout=20)
    real.admin.reassign({m0: [2, 3, 4]})
    wait_until(lambda: real.metadata.assignments(["m"])["m"].value.partitions[0] == (2, 3, 4, 1),
               timeout=20, message="phase A")
    assert change_isr(real.participants[1].metadata, m0, [1, 2, 3])
    wait_until(lambda: real.metadata.isr_change_notifications() == [], timeout=20)
    real.kill(1)
    wait_until(lambda: (real.leader("m", 0), real.isr("m", 0)) == (2, (2, 3)), timeout=20,
               message="leader 2, ISR [2, 3]")
    real.client.set(layout.REASSIGN_PARTITIONS, encode_reassignment({m0: [1]}))
    wait_until(lambda: real.metadata.assignments(["m"])["m"].value.partitions[0] == (1,),
               timeout=20, message="back on [1]")
    wait_until(lambda: (real.leader("m", 0), real.isr("m", 0)) == (-1, (3,)), timeout=20,
               message="leader -1, ISR [3]")


def test_controlled_shutdown(real: RealCluster) -> None:
    _start(real)
    leaving = real.participants[2]
    assert leaving.controlled_shutdown(timeout=20) == ()
    assert real.leader("t", 1) != 2
    # The answer goes out once leadership has moved; the followers' ISR shrinks come after.
    wait_until(lambda: all(2 not in real.isr("t", p) for p in range(3)), timeout=20,
               message="broker 2 out of every ISR")


def test_a_broker_in_controlled_shutdown_still_hears_of_isr_changes(real: RealCluster) -> None:
    """Issue 14 #7: Kafka sends the UpdateMetadata of an ISR change notification to
    liveOrShuttingDownBrokerIds."""
    _start(real)
    leaving = real.participants[2]
    assert leaving.controlled_shutdown(timeout=20) == ()
    assert change_isr(real.participants[1].metadata, tp("t", 0), [1])
    wait_until(lambda: real.active().controller.ctx.leaders[tp("t", 0)].isr == (1,),
               timeout=20, message="the controller sees the ISR change")
    wait_until(lambda: leaving.handler.metadata()[tp("t", 0)].isr == (1,), timeout=20,
               message="broker 2 told of the ISR change")


def test_preferred_election(real: RealCluster) -> None:
    _start(real)
    assert real.participants[3].controlled_shutdown(timeout=20) == ()
    assert real.leader("t", 2) == 1
    assert change_isr(real.participants[1].metadata, tp("t", 2), [1, 2, 3])
    wait_until(lambda: real.metadata.isr_change_notifications() == [], timeout=20)
    real.kill(3)
    real.add(3)  # back, no longer shutting down
    wait_until(lambda: 3 in real.active().controller.ctx.brokers, timeout=20)
    if 3 not in real.isr("t", 2):
        assert change_isr(real.participants[1].metadata, tp("t", 2), [1, 2, 3])
    real.admin.elect_preferred([tp("t", 2)])
    wait_until(lambda: real.leader("t", 2) == 3, timeout=20, message="preferred leader back")
    wait_until(lambda: real.metadata.preferred_election() is None, timeout=20)


def test_zookeeper_standby_follows_the_tree_and_the_winner_drops_it(
    zookeeper_server: Server,
) -> None:
    """Candidates follow the store with one persistent recursive watch (batched reads, no
    re-arming). A persistent watch stays on the server until removed: the winner removes
    its own, or it would be told of every write it makes as the controller."""
    from tests.servers import zookeeper_watches

    name = "w" + uuid.uuid4().hex[:12]
    c = RealCluster(_zookeeper_url(zookeeper_server, name))
    try:
        # a cluster that ran before: topic t with its states, no controller
        from coordinator import layout
        from coordinator.codecs import PartitionStateNode, TopicAssignment

        c.metadata.ensure_layout()
        c.metadata.create_topic(TopicAssignment(
            topic="t", partitions={0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}))
        for p in range(3):
            state = PartitionStateNode(leader=p + 1, leader_epoch=4, isr=(1, 2, 3),
                                       controller_epoch=0)
            c.client.create(layout.partition_state("t", p), state.encode(), make_parents=True)
        for b in (1, 2, 3):
            c.add(b)
        first = c.active()
        wait_until(lambda: first.controller.last_failover is not None, timeout=20)
        assert len(first.controller.ctx.leaders) == 3
        standbys = [p for p in c.participants.values() if p is not first]

        def tree_watched(p: Participant) -> bool:
            held = zookeeper_watches(zookeeper_server).get(p.coordinator.session_id, set())
            return "/" + name in held

        wait_until(lambda: not tree_watched(first), timeout=20,
                   message="the winner to remove its tree watch from the server")
        assert all(tree_watched(p) for p in standbys)
        for p in standbys:  # their first read of t's states may still be on its way
            wait_until(lambda p=p: len(p.controller.ctx.leaders) == 3, timeout=20,
                       message="the standby's view to hold t's three states")
        # A leader's ISR change reaches the standbys' views through the tree.
        tp_state = layout.partition_state("t", 0)
        _, stat = c.client.get(tp_state)
        shrunk = PartitionStateNode(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=1)
        written = c.client.set(tp_state, shrunk.encode(), version=stat.version)
        for p in standbys:
            assert p.controller.caught_up(written.modify_id, timeout=20)
            assert tuple(p.controller.ctx.leaders[tp("t", 0)].isr) == (1, 2)
            assert not p.controller.caught_up(written.modify_id + 1_000_000, timeout=0.2)
    finally:
        c.close()


def test_an_unexpected_error_in_a_handler_moves_control_to_another_candidate(
    real: RealCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14 #11 on real servers: the controller whose handler fails resigns, gives up
    /controller and holds back; another candidate wins and finishes the work from the store."""
    from statemachines.handlers import isr

    _start(real, config=ControllerConfig(error_backoff=StandBackoff(base=60.0, cap=60.0)))
    first = real.active()
    handled = isr.on_isr_change_notification

    def buggy(ctl):  # type: ignore[no-untyped-def]
        if ctl.broker_id == first.id:
            raise RuntimeError("injected bug")
        return handled(ctl)

    monkeypatch.setattr(isr, "on_isr_change_notification", buggy)
    other = next(b for b in real.participants if b != first.id)
    part = tp("t", other - 1)  # led by ``other``
    assert change_isr(real.participants[other].metadata, part, [other])
    new = wait_until(lambda: next((p for p in real.participants.values()
                                   if p.controller.active and p.id != first.id), None),
                     timeout=20, message="another controller")
    assert new.controller.epoch == 2
    wait_until(lambda: real.metadata.isr_change_notifications() == [], timeout=20)
    wait_until(lambda: new.controller.ctx.leaders[part].isr == (other,), timeout=20)
    assert first.controller.error_resignations == 1 and not first.controller.active
