"""The fault harness's workload: real Kafka clients (confluent-kafka) producing, reading and
administering the cluster under test while faults happen, every step recorded in the history.

- **Producers** (idempotent, acks=all) send unique text values, one a produce() call, to
  explicit partitions in turn over every partition of every topic, at a total rate of ``rate``
  attempts a second, at most ``max_in_flight`` outstanding per partition (a partition that
  cannot take writes holds up no other). Each attempt is recorded before it is
  handed to the client, and its outcome when the delivery report comes: acknowledged at its
  offset, failed, or unknown (:func:`outcome_of` decides, conservatively).
- **Consumers** hold every partition (assigned, from the beginning) and record what each poll
  returned, per partition, with the high watermark the client last saw.
- **An admin thread** (optional) creates and deletes scratch topics, asks for preferred leader
  elections (ElectLeaders, served by the brokers) and reorders a workload partition's replicas
  (a reassignment through the coordinator's ``/admin/reassign_partitions``, as partctl's tools
  submit it). Its errors are counted, never raised: under faults they are expected.

Everything that talks to the cluster runs in its client host (``cluster.client.call``): each
client thread's body is called through it, so its sockets live in that namespace.

At the end, :meth:`Workload.final_reads` reads every partition from its start to its HW, and
:func:`finals` gives the checker what the logs hold: it waits for a quiet cluster (a leader and
a full ISR everywhere), takes each partition's leader, ISR and HW, stops the brokers and reads
the in-sync replicas' log directories.
"""

from __future__ import annotations

import functools
import itertools
import logging
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from tests.faults.checker import FinalPartition, final_from_log_dirs
from tests.faults.cluster import FaultCluster
from tests.faults.history import ACKED, FAILED, UNKNOWN, History

__all__ = ["Workload", "WorkloadStats", "create_topics", "finals", "outcome_of"]

log = logging.getLogger(__name__)
CLIENT_LOG: dict[str, object] = {"logger": logging.getLogger("tests.faults.librdkafka")}
"""The clients' own log lines (request timeouts, reconnects: expected under faults) go to this
logger, not to stderr; the runner keeps them in the run's ``run.log``."""

EOS_LOG: dict[str, object] = {"logger": logging.getLogger("tests.faults.librdkafka.eos"),
                              "debug": "eos,msg"}
"""A transactional producer's log: its transaction manager's steps and its batches (librdkafka's
``eos`` and ``msg`` debug contexts: each request to the coordinator, each state change, each
batch sent, retried or purged), kept in ``run.log`` so that a step that stalls shows where.
librdkafka hands these lines over only when the producer is polled or flushed (a commit
flushes), so their times are when they were handed over, not when they happened."""
logging.getLogger("tests.faults.librdkafka.eos").setLevel(logging.DEBUG)


def where_stuck(thread: threading.Thread, frames: int = 4) -> str:
    """The innermost ``frames`` lines ``thread`` is running now, for a thread that did not
    stop: the call it waits in (a librdkafka call shows as the Python line calling it). A
    thread waiting for the one it runs its work in (``tests.faults.net.Host.call``'s, named
    after it) is shown by that one."""
    inner = [t for t in threading.enumerate() if t.name.startswith(f"{thread.name}/")]
    if inner:
        return where_stuck(inner[0], frames)
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return "(it has no frame)"
    stack = traceback.extract_stack(frame)[-frames:]
    return " <- ".join(f"{s.name}:{s.lineno} {(s.line or '').strip()}" for s in reversed(stack))

REPLICATION_FACTOR = 3
MIN_INSYNC = 2
WATERMARK_UNKNOWN = -1001  # librdkafka's OFFSET_INVALID: no HW cached yet

# Errors the broker gives for a message whatever happened before: refused for what the message
# (or the producer's configuration) is, so no earlier attempt of it can have been written.
_REFUSED_FOR_WHAT_IT_IS = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_EXCEPTION,
})
# Local errors produce() raises: the message never entered the client's queue.
_REFUSED_BEFORE_QUEUEING = frozenset({
    KafkaError._QUEUE_FULL,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._INVALID_ARG,
    KafkaError._FATAL,
    KafkaError._STATE,
})


