"""Coordinator benchmark: our layer against the raw client, same work, same run.

Per backend, the three things a controller lives on:
- single synchronous writes: a versioned set of one node, waiting for each answer;
- fenced batched writes: conditional sets of many partition-state nodes (each at its expected
  version, as Kafka's updateLeaderAndIsr writes), every request first checking the version of
  the epoch node;
- a bulk read of many partition-state nodes (Kafka's layout: 100 partitions a topic),
  returning each node's data and version.

The raw client (kazoo / the etcd3 gRPC stubs) does the same work: the same checks, the same
answers per node. Rows alternate ours and raw over several rounds and keep each side's best,
so neither meets a colder server. Memory has no raw client.

    .venv/bin/python benchmarks/coordinator.py [--backends memory,zookeeper,etcd]
                                               [--nodes 100000] [--rounds 3]

ZooKeeper and etcd are started on loopback in temporary directories (coordinator.servers,
without fsync unless ``--server-fsync``; the output says which) unless ``--zookeeper
HOST:PORT`` / ``--etcd HOST:PORT`` point at running ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from benchmarks.common import add_server_options, server_label, start_server  # noqa: E402
from coordinator import Check, Create, SetData  # noqa: E402

STATE = json.dumps({"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1,
                    "isr": [1, 2, 3]}, separators=(",", ":")).encode()
ROWS = ("single", "fenced", "bulk_read")
LABELS = {"single": "single sync writes", "fenced": "fenced batched writes",
          "bulk_read": "bulk read"}


PARTITIONS_PER_TOPIC = 100


def state_paths(root: str, n: int) -> tuple[list[str], list[list[str]]]:
    """``n`` partition-state paths in Kafka's layout, and the parent levels to create first."""
    topics = [f"{root}/t{k}" for k in range((n + PARTITIONS_PER_TOPIC - 1) // PARTITIONS_PER_TOPIC)]
    parts = [f"{t}/partitions/{p}" for t in topics for p in range(PARTITIONS_PER_TOPIC)][:n]
    levels = [topics, [t + "/partitions" for t in topics], parts]
    return [p + "/state" for p in parts], levels


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Side:
    """One way of doing the three jobs; ``versions`` tracks each node's expected version."""

    def setup(self, n: int) -> None: ...
    def single(self, n: int) -> None: ...
    def fenced(self) -> None: ...
    def bulk_read(self) -> None: ...
    def close(self) -> None: ...


class Ours(Side):
    def __init__(self, url: str) -> None:
        self.c = coordinator.connect(url, timeout=10)

    def setup(self, n: int) -> None:
        c = self.c
        self.root = "/bench-" + uuid.uuid4().hex[:8]
        c.create(self.root)
        c.create(self.root + "/epoch", b"1")
        self.one = self.root + "/single"
        c.create(self.one, b"")
        self.one_version = 0
        self.paths, levels = state_paths(self.root, n)
        for level in levels:
            c.write_many([Create(path=p) for p in level])
        c.write_many([Create(path=p, data=STATE) for p in self.paths])
        self.version = 0
        self.guard = Check(path=self.root + "/epoch", version=0)

    def single(self, n: int) -> None:
        c, path, v = self.c, self.one, self.one_version
        for _ in range(n):
            v = c.set(path, STATE, version=v).version
        self.one_version = v

    def fenced(self) -> None:
        v = self.version
        results = self.c.write_many([SetData(path=p, data=STATE, version=v) for p in self.paths],
                                    guard=self.guard)
        assert all(not isinstance(r, Exception) for r in results)
        self.version = v + 1

    def bulk_read(self) -> None:
        got = self.c.get_many(self.paths)
        assert len(got) == len(self.paths) and got[-1] is not None

    def close(self) -> None:
        self.c.close()


class RawKazoo(Side):
    """kazoo as a careful user would drive it: pipelined async calls, multis of 100 sets."""

    def __init__(self, address: str, in_flight: int = 8) -> None:
        from kazoo.client import KazooClient

        self.k = KazooClient(hosts=address)
        self.k.start(timeout=10)
        self.in_flight = in_flight

    def setup(self, n: int) -> None:
        k = self.k
        self.root = "/rawbench-" + uuid.uuid4().hex[:8]
        k.create(self.root)
        k.create(self.root + "/epoch", b"1")
        self.one = self.root + "/single"
        k.create(self.one, b"")
        self.one_version = 0
        self.paths, levels = state_paths(self.root, n)
        for level, data in [(lv, b"") for lv in levels] + [(self.paths, STATE)]:
            for i in range(0, len(level), 1000):
                t = k.transaction()
                for p in level[i:i + 1000]:
                    t.create(p, data)
                t.commit()
        self.version = 0

    def single(self, n: int) -> None:
        k, path, v = self.k, self.one, self.one_version
        for _ in range(n):
            v = k.set(path, STATE, version=v).version
        self.one_version = v

    def fenced(self) -> None:
        k, v, pending = self.k, self.version, []
        for i in range(0, len(self.paths), 100):
            t = k.transaction()
            t.check(self.root + "/epoch", 0)
            for p in self.paths[i:i + 100]:
                t.set_data(p, STATE, version=v)
            pending.append(t.commit_async())
            if len(pending) >= self.in_flight:
                _kazoo_ok(pending.pop(0).get())
        for a in pending:
            _kazoo_ok(a.get())
        self.version = v + 1

    def bulk_read(self) -> None:
        asyncs = [self.k.get_async(p) for p in self.paths]
        got = [(a.get()[0], a.get()[1].version) for a in asyncs]
        assert len(got) == len(self.paths)

    def close(self) -> None:
        self.k.stop()
        self.k.close()


def _kazoo_ok(results: list[Any]) -> None:
    assert not any(isinstance(r, Exception) for r in results), results[:3]


class RawEtcd(Side):
    """The etcd3 client's gRPC stubs: transactions with the same compares, several in flight,
    and paginated range reads."""

    def __init__(self, address: str, in_flight: int = 8) -> None:
        import etcd3

        host, port = address.rsplit(":", 1)
        self.e = etcd3.client(host=host, port=int(port),
                              grpc_options=[("grpc.max_receive_message_length", 256 << 20)])
        self.in_flight = in_flight

    def _call(self, method: Any, request: Any, future: bool = False) -> Any:
        e = self.e
        fn = method.future if future else method
        return fn(request, e.timeout, credentials=e.call_credentials, metadata=e.metadata)

    def _txn(self, compares: list[tuple[bytes, int]], puts: list[bytes]) -> Any:
        from etcd3 import etcdrpc

        req = etcdrpc.TxnRequest()
        for key, version in compares:
            cmp = req.compare.add()
            cmp.key = key
            cmp.result = etcdrpc.Compare.EQUAL
            cmp.target = etcdrpc.Compare.VERSION
            cmp.version = version
        for key in puts:
            req.success.add().request_put.CopyFrom(etcdrpc.PutRequest(key=key, value=STATE))
        return req

    def setup(self, n: int) -> None:
        self.root = "/rawbench-" + uuid.uuid4().hex[:8]
        self.e.put(self.root + "/epoch", b"1")
        self.epoch_key = (self.root + "/epoch").encode()
        self.one = (self.root + "/single").encode()
        self.e.put(self.one, b"")
        self.one_version = 1  # etcd counts puts from 1
        paths_, levels = state_paths(self.root, n)
        self.keys = [p.encode() for p in paths_]
        parents = [p.encode() for level in levels for p in level]
        self._pipelined([self._txn([], parents[i:i + 127]) for i in range(0, len(parents), 127)])
        self._pipelined([self._txn([], self.keys[i:i + 127]) for i in range(0, n, 127)])
        self.version = 1

    def _pipelined(self, requests: list[Any]) -> None:
        pending = []
        for r in requests:
            pending.append(self._call(self.e.kvstub.Txn, r, future=True))
            if len(pending) >= self.in_flight:
                assert pending.pop(0).result().succeeded
        for f in pending:
            assert f.result().succeeded

    def single(self, n: int) -> None:
        v = self.one_version
        for _ in range(n):
            resp = self._call(self.e.kvstub.Txn, self._txn([(self.one, v)], [self.one]))
            assert resp.succeeded
            v += 1
        self.one_version = v

    def fenced(self) -> None:
        v, keys = self.version, self.keys
        self._pipelined([
            self._txn([(self.epoch_key, 1)] + [(k, v) for k in keys[i:i + 127]], keys[i:i + 127])
            for i in range(0, len(keys), 127)])
        self.version = v + 1

    def bulk_read(self) -> None:
        """A range over the topics' subtree, paginated, keeping the wanted state keys."""
        from etcd3 import etcdrpc

        wanted = set(self.keys)
        got = []
        key, end = (self.root + "/").encode(), (self.root + "0").encode()
        while True:
            resp = self._call(self.e.kvstub.Range,
                              etcdrpc.RangeRequest(key=key, range_end=end, limit=10_000))
            got.extend((kv.value, kv.version - 1, kv.mod_revision)
                       for kv in resp.kvs if kv.key in wanted)
            if not resp.more:
                break
            key = resp.kvs[-1].key + b"\x00"
        assert len(got) == len(self.keys), len(got)

    def close(self) -> None:
        self.e.close()


def measure(sides: list[Side], n_single: int, rounds: int) -> list[dict[str, float]]:
    """Best time per row and side, alternating the sides within each round."""
    best: list[dict[str, float]] = [{} for _ in sides]
    for _ in range(rounds):
        for row in ROWS:
            for i, side in enumerate(sides):
                if row == "single":
                    elapsed = timed(lambda s=side: s.single(n_single))
                else:
                    elapsed = timed(getattr(side, row))
                best[i][row] = min(best[i].get(row, float("inf")), elapsed)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,zookeeper,etcd")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes for bulk rows")
    parser.add_argument("--single", type=int, default=2_000, help="single synchronous writes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--zookeeper", help="HOST:PORT of a running ZooKeeper")
    parser.add_argument("--etcd", help="HOST:PORT of a running etcd")
    add_server_options(parser)
    args = parser.parse_args()
    lines = []
    for backend in args.backends.split(","):
        print(f"# {backend}: {args.nodes:,} nodes, {args.rounds} rounds ...", file=sys.stderr,
              flush=True)
        server = None
        try:
            if backend == "memory":
                sides: list[Side] = [Ours(f"memory://bench-{uuid.uuid4().hex[:6]}")]
            else:
                address = getattr(args, backend)
                if address is None:
                    server = start_server(backend, args)
                    address = server.address
                raw: Side = RawKazoo(address) if backend == "zookeeper" else RawEtcd(address)
                sides = [Ours(f"{backend}://{address}"), raw]
            for side in sides:
                side.setup(args.nodes)
            best = measure(sides, args.single, args.rounds)
            for side in sides:
                side.close()
        finally:
            if server is not None:
                server.stop()
        for row in ROWS:
            n = args.single if row == "single" else args.nodes
            ours = n / best[0][row]
            if len(best) > 1:
                raw_rate = n / best[1][row]
                tail = f"{raw_rate:>12,.0f} {ours / raw_rate:>6.2f}"
            else:
                tail = f"{'-':>12} {'-':>6}"
            lines.append(f"{backend:<10} {LABELS[row]:<24} {n:>8,} {best[0][row]:>8.2f}s "
                         f"{ours:>12,.0f} {tail}")
    started = [b for b in args.backends.split(",") if b != "memory" and not getattr(args, b)]
    if started:
        print(f"# {', '.join(started)}: {server_label(args)}")
    print(f"{'backend':<10} {'operation':<24} {'ops':>8} {'best':>9} {'ours ops/s':>12} "
          f"{'raw ops/s':>12} {'ratio':>6}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
