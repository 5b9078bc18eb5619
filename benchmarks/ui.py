"""Cluster page benchmark: the overview of a 100,000-partition cluster (target: at most 1 s).

    .venv/bin/python benchmarks/ui.py                          # memory and zookeeper
    .venv/bin/python benchmarks/ui.py --backend memory --partitions 20000

A cluster's metadata is written straight into the coordinator (brokers registered, topics
assigned rack-aware, partition states as a controller writes them, a few partitions left
under-replicated, some led by another than their preferred replica, a reassignment pending):
no controller or broker runs. Then, timed, each the median of ``--repeat`` runs:

- *read*: :func:`partctl.cluster_view.read_cluster`, the bulk reads and the view;
- *render*: the overview page's HTML from that view (what the 1 s target is about);
- *GET /*: a whole GET / through the application, the read included (as for a cluster quick to
  read, or the first page);
- *served*: GET / as ``partctl ui`` serves a cluster slow to read: from the last view, while a
  thread reads the cluster again (which competes for the interpreter meanwhile);
- *status*: ``partctl cluster status``'s screen drawn to a string by rich.

ZooKeeper is started on loopback for the run (coordinator.servers, without fsync unless
--server-fsync).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from benchmarks.common import add_server_options, server_label, start_server  # noqa: E402
from coordinator.assignment import assign_replicas  # noqa: E402
from coordinator.base import Coordinator  # noqa: E402
from coordinator.codecs import (  # noqa: E402
    BrokerInfo,
    PartitionStateNode,
    TopicAssignment,
    TopicPartition,
)
from coordinator.metadata import MetadataClient  # noqa: E402


def populate(client: Coordinator, brokers: int, partitions: int, topics: int, rf: int) -> None:
    """Brokers in 3 racks, ``topics`` topics sharing ``partitions``, and their states: every
    97th partition has lost a replica from its ISR, every 89th is led by its second replica."""
    md = MetadataClient(client)
    md.ensure_layout()
    racks = {b: f"rack-{b % 3}" for b in range(1, brokers + 1)}
    for b, rack in racks.items():
        md.register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9000 + b, rack=rack))
    epoch = md.register_controller(1)
    per_topic = partitions // topics
    n = 0
    for t in range(topics):
        name = f"topic-{t:04d}"
        assignment = assign_replicas(racks, per_topic, rf)
        md.create_topic(TopicAssignment(topic=name, partitions=assignment))
        states = {}
        for p, replicas in assignment.items():
            leader = replicas[1] if n % 89 == 0 else replicas[0]
            isr = tuple(replicas[:-1]) if n % 97 == 0 else tuple(replicas)
            states[TopicPartition(name, p)] = PartitionStateNode(
                leader=leader, leader_epoch=0, isr=isr, controller_epoch=epoch.epoch)
            n += 1
        md.create_partition_states(epoch, states)
    first = md.assignments(["topic-0000"])["topic-0000"].value.partitions
    md.request_reassignment({TopicPartition("topic-0000", p): tuple(reversed(first[p]))
                             for p in range(min(50, per_topic))})


def timed(step: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median seconds of ``repeat`` runs, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run(url: str, args: argparse.Namespace) -> dict[str, float]:
    from rich.console import Console

    from partctl.cluster_view import read_cluster
    from partctl.status_screen import status_screen
    from partctl.webui import ClusterPage, PageOptions
    from partctl.webui.pages import overview

    client = coordinator.connect(url, timeout=30)
    try:
        start = time.perf_counter()
        populate(client, args.brokers, args.partitions, args.topics, args.rf)
        setup = time.perf_counter() - start
        read, _ = timed(lambda: read_cluster(client), args.repeat)
        view = read_cluster(client)
        assert len(view.partitions) == args.partitions, len(view.partitions)
        render, _ = timed(lambda: overview(view, PageOptions(refresh=10)), args.repeat)
        html = overview(view, PageOptions(refresh=10))
        app = ClusterPage(client, refresh=10, cache_seconds=0)
        page, response = timed(lambda: app.handle("GET", "/", {}), args.repeat)
        assert response.status == 200  # type: ignore[attr-defined]
        served = ClusterPage(client, refresh=10, cache_seconds=0, refresh_in_background=True)
        served.handle("GET", "/", {})  # the first read, which pages wait for
        warm, _ = timed(lambda: served.handle("GET", "/", {}), args.repeat)
        served.close()

        def draw() -> str:
            out = io.StringIO()
            Console(file=out, width=120).print(status_screen(view))
            return out.getvalue()

        status, _ = timed(draw, args.repeat)
    finally:
        client.close()
    return {"setup": setup, "read": read, "render": render, "page": page, "warm": warm,
            "status": status,
            "html_kib": len(html) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=("memory", "zookeeper"),
                    help="repeatable (default: memory and zookeeper)")
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="runs per step; the median is shown")
    add_server_options(ap)
    args = ap.parse_args()
    backends = args.backend or ["memory", "zookeeper"]
    print(f"{args.brokers} brokers, {args.partitions} partitions in {args.topics} topics, "
          f"RF {args.rf}; median of {args.repeat}"
          + (f"; {server_label(args)}" if "zookeeper" in backends else ""))
    print(f"{'backend':<10} {'setup s':>8} {'read s':>8} {'render s':>9} {'GET / s':>8} "
          f"{'served s':>9} {'status s':>9} {'HTML KiB':>9}")
    for backend in backends:
        server = None
        if backend == "memory":
            url = f"memory://bench-ui-{uuid.uuid4().hex[:8]}"
        else:
            server = start_server(backend, args)
            url = server.url(f"/bench-ui-{uuid.uuid4().hex[:8]}")
        try:
            r = run(url, args)
        finally:
            if server is not None:
                server.stop()
        print(f"{backend:<10} {r['setup']:>8.2f} {r['read']:>8.3f} {r['render']:>9.3f} "
              f"{r['page']:>8.3f} {r['warm']:>9.3f} {r['status']:>9.3f} "
              f"{r['html_kib']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
