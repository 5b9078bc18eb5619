"""The fault harness's transactional workload, as Jepsen's Kafka workloads run transactions:
librdkafka's transactional producers and read_committed consumers, every transaction and every
read recorded in the history for :mod:`tests.faults.txn_checker`.

Two topics of the cluster under test:

- ``ring``: **writers** begin a transaction, send one to three new values to *one* partition,
  and commit (or, one time in five, abort); **consume-transform-produce steps** (a consumer
  group, read_committed, with a transactional producer each) read a batch of the ring, and in
  one transaction send each value read, marked with one more hop (``'`` and the step's
  attempt, so that a value processed again after an abort differs), back to the ring (to
  the step's own partition; a value that has made :data:`HOPS` hops is consumed without a
  result) and commit the batch's offsets with the group's metadata (KIP-447). The ring's
  values therefore flow from transaction to transaction through reads and writes both ways,
  which is what a dependency cycle needs to be possible at all: the checker looks for them.
- ``spread``: writers' transactions over two or three partitions, for torn transactions.

A **reader** (``rc1``) reads both topics read_committed from the beginning throughout.

Outcomes are recorded conservatively: ``committed`` when commit_transaction returned,
``aborted`` when abort_transaction returned or no commit was ever asked (a transaction whose
end was never asked commits never), ``unknown`` when a commit was asked and no answer said how
it ended. A producer that fails fatally (fenced, its epoch exhausted) is replaced by a new one
with the same transactional id, which fences the old one.

A **watchdog** gives up a session (a producer's life, and a step's consumer's) whose
transactional call has run :data:`STALL_GRACE` seconds past the timeout it was given: such a
call is a client bug whatever the brokers do (librdkafka's ``send_offsets_to_transaction``
ignores its timeout, issue #5456, and waits for ever on a coordinator dropped from the
metadata, #5511). The transaction it was ending is recorded ``aborted`` when no commit was
asked (only an EndTxn can commit it, and the next producer's InitProducerId aborts it), else
``unknown``; its consumer is closed, and a new session starts with the same transactional id,
fencing the stuck producer. The stuck thread, should its call ever return, records nothing and
ends. Each session given up is counted in :attr:`TxnStats.abandoned` and said in the log with
the call it was stuck in: a client stall, not a violation, and not hidden.

At the end (:meth:`TxnWorkload.finish`) the steps run until the group has consumed every
committed value, then every partition's last stable offset is waited for to reach its high
watermark (each open transaction ended: the brokers abort a producer's after its
``transaction.timeout.ms``), and both topics are read read_committed to their ends as the
reader ``final-committed``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition

from coordinator.codecs import TopicPartition
from tests.faults.cluster import FaultCluster
from tests.faults.history import ABORTED, COMMITTED, UNKNOWN, History
from tests.faults.txn_checker import FINAL_READER
from tests.faults.workload import CLIENT_LOG, EOS_LOG, create_topics, where_stuck

__all__ = ["HOPS", "RING", "SPREAD", "TXN_TOPICS", "TxnStats", "TxnWorkload"]

log = logging.getLogger(__name__)

RING = "ring"
SPREAD = "spread"
TXN_TOPICS = (RING, SPREAD)
PARTITIONS = 3
HOPS = 3
GROUP = "ctp"
TXN_TIMEOUT_MS = 10_000
"""The producers' ``transaction.timeout.ms``: an abandoned transaction is aborted after it."""
CALL_TIMEOUT = 30.0
"""The timeout each blocking transactional call is given."""
COMMIT_RETRY = 60.0
"""How long a commit is asked again while librdkafka says it may be retried."""
STALL_GRACE = 15.0
"""How long past its own timeout a transactional call may run before the watchdog gives its
session up."""


@dataclass
class TxnStats:
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    reads: int = 0
    abandoned: int = 0
    """Sessions the watchdog gave up: a transactional call that ran past its timeout."""


class _Fatal(Exception):
    """The producer cannot go on: a new one takes its transactional id."""


class _Abandoned(Exception):
    """The watchdog gave this session up: its thread ends, recording nothing more."""


