"""partctl side by side with Apache Kafka on this machine, in one run; prints one table.

    .venv/bin/python benchmarks/versus_kafka.py [--rounds N] [--rows produce,latency,...]
        [--systems partctl,kafka3,kafka4] [--clients java,rdkafka] [--quick | --full]
        [--broker-config KEY=VALUE ...] [--out DIR] [--write-docs]

A ZooKeeper started on loopback for the run; then, one at a time (alternated over
``--rounds``): three ``partctl broker`` processes on a chroot of it, three Apache Kafka 3.9.1
brokers in ZooKeeper mode on another chroot of the same server, and three Kafka 4.x nodes in
KRaft mode (data-plane rows only). Each row is measured on each system by the same clients:
Kafka's Java tools by main class, and librdkafka. docs/performance.md says what each row
measures and how; the table gives each figure, its ratio partctl/Kafka and issue 32's target
(issue 33's for the transactional rows).
Exit status 1 when any step failed (each printed as one ``FAILED`` line).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import add_server_options, parse_size, start_server  # noqa: E402
from benchmarks.versus import rows as R  # noqa: E402
from benchmarks.versus import txn as T  # noqa: E402
from benchmarks.versus.report import machine, write_docs  # noqa: E402
from benchmarks.versus.systems import (  # noqa: E402
    KAFKA_HEAP,
    SYSTEMS,
    System,
    SystemError_,
    kafka_kraft_system,
    kafka_zk_system,
    newest_kafka,
    partctl_system,
)
from benchmarks.versus.table import Results, render_text, write_chart, write_json  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"
ZK_ROWS = ("rss", "start", "controller")
"""Rows run on the ZooKeeper-mode systems only (partctl and Kafka 3.9.1)."""


_BASE = {  # produce, consume, latency s, end-to-end s, replicas, log, warm-up s
    "quick": ("2M", "4M", 2.0, 2.0, (60, 150), "4M", 1.0),
    "default": ("32M", "128M", 10.0, 10.0, (1000, 5000), "128M", 5.0),
    "full": ("256M", "1G", 20.0, 20.0, (1000, 5000), "1G", 5.0),
}


def _sizes(args: argparse.Namespace) -> R.Sizes:
    produce, consume, latency, e2e, replicas, log, warmup = _BASE[
        "quick" if args.quick else "full" if args.full else "default"]
    if args.replicas:
        counts = tuple(int(x) for x in args.replicas.split(","))
        if len(counts) != 2:
            raise SystemExit("--replicas takes two counts, e.g. 1000,5000")
        replicas = (counts[0], counts[1])
    return R.Sizes(produce_bytes=parse_size(args.produce_size or produce),
                   consume_bytes=parse_size(args.consume_size or consume),
                   latency_seconds=args.latency_seconds or latency,
                   e2e_seconds=args.e2e_seconds or e2e, replicas=replicas,
                   log_bytes=parse_size(args.log_size or log),
                   warmup_seconds=args.warmup_seconds or warmup)


def _pick(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    picked = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in picked if x not in known]
    if unknown or not picked:
        raise SystemExit(f"--{what}: unknown {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(known)}")
    return picked


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=1, help="alternate the systems N times")
    p.add_argument("--rows", default=",".join(R.ROWS), help=f"of {', '.join(R.ROWS)}")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    p.add_argument("--clients", default=",".join(R.CLIENTS), help="java and/or rdkafka")
    sizes = p.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="tiny sizes: does every row work")
    sizes.add_argument("--full", action="store_true", help="issue 32's sizes (1 GiB)")
    p.add_argument("--produce-size", help="bytes per produce step (32M), txn-produce's too")
    p.add_argument("--consume-size", help="bytes read back by each consumer (128M; full 1G), "
                   "txn-consume's topic too")
    p.add_argument("--latency-seconds", type=float, help="per rate and client (10)")
    p.add_argument("--e2e-seconds", type=float, help="end-to-end step (10)")
    p.add_argument("--warmup-seconds", type=float,
                   help="the Java latency rows' warm-up, sent before what they judge (5)")
    p.add_argument("--replicas", help="partitions of the big topic, two sizes (1000,5000)")
    p.add_argument("--log-size", help="log written before the start rows (128M; full 1G)")
    p.add_argument("--kafka3", default="3.9.1", help="Kafka version in ZooKeeper mode")
    p.add_argument("--kafka4", default=None, help="Kafka 4.x version (newest resolved)")
    p.add_argument("--kafka-heap", default=" ".join(KAFKA_HEAP),
                   help="the Kafka brokers' heap flags (kafka-server-start.sh's)")
    p.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a server.properties setting for every system's brokers (repeatable; "
                        "e.g. transaction.partition.verification.enable=false)")
    p.add_argument("--out", type=Path, help="write results.json and performance.png there")
    p.add_argument("--write-docs", action="store_true",
                   help="rewrite docs/performance.md and docs/performance.png from this run")
    p.add_argument("--keep", action="store_true", help="keep the brokers' directory")
    add_server_options(p)
    args = p.parse_args(argv)
    args.rows = _pick(args.rows, R.ROWS, "rows")
    args.systems = _pick(args.systems, SYSTEMS, "systems")
    args.clients = _pick(args.clients, R.CLIENTS, "clients")
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if args.warmup_seconds is not None and args.warmup_seconds <= 0:
        raise SystemExit("--warmup-seconds must be more than 0")
    if any("=" not in x or not x.partition("=")[0].strip() for x in args.broker_config):
        raise SystemExit("--broker-config takes KEY=VALUE")
    args.kafka4 = args.kafka4 or newest_kafka(4)  # None: no 4.x resolved
    args.broker_config = dict((k.strip(), v.strip()) for k, _, v in
                              (x.partition("=") for x in args.broker_config))
    return args


def _build(key: str, args: argparse.Namespace, work: Path, zk_address: str, n: int) -> System:
    directory = work / f"{key}-{n}"
    heap = tuple(args.kafka_heap.split())
    settings = args.broker_config
    if key == "partctl":
        return partctl_system(directory, zk_address, settings)
    if key == "kafka3":
        return kafka_zk_system(directory, zk_address, args.kafka3, heap, settings)
    version = args.kafka4
    if version is None:
        raise SystemError_("no Kafka 4.x resolved: run `bash tests/kafka/resolve.sh`")
    return kafka_kraft_system(directory, version, work, heap, settings)


def run_system(step: R.Step, system: System, rows: tuple[str, ...]) -> None:
    """Every chosen row on one started system."""
    zk = system.zk_url is not None
    if "rss" in rows and zk:
        R.rss_idle(step, system)
    if "produce" in rows or "cpu" in rows:
        R.produce_rows(step, system)
    if "consume" in rows:
        R.consume_rows(step, system)
    if "txn-produce" in rows:
        T.txn_produce_rows(step, system)
    if "txn-consume" in rows:
        T.txn_consume_rows(step, system)
    if "latency" in rows:
        R.latency_rows(step, system)
    if "e2e" in rows:
        R.e2e_rows(step, system)
    if (zk and ("rss" in rows or "controller" in rows)
            and R.big_topic(step, system, with_rss="rss" in rows) and "controller" in rows):
        R.controller_rows(step, system)
    if zk and "start" in rows:
        R.start_rows(step, system)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = _sizes(args)
    results = Results()
    command = "python benchmarks/versus_kafka.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="versus-kafka-"))
    step = R.Step(rows=args.rows, clients=args.clients, sizes=sizes, results=results, work=work,
                  tools=args.kafka3, started=started,
                  latency_tools=args.kafka4)
    running: list[System] = []

    def terminated(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminated)
    server = None
    try:
        step.say(f"work directory {work}; sizes {sizes}")
        server = start_server("zookeeper", args)
        step.say(f"ZooKeeper on {server.address}")
        for n in range(args.rounds):
            order = list(args.systems[n % len(args.systems):] + args.systems[:n %
                                                                                len(args.systems)])
            for key in order:
                rows = tuple(r for r in args.rows if key != "kafka4" or r in R.DATA_PLANE)
                if not rows:
                    continue
                step.say(f"round {n + 1}/{args.rounds}: {key}")
                try:
                    system = _build(key, args, work, server.address, n)
                    running.append(system)
                    t0 = time.perf_counter()
                    system.start()
                    step.say(f"{system.label} serving in {time.perf_counter() - t0:.1f}s "
                             f"on {system.bootstrap}")
                except (SystemError_, OSError) as exc:
                    line = f"FAILED {key}: start: {str(exc).splitlines()[0]}"
                    results.fail(line)
                    print(line, file=sys.stderr, flush=True)
                    if running:
                        running.pop().kill_all()
                    continue
                run_system(step, system, rows)
                # SIGKILL: nothing is measured after the rows and the directory goes (a clean
                # stop of all three at once costs Kafka its controlled shutdown's retries)
                system.kill_all()
                running.remove(system)
                if not args.keep:
                    shutil.rmtree(system.directory, ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted: stopping every process", file=sys.stderr, flush=True)
        results.fail("interrupted")
    finally:
        for system in running:
            system.kill_all()
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(render_text(results, args.systems))
    for line in results.failures:
        print(line)
    meta = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "rounds": args.rounds, "machine": machine(), "systems": list(args.systems),
            "sizes": {k: getattr(sizes, k) for k in sizes.__slots__}}
    if args.out:
        write_json(results, args.out / "results.json", meta)
        write_chart(results, args.out / "performance.png")
        print(f"wrote {args.out / 'results.json'} and {args.out / 'performance.png'}")
    if args.write_docs:
        write_chart(results, DOCS / "performance.png")
        write_docs(results, args.systems, meta, DOCS)
        print(f"wrote {DOCS / 'performance.md'} and {DOCS / 'performance.png'}")
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())
