"""An application that keeps its own replicas and lets partctl's controller drive them.

Each broker of this application keeps, for every partition it is assigned, a small in-memory
key-value replica. partctl's embedded controller decides who leads each partition; the broker
learns it through its request handler and serves reads and writes only where it leads. Its
followers copy the leader's data when they sync, the leader takes a caught-up follower back into
the ISR through the controller client, and a broker leaving asks for a controlled shutdown first.
docs/embedding.md walks through it; tests/statemachines/test_embedding_example.py runs it.

    .venv/bin/python docs/examples/embedded_kv.py                       # on memory://
    .venv/bin/python docs/examples/embedded_kv.py zookeeper://127.0.0.1:2181/kv
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import PartitionStateNode, TopicPartition
from interbroker import BrokerResponse, ControllerClient, ErrorCode, IsrWritten
from interbroker.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from statemachines import InProcessNetwork, Participant

log = logging.getLogger("embedded_kv")

NO_LEADER = -1


class NotLeader(Exception):
    """Reads and writes go to a partition's leader, and this broker does not lead it."""

    def __init__(self, tp: TopicPartition, leader: int | None) -> None:
        super().__init__(f"not the leader of {name(tp)} (the leader is {leader})")
        self.leader = leader


def name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


@dataclass
class KvReplica:
    """One partition's replica on one broker: its data, and what the controller last said."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the version of the partition's state: ISR writes are conditional on it
    controller_epoch: int
    data: dict[str, str] = field(default_factory=dict)


class KvBroker:
    """The application's broker side: an ``interbroker.RequestHandler`` over its replicas.

    ``peers`` is the application's own way to reach another broker's replicas (here, the
    objects themselves)."""

    def __init__(self, controller: ControllerClient, peers: dict[int, KvBroker]) -> None:
        self.controller = controller
        self.id = controller.broker_id
        self.peers = peers
        self.events: list[str] = []  # what this broker became and did, in order
        self._lock = threading.Lock()
        self._replicas: dict[TopicPartition, KvReplica] = {}
        self._metadata: dict[TopicPartition, tuple[int, tuple[int, ...]]] = {}  # leader, ISR

    # -- the controller's requests (on the controller's thread: quick, no calls back) ----------

    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> BrokerResponse:
        errors: dict[TopicPartition, ErrorCode] = {}
        with self._lock:
            for p in request.partitions:
                tp = TopicPartition(p.topic, p.partition)
                replica = self._replicas.get(tp)
                if self.id not in p.replicas:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if replica is not None and p.leader_epoch < replica.leader_epoch:
                    errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH  # an older leader epoch: ignore it
                    continue
                if replica is None:
                    replica = self._replicas[tp] = KvReplica(
                        leader=NO_LEADER, leader_epoch=-1, isr=(), partition_epoch=-1,
                        controller_epoch=-1)
                new_epoch = p.leader_epoch != replica.leader_epoch
                replica.leader, replica.leader_epoch = p.leader, p.leader_epoch
                replica.isr, replica.partition_epoch = p.isr, p.partition_epoch
                replica.controller_epoch = p.controller_epoch
                if not new_epoch:
                    continue  # same leader and epoch, a new ISR: nothing to become
                if p.leader == self.id:
                    self._note(f"{name(tp)}: leader at leader epoch {p.leader_epoch}")
                elif p.leader >= 0:
                    self._note(f"{name(tp)}: follower of broker {p.leader} "
                               f"at leader epoch {p.leader_epoch}")
                else:
                    self._note(f"{name(tp)}: no leader at leader epoch {p.leader_epoch}")
        return BrokerResponse(partition_errors=errors)

    def handle_update_metadata(self, request: UpdateMetadataRequest) -> BrokerResponse:
        with self._lock:
            for p in request.partitions:
                self._metadata[TopicPartition(p.topic, p.partition)] = (p.leader, p.isr)
        return BrokerResponse()

    def handle_stop_replica(self, request: StopReplicaRequest) -> BrokerResponse:
        with self._lock:
            for p in request.partitions:
                tp = TopicPartition(p.topic, p.partition)
                replica = self._replicas.pop(tp, None) if p.delete else self._replicas.get(tp)
                if replica is not None and not p.delete:
                    replica.leader = NO_LEADER  # stopped: neither leads nor follows
                self._note(f"{name(tp)}: replica {'deleted' if p.delete else 'stopped'}")
        return BrokerResponse()

    def _note(self, event: str) -> None:
        self.events.append(event)
        log.info("broker %d: %s", self.id, event)

    # -- clients: reads and writes only where it leads -----------------------------------------

    def get(self, tp: TopicPartition, key: str) -> str | None:
        with self._lock:
            return self._leading(tp).data.get(key)

    def put(self, tp: TopicPartition, key: str, value: str) -> None:
        with self._lock:
            self._leading(tp).data[key] = value

    def _leading(self, tp: TopicPartition) -> KvReplica:
        replica = self._replicas.get(tp)
        if replica is None or replica.leader != self.id:
            raise NotLeader(tp, self.leader_of(tp))
        return replica

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader as the controller last told this broker (UpdateMetadata)."""
        known = self._metadata.get(tp)
        return known[0] if known is not None else None

    def isr_of(self, tp: TopicPartition) -> tuple[int, ...]:
        known = self._metadata.get(tp)
        return known[1] if known is not None else ()

    def role(self, tp: TopicPartition) -> str:
        with self._lock:
            replica = self._replicas.get(tp)
            if replica is None or replica.leader == NO_LEADER:
                return "none"
            return "leader" if replica.leader == self.id else "follower"

    # -- the application's own replication, and the ISR calls back to the controller ----------

    def sync(self) -> None:
        """Copy the leader's data into every replica this broker follows."""
        with self._lock:
            following = [(tp, r.leader, r.leader_epoch) for tp, r in self._replicas.items()
                         if r.leader not in (self.id, NO_LEADER)]
        for tp, leader, epoch in following:
            peer = self.peers.get(leader)
            data = peer.snapshot(tp, self.id, epoch) if peer is not None else None
            if data is None:
                continue
            with self._lock:
                replica = self._replicas.get(tp)
                if replica is not None and (replica.leader, replica.leader_epoch) == (leader,
                                                                                      epoch):
                    replica.data = data

    def snapshot(self, tp: TopicPartition, follower: int, leader_epoch: int
                 ) -> dict[str, str] | None:
        """A follower's sync: all of the data, if this broker still leads ``tp`` at
        ``leader_epoch``. A follower outside the ISR now holds everything, so the leader takes
        it back in (under the lock, so that no write slips in between)."""
        announce = False
        with self._lock:
            replica = self._replicas.get(tp)
            if replica is None or (replica.leader, replica.leader_epoch) != (self.id,
                                                                             leader_epoch):
                return None
            data = dict(replica.data)
            if follower not in replica.isr:
                isr = (*replica.isr, follower)
                outcome = self.controller.write_isr(
                    tp,
                    PartitionStateNode(leader=self.id, leader_epoch=replica.leader_epoch,
                                       isr=isr, controller_epoch=replica.controller_epoch),
                    replica.partition_epoch,
                )
                if isinstance(outcome, IsrWritten):
                    replica.isr, replica.partition_epoch = isr, outcome.partition_epoch
                    self._note(f"{name(tp)}: took broker {follower} back into the ISR")
                    announce = True
                # else the controller moved the partition on (or the store was unreachable):
                # the follower stays out of the ISR until a later sync
        if announce:
            self.controller.notify_isr_change([tp])  # the controller tells every broker
        return data


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.01)