@dataclass(eq=False)
class _Session:
    """One producer's life (and a step's consumer's), as the watchdog sees it: the call it is
    in, until when that call may run, and the transaction being ended. ``lock`` makes the
    watchdog's giving up and the session's own recording of an outcome exclusive: each
    transaction's outcome is recorded once, by one of them."""

    name: str
    kind: str
    index: int
    thread: threading.Thread = field(default_factory=threading.current_thread)
    consumer: Consumer | None = None
    op: int | None = None
    """The transaction being ended, until its outcome is recorded."""
    asked_commit: bool = False
    call: str | None = None
    deadline: float = 0.0
    abandoned: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def waiting(self, call: str, timeout: float) -> Iterator[None]:
        """Around a blocking call given ``timeout`` seconds; :class:`_Abandoned` before it
        when the session has been given up."""
        with self.lock:
            if self.abandoned:
                raise _Abandoned(self.name)
            self.call, self.deadline = call, time.monotonic() + timeout + STALL_GRACE
        try:
            yield
        finally:
            with self.lock:
                self.call = None

    def overdue(self, now: float) -> str | None:
        """The call this session has been in too long, if it has; called under ``lock``."""
        return self.call if self.call is not None and now > self.deadline else None


class TxnWorkload:
    """Writers, consume-transform-produce steps and a reader on ``cluster``; see the module."""

    def __init__(self, cluster: FaultCluster, history: History, *, writers: int = 2,
                 steps: int = 2, rate: float = 20.0, seed: int = 0,
                 say: Callable[[str], None] = log.info) -> None:
        self.cluster = cluster
        self.history = history
        self.writers = writers
        self.steps = steps
        self.rate = rate
        self.say = say
        self.rng = random.Random(seed)
        self.stats = TxnStats()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop_writing = threading.Event()
        self._stop_steps = threading.Event()
        self._stop_reading = threading.Event()
        self._threads: dict[str, list[threading.Thread]] = {"write": [], "step": [], "read": []}
        self._sessions: dict[str, _Session] = {}
        """The live sessions, by name, for the watchdog."""
        self._session_numbers: dict[str, itertools.count[int]] = {}
        self._stop_watching = threading.Event()
        self._consumed_to: dict[TopicPartition, int] = {}
        self._attempts: dict[int, int] = {}
        """Each step's transactions, counted across its producers (a hop names the count)."""

    # --- life ----------------------------------------------------------------------------------

    def create_topics(self) -> None:
        create_topics(self.cluster, (RING, SPREAD), PARTITIONS)

    def start(self) -> None:
        for i in range(1, self.writers + 1):
            self._start("write", f"w{i}", self._write, i)
        for i in range(1, self.steps + 1):
            self._start("step", f"ctp{i}", self._step, i)
        self._start("read", "rc1", self._read, "rc1")
        watchdog = threading.Thread(target=self._watch, name="txn-watchdog", daemon=True)
        watchdog.start()

    def _start(self, kind: str, name: str, body: Callable[..., None], *args: object) -> None:
        def run() -> None:
            try:
                self.cluster.client.call(body, *args)
            except BaseException as exc:  # noqa: BLE001 - kept and said, never lost
                self._error(f"{name} died: {exc!r}")
        thread = threading.Thread(target=run, name=f"txn-{name}", daemon=True)
        with self._lock:
            self._threads[kind].append(thread)
        thread.start()

    def _session(self, kind: str, prefix: str, index: int) -> _Session:
        """A new session of writer or step ``index``, named on from its last one's number."""
        with self._lock:
            numbers = self._session_numbers.setdefault(prefix, itertools.count(1))
            session = _Session(f"{prefix}.{next(numbers)}", kind, index)
            self._sessions[session.name] = session
        return session

    def _end_session(self, session: _Session) -> None:
        with self._lock:
            self._sessions.pop(session.name, None)

    # --- the watchdog --------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop_watching.wait(1.0):
            with self._lock:
                sessions = list(self._sessions.values())
            for session in sessions:
                self._give_up_if_stuck(session)

    def _give_up_if_stuck(self, session: _Session) -> None:
        """Give ``session`` up when its call has run past its deadline: record the outcome of
        the transaction it was ending, close its consumer and start its successor."""
        with session.lock:
            call = session.overdue(time.monotonic())
            if call is None or session.abandoned:
                return
            session.abandoned = True
            where = where_stuck(session.thread)
            if session.op is not None:
                outcome = UNKNOWN if session.asked_commit else ABORTED
                self.history.txn_outcome(
                    session.op, session.name, outcome,
                    f"abandoned: {call} ran {STALL_GRACE:.0f} s past its timeout")
                self._count(outcome)
                session.op = None
        with self._lock:
            self.stats.abandoned += 1
            self._sessions.pop(session.name, None)
            outer = next((t for t in self._threads[session.kind]
                          if session.thread.name.startswith(f"{t.name}/")), None)
            if outer is not None:  # no longer waited for at the end
                self._threads[session.kind].remove(outer)
        self.say(f"txn workload: {session.name} given up, stuck {STALL_GRACE:.0f} s past "
                 f"its timeout in {where}; a new session follows")
        if session.consumer is not None:
            consumer = session.consumer
            threading.Thread(target=self.cluster.client.call, args=(consumer.close,),
                             name=f"txn-close-{session.name}", daemon=True).start()
        prefix = "w" if session.kind == "write" else "ctp"
        body = self._write if session.kind == "write" else self._step
        self._start(session.kind, f"{prefix}{session.index}+{self.stats.abandoned}", body,
                    session.index)

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
        self.say(f"txn workload: {message}")

    def _join(self, kind: str, timeout: float) -> None:
        """Wait for ``kind``'s threads, a successor the watchdog starts meanwhile too (one it
        gave up is no longer among them: it was counted then)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                running = [t for t in self._threads[kind] if t.is_alive()]
            if not running:
                return
            if time.monotonic() >= deadline:
                for thread in running:
                    self._error(f"{thread.name} did not stop, in {where_stuck(thread)}")
                return
            running[0].join(min(1.0, deadline - time.monotonic()))

    def _count(self, outcome: str) -> None:
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)

    def finish(self, timeout: float = 120.0) -> None:
        """Stop writing, let the steps consume everything committed, stop them and the reader,
        wait for every transaction to end and read both topics to their ends."""
        self._stop_writing.set()
        self._join("write", timeout)
        deadline = time.monotonic() + timeout
        self.cluster.client.call(self._wait_consumed, deadline)
        self._stop_steps.set()
        self._join("step", 60.0)
        self._stop_watching.set()
        self._stop_reading.set()
        self._join("read", 30.0)
        self.cluster.client.call(self._final_read, time.monotonic() + timeout)

    # --- the producers' common part ------------------------------------------------------------

    def _producer(self, session: _Session, transactional_id: str) -> Producer:
        producer = Producer({
            **EOS_LOG,
            "bootstrap.servers": self.cluster.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "message.timeout.ms": TXN_TIMEOUT_MS,
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 5000,
            "linger.ms": 5,
        })
        while True:
            try:
                with session.waiting("init_transactions", CALL_TIMEOUT):
                    producer.init_transactions(CALL_TIMEOUT)
                return producer
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal() or self._stop_steps.is_set():
                    raise _Fatal(str(err)) from None
                time.sleep(0.5)  # a coordinator still loading or moving: again

    def _end(self, session: _Session, producer: Producer, op: int, commit: bool,
             offsets: Callable[[], None] | None = None) -> str:
        """End transaction ``op`` (sending the step's ``offsets`` first) and record how it
        ended; :class:`_Fatal` when the producer must be replaced, :class:`_Abandoned` when
        the watchdog gave the session up meanwhile (and recorded the outcome itself)."""
        with session.lock:
            session.op, session.asked_commit = op, False
        try:
            if commit:
                if offsets is not None:
                    with session.waiting("send_offsets_to_transaction", CALL_TIMEOUT):
                        offsets()
                with session.waiting("commit_transaction", COMMIT_RETRY + CALL_TIMEOUT):
                    session.asked_commit = True
                    self._commit(producer)
                outcome = COMMITTED
            else:
                with session.waiting("abort_transaction", CALL_TIMEOUT):
                    producer.abort_transaction(CALL_TIMEOUT)
                outcome = ABORTED
        except KafkaException as exc:
            err = exc.args[0]
            unsure = UNKNOWN if session.asked_commit else ABORTED
            if err.fatal():
                self._record(session, unsure, err)
                raise _Fatal(str(err)) from None
            if err.txn_requires_abort():
                try:
                    with session.waiting("abort_transaction", CALL_TIMEOUT):
                        producer.abort_transaction(CALL_TIMEOUT)
                except KafkaException as again:
                    self._record(session, unsure, again.args[0])
                    raise _Fatal(str(again.args[0])) from None
                self._record(session, ABORTED, err)
                return ABORTED
            self._record(session, unsure, err)
            raise _Fatal(str(err)) from None
        self._record(session, outcome, None)
        return outcome

    def _commit(self, producer: Producer) -> None:
        """commit_transaction, asked again while librdkafka says the commit may be retried."""
        deadline = time.monotonic() + COMMIT_RETRY
        while True:
            try:
                producer.commit_transaction(CALL_TIMEOUT)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise

    def _record(self, session: _Session, outcome: str, err: KafkaError | None) -> None:
        """Record the outcome of the transaction ``session`` ends, unless the watchdog gave
        the session up and recorded it already (:class:`_Abandoned`)."""
        with session.lock:
            if session.abandoned or session.op is None:
                raise _Abandoned(session.name)
            self.history.txn_outcome(session.op, session.name, outcome,
                                     None if err is None else f"{err.name()}: {err.str()}")
            self._count(outcome)
            session.op = None

    # --- writers -------------------------------------------------------------------------------

    def _write(self, index: int) -> None:
        rng = random.Random(self.rng.random())
        counter = itertools.count()
        while not self._stop_writing.is_set():
            session = self._session("write", f"w{index}", index)
            try:
                producer = self._producer(session, f"writer-{index}")
            except _Fatal as exc:
                self._end_session(session)
                self._error(f"{session.name}: no producer: {exc}")
                time.sleep(1.0)
                continue
            except _Abandoned:
                return
            try:
                while not self._stop_writing.wait(self.writers / self.rate):
                    self._one_write(session, producer, rng, counter)
            except (_Fatal, KafkaException) as exc:
                self.say(f"txn workload: {session.name}: {exc}; a new producer follows")
            except _Abandoned:
                return  # the watchdog started this writer's next session
            finally:
                _close(producer)
                self._end_session(session)

    def _one_write(self, session: _Session, producer: Producer, rng: random.Random,
                   counter: itertools.count[int]) -> None:
        n = next(counter)
        name = session.name
        producer.poll(0)  # hands its log lines over now, with the times they happened at
        if rng.random() < 0.5:
            topic, partitions = RING, [rng.randrange(PARTITIONS)]
        else:
            topic, partitions = SPREAD, rng.sample(range(PARTITIONS), rng.randint(2, PARTITIONS))
        sends = [(topic, p, f"{name}-{n}-{k}") for k, p in enumerate(
            partitions * rng.randint(1, 2) if topic == SPREAD else partitions * rng.randint(1, 3))]
        try:
            producer.begin_transaction()
            for t, p, value in sends:
                producer.produce(t, value=value.encode(), partition=p)
        except KafkaException as exc:
            raise _Fatal(str(exc.args[0])) from None
        except BufferError:
            producer.flush(5)
        op = self.history.txn_attempt(name, sends)
        self._end(session, producer, op, commit=rng.random() >= 0.2)

    # --- consume-transform-produce ---------------------------------------------------------------

    def _step(self, index: int) -> None:
        while not self._stop_steps.is_set():
            session = self._session("step", f"ctp{index}", index)
            consumer = session.consumer = Consumer({
                **CLIENT_LOG,
                "bootstrap.servers": self.cluster.bootstrap,
                "group.id": GROUP,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "socket.timeout.ms": 5000,
            })
            try:
                producer = self._producer(session, f"step-{index}")
            except _Fatal as exc:
                consumer.close()
                self._end_session(session)
                self._error(f"{session.name}: no producer: {exc}")
                time.sleep(1.0)
                continue
            except _Abandoned:
                return  # its consumer is the watchdog's to close
            try:
                consumer.subscribe([RING])
                while not self._stop_steps.is_set():
                    self._one_step(session, consumer, producer)
            except (_Fatal, KafkaException) as exc:
                self.say(f"txn workload: {session.name}: {exc}; a new producer follows")
            except _Abandoned:
                return  # the watchdog closed the consumer and started the next session
            finally:
                _close(producer)
                with session.lock:
                    given_up = session.abandoned
                if not given_up:
                    consumer.close()
                self._end_session(session)

    def _one_step(self, session: _Session, consumer: Consumer, producer: Producer) -> None:
        index, name = session.index, session.name
        producer.poll(0)  # hands its log lines over now, with the times they happened at
        messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
        if not messages:
            return
        inputs = [m.value().decode() for m in messages if m.value() is not None]
        out = (index - 1) % PARTITIONS
        # the hop names this attempt: an input processed again after an abort gives new
        # values, so each value has one writer and an aborted one is never mistaken for it
        with self._lock:
            attempt = self._attempts[index] = self._attempts.get(index, 0) + 1
        sends = [(RING, out, f"{v}'{index}.{attempt}") for v in inputs if v.count("'") < HOPS]
        try:
            producer.begin_transaction()
            for t, p, value in sends:
                producer.produce(t, value=value.encode(), partition=p)
        except KafkaException as exc:
            raise _Fatal(str(exc.args[0])) from None
        op = self.history.txn_attempt(name, sends, inputs)
        positions = {}
        for m in messages:
            positions[(m.topic(), m.partition())] = m.offset() + 1

        def offsets() -> None:
            producer.send_offsets_to_transaction(
                [KafkaPartition(t, p, o) for (t, p), o in positions.items()],
                consumer.consumer_group_metadata(), CALL_TIMEOUT)

        outcome = self._end(session, producer, op, commit=True, offsets=offsets)
        if outcome == COMMITTED:
            with self._lock:
                for (t, p), o in positions.items():
                    tp = TopicPartition(t, p)
                    self._consumed_to[tp] = max(self._consumed_to.get(tp, 0), o)
        else:  # read the batch again from the group's committed offsets
            committed = consumer.committed([KafkaPartition(t, p) for t, p in positions],
                                           CALL_TIMEOUT)
            for kp in committed:
                consumer.seek(KafkaPartition(kp.topic, kp.partition,
                                             kp.offset if kp.offset >= 0 else OFFSET_BEGINNING))

    def _wait_consumed(self, deadline: float) -> None:
        """Until the group's committed offset on every ring partition is past the partition's
        last committed record, and the last stable offsets stood still meanwhile: the steps
        consumed everything committed. (The committed offset is compared with the last
        record, not with the last stable offset: a marker after the last record takes an
        offset no consumer is given.)"""
        ends_reader = Consumer({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                                "group.id": f"{GROUP}-ends",
                                "isolation.level": "read_committed",
                                "enable.auto.commit": False, "enable.partition.eof": True})
        group = Consumer({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                          "group.id": GROUP, "isolation.level": "read_committed",
                          "enable.auto.commit": False})
        tps = [KafkaPartition(RING, p) for p in range(PARTITIONS)]
        last: dict[int, int] = {}
        committed: dict[int, int] = {}
        at_end: set[tuple[str | None, int | None]] = set()
        try:
            ends_reader.assign([KafkaPartition(RING, p, OFFSET_BEGINNING)
                                for p in range(PARTITIONS)])
            while time.monotonic() < deadline:
                try:
                    ends = [ends_reader.get_watermark_offsets(tp, timeout=5)[1] for tp in tps]

                    def note(batch: list[Message]) -> None:
                        for m in batch:
                            partition, offset = m.partition(), m.offset()
                            if partition is not None and offset is not None:
                                last[partition] = max(last.get(partition, -1), offset)

                    # read the ring to its last stable offsets, noting each last record
                    _read_to_ends(ends_reader, PARTITIONS, deadline, note, at_end)
                    committed = {tp.partition: tp.offset for tp in group.committed(tps, 10)}
                    still = [ends_reader.get_watermark_offsets(tp, timeout=5)[1] for tp in tps]
                except KafkaException:
                    time.sleep(0.5)
                    continue
                # a partition that never had a record has nothing to catch up with
                if still == ends and all(p not in last or committed.get(p, -1) > last[p]
                                         for p in range(PARTITIONS)):
                    return
                time.sleep(0.5)
            self._error(f"the consume-transform-produce steps did not catch up: committed "
                        f"offsets {committed}, last records {last}")
        finally:
            ends_reader.close()
            group.close()

    # --- readers -------------------------------------------------------------------------------

    def _read(self, reader: str) -> None:
        consumer = Consumer({
            **CLIENT_LOG,
            "bootstrap.servers": self.cluster.bootstrap,
            "group.id": f"txn-{reader}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "socket.timeout.ms": 5000,
        })
        try:
            consumer.assign([KafkaPartition(t, p, OFFSET_BEGINNING)
                             for t in (RING, SPREAD) for p in range(PARTITIONS)])
            while not self._stop_reading.is_set():
                self._record_reads(reader, consumer.consume(500, 0.5))
        finally:
            consumer.close()

    def _record_reads(self, reader: str, messages: Sequence[Message]) -> int:
        batches: dict[TopicPartition, list[tuple[int, bytes | None]]] = {}
        for m in messages:
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is not None or topic is None or partition is None or offset is None:
                continue
            batches.setdefault(TopicPartition(topic, partition), []).append((offset, m.value()))
        for tp, records in batches.items():
            self.history.read(reader, tp, records[0][0], records, records[-1][0] + 1)
        with self._lock:
            self.stats.reads += sum(len(r) for r in batches.values())
        return sum(len(r) for r in batches.values())

    def _final_read(self, deadline: float) -> None:
        """Wait until every partition's last stable offset is its high watermark, then read
        both topics read_committed to their ends as the reader ``final-committed``."""
        committed = Consumer({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                              "group.id": "txn-final", "isolation.level": "read_committed",
                              "enable.auto.commit": False, "enable.partition.eof": True})
        plain = Consumer({**CLIENT_LOG, "bootstrap.servers": self.cluster.bootstrap,
                          "group.id": "txn-final-hw", "enable.auto.commit": False,
                          # librdkafka's default is read_committed: its "high watermark"
                          # would be the LSO, and an open transaction would pass unseen
                          "isolation.level": "read_uncommitted"})
        tps = [KafkaPartition(t, p) for t in (RING, SPREAD) for p in range(PARTITIONS)]
        failed: KafkaException | None = None
        try:
            while True:
                try:
                    lso = [committed.get_watermark_offsets(tp, timeout=5)[1] for tp in tps]
                    hw = [plain.get_watermark_offsets(tp, timeout=5)[1] for tp in tps]
                    failed = None
                except KafkaException as exc:
                    lso, hw, failed = [0], [1], exc
                if lso == hw:
                    break
                if time.monotonic() > deadline:
                    if failed is not None:  # the offsets could not be asked for at all
                        raise TimeoutError(f"the final offsets could not be read: {failed}")
                    raise TimeoutError(f"open transactions at the end: last stable offsets "
                                       f"{lso}, high watermarks {hw}")
                time.sleep(0.5)
            committed.assign([KafkaPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                              for tp in tps])
            if not _read_to_ends(committed, len(tps), deadline,
                                 lambda batch: self._record_reads(FINAL_READER, batch)):
                positions = committed.position(tps)
                raise TimeoutError(f"the final read stopped short: at "
                                   f"{[tp.offset for tp in positions]} of {hw}")
        finally:
            committed.close()
            plain.close()


def _read_to_ends(consumer: Consumer, partitions: int, deadline: float,
                  take: Callable[[list[Message]], object],
                  at_end: set[tuple[str | None, int | None]] | None = None) -> bool:
    """Consume until each of the ``partitions`` assigned has said it is at its end since its
    last message (``enable.partition.eof``; read_committed, the end is the last stable
    offset), giving ``take`` the messages; False at ``deadline``. An end, not a position: a
    partition whose records were all aborted gives a read_committed consumer no message, and
    so no position, however far it read. ``at_end`` carries what was at its end from one call
    to the next with the same consumer (a partition says so once until new messages come)."""
    at_end = set() if at_end is None else at_end
    while len(at_end) < partitions:
        messages = []
        for m in consumer.consume(500, 1.0):
            error, key = m.error(), (m.topic(), m.partition())
            if error is None:
                at_end.discard(key)
                messages.append(m)
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(key)
        take(messages)
        if len(at_end) < partitions and time.monotonic() > deadline:
            return False
    return True


def _close(producer: Producer) -> None:
    """Let go of a producer, whatever state it is in (a fatal one refuses even a flush)."""
    try:
        producer.flush(1)
    except KafkaException:
        pass
