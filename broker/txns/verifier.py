"""KIP-890 part 1, the partition leader's side: before a transaction's first batch reaches a
partition, ask the transaction coordinator whether the partition is in the transaction (Kafka's
``AddPartitionsToTxnManager``).

:meth:`TxnVerifier.verify` asks the coordinator of a transactional id (the leader of its
``__transaction_state`` partition) with AddPartitionsToTxn v4 or v5 (the newer both serve),
``verify_only`` set, and returns the partitions it did not verify with their errors. When this
broker is the coordinator it answers the question itself, without the network. Otherwise
each coordinator broker has one queue and at most one request in flight: what waits meanwhile
goes out as one request. Questions for one transactional id from the same producer id and
epoch wait together and go out as one entry (the union of their partitions): this broker
handles a connection's pipelined produces at once, so one producer's first batches to several
partitions are asked about side by side. Kafka, which handles one request of a connection at a
time, keeps one question per id and answers a replaced one NETWORK_EXCEPTION; here that refused
batches the client had every right to send, and their later batches came back out of order.
A question from a newer epoch replaces the waiting ones, which are answered
INVALID_PRODUCER_EPOCH; one from an older epoch is answered INVALID_PRODUCER_EPOCH at once; one
from another producer id of the same epoch replaces them, answered NETWORK_EXCEPTION (Kafka's).

The answers are Kafka's: a request-level error goes to every partition asked, except that
CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE; PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH; a broker that cannot be reached, or an answer that cannot be read, is
NETWORK_EXCEPTION; a coordinator that serves no AddPartitionsToTxn v4 cannot verify, and the
batch is let through, as Kafka lets it through. No coordinator known is COORDINATOR_NOT_AVAILABLE.
What the produce then answers for each error is :mod:`broker.apis.produce`'s.

Appends of one producer to one partition stay in order across a verification:
:meth:`TxnVerifier.turn` makes a later produce wait until the earlier one is appended or
refused (Kafka reads no further request of a connection while one is being handled; this broker
does, so it orders them here).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.metadata_cache import MetadataCache
from broker.txns.config import TRANSACTION_STATE_TOPIC
from broker.txns.peer import PeerLink
from broker.txns.stats import Timings
from coordinator.codecs import TopicPartition
from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.messages import build, request_schema
from kafkaclient.security.connector import Connector

if TYPE_CHECKING:
    from broker.txns.coordinator import TransactionCoordinator

__all__ = ["ADD_PARTITIONS_TO_TXN", "TxnVerifier"]

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
FIRST_VERIFY_VERSION = 4
LAST_VERIFY_VERSION = 5

TP = tuple[str, int]
Unverified = dict[TP, ErrorCode]
"""The partitions a verification did not verify, with why; empty when all were."""


@dataclass(slots=True, eq=False)
class _Ask:
    transactional_id: str
    producer_id: int
    epoch: int
    partitions: tuple[TP, ...]
    answer: asyncio.Future = field(repr=False)

    def tell(self, unverified: Unverified) -> None:
        if not self.answer.done():
            self.answer.set_result(unverified)

    def tell_all(self, error: ErrorCode) -> None:
        self.tell(dict.fromkeys(self.partitions, error))


class _Unsupported(Exception):
    """The coordinator serves no AddPartitionsToTxn version that can verify."""


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:
        return ErrorCode.unknown_server_error


def _as_producer_sees(error: ErrorCode) -> ErrorCode:
    return ErrorCode.invalid_producer_epoch if error is ErrorCode.producer_fenced else error


def _send(conn: KafkaConnection, asks: list[_Ask]) -> dict[str, Unverified]:
    """One AddPartitionsToTxn request verifying ``asks`` (blocking): the unverified partitions
    of each transactional id."""
    version = conn.version(ADD_PARTITIONS_TO_TXN, FIRST_VERIFY_VERSION, LAST_VERIFY_VERSION)
    if version is None:
        raise _Unsupported(f"{conn!r} serves no AddPartitionsToTxn v{FIRST_VERIFY_VERSION}")
    cls = request_schema(ADD_PARTITIONS_TO_TXN, version)
    module: Any = sys.modules[cls.__module__]
    by_id: dict[str, tuple[_Ask, dict[str, list[int]]]] = {}
    for ask in asks:  # one entry per transactional id (their producer id and epoch agree)
        _first, by_topic = by_id.setdefault(ask.transactional_id, (ask, {}))
        for topic, partition in ask.partitions:
            if partition not in (listed := by_topic.setdefault(topic, [])):
                listed.append(partition)
    transactions = [build(
        module.AddPartitionsToTxnTransaction, transactional_id=first.transactional_id,
        producer_id=first.producer_id, producer_epoch=first.epoch, verify_only=True,
        topics=tuple(build(module.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                     for t, ps in by_topic.items())) for first, by_topic in by_id.values()]
    response = conn.call(build(cls, transactions=tuple(transactions)))
    top = _code(response.error_code)
    if top is not ErrorCode.none:
        if top is ErrorCode.cluster_authorization_failed:
            top = ErrorCode.invalid_txn_state
        return {a.transactional_id: dict.fromkeys(a.partitions, top) for a in asks}
    found: dict[str, Unverified] = {}
    for result in response.results_by_transaction:
        unverified = found.setdefault(str(result.transactional_id), {})
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                error = _code(p.partition_error_code)
                if error is not ErrorCode.none:
                    unverified[(str(topic.name), int(p.partition_index))] = \
                        _as_producer_sees(error)
    return found


class _Node:
    """The questions for one coordinator broker: one request in flight, from a thread of its
    own (the connection is blocking)."""

    def __init__(self, verifier: TxnVerifier, broker_id: int) -> None:
        self.verifier = verifier
        self.broker_id = broker_id
        self.waiting: dict[str, list[_Ask]] = {}
        self.wake = asyncio.Event()
        self.link = PeerLink(verifier.broker_id, broker_id, "txn-verify",
                             timeout_ms=verifier.request_timeout_ms, connector=verifier.connector)
        self.task = asyncio.ensure_future(self._run())

    def put(self, ask: _Ask) -> None:
        queued = self.waiting.setdefault(ask.transactional_id, [])
        if queued:
            old = queued[0]
            if ask.epoch < old.epoch:
                ask.tell_all(ErrorCode.invalid_producer_epoch)
                return
            if ask.epoch > old.epoch or ask.producer_id != old.producer_id:
                error = (ErrorCode.invalid_producer_epoch if ask.epoch > old.epoch
                         else ErrorCode.network_exception)
                for replaced in queued:
                    replaced.tell_all(error)
                queued.clear()
        queued.append(ask)
        self.wake.set()

    def close(self) -> None:
        self.task.cancel()
        for queued in self.waiting.values():
            for ask in queued:
                ask.tell_all(ErrorCode.network_exception)
        self.waiting.clear()
        self.link.close()

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            asks = [ask for queued in self.waiting.values() for ask in queued]
            self.waiting = {}
            if not asks:
                continue
            address = self.verifier.address(self.broker_id)
            answers: dict[str, Unverified] | None = None
            if address is not None:
                try:
                    answers = await self.link.call(address, _send, asks)
                except _Unsupported as exc:
                    log.warning("%s: transactional produces are appended unverified", exc)
                    answers = {}
                    for ask in asks:
                        answers[ask.transactional_id] = {}
                except (BrokerUnreachable, OSError) as exc:
                    log.info("verifying transactions with broker %d failed: %s",
                             self.broker_id, exc)
                except Exception as exc:  # noqa: BLE001 - an answer kio cannot read
                    log.warning("verifying transactions with broker %d failed: %s: %s",
                                self.broker_id, type(exc).__name__, exc)
            for ask in asks:
                found = None if answers is None else answers.get(ask.transactional_id)
                if found is None:
                    ask.tell_all(ErrorCode.network_exception)
                else:
                    ask.tell({tp: e for tp, e in found.items() if tp in ask.partitions})


class TxnVerifier:
    """Broker ``broker_id``'s questions to transaction coordinators (on the loop)."""

    def __init__(self, broker_id: int, coordinator: TransactionCoordinator,
                 metadata: MetadataCache, address: Callable[[int], tuple[str, int] | None], *,
                 connector: Connector | None = None, request_timeout_ms: int = 30_000) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.metadata = metadata
        self.address = address
        self.connector = connector
        self.request_timeout_ms = request_timeout_ms
        self._nodes: dict[int, _Node] = {}
        self._turns: dict[tuple[TP, int], asyncio.Future] = {}
        self.times = Timings()
        """Verifications asked of a coordinator and how long each took (Kafka's
        VerificationTimeMs): not those refused at once for want of a coordinator."""
        self.failures = 0
        """Partitions a coordinator's answer (or its absence) left unverified (Kafka's
        VerificationFailureRate)."""

    @property
    def enabled(self) -> bool:
        """``transaction.partition.verification.enable``."""
        return self.coordinator.config.partition_verification_enable

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()
        self._nodes.clear()

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partitions: Iterable[TP]) -> Unverified:
        """Ask ``transactional_id``'s coordinator about ``partitions``."""
        wanted = tuple(partitions)
        manager = self.coordinator.manager
        p = manager.partition_of(transactional_id)
        state = None if p is None else self.metadata.snapshot.partition(
            TopicPartition(TRANSACTION_STATE_TOPIC, p))
        if state is None or state.leader < 0:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        if state.leader == self.broker_id:
            started = time.monotonic()
            errors = self.coordinator.verify_partitions(transactional_id, producer_id, epoch,
                                                        wanted)
            return self._measured(started, {tp: _as_producer_sees(e) for tp, e in errors.items()
                                            if e is not ErrorCode.none})
        if self.address(state.leader) is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        started = time.monotonic()
        node = self._nodes.get(state.leader)
        if node is None:
            node = self._nodes[state.leader] = _Node(self, state.leader)
        ask = _Ask(transactional_id, producer_id, epoch, wanted,
                   asyncio.get_running_loop().create_future())
        node.put(ask)
        result: Unverified = await ask.answer
        return self._measured(started, result)

    def _measured(self, started: float, unverified: Unverified) -> Unverified:
        self.times.observe((time.monotonic() - started) * 1000)
        self.failures += len(unverified)
        return unverified

    # -- one producer's appends to one partition, in order -------------------------------------

    def busy(self, tp: TP, producer_id: int) -> bool:
        """Whether a produce of ``producer_id`` to ``tp`` is being verified."""
        return (tp, producer_id) in self._turns

    def turn(self, keys: Iterable[tuple[TP, int]]) -> tuple[list[asyncio.Future], Callable[[], None]]:
        """Take the turn of (partition, producer id) ``keys``: the futures of the produces
        before (await them first) and the call that ends this one's turn."""
        loop = asyncio.get_running_loop()
        mine: asyncio.Future = loop.create_future()
        keys = list(keys)
        before = [f for k in keys if (f := self._turns.get(k)) is not None]
        for key in keys:
            self._turns[key] = mine

        def done() -> None:
            for key in keys:
                if self._turns.get(key) is mine:
                    del self._turns[key]
            if not mine.done():
                mine.set_result(None)
        return before, done
