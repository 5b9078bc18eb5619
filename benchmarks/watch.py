"""Watch benchmark: the CPU a watching process spends while N watched nodes change.

    .venv/bin/python benchmarks/watch.py                               # zookeeper and etcd
    .venv/bin/python benchmarks/watch.py --backend zookeeper --nodes 30000 --kind tree

A standby controller follows the store by watches while the active one writes: what each change
costs the watcher (and, on ZooKeeper, the server, which answers every re-arming read) decides
whether a standby keeps up with a mass election on the same machine. One session writes N nodes
with bulk writes; another, in a process of its own, watches them with one tree watch or with a
data watch per node, and reports its CPU from the first write until it has seen every change.
Servers are started on loopback for the run (coordinator.servers, without fsync unless
--server-fsync; the output says which).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from benchmarks.common import add_server_options, cpu_seconds, server_label, start_server  # noqa: E402
from coordinator.model import Create, DataEvent, SetData, TreeEvent  # noqa: E402

ROOT = "/watched"


def _watcher(url: str, kind: str, nodes: int, conn: Any) -> None:
    """Watch the nodes, say "ready", then report (CPU, wall, changes seen) once every node has
    been reported with its new value."""
    session = coordinator.connect(url)
    seen: set[str] = set()
    lock = threading.Lock()
    done = threading.Event()

    def saw(path: str) -> None:
        seen.add(path)
        if len(seen) == nodes:
            done.set()

    def on_data(event: DataEvent) -> None:
        if event.data == b"2":
            with lock:
                saw(event.path)

    def on_tree(event: TreeEvent) -> None:
        with lock:
            for change in event.changes:
                if change.data == b"2":
                    saw(change.path)

    if kind == "tree":
        watches = [session.watch_tree(ROOT, on_tree)]
    else:
        watches = [session.watch_data(f"{ROOT}/n{i}", on_data) for i in range(nodes)]
    session.sync()
    time.sleep(1.0)  # let the arming reads settle
    conn.send("ready")
    conn.recv()
    cpu, wall = time.process_time(), time.monotonic()
    done.wait(300)
    conn.send((time.process_time() - cpu, time.monotonic() - wall, len(seen)))
    for w in watches:
        w.cancel()
    session.close()


def run(backend: str, url: str, kind: str, nodes: int, server_pid: int | None) -> str:
    writer = coordinator.connect(url)
    writer.ensure_path(ROOT)
    for start in range(0, nodes, 10_000):
        writer.write_many([Create(path=f"{ROOT}/n{i}", data=b"1")
                           for i in range(start, min(nodes, start + 10_000))])
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_watcher, args=(url, kind, nodes, child), daemon=True)
    proc.start()
    if not conn.poll(600) or conn.recv() != "ready":
        raise RuntimeError("the watcher did not get ready")
    server_cpu = (cpu_seconds(server_pid) or 0.0) if server_pid else 0.0
    conn.send("go")
    t = time.perf_counter()
    writer.write_many([SetData(path=f"{ROOT}/n{i}", data=b"2") for i in range(nodes)])
    wrote = time.perf_counter() - t
    cpu, wall, seen = conn.recv()
    server = (f", server CPU {(cpu_seconds(server_pid) or 0.0) - server_cpu:.2f} s"
              if server_pid else "")
    proc.join(30)
    writer.delete(ROOT, recursive=True)
    writer.close()
    return (f"{backend:9s} {kind:4s} x {nodes}: written in {wrote:.2f} s; watcher CPU {cpu:.2f} s "
            f"({cpu / max(seen, 1) * 1e6:.0f} us a change), all seen after {wall:.2f} s"
            f"{server}; seen {seen}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["zookeeper", "etcd"])
    ap.add_argument("--kind", action="append", choices=["tree", "data"])
    ap.add_argument("--nodes", type=int, default=20_000)
    add_server_options(ap)
    args = ap.parse_args()
    print(f"# {server_label(args)}", flush=True)
    for backend in args.backend or ["zookeeper", "etcd"]:
        server = start_server(backend, args)
        try:
            for kind in args.kind or ["tree", "data"]:
                print(run(backend, server.url(), kind, args.nodes, server.pid), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
