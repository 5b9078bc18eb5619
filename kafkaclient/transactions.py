"""Transactions administered over Kafka's protocol: what ``kafka-transactions`` asks of a cluster
(KIP-664), for any cluster that speaks it (Apache Kafka 3.x and 4.x, partctl's brokers).

:class:`TransactionAdmin` is an :class:`~kafkaclient.admin.AdminClient` (the same bootstrap,
security and routing) with the calls Kafka's Admin client makes for the tool:

- ListTransactions to every broker (each lists the transactional ids it coordinates), with
  Kafka's filters: states, producer ids, and (v1, Kafka 3.8+) a minimum duration;
- FindCoordinator for the transactional id (key type 1), then DescribeTransactions to it;
  COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE are asked again
  within the call's timeout, as Kafka's client does;
- DescribeProducers to each partition's leader (or to the broker named);
- an abort: WriteTxnMarkers carrying an abort marker for one partition, to its leader, as
  Kafka's ``Admin.abortTransaction`` sends it;
- the search for hanging transactions: the open transactions of the partitions asked about
  that are older than the longest transaction timeout, whose producer the coordinators no
  longer hold in a transaction that names the partition.

Answers are checked before use (:mod:`kafkaclient.admin_checks`): an error is one
:class:`~kafkaclient.admin_types.AdminError` line naming what failed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.static.primitive import i8, i16, i32, i64

from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient, _failure
from kafkaclient.admin_checks import error_name
from kafkaclient.admin_types import AdminError
from kafkaclient.messages import build

__all__ = [
    "HangingTransaction",
    "ProducerState",
    "TransactionAdmin",
    "TransactionDescription",
    "TransactionListing",
]

FIND_COORDINATOR = 10
WRITE_TXN_MARKERS = 27
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
TRANSACTION_KEY = 1
BATCH = 500
"""Partitions per DescribeProducers request, and topics per Metadata request, in a search."""
_RETRIABLE = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
                        "COORDINATOR_NOT_AVAILABLE"})
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "PrepareEpochFence")
"""The transaction states Kafka names in ListTransactions and DescribeTransactions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None
    """When the ongoing transaction started; None when there is none."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int | None
    """The first offset of the producer's open transaction in the partition; None: none open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HangingTransaction:
    tp: TopicPartition
    producer: ProducerState


def _ms(value: Any) -> int:
    """A kio duration or timestamp field as milliseconds."""
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(value)


