"""librdkafka's loads (confluent-kafka): produce as fast as it goes, produce at a fixed rate
timing each delivery callback, produce and consume at a fixed rate timing each message from
produce() to its arrival, and read a topic from the beginning. MB is 10^6 value bytes."""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.common import produce_values
from benchmarks.versus.systems import SystemError_

_STAMP = struct.Struct(">q")


def _producer(bootstrap: str, **settings: object) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "queue.buffering.max.messages": 1_000_000, **settings})


def produce(bootstrap: str, topic: str, *, records: int, size: int,
            compression: str = "none", partitions: int | None = None) -> dict[str, float]:
    """``records`` values of ``size`` random bytes, acks=all, idempotent, linger.ms 5: MB/s
    from the first produce() to the end of flush(). With ``partitions``, record i goes to
    partition i mod ``partitions`` (each gets the same share), else where librdkafka's sticky
    partitioner puts it (shares that differ from run to run)."""
    producer = _producer(bootstrap, **{"linger.ms": 5, "compression.type": compression,
                                       "batch.size": 1_000_000})
    spread = (lambda i: i % partitions) if partitions else None
    elapsed, left, failed = produce_values(producer, topic, os.urandom(size), records,
                                           partition=spread, backoff=0.005, flush_timeout=600)
    if left or failed:
        raise SystemError_(f"librdkafka produce: {left} undelivered, errors {failed[:2]}")
    return {"mbps": records * size / elapsed / 1e6}


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": at(0.5), "p99": at(0.99), "p999": at(0.999)}


def _paced(rate: int, seconds: float, send: Callable[[int], None], poll: Callable[[], None]
           ) -> None:
    """Call ``send(i)`` ``rate`` times a second for ``seconds``, each on its schedule."""
    total = int(rate * seconds)
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            send(sent)
            sent += 1
        poll()
        wait = start + sent / rate - time.perf_counter()
        if wait > 0:
            time.sleep(min(wait, 0.001))


class _Windows:
    """librdkafka's statistics (``statistics.interval.ms``), each second's window per broker:
    the produce round trip (``rtt``: a ProduceRequest sent until its answer is read, so the
    broker's share of a delivery) and the time in the producer's own queue (``int_latency``:
    produce() until the message is put in a request). :meth:`figures` gives each window's p50
    and p99 averaged over the windows, weighted by the requests (messages) in each."""

    def __init__(self) -> None:
        self.kept: dict[str, list[tuple[int, float, float]]] = {"rtt": [], "int_latency": []}

    def __call__(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:  # the bootstrap connections
                continue
            for key, kept in self.kept.items():
                window = broker.get(key) or {}
                if window.get("cnt"):
                    kept.append((window["cnt"], window["p50"] / 1000, window["p99"] / 1000))

    def clear(self) -> None:
        for kept in self.kept.values():
            kept.clear()

    def figures(self) -> dict[str, float]:
        """``rtt_p50``, ``rtt_p99``, ``queue_p50``, ``queue_p99`` in ms (those seen)."""
        out = {}
        for key, name in (("rtt", "rtt"), ("int_latency", "queue")):
            kept = self.kept[key]
            weight = sum(count for count, _p50, _p99 in kept)
            if weight:
                out[f"{name}_p50"] = sum(count * p50 for count, p50, _p99 in kept) / weight
                out[f"{name}_p99"] = sum(count * p99 for count, _p50, p99 in kept) / weight
        return out


def latency(bootstrap: str, topic: str, *, rate: int, seconds: float, size: int
            ) -> dict[str, float]:
    """acks=all, idempotent, linger.ms 0, ``rate`` values a second for ``seconds`` after one
    delivered first (the producer's start-up): each one's time from produce() to its delivery
    callback, in ms (the poll loop adds up to 1 ms); beside them librdkafka's own split of
    that time (:class:`_Windows`): ``rtt_*`` the brokers' round trips, ``queue_*`` the wait
    in the client before a message is sent."""
    windows = _Windows()
    producer = _producer(bootstrap, **{"linger.ms": 0, "statistics.interval.ms": 1000,
                                       "stats_cb": windows})
    value = os.urandom(size)
    producer.produce(topic, value=value)
    if producer.flush(60):
        raise SystemError_("librdkafka latency: the first message was not delivered")
    windows.clear()  # the start-up's windows
    samples: list[float] = []
    failed: list[object] = []

    def send(_i: int) -> None:
        sent_at = time.perf_counter()

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                failed.append(error)
            else:
                samples.append((time.perf_counter() - sent_at) * 1000)

        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.001)

    _paced(rate, seconds, send, lambda: producer.poll(0))
    producer.flush(60)
    if failed or not samples:
        raise SystemError_(f"librdkafka latency: {len(failed)} failed, errors {failed[:2]}")
    return {**_percentiles(samples), **windows.figures()}


