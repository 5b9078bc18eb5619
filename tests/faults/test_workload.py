"""The workload of the fault harness: how a producer's error becomes an outcome, and real runs
against a cluster of broker processes (clients in the client host), judged by the checker on
the logs read back: quiet, and with a broker killed and restarted in the middle.

The runs on a real cluster are in the long tier (on demand: ``make test-long``, or
``PARTCTL_LONG_TESTS=1``); tests/faults/test_smoke.py is what every run of the suite does
with the harness."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from tests.faults.checker import Verdict, check
from tests.faults.cluster import FaultCluster
from tests.faults.history import (
    ACKED,
    FAILED,
    UNKNOWN,
    Event,
    History,
    ProduceAttempt,
    ProduceOutcome,
    Read,
    read_history,
)
from tests.faults.test_cluster import start
from tests.faults.workload import Workload, create_topics, finals, outcome_of, where_stuck

TOPICS = ("wl-a", "wl-b")


# --- the outcome of an error (pure) -----------------------------------------------------------


@pytest.mark.parametrize("code", [
    KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError._PURGE_INFLIGHT, KafkaError._PURGE_QUEUE, KafkaError._FATAL,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._ALL_BROKERS_DOWN, KafkaError.UNKNOWN,
])
def test_a_delivery_error_that_may_follow_a_written_attempt_is_unknown(code: int) -> None:
    assert outcome_of(KafkaError(code)) == UNKNOWN
    assert outcome_of(KafkaError(code, fatal=True)) == UNKNOWN


@pytest.mark.parametrize("code", [
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_REQUIRED_ACKS, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_EXCEPTION,
])
def test_a_refusal_of_the_message_for_what_it_is_failed(code: int) -> None:
    assert outcome_of(KafkaError(code)) == FAILED


def test_a_refusal_flagged_retriable_is_unknown() -> None:
    assert outcome_of(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, retriable=True)) == UNKNOWN


@pytest.mark.parametrize(("code", "outcome"), [
    (KafkaError._QUEUE_FULL, FAILED), (KafkaError._UNKNOWN_PARTITION, FAILED),
    (KafkaError._UNKNOWN_TOPIC, FAILED), (KafkaError.MSG_SIZE_TOO_LARGE, FAILED),
    (KafkaError._FATAL, FAILED), (KafkaError._TRANSPORT, UNKNOWN),
])
def test_an_error_produce_raised_before_queueing(code: int, outcome: str) -> None:
    assert outcome_of(KafkaError(code), queued=False) == outcome


def test_no_error_is_acked() -> None:
    assert outcome_of(None) == ACKED


# --- real runs -----------------------------------------------------------------------------


def judge(cluster: FaultCluster, workload: Workload, path: Path) -> tuple[Verdict, list[Event]]:
    workload.final_reads()
    final = finals(cluster, TOPICS, timeout=60)
    assert len(final) == 2 * 3
    events = read_history(path)
    return check(events, final), events


def outcomes(events: Sequence[Event]) -> tuple[set[int], dict[int, str]]:
    attempts = {e.op for e in events if isinstance(e, ProduceAttempt)}
    done = {e.op: e.outcome for e in events if isinstance(e, ProduceOutcome)}
    return attempts, done


def test_a_thread_that_did_not_stop_is_named_with_the_call_it_waits_in() -> None:
    release = threading.Event()

    def waits_for_the_commit() -> None:
        release.wait(30)

    thread = threading.Thread(target=waits_for_the_commit)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while "waits_for_the_commit" not in where_stuck(thread) and time.monotonic() < deadline:
            release.wait(0.01)
        where = where_stuck(thread)
        assert where.startswith("wait:"), where  # the innermost call first
        assert "waits_for_the_commit" in where and "release.wait(30)" in where
    finally:
        release.set()
        thread.join()
    assert where_stuck(thread) == "(it has no frame)"


def test_a_thread_waiting_for_its_work_in_another_is_named_with_that_ones_call() -> None:
    release = threading.Event()

    def commits() -> None:
        release.wait(30)

    def runs_it_elsewhere() -> None:  # as tests.faults.net.Host.call runs a client's work
        inner = threading.Thread(target=commits,
                                 name=f"{threading.current_thread().name}/in-client")
        inner.start()
        inner.join()

    outer = threading.Thread(target=runs_it_elsewhere, name="txn-ctp9")
    outer.start()
    try:
        deadline = time.monotonic() + 10
        while "commits" not in where_stuck(outer) and time.monotonic() < deadline:
            release.wait(0.01)
        assert "commits:" in where_stuck(outer) and "join" not in where_stuck(outer)
    finally:
        release.set()
        outer.join()


@pytest.mark.servers
@pytest.mark.long
@pytest.mark.parametrize("kind", ["zookeeper", "etcd"])
def test_a_quiet_run_is_acknowledged_read_and_judged_ok(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with start(kind, tmp_path / "cluster") as cluster, History(path) as history:
        create_topics(cluster, TOPICS)
        workload = Workload(cluster, history, TOPICS, rate=150, admin_interval=1.5)
        workload.start()
        time.sleep(10)
        stats = workload.stop(timeout=30)
        verdict, events = judge(cluster, workload, path)
    assert verdict.ok, verdict.summary()
    assert not workload.errors
    attempts, done = outcomes(events)
    assert attempts == set(done), "every attempt has an outcome"
    assert stats.attempts == len(attempts) > 500
    assert stats.acked == verdict.acknowledged == len(attempts), stats
    # Spread over every partition of every topic, by both producers.
    sent = {(e.topic, e.partition, e.producer.split(".")[0]) for e in events
            if isinstance(e, ProduceAttempt)}
    assert sent == {(t, p, w) for t in TOPICS for p in range(3) for w in ("p1", "p2")}
    # The running consumer read what was acknowledged; the final reads read all of it.
    acked = {v for e in events if isinstance(e, ProduceOutcome) and e.outcome == ACKED
             for v in e.values}
    read_live = {v for e in events if isinstance(e, Read) and e.reader == "c1"
                 for _o, v in e.records}
    read_final = {v for e in events if isinstance(e, Read) and e.reader == "final"
                  for _o, v in e.records}
    assert read_final == acked
    assert len(read_live & acked) > 0.9 * len(acked)
    # Admin operations ran, through the brokers and the coordinator, without errors.
    assert {"create-topic", "delete-topic", "elect", "reassign"} <= set(stats.admin_ops), stats
    assert not stats.admin_errors, stats


@pytest.mark.servers
@pytest.mark.long
def test_a_run_with_a_broker_killed_and_restarted_is_judged_ok(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with start("zookeeper", tmp_path / "cluster") as cluster, History(path) as history:
        create_topics(cluster, TOPICS)
        # A produce times out after 2 s: shorter than the victim's partitions are without a
        # leader (its session, 4 s, must expire first), so some end unknown.
        workload = Workload(cluster, history, TOPICS, rate=150, admin=False,
                            message_timeout=2.0)
        workload.start()
        time.sleep(3)
        victim = cluster.partition_states(TOPICS[0])[0][0]  # a leader
        with history.fault("kill-leader", f"b{victim}"):
            cluster.kill_broker(victim)
            time.sleep(5)
            restarted = threading.Thread(target=cluster.restart_broker, args=(victim,))
            restarted.start()
            restarted.join(90)
        time.sleep(5)
        stats = workload.stop(timeout=30)
        verdict, events = judge(cluster, workload, path)
    assert verdict.ok, verdict.summary()
    assert not workload.errors
    attempts, done = outcomes(events)
    assert attempts == set(done), f"left open: {sorted(attempts - set(done))[:10]}"
    assert stats.attempts == stats.acked + stats.failed + stats.unknown == len(attempts)
    assert stats.acked == verdict.acknowledged > 0
    unknown = [e for e in events if isinstance(e, ProduceOutcome) and e.outcome == UNKNOWN]
    assert len(unknown) == stats.unknown > 0, stats
    assert all(e.error and e.error.startswith("_MSG_TIMED_OUT") for e in unknown), unknown[:3]
    # Writes went on after the kill: acknowledged while the victim was down or after.
    kill = next(e.t for e in events if e.type == "fault_start")
    assert any(e.t > kill + 1 for e in events
               if isinstance(e, ProduceOutcome) and e.outcome == ACKED)
    assert verdict.error_rates["kill-leader"].errors > 0, verdict.summary()


@pytest.mark.servers
@pytest.mark.long
def test_what_is_outstanding_when_the_workload_stops_is_recorded_unknown(tmp_path: Path
                                                                        ) -> None:
    path = tmp_path / "history.jsonl"
    with start("zookeeper", tmp_path / "cluster") as cluster, History(path) as history:
        create_topics(cluster, TOPICS)
        workload = Workload(cluster, history, TOPICS, rate=150, admin=False,
                            message_timeout=60.0)
        workload.start()
        time.sleep(3)
        # Nothing answers: every produce from now on stays outstanding. Resumed within their
        # coordinator session (4 s), the brokers keep their registrations and leaderships.
        for i in cluster.ids:
            cluster.pause_broker(i)
        time.sleep(0.5)
        began = time.monotonic()
        stats = workload.stop(timeout=1.0)
        took = time.monotonic() - began
        for i in cluster.ids:
            cluster.resume_broker(i)
        verdict, events = judge(cluster, workload, path)
    assert took < 10, f"stop took {took:.1f}s"
    assert verdict.ok, verdict.summary()
    attempts, done = outcomes(events)
    assert attempts == set(done), f"left open: {sorted(attempts - set(done))[:10]}"
    unknown = [e for e in events if isinstance(e, ProduceOutcome) and e.outcome == UNKNOWN]
    assert len(unknown) == stats.unknown > 0, stats
    assert stats.failed == 0, stats
