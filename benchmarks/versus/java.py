"""The Java client's loads: Kafka's own ProducerPerformance, ConsumerPerformance and
EndToEndLatency, run by main class from one Kafka version's jars against every system, their
printed figures parsed. MB here is 10^6 bytes (the tools print MiB; converted)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from benchmarks.versus.systems import SystemError_, java_tool

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
END_TO_END = "org.apache.kafka.tools.EndToEndLatency"

_PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")
_STEADY = re.compile(
    r"(\d+) steady state records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
    r"latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
    r"(\d+) ms 99\.9th")
"""The summary of the records after ``--warmup-records`` (Kafka 4.x's tool, KIP-1052), printed
after the whole run's."""
_E2E = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)")


def _failed(what: str, done: object) -> SystemError_:
    out = (getattr(done, "stdout", "") + getattr(done, "stderr", "")).strip().splitlines()
    tail = " | ".join(out[-3:]) if out else "no output"
    return SystemError_(f"{what} failed (status {getattr(done, 'returncode', '?')}): {tail}")


def produce(version: str, work: Path, bootstrap: str, topic: str, *, records: int, size: int,
            compression: str = "none", throughput: int = -1,
            transaction_ms: int = 0, warmup: int = 0,
            linger_ms: int | None = None) -> dict[str, float]:
    """ProducerPerformance, acks=all and idempotent: records/s, MB/s and its latencies (ms).
    ``throughput`` -1: as fast as it goes; else records a second. ``transaction_ms`` > 0:
    transactional (``--transaction-duration-ms``, a fresh transactional id): the tool begins a
    transaction, sends, and commits with the first send ``transaction_ms`` or more after the
    begin, so a transaction holds the records sent in that time (at least one).
    ``warmup`` > 0 (Kafka 4.x's tool only: ``--warmup-records``): the first ``warmup`` of the
    ``records`` are the client's warm-up; p50/p99/p999 are then those of the records after
    them, and ``all_p50``/``all_p99``/``all_p999`` the whole run's. ``linger_ms``: the
    producer's ``linger.ms`` (None: the tool's client's default; 0 in 3.x, 5 in 4.x)."""
    extra = ([] if transaction_ms <= 0 else
             ["--transaction-duration-ms", str(transaction_ms),
              "--transactional-id", f"bench-{uuid.uuid4().hex}"])
    done = java_tool(version, work, PRODUCER, "--topic", topic, "--num-records", str(records),
                     "--record-size", str(size), "--throughput", str(throughput), *extra,
                     *(["--warmup-records", str(warmup)] if warmup > 0 else []),
                     "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
                     "enable.idempotence=true", f"compression.type={compression}",
                     *([] if linger_ms is None else [f"linger.ms={linger_ms}"]))
    if done.returncode != 0 or not _PRODUCED.search(done.stdout):
        raise _failed("ProducerPerformance", done)
    return summary(done.stdout, records=records, size=size, warmup=warmup)


def summary(stdout: str, *, records: int, size: int, warmup: int = 0) -> dict[str, float]:
    """ProducerPerformance's printed summary: MB/s and latencies (ms) of the whole run, and
    with ``warmup`` > 0 the steady state's as p50/p99/p999 (the whole run's as ``all_*``).
    A run that sent fewer than ``records`` (or printed no steady state) is an error."""
    matches = _PRODUCED.findall(stdout)
    if not matches:
        raise SystemError_("ProducerPerformance printed no summary")
    sent, rate, _mib, _avg, _max, p50, _p95, p99, p999 = (float(x) for x in matches[-1])
    if sent < records:
        raise SystemError_(f"ProducerPerformance sent {sent:.0f} of {records}")
    got = {"mbps": rate * size / 1e6, "p50": p50, "p99": p99, "p999": p999}
    if warmup > 0:
        steady = _STEADY.findall(stdout)
        if not steady:
            raise SystemError_("ProducerPerformance printed no steady-state summary "
                               "(--warmup-records needs Kafka 4.x's tool)")
        s_sent, *_rest, s50, _s95, s99, s999 = (float(x) for x in steady[-1])
        if s_sent < records - warmup:
            raise SystemError_(f"ProducerPerformance's steady state holds {s_sent:.0f} of "
                               f"{records - warmup} records")
        got.update(all_p50=p50, all_p99=p99, all_p999=p999, p50=s50, p99=s99, p999=s999)
    return got


def consume(version: str, work: Path, bootstrap: str, topic: str, *, messages: int,
            isolation: str = "read_uncommitted", log_bytes: int | None = None
            ) -> dict[str, float]:
    """ConsumerPerformance of a fresh group from the beginning (``isolation.level``
    ``isolation``): MB/s over its fetch time (the group's join left out, as the tool reports
    it); with ``log_bytes``, MB/s of those bytes (the values of the whole log read) over the
    fetch time instead of the bytes handed over."""
    config = work / f"consumer-{isolation}.properties"
    config.write_text(f"isolation.level={isolation}\n")
    done = java_tool(version, work, CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
                     "--messages", str(messages), "--timeout", "60000",
                     "--consumer.config", str(config))
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if "fetch.MB.sec" in line), None)
    if done.returncode != 0 or header is None or header + 1 >= len(lines):
        raise _failed("ConsumerPerformance", done)
    names = [n.strip() for n in lines[header].split(",")]
    values = dict(zip(names, (v.strip() for v in lines[header + 1].split(",")), strict=False))
    got = int(float(values["data.consumed.in.nMsg"]))
    if got < messages:
        raise SystemError_(f"ConsumerPerformance read {got} of {messages} messages")
    if log_bytes is not None:
        seconds = float(values["fetch.time.ms"]) / 1000
        if seconds <= 0:
            raise SystemError_(f"ConsumerPerformance fetch time {seconds} s")
        return {"mbps": log_bytes / seconds / 1e6}
    return {"mbps": float(values["fetch.MB.sec"]) * (1 << 20) / 1e6}


def end_to_end(version: str, work: Path, bootstrap: str, topic: str, *, messages: int,
               size: int) -> dict[str, float]:
    """EndToEndLatency (acks=all): one message at a time, sent once the last came back
    (ping-pong, not a fixed rate): its p50/p99/p99.9 in ms."""
    done = java_tool(version, work, END_TO_END, bootstrap, topic, str(messages), "all",
                     str(size))
    found = _E2E.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise _failed("EndToEndLatency", done)
    p50, p99, p999 = (float(x) for x in found.groups())
    return {"p50": p50, "p99": p99, "p999": p999}