def end_to_end(bootstrap: str, topic: str, partitions: int, *, rate: int, seconds: float,
               size: int) -> dict[str, float]:
    """A producer (acks=all, idempotent, linger.ms 0) at ``rate`` values a second and a
    consumer on a thread, assigned to every partition at its end: each value carries the time
    of its produce(); its arrival at the consumer minus that, in ms."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    samples: list[float] = []
    seen = threading.Event()
    stop = threading.Event()

    def consume() -> None:
        # poll(), one value at a time as it comes: a batch consume() waits its whole timeout
        # for a batch it cannot fill, and every value of the batch waited with it
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is None:
                continue
            value = message.value()
            if message.error() is None and value:
                (stamp,) = _STAMP.unpack_from(value)
                if stamp > 0:
                    samples.append((time.perf_counter_ns() - stamp) / 1e6)
                seen.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    producer = _producer(bootstrap, **{"linger.ms": 0})
    padding = os.urandom(max(0, size - _STAMP.size))
    try:
        deadline = time.monotonic() + 60
        while not seen.is_set():  # the consumer's position is known once a message comes
            producer.produce(topic, value=_STAMP.pack(0) + padding)
            producer.flush(10)
            if seen.wait(0.5) or time.monotonic() > deadline:
                break
        if not seen.is_set():
            raise SystemError_("librdkafka end-to-end: the consumer saw nothing in 60 s")
        expected = int(rate * seconds)

        def send(_i: int) -> None:
            while True:
                try:
                    producer.produce(topic, value=_STAMP.pack(time.perf_counter_ns()) + padding)
                    return
                except BufferError:
                    producer.poll(0.001)

        _paced(rate, seconds, send, lambda: producer.poll(0))
        producer.flush(60)
        deadline = time.monotonic() + 30
        while len(samples) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
        consumer.close()
    if len(samples) < expected:
        raise SystemError_(f"librdkafka end-to-end: {len(samples)} of {expected} arrived")
    return _percentiles(samples)


def consume(bootstrap: str, topic: str, partitions: int, *, messages: int) -> dict[str, float]:
    """A fresh consumer (assign() from the beginning, no group) reads ``messages`` values:
    MB/s from assign() to the last message (librdkafka's start-up included: from the first
    message alone, a small topic is all in its prefetch queue by then)."""
    size = [0]

    def count(value: bytes) -> None:
        size[0] += len(value)

    seconds = _fresh_read(bootstrap, topic, partitions, messages, "consume", {}, count)
    return {"mbps": size[0] / seconds / 1e6}


def _fresh_read(bootstrap: str, topic: str, partitions: int, messages: int, what: str,
                settings: dict[str, str], each: Callable[[bytes], None]) -> float:
    """A fresh consumer (assign() from the beginning, no group, ``settings`` added) reads
    until ``messages`` values came, each given to ``each`` (none is kept): the seconds from
    assign() to the last. Each call asks for no more than the values still to come:
    librdkafka's batch consume waits its whole timeout for a batch it cannot fill, and asking
    10,000 at a time ended every read with a second of waiting for values that were not
    there (a 128 MiB read took 1.8 s, 1 s of it that wait)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                         **settings})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    try:
        while got < messages and time.monotonic() < deadline:
            for message in consumer.consume(min(10_000, messages - got), 1.0):
                if message.error() is None:
                    got += 1
                    each(message.value() or b"")
        end = time.perf_counter()
    finally:
        consumer.close()
    if got < messages or end <= start:
        raise SystemError_(f"librdkafka {what} read {got} of {messages} messages")
    return end - start


