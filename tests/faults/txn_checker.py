"""The transactional checker: a history of transactions (:class:`~tests.faults.history.
TxnAttempt` and :class:`~tests.faults.history.TxnOutcome`), the reads of read_committed
consumers, and the final committed view, judged as Jepsen judges Kafka's transactions.

The final committed view is what a read_committed consumer reads of every transactional
partition once the cluster is quiet and every transaction has ended: the reads of the reader
``final-committed`` (its records, by partition and offset). The read_committed readers during
the run are the readers whose names start with ``rc``.

The verdicts (each a :class:`~tests.faults.checker.Tally`):

- **aborted_read**: a value of an aborted transaction in the final view or in a read_committed
  read; or a value of a transaction whose outcome is unknown, read during the run, but absent
  from the final view (it was read, so it was visible, so it must have committed);
- **torn**: a transaction some but not all of whose values are in the final view; or a
  read_committed reader that read one of a transaction's values and read past where another
  of its values sits in the final view without reading it;
- **lost**: a committed transaction none of whose values is in the final view;
- **duplicated**: a value at two places in the final view; or an input that two committed
  consume-transform-produce transactions both consumed (exactly once means once);
- **unprocessed** (with ``processed=True``, when the run waited until the consume-transform-
  produce stage had consumed everything): a committed input value no committed transaction
  consumed;
- **cycles**: a G1c cycle (Adya's cyclic information flow) among the committed transactions
  that each wrote one partition: write-write edges by the order of their records in a
  partition of the final view, write-read edges from the transaction that wrote a value to the
  one that consumed it. A transaction that writes one partition and reads (read_committed)
  before it writes is visible only after every transaction before it in its partition has
  ended, and after every transaction it read from: along every edge the time a transaction
  became visible does not decrease, and strictly increases along a write-read edge, so a cycle
  with one is a broker's fault (markers out of order, a last stable offset past an open
  transaction). Transactions over several partitions are left out of the graph: Kafka lets
  concurrent ones interleave into write cycles (G0), which it does not promise to prevent.
- **unexpected** (information, not a violation): a value in the final view that no
  transaction sent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from coordinator.codecs import TopicPartition

from .checker import Tally
from .history import ABORTED, COMMITTED, Event, Read, TxnAttempt, TxnOutcome

__all__ = ["FINAL_READER", "KINDS", "TxnVerdict", "check_transactions"]

FINAL_READER = "final-committed"
COMMITTED_READER_PREFIX = "rc"
KINDS = ("aborted_read", "torn", "lost", "duplicated", "unprocessed", "cycles")


@dataclass(slots=True, kw_only=True)
class TxnVerdict:
    """What the transactional checker found. ``ok``: no violation of any kind."""

    transactions: dict[str, int] = field(default_factory=dict)
    """How many transactions ended each way (committed, aborted, unknown, open)."""
    committed_reads: int = 0
    aborted_read: Tally = field(default_factory=Tally)
    torn: Tally = field(default_factory=Tally)
    lost: Tally = field(default_factory=Tally)
    duplicated: Tally = field(default_factory=Tally)
    unprocessed: Tally = field(default_factory=Tally)
    cycles: Tally = field(default_factory=Tally)
    unexpected: Tally = field(default_factory=Tally)
    graph: tuple[int, int] = (0, 0)
    """The dependency graph's size: (transactions, edges)."""

    def counts(self) -> dict[str, int]:
        return {kind: getattr(self, kind).count for kind in KINDS}

    @property
    def ok(self) -> bool:
        return not any(self.counts().values())

    def summary(self) -> str:
        ended = ", ".join(f"{k} {n}" for k, n in sorted(self.transactions.items()))
        lines = [f"transactions: {'OK' if self.ok else 'VIOLATIONS'}  {ended or 'none'}; "
                 f"read_committed records read {self.committed_reads}; graph "
                 f"{self.graph[0]} transactions, {self.graph[1]} edges",
                 "  " + "  ".join(f"{kind} {n}" for kind, n in self.counts().items())]
        for kind in KINDS:
            lines.extend(f"  {kind}: {e}" for e in getattr(self, kind).examples)
        if self.unexpected.count:
            lines.append(f"  unexpected values (not counted against ok): "
                         f"{self.unexpected.count}, e.g. {'; '.join(self.unexpected.examples)}")
        return "\n".join(lines)


