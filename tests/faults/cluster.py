"""The cluster under test of the fault harness: a coordinator ensemble and broker processes,
each in a host (network namespace) of its own, and a host for the clients.

A :class:`FaultCluster` makes a :class:`~tests.faults.net.Network` with hosts ``coord1..3`` (one
ZooKeeper server or etcd member each), ``b1..bN`` (one ``partctl broker start`` process each,
its listener on the host's address, port 9092) and ``client``. Every connection between them
crosses the bridge, so any link can be faulted by host name through :attr:`FaultCluster.network`.

Where the test's own code runs: the root namespace has no interface on the bridge, so it
reaches none of these addresses. Code that talks to the cluster (a Kafka client, a coordinator
session, the ensemble's readiness and role probes) runs in the client host:
``cluster.client.call(fn)`` runs ``fn`` in a thread that entered the client's namespace, and
the helpers here (:meth:`FaultCluster.controller`, :meth:`FaultCluster.registered`,
:meth:`FaultCluster.on_coordinator`, :meth:`FaultCluster.ensemble_call`) do so themselves.
Broker processes are started from a thread inside their own host, so they are that host's;
coordinator members are started with the host's ``ip netns exec`` prefix.

Brokers get a short coordinator session (``zookeeper.session.timeout.ms``, which partctl also
applies to an etcd lease), so that a broker cut off from the coordinator loses its
registration, and a controller its office, within seconds. They also get a short
``replica.lag.time.max.ms`` (8 s, Kafka's default is 30 s): a controller that takes over from a
broker already gone finds that broker's replicas offline but, as Kafka's does at failover, takes
them out of no ISR (only partitions the broker led get a new leader, from the ISR); the leaders
drop the silent follower once it has lagged that long behind a write (a follower whose log end
is the leader's counts as caught up however long it has been silent, as in Kafka), and until
then acks=all writes to those partitions wait for it. Restarting a broker keeps its log
directory and id. Leaving the context (or :meth:`FaultCluster.close`) kills every broker, stops
the ensemble and removes the network, whatever failed before.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import coordinator
from broker.cluster import LaunchedBroker, launch_broker
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from coordinator.servers import LocalEnsemble, start_ensemble
from tests.faults.net import Host, Network

T = TypeVar("T")
Kind = Literal["zookeeper", "etcd"]

PORT = 9092
SESSION_MS = 4000
REPLICA_LAG_MS = 8000


class FaultCluster:
    """A coordinator ensemble, ``brokers`` broker processes and a client host on one network.

    Not started by the constructor: :meth:`start` (or entering the context) starts it."""

    def __init__(self, kind: Kind = "zookeeper", brokers: int = 3, *,
                 directory: str | Path | None = None, session_ms: int = SESSION_MS,
                 replica_lag_ms: int = REPLICA_LAG_MS,
                 extra: Mapping[str, str] | None = None) -> None:
        if kind not in ("zookeeper", "etcd"):
            raise ValueError(f"unknown coordinator kind {kind!r} (expected zookeeper or etcd)")
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self.kind: Kind = kind
        self.size = brokers
        self.session_ms = session_ms
        self.replica_lag_ms = replica_lag_ms
        self.extra = dict(extra or {})
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="partctl-faults-")
                              if directory is None else directory)
        self.network: Network | None = None
        self.ensemble: LocalEnsemble | None = None
        self.brokers: dict[int, LaunchedBroker] = {}
        self.paused: set[int] = set()

    # --- life ----------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> FaultCluster:
        """Make the network, start the ensemble and the brokers; return once every broker
        serves. On any failure everything started is stopped and the error raised. A cluster
        starts once."""
        if self.network is not None:
            raise RuntimeError("the cluster has been started already")
        try:
            self.network = Network()
            coords = [self.network.add_host(f"coord{i}") for i in (1, 2, 3)]
            for i in self.ids:
                self.network.add_host(f"b{i}")
            self.client = self.network.add_host("client")
            # Readiness is probed from the calling namespace: the client's reaches the members.
            self.ensemble = self.client.call(
                start_ensemble, self.kind, 3, directory=self.directory / self.kind,
                fsync=False, hosts=[h.address for h in coords],
                prefixes=[h.prefix for h in coords], timeout=60.0)
            for i in self.ids:
                self._launch(i)
            self.wait_serving(timeout)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def ids(self) -> list[int]:
        return list(range(1, self.size + 1))

    def url(self) -> str:
        """The coordinator URL (every member), as brokers and clients in the network use it."""
        assert self.ensemble is not None, "the cluster is not started"
        return self.ensemble.url()

    def host(self, name: str) -> Host:
        assert self.network is not None, "the cluster is not started"
        return self.network.hosts[name]

    def broker_host(self, i: int) -> Host:
        return self.host(f"b{i}")

    def _launch(self, i: int) -> LaunchedBroker:
        host = self.broker_host(i)
        extra = {"listeners": f"PLAINTEXT://{host.address}:{PORT}",
                 "zookeeper.session.timeout.ms": str(self.session_ms),
                 "replica.lag.time.max.ms": str(self.replica_lag_ms),
                 **self.extra}
        broker = host.call(launch_broker, self.directory / f"broker{i}", i, self.url(),
                           extra=extra)
        self.brokers[i] = broker
        return broker

    def wait_serving(self, timeout: float = 90.0) -> None:
        """Wait until every running broker has said it serves."""
        deadline = time.monotonic() + timeout
        for broker in self.brokers.values():
            if broker.running():
                broker.wait_serving(max(1.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Kill every broker, stop the ensemble, remove the network (and the directory if this
        cluster made it). Each step runs even when one before failed; twice is harmless."""
        for i, broker in self.brokers.items():
            with contextlib.suppress(Exception):
                if i in self.paused:
                    broker.signal(signal.SIGCONT)
                broker.kill()
        self.paused.clear()
        if self.ensemble is not None:
            with contextlib.suppress(Exception):
                self.ensemble.stop()
        if self.network is not None:
            with contextlib.suppress(Exception):
                self.network.close()
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> FaultCluster:
        """Start the cluster unless :meth:`start` did already."""
        return self if self.network is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- brokers -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers for a client in the client host: every broker's listener."""
        return ",".join(f"{self.broker_host(i).address}:{PORT}" for i in self.ids)

    def broker(self, i: int) -> LaunchedBroker:
        return self.brokers[i]

    def kill_broker(self, i: int) -> None:
        """SIGKILL broker ``i`` and reap it."""
        if i in self.paused:
            self.resume_broker(i)
        self.brokers[i].kill()

    def restart_broker(self, i: int, timeout: float = 90.0) -> LaunchedBroker:
        """Kill broker ``i`` if it runs, start it again (same id, same log directory) and wait
        until it serves."""
        self.kill_broker(i)
        broker = self._launch(i)
        broker.wait_serving(timeout)
        return broker

    def pause_broker(self, i: int) -> None:
        """SIGSTOP broker ``i`` (a process that stops answering but keeps its state)."""
        self.brokers[i].signal(signal.SIGSTOP)
        self.paused.add(i)

    def resume_broker(self, i: int) -> None:
        self.brokers[i].signal(signal.SIGCONT)
        self.paused.discard(i)

    # --- the coordinator, as seen from the client host ----------------------------------------

    def on_coordinator(self, fn: Callable[[MetadataClient], T], timeout: float = 10.0) -> T:
        """``fn`` on a fresh coordinator session opened in the client host (closed after)."""
        def run() -> T:
            session = coordinator.connect(self.url(), timeout=timeout)
            try:
                return fn(MetadataClient(session))
            finally:
                session.close()
        return self.client.call(run)

    def controller(self) -> int | None:
        """The id in ``/controller`` (None while no broker holds it)."""
        def read(meta: MetadataClient) -> int | None:
            held = meta.controller()
            return None if held is None else held[0].broker_id
        return self.on_coordinator(read)

    def registered(self) -> list[int]:
        """The ids under ``/brokers/ids``."""
        return self.on_coordinator(lambda meta: meta.broker_ids())

    def ensemble_call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` in the client host, for the ensemble's probes: e.g.
        ``cluster.ensemble_call(cluster.ensemble.leader)`` (a member's kill, start, pause and
        resume work from anywhere)."""
        return self.client.call(fn, *args, **kwargs)

    def partition_states(self, topic: str) -> dict[int, tuple[int, list[int]]]:
        """Leader and ISR of each partition of ``topic`` in the coordinator (empty while the
        topic has no state nodes)."""
        def read(meta: MetadataClient) -> dict[int, tuple[int, list[int]]]:
            tps = [TopicPartition(topic, p) for p in meta.partitions_of(topic)]
            out: dict[int, tuple[int, list[int]]] = {}
            for tp, state in meta.partition_states(tps).items():
                if state is not None:
                    out[tp.partition] = (state.value.leader, list(state.value.isr))
            return out
        return self.on_coordinator(read)