def outcome_of(error: KafkaError | None, *, queued: bool = True) -> str:
    """The outcome an attempt is recorded with: ``acked`` without an error, ``failed`` only
    when the error is certain that nothing was written, else ``unknown``.

    ``queued`` is False for an error produce() itself raised (the message never entered the
    client's queue, so it was never sent: failed for the local refusals, unknown for anything
    else). For a delivery report's error the question is whether any attempt of the message may
    have reached a leader's log. librdkafka retries an idempotent producer's retriable errors
    until ``message.timeout.ms``, so what reaches the report has often been sent before, maybe
    more than once, and one of those sends may have been appended although its answer was
    lost. That rules out the errors answered before the append: NOT_ENOUGH_REPLICAS for this
    request says nothing of an earlier request for the same batch (Kafka checks the ISR
    before its duplicate check, so a retried batch that was appended is refused, not
    de-duplicated), and NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    _MSG_TIMED_OUT, _TIMED_OUT, _TRANSPORT are ambiguous anyway. ``_PURGE_QUEUE`` too: a
    message waiting in the queue for a retry has been sent already, and the report does not
    tell it from one never sent. Only a refusal of the message for what it is (too large, acks
    not allowed, a topic it may not write) is certain, as it would have been refused every
    time. Calling an ambiguous failure ``failed`` would make the checker call a value that
    was written anyway "unexpected"; calling a certain one ``unknown`` costs nothing.
    """
    if error is None:
        return ACKED
    code = error.code()
    if not queued:
        return FAILED if code in _REFUSED_BEFORE_QUEUEING else UNKNOWN
    if code in _REFUSED_FOR_WHAT_IT_IS and not error.retriable():
        return FAILED
    return UNKNOWN


@dataclass
class WorkloadStats:
    """What the workload did: produce attempts and their outcomes, records read, admin
    operations by kind and the errors they met."""

    attempts: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    reads: int = 0
    admin_ops: Counter[str] = field(default_factory=Counter)
    admin_errors: list[str] = field(default_factory=list)


def create_topics(cluster: FaultCluster, topics: Sequence[str], partitions: int = 3,
                  timeout: float = 60.0, config: Mapping[str, str] | None = None) -> None:
    """Create ``topics`` (RF 3, min.insync.replicas 2, and ``config``) through the brokers'
    CreateTopics and wait until every partition has a leader."""
    def create() -> None:
        admin = AdminClient({**CLIENT_LOG, "bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=partitions, replication_factor=REPLICATION_FACTOR,
                      config={"min.insync.replicas": str(MIN_INSYNC), **(config or {})})
             for t in topics],
            operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout)
    cluster.client.call(create)
    deadline = time.monotonic() + timeout
    for topic in topics:
        while True:
            try:
                states = cluster.partition_states(topic)
            except Exception:  # noqa: BLE001 - the coordinator briefly unreachable: again
                states = {}
            if len(states) == partitions and all(lead >= 0 for lead, _ in states.values()):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not every partition has a leader: {states}")
            time.sleep(0.2)


def _partitions(cluster: FaultCluster, topics: Sequence[str]) -> list[TopicPartition]:
    def read(meta: MetadataClient) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in sorted(meta.partitions_of(t))]
    return cluster.on_coordinator(read)


