"""Scheduled jobs against an embedded cluster with real replicas (replication.EmbeddedCluster):
the rebalance moves data onto an empty broker, which catches up by fetching, and the scheduler's
preferred-election job hands leadership back after a crash; no acknowledged message is lost."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.codecs import TopicPartition
from node import EmbeddedCluster, check_acknowledged
from rebalancer import jobs
from rebalancer.jobs import triggers
from rebalancer.store import RunOutcome, Store
from tests.waiting import wait_until


def now() -> datetime:
    return datetime.now(UTC)


def produce(cluster: EmbeddedCluster, tps: list[TopicPartition], n: int,
            acked: dict[TopicPartition, dict[int, bytes]]) -> None:
    producer = cluster.producer()
    try:
        for i in range(n):
            for tp in tps:
                value = f"{tp}-{len(acked[tp])}-{i}".encode()
                delivery = producer.produce(tp, [value])
                acked[tp][delivery.base_offset] = value
    finally:
        producer.close()


def test_scheduled_rebalance_and_preferred_election_with_real_replicas(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(triggers, "MIN_INTERVAL", 0.5)  # runs every second, below the floor
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    with EmbeddedCluster(brokers=4) as cluster:
        assignment = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 2]}  # broker 4 holds nothing
        tps = cluster.create_topic("orders", assignment=assignment)
        acked: dict[TopicPartition, dict[int, bytes]] = {tp: {} for tp in tps}
        produce(cluster, tps, 50, acked)

        rebalance = jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                                 arguments={"coordinator": cluster.url, "goal": "balance",
                                            "max_concurrent_moves": 2, "timeout": 60,
                                            "poll_interval": 0.1})
        summary = jobs.run_job_now(db, rebalance.id)
        assert summary.outcome is RunOutcome.SUCCEEDED, summary
        hosted = {b: sum(b in cluster.replicas(tp) for tp in tps) for b in (1, 2, 3, 4)}
        assert hosted[4] >= 1 and max(hosted.values()) - min(hosted.values()) <= 1, hosted
        for tp in tps:  # the moved replicas caught up by fetching: they are in sync
            cluster.wait_for_isr(tp)

        # broker 1 crashes: its partitions fail over; it returns and catches up
        led_by_1 = [tp for tp in tps if cluster.replicas(tp)[0] == 1]
        assert led_by_1
        cluster.crash(1)
        for tp in led_by_1:
            cluster.wait_for_leader(tp, excluding=(1,))
        produce(cluster, tps, 20, acked)
        cluster.restart(1)
        for tp in tps:
            cluster.wait_for_isr(tp)
        assert all(cluster.leader(tp) != 1 for tp in led_by_1)

        # the scheduler's preferred-election job gives broker 1 its leadership back
        election = jobs.add_job(db, kind="preferred-election",
                                schedule=jobs.make_schedule(every="1s", first_run=now()),
                                arguments={"coordinator": cluster.url, "wait": 10})
        stop = threading.Event()
        runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                                  kwargs={"stop": stop, "poll_interval": 0.2})
        runner.start()
        watcher = Store.open(db)
        try:
            wait_until(lambda: all(cluster.leader(tp) == 1 for tp in led_by_1), timeout=30,
                       message="preferred leaders restored by the scheduled job")
            wait_until(lambda: any(r.outcome is RunOutcome.SUCCEEDED
                                   for r in watcher.runs(job_id=election.id)),
                       timeout=30, message="the job's run recorded as succeeded")
        finally:
            watcher.close()
            stop.set()
            runner.join(15)
        assert not runner.is_alive()
        store = Store.open(db)
        try:
            runs = store.runs(job_id=election.id)
            assert any(r.outcome is RunOutcome.SUCCEEDED for r in runs)
            assert set().union(*(r.details.get("requested", []) for r in runs)) == {
                str(tp) for tp in led_by_1}
            assert all(r.outcome in (RunOutcome.SUCCEEDED, RunOutcome.NOTHING_TO_DO)
                       for r in runs), [(r.outcome, r.error) for r in runs]
            (rebalance_run,) = store.runs(job_id=rebalance.id)
            assert rebalance_run.plan_id is not None
        finally:
            store.close()

        consumer = cluster.consumer()
        for tp in tps:
            check = check_acknowledged(consumer.read_all(tp), acked[tp])
            assert check.ok, (tp, check)
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refused == [], "every state transition of the moves was legal"
