"""Coordinator benchmark: our layer against the raw client, same work, same run.

Per backend: single synchronous writes, fenced batched writes (multis with the epoch check, as a
controller writes partition states), and a bulk read of many small nodes. Every row is also run
with the raw client (kazoo / etcd3 stubs) and the ratio ours/raw printed; memory has no raw client.

    .venv/bin/python benchmarks/coordinator.py [--backends memory,zookeeper,etcd] [--nodes 100000]

ZooKeeper and etcd servers are started on loopback in temporary directories unless
``--zookeeper HOST:PORT`` / ``--etcd HOST:PORT`` point at running ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coordinator  # noqa: E402
from coordinator import Check, Create, SetData  # noqa: E402

STATE = json.dumps({"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1,
                    "isr": [1, 2, 3]}, separators=(",", ":")).encode()


WARMUP = 500
"""Writes made before the single-write row is timed, so neither side meets a cold server."""


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Row:
    def __init__(self, backend: str, what: str, n: int, ours: float, raw: float | None) -> None:
        self.backend, self.what, self.n, self.ours, self.raw = backend, what, n, ours, raw

    def render(self) -> str:
        ours_rate = self.n / self.ours
        raw_rate = f"{self.n / self.raw:>12,.0f}" if self.raw else f"{'-':>12}"
        ratio = f"{(self.n / self.ours) / (self.n / self.raw):>6.2f}" if self.raw else f"{'-':>6}"
        return (f"{self.backend:<10} {self.what:<28} {self.n:>8,} {self.ours:>8.2f}s "
                f"{ours_rate:>12,.0f} {raw_rate} {ratio}")


def paths_for(root: str, n: int) -> list[str]:
    return [f"{root}/p{i}" for i in range(n)]


def bench_ours(c: coordinator.Coordinator, n_single: int, n_bulk: int) -> dict[str, float]:
    root = "/bench-" + uuid.uuid4().hex[:8]
    c.create(root)
    c.create(root + "/epoch", b"1")
    single = root + "/single"
    c.create(single, b"")
    for _ in range(WARMUP):
        c.set(single, STATE)
    out = {"single": timed(lambda: [c.set(single, STATE) for _ in range(n_single)])}
    ps = paths_for(root, n_bulk)
    c.write_many([Create(path=p, data=STATE) for p in ps])
    guard = Check(path=root + "/epoch", version=0)
    out["fenced"] = timed(lambda: c.write_many([SetData(path=p, data=STATE) for p in ps],
                                               guard=guard))
    got: list = []
    out["bulk_read"] = timed(lambda: got.extend(c.get_many(ps)))
    assert len(got) == n_bulk and all(g is not None for g in got)
    return out


def bench_kazoo(address: str, n_single: int, n_bulk: int, in_flight: int = 8) -> dict[str, float]:
    from kazoo.client import KazooClient

    k = KazooClient(hosts=address)
    k.start(timeout=10)
    root = "/rawbench-" + uuid.uuid4().hex[:8]
    k.create(root)
    k.create(root + "/epoch", b"1")
    k.create(root + "/single", b"")
    for _ in range(WARMUP):
        k.set(root + "/single", STATE)
    out = {"single": timed(lambda: [k.set(root + "/single", STATE) for _ in range(n_single)])}
    ps = paths_for(root, n_bulk)
    for i in range(0, n_bulk, 1000):
        t = k.transaction()
        for p in ps[i:i + 1000]:
            t.create(p, STATE)
        t.commit()

    def fenced() -> None:
        pending: list = []
        for i in range(0, n_bulk, 100):
            t = k.transaction()
            t.check(root + "/epoch", 0)
            for p in ps[i:i + 100]:
                t.set_data(p, STATE)
            pending.append(t.commit_async())
            if len(pending) >= in_flight:
                pending.pop(0).get()
        for a in pending:
            a.get()

    out["fenced"] = timed(fenced)

    def reads() -> None:
        asyncs = [k.get_async(p) for p in ps]
        for a in asyncs:
            a.get()

    out["bulk_read"] = timed(reads)
    k.stop()
    k.close()
    return out


def bench_etcd_raw(address: str, n_single: int, n_bulk: int, in_flight: int = 8) -> dict[str, float]:
    import etcd3
    from etcd3 import etcdrpc

    host, port = address.rsplit(":", 1)
    e = etcd3.client(host=host, port=int(port),
                     grpc_options=[("grpc.max_receive_message_length", 256 << 20)])
    root = "/rawbench-" + uuid.uuid4().hex[:8]
    e.put(root + "/epoch", b"1")
    for _ in range(WARMUP):
        e.put(root + "/single", STATE)
    out = {"single": timed(lambda: [e.put(root + "/single", STATE) for _ in range(n_single)])}
    ps = paths_for(root, n_bulk)
    epoch_key = (root + "/epoch").encode()

    def txn(keys: list[str], compare: bool) -> etcdrpc.TxnRequest:
        req = etcdrpc.TxnRequest()
        if compare:
            cmp = req.compare.add()
            cmp.key = epoch_key
            cmp.result = etcdrpc.Compare.EQUAL
            cmp.target = etcdrpc.Compare.VERSION
            cmp.version = 1
        for p in keys:
            req.success.add().request_put.CopyFrom(etcdrpc.PutRequest(key=p.encode(), value=STATE))
        return req

    def pipelined(requests: list[etcdrpc.TxnRequest]) -> None:
        pending: list[Future] = []
        for r in requests:
            pending.append(e.kvstub.Txn.future(r, e.timeout, credentials=e.call_credentials,
                                               metadata=e.metadata))
            if len(pending) >= in_flight:
                pending.pop(0).result()
        for f in pending:
            f.result()

    pipelined([txn(ps[i:i + 127], False) for i in range(0, n_bulk, 127)])
    out["fenced"] = timed(lambda: pipelined([txn(ps[i:i + 127], True)
                                             for i in range(0, n_bulk, 127)]))

    def reads() -> None:
        got = 0
        start = (root + "/p").encode()
        end = (root + "/q").encode()
        key = start
        while True:
            req = etcdrpc.RangeRequest(key=key, range_end=end, limit=10_000)
            resp = e.kvstub.Range(req, e.timeout, credentials=e.call_credentials,
                                  metadata=e.metadata)
            got += len(resp.kvs)
            if not resp.more:
                break
            key = resp.kvs[-1].key + b"\x00"
        assert got == n_bulk, got

    out["bulk_read"] = timed(reads)
    e.close()
    return out


LABELS = {"single": "single sync writes", "fenced": "fenced batched writes",
          "bulk_read": "bulk read"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,zookeeper,etcd")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes for bulk rows")
    parser.add_argument("--single", type=int, default=2_000, help="single synchronous writes")
    parser.add_argument("--zookeeper", help="HOST:PORT of a running ZooKeeper")
    parser.add_argument("--etcd", help="HOST:PORT of a running etcd")
    args = parser.parse_args()
    servers = []
    rows: list[Row] = []
    try:
        for backend in args.backends.split(","):
            print(f"# {backend}: {args.nodes:,} nodes ...", file=sys.stderr, flush=True)
            if backend == "memory":
                c = coordinator.connect(f"memory://bench-{uuid.uuid4().hex[:6]}")
                ours, raw = bench_ours(c, args.single, args.nodes), None
                c.close()
            else:
                address = getattr(args, backend)
                if address is None:
                    from tests import servers as test_servers

                    server = (test_servers.start_zookeeper() if backend == "zookeeper"
                              else test_servers.start_etcd())
                    servers.append(server)
                    address = server.address
                scheme = "zookeeper" if backend == "zookeeper" else "etcd"
                c = coordinator.connect(f"{scheme}://{address}", timeout=10)
                ours = bench_ours(c, args.single, args.nodes)
                c.close()
                raw = (bench_kazoo(address, args.single, args.nodes) if backend == "zookeeper"
                       else bench_etcd_raw(address, args.single, args.nodes))
            for key in ("single", "fenced", "bulk_read"):
                n = args.single if key == "single" else args.nodes
                rows.append(Row(backend, LABELS[key], n, ours[key], raw[key] if raw else None))
    finally:
        for server in servers:
            server.stop()
    print(f"{'backend':<10} {'operation':<28} {'ops':>8} {'time':>9} {'ours ops/s':>12} "
          f"{'raw ops/s':>12} {'ratio':>6}")
    for row in rows:
        print(row.render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