@dataclass(slots=True)
class _Txn:
    op: int
    producer: str
    sends: tuple[tuple[str, int, str], ...]
    inputs: tuple[str, ...]
    outcome: str = "open"

    @property
    def partitions(self) -> set[TopicPartition]:
        return {TopicPartition(t, p) for t, p, _v in self.sends}

    def name(self) -> str:
        return f"{self.producer}#{self.op}"


def _where(tp: TopicPartition, offset: int) -> str:
    return f"{tp.topic}-{tp.partition}@{offset}"


def check_transactions(events: Iterable[Event], *, input_topics: Collection[str] = (),
                       processed: bool = False, examples: int = 5) -> TxnVerdict:
    """Judge the transactions of ``events`` against the final committed view in them (the
    reads of :data:`FINAL_READER`); see the module's docstring. ``input_topics``: the topics
    the consume-transform-produce stage reads; ``processed``: the run waited until it had
    consumed all of them, so every committed value there must have been consumed once."""
    txns: dict[int, _Txn] = {}
    reads: dict[str, dict[TopicPartition, dict[int, str | None]]] = defaultdict(
        lambda: defaultdict(dict))
    for event in events:
        if isinstance(event, TxnAttempt):
            txns[event.op] = _Txn(event.op, event.producer, event.sends, event.inputs)
        elif isinstance(event, TxnOutcome) and event.op in txns:
            txns[event.op].outcome = event.outcome
        elif isinstance(event, Read) and (event.reader == FINAL_READER or event.reader.startswith(
                COMMITTED_READER_PREFIX)):
            seen = reads[event.reader][TopicPartition(event.topic, event.partition)]
            for offset, value in event.records:
                seen.setdefault(offset, value)
    verdict = TxnVerdict()
    for kind in (*KINDS, "unexpected"):
        getattr(verdict, kind).limit = examples
    counts: dict[str, int] = defaultdict(int)
    for txn in txns.values():
        counts[txn.outcome] += 1
    verdict.transactions = dict(counts)

    writer: dict[str, _Txn] = {}
    for txn in txns.values():
        for _t, _p, value in txn.sends:
            writer[value] = txn
    final = reads.get(FINAL_READER, {})
    places: dict[str, list[tuple[TopicPartition, int]]] = defaultdict(list)
    for tp, records in final.items():
        for offset, value in records.items():
            if value is not None:
                places[value].append((tp, offset))

    _check_final(txns, writer, final, places, verdict)
    _check_reads(reads, writer, places, verdict)
    _check_inputs(txns, writer, places, set(input_topics) if processed else set(), verdict)
    _check_cycles(txns, writer, final, verdict)
    return verdict


def _check_final(txns: Mapping[int, _Txn], writer: Mapping[str, _Txn],
                 final: Mapping[TopicPartition, Mapping[int, str | None]],
                 places: Mapping[str, Sequence[tuple[TopicPartition, int]]],
                 verdict: TxnVerdict) -> None:
    for tp, records in sorted(final.items()):
        for offset, value in sorted(records.items()):
            if value is not None and value not in writer:
                verdict.unexpected.add(f"{value!r} at {_where(tp, offset)}")
    for value, where in sorted(places.items()):
        if len(where) > 1:
            verdict.duplicated.add(f"{value!r} at " + ", ".join(_where(*w) for w in where))
    for txn in txns.values():
        values = [v for _t, _p, v in txn.sends]
        present = [v for v in values if v in places]
        if txn.outcome == ABORTED and present:
            verdict.aborted_read.add(f"{txn.name()} aborted, yet {present[0]!r} is at "
                                     f"{_where(*places[present[0]][0])}")
        elif present and len(present) < len(values):
            missing = [v for v in values if v not in places]
            verdict.torn.add(f"{txn.name()} ({txn.outcome}): {len(present)} of {len(values)} "
                             f"values committed, {missing[0]!r} missing")
        elif txn.outcome == COMMITTED and values and not present:
            verdict.lost.add(f"{txn.name()} committed, none of its {len(values)} values is "
                             f"in the logs (first {values[0]!r})")