class TransactionAdmin(AdminClient):
    """The transaction calls of Kafka's Admin API; see the module's docstring."""

    # -- ListTransactions ----------------------------------------------------------------------

    def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int | None = None) -> list[TransactionListing]:
        """Every transactional id every broker coordinates, filtered as asked. A duration
        filter needs ListTransactions v1 (Kafka 3.8 or later) on every broker."""
        deadline = self._pool.deadline()
        wanted_states = tuple(states)
        wanted_ids = tuple(i64(p) for p in producer_ids)
        low = 1 if min_duration_ms is not None else 0

        def make(m: ModuleType, version: int, _left: float) -> Any:
            fields: dict[str, Any] = {"state_filters": wanted_states,
                                      "producer_id_filters": wanted_ids}
            if version >= 1:
                fields["duration_filter"] = i64(-1 if min_duration_ms is None
                                                else min_duration_ms)
            return build(m.ListTransactionsRequest, **fields)

        self._metadata((), deadline)
        found: list[TransactionListing] = []
        for broker_id in sorted(self._nodes):
            _version, response = self._at(broker_id, LIST_TRANSACTIONS, low, 1, make, deadline)
            code = error_name(response.error_code)
            if code is not None:
                raise _failure(LIST_TRANSACTIONS, code)
            unknown = tuple(response.unknown_state_filters)
            if unknown:
                raise AdminError(f"broker {broker_id} does not know the transaction state(s) "
                                 f"{', '.join(unknown)} (states: {', '.join(STATES)})")
            found.extend(TransactionListing(transactional_id=str(s.transactional_id),
                                            coordinator=broker_id,
                                            producer_id=int(s.producer_id),
                                            state=str(s.transaction_state))
                         for s in response.transaction_states)
        return found

    # -- DescribeTransactions --------------------------------------------------------------------

    def find_coordinator(self, transactional_id: str, deadline: float | None = None) -> int:
        """The broker that coordinates ``transactional_id`` (FindCoordinator, key type 1)."""
        deadline = self._pool.deadline() if deadline is None else deadline

        def make(m: ModuleType, version: int, _left: float) -> Any:
            if version >= 4:
                return build(m.FindCoordinatorRequest, key_type=i8(TRANSACTION_KEY),
                             coordinator_keys=(transactional_id,))
            return build(m.FindCoordinatorRequest, key=transactional_id,
                         key_type=i8(TRANSACTION_KEY))

        attempt = 0
        while True:
            _address, version, response = self._any(FIND_COORDINATOR, 1, 5, make, deadline)
            if version >= 4:
                if len(response.coordinators) != 1:
                    raise AdminError(f"FindCoordinator answered {len(response.coordinators)} "
                                     f"coordinators for one transactional id")
                answer = response.coordinators[0]
            else:
                answer = response
            code = error_name(answer.error_code)
            if code is None:
                return int(answer.node_id)
            if code not in _RETRIABLE:
                raise _failure(FIND_COORDINATOR, code, answer.error_message)
            attempt += 1
            self._retry_pause(attempt, deadline, code, f"the coordinator of transactional id "
                                                       f"{transactional_id!r}")

    def _retry_pause(self, attempt: int, deadline: float, code: str, what: str) -> None:
        """Wait before asking again after ``code``; AdminError once no time is left."""
        if self._pool.remaining(deadline) <= 0.05:
            raise AdminError(f"{what}: still {code} after {self._pool.timeout:g}s", code=code)
        self._pause(attempt, deadline)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The state of ``transactional_id`` at its coordinator. An id no coordinator knows is
        AdminError TRANSACTIONAL_ID_NOT_FOUND."""
        deadline = self._pool.deadline()

        def make(m: ModuleType, version: int, _left: float) -> Any:
            return build(m.DescribeTransactionsRequest, transactional_ids=(transactional_id,))

        attempt = 0
        while True:
            coordinator = self.find_coordinator(transactional_id, deadline)
            try:
                _version, response = self._at(coordinator, DESCRIBE_TRANSACTIONS, 0, 0, make,
                                              deadline)
            except AdminError:
                if self._pool.remaining(deadline) <= 0:
                    raise
                attempt += 1
                self._pause(attempt, deadline)
                self._metadata((), deadline)
                continue
            states = [s for s in response.transaction_states
                      if str(s.transactional_id) == transactional_id]
            if len(states) != 1:
                raise AdminError(f"broker {coordinator} answered DescribeTransactions for "
                                 f"{transactional_id!r} with {len(states)} states")
            state = states[0]
            code = error_name(state.error_code)
            if code is None:
                break
            if code not in _RETRIABLE:
                raise _failure(DESCRIBE_TRANSACTIONS, code)
            attempt += 1
            self._retry_pause(attempt, deadline, code, f"transactional id {transactional_id!r}")
        start = _ms(state.transaction_start_time)
        partitions = tuple(sorted(TopicPartition(str(t.topic), int(p))
                                  for t in state.topics for p in t.partitions))
        return TransactionDescription(
            coordinator=coordinator, transactional_id=transactional_id,
            producer_id=int(state.producer_id), producer_epoch=int(state.producer_epoch),
            state=str(state.transaction_state), timeout_ms=_ms(state.transaction_timeout),
            start_time_ms=start if start >= 0 else None, partitions=partitions)

    # -- DescribeProducers ---------------------------------------------------------------------

    def describe_producers(self, partitions: Sequence[TopicPartition], *,
                           broker_id: int | None = None
                           ) -> dict[TopicPartition, tuple[ProducerState, ...]]:
        """The active producers of each partition, as its leader (or ``broker_id``'s replica)
        holds them. A partition's error is an AdminError naming it."""
        deadline = self._pool.deadline()
        by_broker: dict[int, list[TopicPartition]] = {}
        if broker_id is not None:
            by_broker[broker_id] = list(partitions)
        else:
            leaders = self._leaders({tp.topic for tp in partitions})
            for tp in partitions:
                leader = leaders.get(tp)
                if leader is None or leader < 0:
                    raise AdminError(f"{tp.topic}-{tp.partition}: no leader (the partition "
                                     f"does not exist or is offline)")
                by_broker.setdefault(leader, []).append(tp)
        found: dict[TopicPartition, tuple[ProducerState, ...]] = {}
        for broker, tps in sorted(by_broker.items()):
            for start in range(0, len(tps), BATCH):
                found.update(self._producers_at(broker, tps[start:start + BATCH], deadline))
        return found

    def _leaders(self, topics: Iterable[str]) -> dict[TopicPartition, int]:
        names = sorted(set(topics))
        infos = self.topics(names, batch=BATCH)
        missing = [n for n in names if n not in infos]
        if missing:
            raise AdminError(f"topic {missing[0]} does not exist")
        return {TopicPartition(p.topic, p.partition): p.leader
                for info in infos.values() for p in info.partitions}

    def _producers_at(self, broker: int, tps: Sequence[TopicPartition], deadline: float
                      ) -> dict[TopicPartition, tuple[ProducerState, ...]]:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(m: ModuleType, version: int, _left: float) -> Any:
            return build(m.DescribeProducersRequest, topics=tuple(
                build(m.TopicRequest, name=t, partition_indexes=tuple(i32(p) for p in ps))
                for t, ps in sorted(by_topic.items())))

        _version, response = self._at(broker, DESCRIBE_PRODUCERS, 0, 0, make, deadline)
        asked = set(tps)
        found: dict[TopicPartition, tuple[ProducerState, ...]] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                if tp not in asked:
                    continue
                code = error_name(p.error_code)
                if code is not None:
                    detail = f": {p.error_message}" if p.error_message else ""
                    raise AdminError(f"DescribeProducers of {tp.topic}-{tp.partition} on broker "
                                     f"{broker} failed: {code}{detail}", code=code)
                found[tp] = tuple(ProducerState(
                    producer_id=int(s.producer_id), producer_epoch=int(s.producer_epoch),
                    coordinator_epoch=int(s.coordinator_epoch),
                    last_sequence=int(s.last_sequence), last_timestamp=int(s.last_timestamp),
                    txn_start_offset=(int(s.current_txn_start_offset)
                                      if int(s.current_txn_start_offset) >= 0 else None))
                    for s in p.active_producers)
        missing = asked - found.keys()
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(missing))
            raise AdminError(f"broker {broker} did not answer DescribeProducers for {names}")
        return found

    # -- abort -----------------------------------------------------------------------------------

    def abort_transaction(self, tp: TopicPartition, *, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> None:
        """Write an abort marker for ``producer_id``'s open transaction in ``tp``, at its
        leader (WriteTxnMarkers). A coordinator epoch below 0 is sent as 0, as Kafka's tool
        does (a transaction that never got a marker has none)."""
        deadline = self._pool.deadline()
        epoch = max(coordinator_epoch, 0)

        def make(m: ModuleType, version: int, _left: float) -> Any:
            topic = build(m.WritableTxnMarkerTopic, name=tp.topic,
                          partition_indexes=(i32(tp.partition),))
            marker = build(m.WritableTxnMarker, producer_id=i64(producer_id),
                           producer_epoch=i16(producer_epoch), transaction_result=False,
                           topics=(topic,), coordinator_epoch=i32(epoch))
            return build(m.WriteTxnMarkersRequest, markers=(marker,))

        leader = self._leaders([tp.topic]).get(tp)
        if leader is None or leader < 0:
            raise AdminError(f"{tp.topic}-{tp.partition}: no leader (the partition does not "
                             f"exist or is offline)")
        _version, response = self._at(leader, WRITE_TXN_MARKERS, 0, 1, make, deadline)
        codes = [error_name(p.error_code) for m in response.markers for t in m.topics
                 for p in t.partitions if str(t.name) == tp.topic
                 and int(p.partition_index) == tp.partition]
        if len(codes) != 1:
            raise AdminError(f"broker {leader} answered the abort of {tp.topic}-{tp.partition} "
                             f"with {len(codes)} results")
        if codes[0] is not None:
            raise _failure(WRITE_TXN_MARKERS, codes[0])

    # -- find-hanging ----------------------------------------------------------------------------

    def find_hanging(self, partitions: Sequence[TopicPartition], *, broker_id: int | None = None,
                     max_timeout_ms: int = 15 * 60_000, now_ms: int | None = None
                     ) -> list[HangingTransaction]:
        """The open transactions of ``partitions`` older (by the producer's last timestamp)
        than ``max_timeout_ms`` that no coordinator holds any more: no transactional id has
        the producer, or its transaction does not name the partition."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        producers = self.describe_producers(partitions, broker_id=broker_id)
        candidates = [HangingTransaction(tp=tp, producer=p)
                      for tp, states in sorted(producers.items()) for p in states
                      if p.txn_start_offset is not None and now - p.last_timestamp
                      > max_timeout_ms]
        if not candidates:
            return []
        ids = {c.producer.producer_id for c in candidates}
        owners = {t.producer_id: t.transactional_id
                  for t in self.list_transactions(producer_ids=ids) if t.producer_id in ids}
        descriptions: dict[str, TransactionDescription | None] = {}
        for transactional_id in sorted(set(owners.values())):
            try:
                descriptions[transactional_id] = self.describe_transaction(transactional_id)
            except AdminError as exc:
                if exc.code != "TRANSACTIONAL_ID_NOT_FOUND":
                    raise
                descriptions[transactional_id] = None
        hanging = []
        for candidate in candidates:
            owner = owners.get(candidate.producer.producer_id)
            description = descriptions.get(owner) if owner is not None else None
            if description is None or candidate.tp not in description.partitions:
                hanging.append(candidate)
        return hanging

    def partitions_of(self, topics: Iterable[str] | None, broker_id: int | None
                      ) -> list[TopicPartition]:
        """The partitions of ``topics`` (None: every topic) that have a replica on
        ``broker_id`` (None: all)."""
        names = None if topics is None else sorted(set(topics))
        infos = self.topics(names, batch=BATCH)
        missing = [n for n in names or () if n not in infos]
        if missing:
            raise AdminError(f"topic {missing[0]} does not exist")
        found = [TopicPartition(p.topic, p.partition) for info in infos.values()
                 for p in info.partitions if broker_id is None or broker_id in p.replicas]
        return sorted(found)


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Rows as Kafka's tool prints them: every column padded to its widest value, each one
    followed by a tab."""
    text = [[str(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in text)]) for i, h in enumerate(headers)]
    lines = ["".join(f"{v:<{w}}\t" for v, w in zip(row, widths, strict=True))
             for row in [list(headers), *text]]
    return "\n".join(lines)