def transactions(bootstrap: str, topic: str, partitions: int, *, records: int, size: int,
                 per_transaction: int = 100, transactional: bool = True,
                 abort_every: int = 0) -> dict[str, float]:
    """Record i to partition i mod ``partitions`` (so that a transaction of 100 spans all six
    of the benchmark's topic), acks=all, idempotent, linger.ms 5; with ``transactional``, one
    producer (a librdkafka producer has one transaction open at a time) doing begin, produce
    ``per_transaction`` records, commit, over and over, one in ``abort_every`` transactions
    (the second, then every ``abort_every``-th after it, so that a small run has one too)
    flushed then aborted instead (its records are in the log, below an abort marker). Without
    ``transactional``, the same records from the same producer settings, not in transactions.
    MB/s of the records from the first produce() (the producer's InitProducerId before it) to
    the last commit or flush; committed values start with ``C``, aborted ones with ``A``."""
    from confluent_kafka import Producer

    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000, "linger.ms": 5, "batch.size": 1_000_000}
    if transactional:
        settings["transactional.id"] = f"bench-{uuid.uuid4().hex}"
    producer = Producer(settings)
    padding = os.urandom(size - 1)
    kept, dropped = b"C" + padding, b"A" + padding
    failed: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    def send(value: bytes, i: int) -> None:
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions,
                                 on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.001)

    if transactional:
        producer.init_transactions(60)
    committed = aborted = 0
    start = time.perf_counter()
    for n, first in enumerate(range(0, records, per_transaction)):
        count = min(per_transaction, records - first)
        abort = transactional and abort_every > 0 and n % abort_every == min(1, abort_every - 1)
        if transactional:
            producer.begin_transaction()
        for i in range(first, first + count):
            send(dropped if abort else kept, i)
        if not transactional:
            producer.poll(0)
        elif abort:
            if producer.flush(60):
                raise SystemError_("librdkafka transactions: an aborted transaction's records "
                                   "were not delivered in 60 s")
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
        if abort:
            aborted += count
        else:
            committed += count
    left = producer.flush(600)
    elapsed = time.perf_counter() - start
    if left or failed:
        raise SystemError_(f"librdkafka transactions: {left} undelivered, errors {failed[:2]}")
    return {"mbps": records * size / elapsed / 1e6, "committed": committed,
            "aborted": aborted}


def read_all(bootstrap: str, topic: str, partitions: int, *, isolation: str, messages: int,
             log_bytes: int) -> dict[str, float]:
    """A fresh consumer (assign() from the beginning, no group, ``isolation.level``
    ``isolation``) reads until ``messages`` values came: MB/s of ``log_bytes`` (the values in
    the topic's log, aborted ones included: both isolation levels read the whole log) from
    assign() to the last message. A ``read_committed`` read that hands over a value of an
    aborted transaction (one starting with ``A``) fails."""
    dirty = [0]

    def judge(value: bytes) -> None:
        if value[:1] == b"A":
            dirty[0] += 1

    seconds = _fresh_read(bootstrap, topic, partitions, messages, isolation,
                          {"isolation.level": isolation}, judge)
    if dirty[0] and isolation == "read_committed":
        raise SystemError_(f"librdkafka read_committed handed over {dirty[0]} aborted values")
    return {"mbps": log_bytes / seconds / 1e6}
