"""The transactional checker on histories made by hand: each verdict found where it is, and
none where the history is clean; the history's new events survive a round trip."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from tests.faults.history import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    Event,
    History,
    Read,
    TxnAttempt,
    TxnOutcome,
    read_history,
)
from tests.faults.txn_checker import FINAL_READER, TxnVerdict, check_transactions

_clock = itertools.count()


def txn(op: int, outcome: str | None, sends: Sequence[tuple[str, int, str]],
        inputs: Sequence[str] = (), producer: str = "w") -> list[Event]:
    out: list[Event] = [TxnAttempt(t=next(_clock), wall=0.0, op=op, producer=producer,
                                   sends=tuple(sends), inputs=tuple(inputs))]
    if outcome is not None:
        out.append(TxnOutcome(t=next(_clock), wall=0.0, op=op, producer=producer,
                              outcome=outcome))
    return out


def read(reader: str, topic: str, partition: int, records: Iterable[tuple[int, str]]
         ) -> Read:
    records = tuple(records)
    return Read(t=next(_clock), wall=0.0, reader=reader, topic=topic, partition=partition,
                offset=records[0][0] if records else 0, records=records,
                high_watermark=records[-1][0] + 1 if records else 0)


def check(*events: Event | list[Event], **kw: object) -> TxnVerdict:
    flat: list[Event] = []
    for e in events:
        flat.extend(e if isinstance(e, list) else [e])
    return check_transactions(flat, **kw)  # type: ignore[arg-type]


CLEAN = [
    txn(1, COMMITTED, [("a", 0, "x1"), ("a", 1, "x2")]),
    txn(2, ABORTED, [("a", 0, "y1"), ("a", 1, "y2")]),
    txn(3, COMMITTED, [("a", 0, "z1")]),
    # the consume-transform-produce step: read x1 and z1, wrote their results to b-0
    txn(4, COMMITTED, [("b", 0, "x1>"), ("b", 0, "z1>")], inputs=["x1", "z1"], producer="ctp"),
    read("rc1", "a", 0, [(0, "x1"), (5, "z1")]),
    read(FINAL_READER, "a", 0, [(0, "x1"), (5, "z1")]),
    read(FINAL_READER, "a", 1, [(0, "x2")]),
    read(FINAL_READER, "b", 0, [(0, "x1>"), (1, "z1>")]),
]


def test_a_clean_history_is_clean() -> None:
    verdict = check(*CLEAN, input_topics=["a"], processed=False)
    assert verdict.ok, verdict.summary()
    assert verdict.transactions == {COMMITTED: 3, ABORTED: 1}
    # the graph: the one-partition committed transactions 3 and 4, and 4 read 3's z1
    assert verdict.graph == (2, 1)
    assert verdict.committed_reads == 2


def test_aborted_values_in_the_final_view_or_a_read_are_aborted_reads() -> None:
    verdict = check(*CLEAN, read("rc2", "a", 0, [(2, "y1")]),
                    read(FINAL_READER, "a", 1, [(3, "y2")]))
    assert verdict.aborted_read.count == 2, verdict.summary()
    assert "rc2 read 'y1' at a-0@2" in " ".join(verdict.aborted_read.examples)


def test_a_read_of_an_unknown_transaction_that_never_committed_is_an_aborted_read() -> None:
    verdict = check(txn(1, UNKNOWN, [("a", 0, "u1")]), read("rc1", "a", 0, [(0, "u1")]))
    assert verdict.aborted_read.count == 1
    # the same, committed in the end: fine
    verdict = check(txn(1, UNKNOWN, [("a", 0, "u1")]), read("rc1", "a", 0, [(0, "u1")]),
                    read(FINAL_READER, "a", 0, [(0, "u1")]))
    assert verdict.ok, verdict.summary()


def test_a_partly_visible_transaction_is_torn_and_a_missing_one_lost() -> None:
    verdict = check(txn(1, COMMITTED, [("a", 0, "x1"), ("a", 1, "x2")]),
                    txn(2, UNKNOWN, [("a", 0, "u1"), ("a", 1, "u2")]),
                    txn(3, COMMITTED, [("a", 0, "z1")]),
                    read(FINAL_READER, "a", 0, [(0, "x1"), (1, "u1")]))
    assert (verdict.torn.count, verdict.lost.count) == (2, 1), verdict.summary()
    assert any("z1" in e for e in verdict.lost.examples)


def test_a_reader_that_passed_a_transactions_other_value_saw_it_torn() -> None:
    history = [txn(1, COMMITTED, [("a", 0, "x1"), ("a", 1, "x2")]),
               txn(2, COMMITTED, [("a", 1, "w")]),
               read(FINAL_READER, "a", 0, [(0, "x1")]),
               read(FINAL_READER, "a", 1, [(0, "x2"), (2, "w")])]
    verdict = check(*history, read("rc1", "a", 0, [(0, "x1")]), read("rc1", "a", 1, [(2, "w")]))
    assert verdict.torn.count == 1 and "without its 'x2'" in verdict.torn.examples[0]
    # a reader that has not got that far yet is not torn
    assert check(*history, read("rc1", "a", 0, [(0, "x1")])).ok


def test_duplicates_in_the_view_and_inputs_consumed_twice() -> None:
    verdict = check(txn(1, COMMITTED, [("a", 0, "x1")]),
                    txn(2, COMMITTED, [("b", 0, "x1>")], inputs=["x1"], producer="c1"),
                    txn(3, COMMITTED, [("b", 1, "x1>>")], inputs=["x1"], producer="c2"),
                    read(FINAL_READER, "a", 0, [(0, "x1"), (4, "x1")]),
                    read(FINAL_READER, "b", 0, [(0, "x1>")]),
                    read(FINAL_READER, "b", 1, [(0, "x1>>")]))
    assert verdict.duplicated.count == 2, verdict.summary()


def test_an_aborted_input_consumed_and_an_input_never_consumed() -> None:
    verdict = check(txn(1, ABORTED, [("a", 0, "y1")]),
                    txn(2, COMMITTED, [("a", 0, "x1")]),
                    txn(3, COMMITTED, [("b", 0, "y1>")], inputs=["y1"], producer="ctp"),
                    read(FINAL_READER, "a", 0, [(1, "x1")]),
                    read(FINAL_READER, "b", 0, [(0, "y1>")]),
                    input_topics=["a"], processed=True)
    assert (verdict.aborted_read.count, verdict.unprocessed.count) == (1, 1), verdict.summary()
    assert "'x1' at a-0@1 never consumed" in verdict.unprocessed.examples[0]


def test_a_write_read_cycle_is_found() -> None:
    """T1 wrote a-0 after T3 did, T2 read T1's value and wrote b-0 before T3 did, T3 wrote
    b-0 and a-0... as one-partition transactions: T3 writes b-0 only, T4 reads T3 and writes
    a-0 before T1. The edges T1 -wr-> T2 -ww(b-0)-> T3 -wr-> T4 -ww(a-0)-> T1 close a cycle."""
    verdict = check(txn(1, COMMITTED, [("a", 0, "t1")]),
                    txn(2, COMMITTED, [("b", 0, "t2")], inputs=["t1"]),
                    txn(3, COMMITTED, [("b", 0, "t3")]),
                    txn(4, COMMITTED, [("a", 0, "t4")], inputs=["t3"]),
                    read(FINAL_READER, "a", 0, [(0, "t4"), (1, "t1")]),
                    read(FINAL_READER, "b", 0, [(0, "t2"), (1, "t3")]))
    assert verdict.cycles.count == 1, verdict.summary()
    assert "write-read cycle of 4 transactions" in verdict.cycles.examples[0]
    # the same values in an order a correct broker can give: no cycle
    verdict = check(txn(1, COMMITTED, [("a", 0, "t1")]),
                    txn(2, COMMITTED, [("b", 0, "t2")], inputs=["t1"]),
                    txn(3, COMMITTED, [("b", 0, "t3")]),
                    txn(4, COMMITTED, [("a", 0, "t4")], inputs=["t3"]),
                    read(FINAL_READER, "a", 0, [(0, "t1"), (1, "t4")]),
                    read(FINAL_READER, "b", 0, [(0, "t2"), (1, "t3")]))
    assert verdict.ok, verdict.summary()


def test_transactions_over_several_partitions_stay_out_of_the_graph() -> None:
    """Two concurrent transactions over a-0 and a-1 in opposite orders: a write cycle Kafka
    allows (G0), not counted."""
    verdict = check(txn(1, COMMITTED, [("a", 0, "p1"), ("a", 1, "q1")]),
                    txn(2, COMMITTED, [("a", 0, "p2"), ("a", 1, "q2")]),
                    read(FINAL_READER, "a", 0, [(0, "p1"), (1, "p2")]),
                    read(FINAL_READER, "a", 1, [(0, "q2"), (1, "q1")]))
    assert verdict.ok and verdict.graph == (0, 0), verdict.summary()


def test_the_new_events_survive_the_history_file(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        op = history.txn_attempt("w1", [("a", 0, "x1"), ("a", 2, "x2")], inputs=["i"])
        history.txn_outcome(op, "w1", COMMITTED)
        with pytest.raises(ValueError, match="outcome 'maybe'"):
            history.txn_outcome(op, "w1", "maybe")
    events = read_history(path)
    attempt, outcome = events
    assert isinstance(attempt, TxnAttempt) and isinstance(outcome, TxnOutcome)
    assert attempt.sends == (("a", 0, "x1"), ("a", 2, "x2")) and attempt.inputs == ("i",)
    assert (outcome.op, outcome.outcome) == (op, COMMITTED)
    path.write_text('{"type":"txn_result","t":1,"wall":1,"op":1,"producer":"w",'
                    '"outcome":"maybe"}\n')
    with pytest.raises(ValueError, match="outcome 'maybe'"):
        read_history(path)