def _check_reads(reads: Mapping[str, Mapping[TopicPartition, Mapping[int, str | None]]],
                 writer: Mapping[str, _Txn],
                 places: Mapping[str, Sequence[tuple[TopicPartition, int]]],
                 verdict: TxnVerdict) -> None:
    for reader, by_tp in sorted(reads.items()):
        if reader == FINAL_READER:
            continue
        furthest = {tp: max(records) for tp, records in by_tp.items() if records}
        seen = {v for records in by_tp.values() for v in records.values() if v is not None}
        verdict.committed_reads += sum(len(records) for records in by_tp.values())
        judged: set[int] = set()
        for tp, records in sorted(by_tp.items()):
            for offset, value in sorted(records.items()):
                txn = writer.get(value) if value is not None else None
                if txn is None or txn.op in judged:
                    continue
                judged.add(txn.op)
                if txn.outcome == ABORTED or (txn.outcome != COMMITTED and value not in places):
                    verdict.aborted_read.add(f"{reader} read {value!r} at {_where(tp, offset)}"
                                             f" of {txn.name()} ({txn.outcome})")
                    continue
                for _t, _p, other in txn.sends:
                    for where in places.get(other, ()):
                        if (other not in seen and where[0] in furthest
                                and furthest[where[0]] > where[1]):
                            verdict.torn.add(
                                f"{reader} read {value!r} of {txn.name()} and read "
                                f"{where[0].topic}-{where[0].partition} past {where[1]} "
                                f"without its {other!r}")
                            break


def _check_inputs(txns: Mapping[int, _Txn], writer: Mapping[str, _Txn],
                  places: Mapping[str, Sequence[tuple[TopicPartition, int]]],
                  all_of: set[str], verdict: TxnVerdict) -> None:
    """Inputs consumed by committed transactions: never an aborted value, never twice, and,
    for the topics in ``all_of``, every committed value."""
    consumers: dict[str, list[_Txn]] = defaultdict(list)
    for txn in txns.values():
        if txn.outcome == COMMITTED or (txn.outcome != ABORTED and any(
                v in places for _t, _p, v in txn.sends)):
            for value in txn.inputs:
                consumers[value].append(txn)
    for value, by in sorted(consumers.items()):
        source = writer.get(value)
        if source is not None and source.outcome == ABORTED:
            verdict.aborted_read.add(f"{by[0].name()} consumed {value!r} of aborted "
                                     f"{source.name()}")
        if len(by) > 1:
            verdict.duplicated.add(f"{value!r} consumed by " + ", ".join(t.name() for t in by))
    for value, where in sorted(places.items()):
        if where[0][0].topic in all_of and value not in consumers:
            verdict.unprocessed.add(f"{value!r} at {_where(*where[0])} never consumed by a "
                                    f"committed transaction")


def _check_cycles(txns: Mapping[int, _Txn], writer: Mapping[str, _Txn],
                  final: Mapping[TopicPartition, Mapping[int, str | None]],
                  verdict: TxnVerdict) -> None:
    nodes = {op for op, txn in txns.items()
             if txn.outcome == COMMITTED and len(txn.partitions) == 1}
    edges: dict[int, set[int]] = defaultdict(set)
    reads_from: set[tuple[int, int]] = set()
    for records in final.values():
        previous: int | None = None
        for _offset, value in sorted(records.items()):
            txn = writer.get(value) if value is not None else None
            if txn is None or txn.op not in nodes:
                continue
            if previous is not None and previous != txn.op:
                edges[previous].add(txn.op)
            previous = txn.op
    for op in nodes:
        for value in txns[op].inputs:
            source = writer.get(value)
            if source is not None and source.op in nodes and source.op != op:
                edges[source.op].add(op)
                reads_from.add((source.op, op))
    verdict.graph = (len(nodes), sum(len(v) for v in edges.values()))
    for component in _strongly_connected(nodes, edges):
        if len(component) > 1:
            members = set(component)
            kinds = "write-read" if any((a, b) in reads_from for a in members
                                        for b in edges[a] if b in members) else "write-write"
            names = ", ".join(txns[op].name() for op in sorted(component)[:6])
            verdict.cycles.add(f"a {kinds} cycle of {len(component)} transactions: {names}")


def _strongly_connected(nodes: Iterable[int], edges: Mapping[int, set[int]]
                        ) -> list[list[int]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    found: list[list[int]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found