def run(url: str, say: Callable[[str], None] = print) -> list[str]:
    """Three brokers, one topic of two partitions; a write, a broker lost and back, a
    controlled shutdown. Returns what it said (it says only what is settled, so the story is
    the same on every run and coordinator)."""
    story: list[str] = []

    def tell(line: str) -> None:
        story.append(line)
        say(line)

    network = InProcessNetwork()  # carries the controller's requests to the handlers
    peers: dict[int, KvBroker] = {}
    participants: dict[int, Participant] = {}

    def start(broker_id: int) -> KvBroker:
        def build(controller: ControllerClient) -> KvBroker:
            peers[broker_id] = KvBroker(controller, peers)
            return peers[broker_id]

        participants[broker_id] = Participant(url, broker_id, handler=build,
                                              network=network).start()
        return peers[broker_id]

    admin_session = coordinator.connect(url)
    admin = Admin(admin_session)
    try:
        start(1)
        wait_for(lambda: participants[1].controller.active, "broker 1 to be the controller")
        for b in (2, 3):
            start(b)
        tell(f"brokers {sorted(participants)} registered; controller: broker "
             f"{admin.controller_status().broker_id}")

        admin.create_topic("kv", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
        kv0, kv1 = TopicPartition("kv", 0), TopicPartition("kv", 1)
        wait_for(lambda: all(peers[b].leader_of(tp) is not None for b in peers
                             for tp in (kv0, kv1)), "every broker to know the leaders")
        for tp in (kv0, kv1):
            tell(f"{name(tp)}: " + ", ".join(f"broker {b} {peers[b].role(tp)}"
                                             for b in sorted(peers)))

        peers[1].put(kv0, "colour", "blue")
        tell(f"broker 1 reads colour = {peers[1].get(kv0, 'colour')} from kv-0")
        try:
            peers[2].get(kv0, "colour")
        except NotLeader as exc:
            tell(f"broker 2 refuses to serve kv-0: {exc}")
        for b in peers:
            peers[b].sync()

        participants.pop(3).close()  # broker 3 is lost: its session ends
        wait_for(lambda: all(3 not in peers[b].isr_of(tp) for b in (1, 2) for tp in (kv0, kv1)),
                 "the controller to drop broker 3 from the ISRs")
        tell(f"broker 3 lost: ISR of kv-0 {list(peers[1].isr_of(kv0))}, "
             f"of kv-1 {list(peers[1].isr_of(kv1))}")

        start(3)  # back, empty: it follows, catches up, and the leaders take it back in
        wait_for(lambda: peers[3].role(kv0) == peers[3].role(kv1) == "follower",
                 "broker 3 to follow")
        peers[3].sync()
        wait_for(lambda: all(3 in peers[b].isr_of(tp) for b in peers for tp in (kv0, kv1)),
                 "every broker to hear of the ISR changes")
        tell(f"broker 3 back: ISR of kv-0 {list(peers[2].isr_of(kv0))}, "
             f"of kv-1 {list(peers[2].isr_of(kv1))}")

        remaining = participants[1].controlled_shutdown()
        tell(f"broker 1 asks for a controlled shutdown: still leads {list(remaining)}")
        # The answer comes once leadership moved; its follower replicas are taken out of the
        # ISRs right after (broker 3, told last, hears of it last): wait for that, then go.
        wait_for(lambda: peers[3].leader_of(kv0) == 2 and 1 not in peers[3].isr_of(kv1),
                 "the controller to finish moving broker 1 out")
        participants.pop(1).close()
        tell(f"broker 2 now reads colour = {peers[2].get(kv0, 'colour')} from kv-0")
        for b in sorted(peers):
            tell(f"broker {b}'s log:")
            for event in peers[b].events:
                tell(f"  {event}")
        return story
    finally:
        for participant in participants.values():
            participant.close()
        admin_session.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    run(sys.argv[1] if len(sys.argv) > 1 else f"memory://kv-{uuid.uuid4().hex[:8]}")
