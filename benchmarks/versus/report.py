"""What a run says about where it ran, and docs/performance.md written from a run."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from benchmarks.versus.table import Results, render_markdown


def machine() -> dict[str, str]:
    """The machine in a few fields: kernel, CPU model and cores, memory, Python, Java, and
    librdkafka's version."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = next(int(line.split()[1]) for line in
                       Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal:"))
        memory = f"{mem_kib / (1 << 20):.1f} GiB"
    except (OSError, StopIteration, ValueError):
        memory = "unknown"
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = (done.stderr.strip().splitlines() or ["?"])[0]
    except (OSError, subprocess.TimeoutExpired):
        java = "no java"
    try:
        import confluent_kafka

        rdkafka = confluent_kafka.libversion()[0]
    except ImportError:
        rdkafka = "not installed"
    return {"kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
            "cpu": f"{cpu}, {os.cpu_count()} cores", "memory": memory,
            "python": platform.python_version(), "java": java, "librdkafka": rdkafka}


_INTRO = """# Performance beside Apache Kafka

`benchmarks/versus_kafka.py` (`make bench-kafka`) runs partctl and Apache Kafka on this machine,
one cluster at a time, under the same clients, and prints one table: each figure for partctl,
Kafka 3.9.1 in ZooKeeper mode (on the same ZooKeeper server as partctl, a chroot each) and Kafka
4.x in KRaft mode (the data-plane rows only), the ratio partctl/Kafka, and issue 32's target
for that ratio with whether it is met. `--rounds N` alternates the clusters N times and prints
medians with their ranges.

What is measured, per system (three brokers on 127.0.0.1, a topic of 6 partitions, RF 3,
min.insync.replicas 2):

- **produce** MB/s (10^6 value bytes), acks=all and idempotent, 1 KiB and 100-byte records,
  uncompressed and lz4: Kafka's `ProducerPerformance` (the Java client, run by main class from
  Kafka 3.9.1's jars for every system) and librdkafka (confluent-kafka, linger.ms 5);
- **consume** MB/s from the beginning by a fresh consumer: `ConsumerPerformance` (its fetch
  time, the group's join left out) and librdkafka (from assign() to the last message, each
  batch `consume()` asking for no more messages than are still to come: one that cannot be
  filled waits its whole timeout);
- **transactional produce** (issue 33) MB/s of 1 KiB records, acks=all, on a fresh topic of
  the same kind, record i to partition i mod 6; beside it the same records from the same
  client without transactions (idempotent, pipelined), and the first over the second (the
  target, >= 0.7, is on partctl's own ratio). librdkafka: one producer (a librdkafka producer
  has one transaction open at a time, so transactions are never in flight together), begin,
  100 records, commit, over and over, each transaction spanning all six partitions; the time
  runs from the first produce() (after InitProducerId) to the last commit, so it holds each
  transaction's AddPartitionsToTxn, the leaders' KIP-890 check with the coordinator, the
  records' acks=all, EndTxn, and the wait of the next AddPartitionsToTxn while the previous
  transaction's markers are written (Kafka answers CONCURRENT_TRANSACTIONS, retried by the
  client after 20 ms; partctl holds the request until the markers and the completion are
  written, `transactions.md`).
  `ProducerPerformance --transaction-duration-ms 100` (the Java client): the tool commits
  with the first send 100 ms or more after its begin (Kafka Streams' commit interval under
  exactly_once_v2), so a transaction holds what it hands the producer in 100 ms (its default
  partitioner spreads them; bounded by the producer's buffer, not by the brokers) and the
  commit waits for them all. A transaction of exactly 100 records cannot be asked of the
  tool (with 1 ms, a transaction held a handful of records on a loaded machine), so issue
  33's 0.7 target is judged on librdkafka's row only;
- **read_committed consume** (issue 33) of a topic written by 4 librdkafka transactional
  producers at once, in transactions of 100 x 1 KiB spanning all six partitions, one in ten
  transactions of each (the 2nd, 12th, ...) aborted after its records were written (10% of the
  records at the default size, the row says how many; each fetch carries aborted transactions
  to skip): a fresh consumer from the beginning with
  `isolation.level=read_uncommitted`, then another with `read_committed` (librdkafka from
  assign() to the last message; `ConsumerPerformance` its fetch time), and the second over the
  first (the target, >= 0.9, is on partctl's own ratio). Both figures are MB/s of all the
  values in the log, the aborted ones included: both reads walk the whole log, read_committed
  hands 90% of it to the application. A read_committed read that hands over a value of an
  aborted transaction fails the step;
- **produce latency** p50 / p99 / p99.9 at 1,000 and 10,000 records of 1 KiB a second:
  `ProducerPerformance --throughput` and librdkafka's delivery callbacks (linger.ms 0).
  The Java rows run Kafka 4.x's `ProducerPerformance` (the same client for every system,
  `linger.ms=0` as 3.9.1's client has it) for `--warmup-seconds` (5) at the rate before the
  timed seconds, with `--warmup-records` (KIP-1052) leaving those records out of the judged
  p50 / p99 / p99.9: a fresh JVM compiles its send path in its first seconds, on the two cores
  the brokers use, and the records it holds back meanwhile were most of the old rows' tail.
  The whole run's p99 and p99.9, those first seconds included, are printed beside them (not
  judged). librdkafka's rows time the whole run;
  beside librdkafka's rows, its own split of that time from its statistics (each second's
  window per broker, averaged weighted by what each counted; shown, not judged): the
  brokers' round trip (`rtt`: a ProduceRequest sent until its answer is read) p50 and p99,
  and the wait in the client's queue before a record is sent (`int_latency`) p99;
- **end-to-end latency** p99 (and p50, shown, not judged): librdkafka, a producer at
  1,000/s and a consumer taking each value with `poll()` as it comes, each value carrying
  its produce() time; Kafka's `EndToEndLatency`, which sends one message at a time
  (ping-pong, not a fixed rate);
- **brokers' CPU per MB** produced: the three broker processes' user + system time (from
  `/proc/PID/stat`) over the 1 KiB uncompressed produce step, per MB of values (the
  ZooKeeper server and the client are left out);
- **brokers' RSS** (`VmRSS` of each broker process, the sum of three and the largest) idle and
  with a topic of 1,000 and then 5,000 partitions at RF 3 (that many replicas on every broker),
  once the sum has settled. The Kafka brokers run with the flags Kafka's scripts give them:
  kafka-server-start.sh's heap `-Xmx1G -Xms1G` and kafka-run-class.sh's G1 settings
  (`--kafka-heap` changes the heap);
- **start** after a clean stop of every broker, and after a SIGKILL of every broker
  (recovery), with the topics above and a log filled to `--log-size`: from the launch until
  every broker answers Metadata with a live leader for every partition of every topic;
- **the controller** (ZooKeeper mode, partctl's against Kafka 3.9.1's on the same ZooKeeper):
  controlled shutdown (SIGTERM) of a broker that is not the controller and leads a third of
  the big topic's partitions, and hot failover (SIGKILL of the active controller's broker,
  found in `/controller`), a preferred leader election between the two so that each broker
  leads a third again; each step starts once the brokers have settled (their summed CPU
  steady and under one core over two 1-second windows: a topic's growth leaves them busy
  for seconds after every broker shows it) and ends when every live broker's own Metadata
  answer names no partition led by the broker gone (a raw Metadata client asks each broker
  every 50 ms, on a thread and over one connection of its own kept for the step, as a
  client would: a new connection, an ApiVersions and a 5,000-partition Metadata every 5 ms
  weighed on the brokers being timed, and brokers asked in turn saw the end late by a
  busy broker's slow answer). Failover is
  counted from the moment `/controller` stops naming the killed broker (its 6 s ZooKeeper
  session expired), and also from the SIGKILL.

The default sizes are smaller than the issue's so that a run takes minutes; `--full` uses the
issue's (1 GiB consumed, 1 GiB of log, 1,000 and 5,000 replicas); `--quick` tiny ones (a check
that every row works, not a measurement). `--rows`, `--systems` and `--clients` pick what runs
(`--rows txn-produce,txn-consume`: the transactional rows alone); `--broker-config KEY=VALUE`
adds a setting to every system's brokers; `--out DIR` keeps the figures
as JSON and the chart; `--write-docs` rewrites this page and its chart from the run. A step
that fails prints one `FAILED` line, the others still run, and the benchmark exits 1.

Targets (issue 32, partctl/Kafka 3.9.1 in the same run): throughput >= 1.0x, p99 and p99.9
latency <= 1.0x, RSS <= 0.25x, start and recovery <= 1.0x, controller failover and controlled
shutdown <= 0.2x, CPU per MB <= 1.0x, which the transactional and read_committed MB/s rows
take as throughput rows; and issue 33's on partctl's own ratios (printed as `partctl >= N`):
transactional produce >= 0.7 of the same records without transactions, read_committed consume
>= 0.9 of read_uncommitted. The chart draws each row as partctl's advantage (a ratio turned
so that more is better), the target as a black mark; rows that are a system's own ratio are
not drawn.
"""


NOTES = Path(__file__).with_name("notes.md")
"""The analysis of the rows not met, written by hand after a run: the page carries it below
the table, so a new run keeps it (edit it when the figures it quotes move)."""


def write_docs(results: Results, systems: Iterable[str], meta: Mapping[str, object],
               docs: Path) -> None:
    """docs/performance.md from a run and :data:`NOTES` (its chart is written beside it by
    the caller)."""
    info = meta.get("machine", {})
    assert isinstance(info, dict)
    lines = [_INTRO, "## The latest run", "",
             f"Run on {meta.get('date')}: `{meta.get('command')}` "
             f"({meta.get('rounds')} round(s); sizes: {meta.get('sizes')}).", "",
             "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + ". The machine is "
             "shared with other work: figures move from run to run.", "",
             render_markdown(results, systems), ""]
    if results.failures:
        lines += ["Steps that failed in this run:", ""]
        lines += [f"- {line}" for line in results.failures] + [""]
    if NOTES.is_file():
        lines += [NOTES.read_text().rstrip(), ""]
    lines += ["![partctl's advantage over Kafka 3.9.1, row by row](performance.png)", ""]
    (docs / "performance.md").write_text("\n".join(lines))