class Workload:
    """Producers, consumers and an admin thread against ``cluster``, recorded in ``history``.

    :meth:`start` starts them; :meth:`stop` stops them and returns the counts. The producers'
    values are ``p<i>.<session>-<n>``: ``session`` counts the producer's instances (a new one
    after a fatal error), so each instance is one idempotent producer in the history, whose
    order the checker judges on its own. ``message_timeout`` is librdkafka's
    ``message.timeout.ms``: how long a produce may wait (retrying) before it is reported
    timed out, and so recorded unknown."""

    def __init__(self, cluster: FaultCluster, history: History, topics: Sequence[str], *,
                 producers: int = 2, consumers: int = 1, rate: float = 200.0,
                 admin: bool = True, say: Callable[[str], None] = log.info,
                 max_in_flight: int = 20, message_timeout: float = 30.0,
                 admin_interval: float = 3.0, prefix: str = "wl") -> None:
        if producers < 1 or rate <= 0:
            raise ValueError("a workload needs at least one producer and a positive rate")
        self.cluster = cluster
        self.history = history
        self.topics = list(topics)
        self.producers = producers
        self.consumers = consumers
        self.rate = rate
        self.admin = admin
        self.say = say
        self.max_in_flight = max_in_flight
        self.message_timeout = message_timeout
        self.admin_interval = admin_interval
        self.prefix = prefix
        self.stats = WorkloadStats()
        self.errors: list[str] = []
        """Unexpected errors of the client threads (a thread that died, a client that could
        not be made): not faults' doing, so the runner should show them."""
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_rest = threading.Event()
        self._drain_deadline = float("inf")
        self._producer_threads: list[threading.Thread] = []
        self._other_threads: list[threading.Thread] = []
        self._partitions: list[TopicPartition] = []

    # --- life --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every client thread (once)."""
        if self._producer_threads:
            raise RuntimeError("the workload has been started already")
        self._partitions = _partitions(self.cluster, self.topics)
        if not self._partitions:
            raise ValueError(f"the topics {self.topics} have no partitions")
        for i in range(1, self.producers + 1):
            self._producer_threads.append(self._thread(f"producer-{i}", self._produce, i))
        for i in range(1, self.consumers + 1):
            self._other_threads.append(self._thread(f"consumer-{i}", self._consume, i))
        if self.admin:
            self._other_threads.append(self._thread("admin", self._administer))

    def _thread(self, name: str, body: Callable[..., None], *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                self.cluster.client.call(body, *args)
            except BaseException as exc:  # noqa: BLE001 - kept and said, never lost
                self._error(f"{name} died: {exc!r}")
        thread = threading.Thread(target=run, name=f"workload-{name}", daemon=True)
        thread.start()
        return thread

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
        self.say(f"workload: {message}")

    def stop(self, timeout: float = 60.0) -> WorkloadStats:
        """Stop producing, wait up to ``timeout`` for the outstanding deliveries (what is still
        outstanding then is recorded unknown), then stop the consumers and the admin thread."""
        deadline = time.monotonic() + timeout
        self._drain_deadline = deadline
        self._stop_producing.set()
        for thread in self._producer_threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 15.0)
            if thread.is_alive():
                self._error(f"{thread.name} did not stop, in {where_stuck(thread)}")
        self._stop_rest.set()
        for thread in self._other_threads:
            thread.join(30.0)
            if thread.is_alive():
                self._error(f"{thread.name} did not stop, in {where_stuck(thread)}")
        with self._lock:
            return WorkloadStats(attempts=self.stats.attempts, acked=self.stats.acked,
                                 failed=self.stats.failed, unknown=self.stats.unknown,
                                 reads=self.stats.reads,
                                 admin_ops=Counter(self.stats.admin_ops),
                                 admin_errors=list(self.stats.admin_errors))

    # --- producers ---------------------------------------------------------------------------

    def _record(self, op: int, outcome: str, offset: int | None, error: str) -> None:
        if outcome == ACKED:
            self.history.acked(op, offset)
        elif outcome == FAILED:
            self.history.failed(op, error)
        else:
            self.history.unknown(op, error)
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)

    def _produce(self, index: int) -> None:
        # Each producer starts at another partition, so that together they cover them evenly.
        tps = self._partitions[index - 1:] + self._partitions[:index - 1]
        interval = self.producers / self.rate
        counter = itertools.count()
        for session in itertools.count(1):
            if self._stop_producing.is_set():
                return
            name = f"p{index}.{session}"
            self._produce_session(name, tps, interval, counter)

    def _produce_session(self, name: str, tps: Sequence[TopicPartition], interval: float,
                         counter: itertools.count[int]) -> None:
        """One idempotent producer instance, until the workload stops or it fails fatally."""
        outstanding: dict[int, TopicPartition] = {}
        in_flight: Counter[TopicPartition] = Counter()
        fatal: list[str] = []

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                fatal.append(str(err))

        def report(op: int, err: KafkaError | None, msg: Any) -> None:
            tp = outstanding.pop(op, None)
            if tp is None:
                return  # recorded already (unknown, after the drain's deadline)
            in_flight[tp] -= 1
            if err is not None and err.fatal():
                fatal.append(str(err))
            # msg.offset() is None for a delivery librdkafka reports without an offset (a
            # retried batch the broker had already written: killed two producers in the long
            # runs when this was asserted)
            self._record(op, outcome_of(err), None if err else msg.offset(),
                         "" if err is None else f"{err.name()}: {err.str()}")

        producer = Producer({
            **CLIENT_LOG,
            "bootstrap.servers": self.cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": int(self.message_timeout * 1000),
            "request.timeout.ms": 10000,
            "socket.timeout.ms": 10000,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 5000,
            "error_cb": on_error,
        })
        next_at = time.monotonic()
        turn = 0
        try:
            while not self._stop_producing.is_set() and not fatal:
                producer.poll(0)
                now = time.monotonic()
                if now < next_at:
                    producer.poll(min(next_at - now, 0.05))
                    continue
                # The next partition in turn that has room: one partition stuck (no leader,
                # too few replicas) must not stop the writes to the others.
                free = [i for i in range(turn, turn + len(tps))
                        if in_flight[tps[i % len(tps)]] < self.max_in_flight]
                if not free:
                    producer.poll(0.05)
                    continue
                turn = free[0] + 1
                tp = tps[free[0] % len(tps)]
                next_at = max(next_at + interval, now - interval)  # no burst after a stall
                value = f"{name}-{next(counter)}"
                op = self.history.produce_attempt(name, tp, [value])
                with self._lock:
                    self.stats.attempts += 1
                outstanding[op] = tp
                in_flight[tp] += 1
                try:
                    producer.produce(tp.topic, value=value.encode(), partition=tp.partition,
                                     on_delivery=functools.partial(report, op))
                except BufferError as exc:
                    outstanding.pop(op)
                    in_flight[tp] -= 1
                    self._record(op, FAILED, None, f"_QUEUE_FULL: {exc}")
                except KafkaException as exc:
                    outstanding.pop(op)
                    in_flight[tp] -= 1
                    err = exc.args[0]
                    if err.fatal():
                        fatal.append(str(err))
                    self._record(op, outcome_of(err, queued=False), None,
                                 f"{err.name()}: {err.str()}")
        finally:
            self._drain(producer, outstanding, fatal)

    def _drain(self, producer: Producer, outstanding: dict[int, TopicPartition],
               fatal: list[str]) -> None:
        """Wait for the outstanding deliveries (until the stop's deadline; a few seconds
        after a fatal error), then purge the rest and record what is left unknown."""
        if fatal:
            self._error(f"fatal producer error, a new producer follows: {fatal[0]}")
            deadline = time.monotonic() + 5.0
        else:
            deadline = self._drain_deadline
        while outstanding and time.monotonic() < deadline:
            producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
        if outstanding:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.poll(0.5)
        for op in list(outstanding):
            outstanding.pop(op)
            self._record(op, UNKNOWN, None, "outstanding when the producer was closed")

    # --- consumers ---------------------------------------------------------------------------

    def _consume(self, index: int) -> None:
        reader = f"c{index}"
        positions: dict[TopicPartition, int] = {}
        seen_hw: dict[TopicPartition, int] = {}
        while not self._stop_rest.is_set():
            try:
                self._consume_session(reader, positions, seen_hw)
            except KafkaException as exc:
                self.say(f"workload: {reader}: {exc}; a new consumer follows")
                self._stop_rest.wait(1.0)

    def _consume_session(self, reader: str, positions: dict[TopicPartition, int],
                         seen_hw: dict[TopicPartition, int]) -> None:
        """One consumer instance over every partition, each from where the last one left it.

        The HW recorded with records is the first HW the client saw above them. A fetch answer
        brings records below its HW, but the client keeps only the last answer's HW, and after
        a leader change that may be the new leader's, lower until it learns the HW: records
        above the client's HW wait (in ``pending``) until its HW passes them. Records still
        waiting when the consumer closes are recorded with the leader's HW asked then: if that
        is not above them either, the checker says so."""
        consumer = Consumer({
            **CLIENT_LOG,
            "bootstrap.servers": self.cluster.bootstrap,
            "group.id": f"{self.prefix}-{reader}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 5000,
            "socket.timeout.ms": 10000,
        })
        pending: dict[TopicPartition, list[tuple[int, bytes | None]]] = {}

        def settle(tp: TopicPartition, high: int) -> None:
            hw = max(seen_hw.get(tp, WATERMARK_UNKNOWN), high)
            seen_hw[tp] = hw
            records = pending.get(tp, [])
            below = [r for r in records if r[0] < hw]
            if below:
                self.history.read(reader, tp, below[0][0], below, hw)
                with self._lock:
                    self.stats.reads += len(below)
                pending[tp] = records[len(below):]

        try:
            consumer.assign([KafkaPartition(tp.topic, tp.partition,
                                            positions.get(tp, OFFSET_BEGINNING))
                             for tp in self._partitions])
            while not self._stop_rest.is_set():
                for msg in consumer.consume(500, 0.5):
                    err = msg.error()
                    if err is not None:
                        if err.fatal():
                            raise KafkaException(err)
                        continue  # a broker down, a leader moving: the client goes on
                    tp = TopicPartition(msg.topic(), msg.partition())
                    pending.setdefault(tp, []).append((msg.offset(), msg.value()))
                    positions[tp] = msg.offset() + 1
                for tp in [tp for tp, records in pending.items() if records]:
                    _low, high = consumer.get_watermark_offsets(
                        KafkaPartition(tp.topic, tp.partition), cached=True)
                    settle(tp, high)
        finally:
            try:
                deadline = time.monotonic() + 10.0
                for tp in [tp for tp, records in pending.items() if records]:
                    settle(tp, _watermarks(consumer, tp, deadline)[1])
            except TimeoutError:
                pass
            for tp, records in pending.items():
                if records:
                    self.history.read(reader, tp, records[0][0], records,
                                      seen_hw.get(tp, WATERMARK_UNKNOWN))
            consumer.close()

    # --- admin -------------------------------------------------------------------------------

    def _administer(self) -> None:
        admin = AdminClient({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                             "socket.timeout.ms": 10000})
        ops: list[Callable[[AdminClient, int], None]] = [
            self._scratch_topic, self._preferred_election, self._reorder_replicas]
        for n in itertools.count():
            if self._stop_rest.wait(self.admin_interval):
                return
            op = ops[n % len(ops)]
            try:
                op(admin, n)
            except Exception as exc:  # noqa: BLE001 - expected under faults: counted
                with self._lock:
                    self.stats.admin_errors.append(f"{op.__name__.strip('_')}: {exc}")

    def _count(self, op: str) -> None:
        with self._lock:
            self.stats.admin_ops[op] += 1

    def _scratch_topic(self, admin: AdminClient, n: int) -> None:
        """Create a scratch topic, then delete it (nobody produces to it)."""
        name = f"{self.prefix}-scratch-{n}"
        timeout = 15.0
        admin.create_topics([NewTopic(name, num_partitions=2,
                                      replication_factor=REPLICATION_FACTOR)],
                            operation_timeout=timeout)[name].result(timeout)
        self._count("create-topic")
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)
        self._count("delete-topic")

    def _preferred_election(self, admin: AdminClient, n: int) -> None:
        """ElectLeaders (preferred) for every workload partition; a partition whose leader is
        its preferred replica already answers ELECTION_NOT_NEEDED, which is no error."""
        tps = [KafkaPartition(tp.topic, tp.partition) for tp in self._partitions]
        # No timeouts given: confluent-kafka 2.16's binding refuses both keywords; the
        # client's socket.timeout.ms bounds the request.
        answers = admin.elect_leaders(ElectionType.PREFERRED, tps).result(20)
        self._count("elect")
        refused = {f"{tp.topic}-{tp.partition}": _error(e) for tp, e in answers.items()
                   if e is not None and _error(e).code() != KafkaError.ELECTION_NOT_NEEDED}
        if refused:
            raise RuntimeError(f"preferred election refused for {refused}")

    def _reorder_replicas(self, admin: AdminClient, n: int) -> None:
        """Rotate one workload partition's replica list (the same replicas: no data moves,
        the preferred leader changes) through ``/admin/reassign_partitions``."""
        tp = self._partitions[n % len(self._partitions)]
        session = coordinator.connect(self.cluster.url(), timeout=10.0)
        try:
            tool = Admin(session)
            current = tool.metadata.assignments([tp.topic])[tp.topic].value.partitions
            replicas = list(current[tp.partition])
            tool.reassign({tp: replicas[1:] + replicas[:1]})
        finally:
            session.close()
        self._count("reassign")

    # --- the end -----------------------------------------------------------------------------

    def final_reads(self, timeout: float = 60.0) -> None:
        """Read every partition from its log start to its HW (as the leaders give them now),
        recorded as reads of ``final``. Meant after the heal, once the cluster is quiet."""
        partitions = self._partitions or _partitions(self.cluster, self.topics)
        self.cluster.client.call(self._final_reads, partitions, timeout)

    def _final_reads(self, partitions: Sequence[TopicPartition], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        consumer = Consumer({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                             "group.id": f"{self.prefix}-final", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        try:
            ends: dict[TopicPartition, tuple[int, int]] = {}
            for tp in partitions:
                ends[tp] = _watermarks(consumer, tp, deadline)
            consumer.assign([KafkaPartition(tp.topic, tp.partition, low)
                             for tp, (low, _high) in ends.items()])
            positions = {tp: low for tp, (low, _high) in ends.items()}
            while any(positions[tp] < ends[tp][1] for tp in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"final reads stopped short: at {positions}, HWs "
                                       f"{ {tp: hw for tp, (_lo, hw) in ends.items()} }")
                batches: dict[TopicPartition, list[tuple[int, bytes | None]]] = {}
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is not None:
                        continue
                    tp = TopicPartition(msg.topic(), msg.partition())
                    if msg.offset() < ends[tp][1]:
                        batches.setdefault(tp, []).append((msg.offset(), msg.value()))
                for tp, records in batches.items():
                    self.history.read("final", tp, records[0][0], records, ends[tp][1])
                    positions[tp] = records[-1][0] + 1
                    with self._lock:
                        self.stats.reads += len(records)
        finally:
            consumer.close()


def _error(answer: KafkaError | KafkaException) -> KafkaError:
    """A per-partition answer's error (the binding hands out KafkaError, its docs say
    KafkaException)."""
    return answer.args[0] if isinstance(answer, KafkaException) else answer


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """The partition's log start and HW, asked of its leader (retried until ``deadline``)."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                KafkaPartition(tp.topic, tp.partition), timeout=5.0, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no watermarks for {tp.topic}-{tp.partition}: {exc}"
                                   ) from None
            time.sleep(0.5)


def finals(cluster: FaultCluster, topics: Sequence[str], timeout: float = 120.0,
           short: list[str] | None = None, remote: Path | None = None
           ) -> list[FinalPartition]:
    """The final state of every partition of ``topics``, for the checker; stops the brokers.

    Waits (up to ``timeout``) until every partition has a leader and all its replicas in the
    ISR, then takes each partition's leader and ISR from the coordinator and its HW from the
    leader (ListOffsets), twice over, until the states did not move in between. Then it kills
    every broker (SIGKILL: the logs are written through to the files, and are opened with
    crash recovery) and reads the in-sync replicas' logs. A partition still without a leader at
    the timeout raises TimeoutError; one whose ISR is short is read as its ISR stands, and
    named in ``short`` when given (a replica that never came back into the ISR after the heal:
    a liveness finding, not a safety one). ``remote``: the filesystem remote store of a tiered
    run, whose part of each log is read with the replicas' local parts."""
    deadline = time.monotonic() + timeout

    def assignments(meta: MetadataClient) -> dict[TopicPartition, tuple[int, ...]]:
        found = meta.assignments(topics)
        return {TopicPartition(t, p): tuple(r) for t, a in found.items()
                for p, r in a.value.partitions.items()}

    def states() -> dict[TopicPartition, tuple[int, tuple[int, ...]]]:
        out: dict[TopicPartition, tuple[int, tuple[int, ...]]] = {}
        for topic in topics:
            for p, (leader, isr) in cluster.partition_states(topic).items():
                out[TopicPartition(topic, p)] = (leader, tuple(sorted(isr)))
        return out

    replicas = cluster.on_coordinator(assignments)
    while True:
        try:
            now = states()
        except Exception:  # noqa: BLE001 - the coordinator briefly unreachable: again
            now = {}
        quiet = len(now) == len(replicas) and all(
            now[tp][0] >= 0 and set(now[tp][1]) == set(r) for tp, r in replicas.items()
            if tp in now)
        if quiet or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if not quiet:
        leaderless = sorted(f"{tp.topic}-{tp.partition}" for tp, r in replicas.items()
                            if now.get(tp, (-1, ()))[0] < 0)
        if leaderless:
            raise TimeoutError(f"partitions without a leader after {timeout:.0f}s: "
                               f"{leaderless}")
        log.warning("finals: ISRs still short after %.0fs: %s", timeout, now)
        if short is not None:
            short.extend(f"{tp.topic}-{tp.partition} leader {now[tp][0]} ISR {list(now[tp][1])}"
                         f" of replicas {list(r)}" for tp, r in sorted(replicas.items())
                         if tp in now and set(now[tp][1]) != set(r))

    def high_watermarks() -> dict[TopicPartition, int]:
        consumer = Consumer({**CLIENT_LOG, "bootstrap.servers": cluster.bootstrap,
                             "group.id": "finals", "enable.auto.commit": False})
        try:
            return {tp: _watermarks(consumer, tp, max(deadline, time.monotonic() + 30))[1]
                    for tp in replicas}
        finally:
            consumer.close()

    while True:
        before = now
        hws = cluster.client.call(high_watermarks)
        now = states()
        if now == before or time.monotonic() > deadline:
            break
    for i in cluster.ids:
        cluster.kill_broker(i)
    return [final_from_log_dirs(tp, leader, hws[tp],
                                {b: cluster.broker(b).directory / "logs" for b in isr},
                                remote)
            for tp, (leader, isr) in sorted(now.items(),
                                            key=lambda item: (item[0].topic, item[0].partition))]
