"""Scheduled jobs: stable function references, schedules, and runs recorded in the store, against
live embedded clusters (memory coordinator + participants with recording brokers).

Recording brokers do not replicate, so an added replica never joins the ISR by itself: the
``CatchUp`` thread plays the data plane and, as a partition leader does for a caught-up follower,
puts the replicas the controller is adding into the ISR (statemachines.broker.change_isr).
"""

from __future__ import annotations

import json
import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from apscheduler.util import ref_to_obj
from sqlalchemy import create_engine, select

import coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from rebalancer import jobs
from rebalancer.jobs import tasks
from rebalancer.jobs.scheduler import DurableJobStore
from rebalancer.store import ExecutionStatus, PartitionStatus, RunOutcome, Store
from statemachines.admin import Admin
from statemachines.broker import change_isr
from statemachines.channel import InProcessNetwork
from statemachines.participant import Participant
from tests.waiting import wait_until

UNREACHABLE = "zookeeper://127.0.0.1:1/nothing"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


class CatchUp(threading.Thread):
    """Put replicas being added into their partition's ISR, as their leader would."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.md = MetadataClient(coordinator.connect(url))
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.02):
            try:
                for topic, a in self.md.assignments(self.md.topics()).items():
                    for p, adding in a.value.adding.items():
                        key = TopicPartition(topic, p)
                        state = self.md.partition_states([key])[key]
                        if state is not None:
                            isr = list(state.value.isr)
                            missing = [b for b in adding if b not in isr]
                            if missing:
                                change_isr(self.md, key, isr + missing)
            except Exception:  # the cluster is closing
                pass

    def close(self) -> None:
        self._stop_event.set()
        self.join(5)
        self.md.coordinator.close()


class Cluster:
    def __init__(self, brokers: tuple[int, ...]) -> None:
        self.url = f"memory://jobs-{uuid.uuid4().hex[:10]}"
        self.network = InProcessNetwork()
        self.participants = {b: self.start(b) for b in brokers}
        self.client = coordinator.connect(self.url)
        self.md = MetadataClient(self.client)
        self.admin = Admin(self.client)
        wait_until(lambda: self.md.controller() is not None, timeout=10)
        self.catch_up = CatchUp(self.url)
        self.catch_up.start()

    def start(self, broker: int) -> Participant:
        return Participant(self.url, broker, rack=f"r{broker % 2}",
                           network=self.network).start()

    def create(self, topic: str, assignment: dict[int, list[int]]) -> None:
        self.admin.create_topic(topic, assignment=assignment)
        keys = [TopicPartition(topic, p) for p in assignment]
        wait_until(lambda: all(s is not None for s in self.md.partition_states(keys).values()),
                   timeout=10, message=f"{topic} online")

    def leaders(self, topic: str) -> dict[int, int]:
        keys = [TopicPartition(topic, p) for p in self.md.partitions_of(topic)]
        return {k.partition: s.value.leader
                for k, s in self.md.partition_states(keys).items() if s is not None}

    def replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        return dict(self.md.assignments([topic])[topic].value.partitions)

    def close(self) -> None:
        self.catch_up.close()
        for p in self.participants.values():
            p.close()
        self.client.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster((1, 2, 3))
    yield c
    c.close()


def make_imbalance(c: Cluster) -> None:
    """Broker 1 leads t-0 as preferred; it fails, 2 takes over, 1 returns to the ISR."""
    c.create("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    wait_until(lambda: c.leaders("t") == {0: 1, 1: 2, 2: 3}, timeout=10)
    c.participants.pop(1).close()
    wait_until(lambda: c.leaders("t")[0] == 2, timeout=10, message="failover to 2")
    c.participants[1] = c.start(1)
    md = MetadataClient(c.participants[2].coordinator)
    wait_until(lambda: 1 in c.md.broker_ids(), timeout=10)
    assert change_isr(md, TopicPartition("t", 0), [2, 3, 1])
    wait_until(lambda: md.isr_change_notifications() == [], timeout=10)
    assert c.leaders("t")[0] == 2


# --- references and schedules ------------------------------------------------------------------


def test_every_registered_job_function_resolves() -> None:
    assert set(jobs.JOB_FUNCTIONS) == {"rebalance", "preferred-election"}
    expected = {"rebalance": tasks.run_rebalance,
                "preferred-election": tasks.run_preferred_election}
    for kind, ref in jobs.JOB_FUNCTIONS.items():
        assert ref.startswith("rebalancer.jobs:")
        assert ref_to_obj(ref) is expected[kind]


def test_stored_jobs_name_their_function_by_import_string_with_json_kwargs(db: str) -> None:
    nightly = jobs.add_job(db, kind="rebalance", trigger=jobs.make_trigger(cron="0 3 * * *"),
                           kwargs={"coordinator": "memory://x", "goal": "balance",
                                   "max_concurrent_moves": 10, "dry_run": True},
                           job_id="nightly")
    leaders = jobs.add_job(db, kind="preferred-election",
                           trigger=jobs.make_trigger(every="5m"),
                           kwargs={"coordinator": "memory://x"})
    assert nightly.schedule == "cron 0 3 * * *" and leaders.schedule == "every 5m"
    assert leaders.id.startswith("preferred-election-")
    engine = create_engine(db)
    with engine.connect() as conn:
        rows = conn.execute(select(DurableJobStore(engine=engine).jobs_t)).all()
    engine.dispose()
    assert len(rows) == 2
    for row in rows:
        state = pickle.loads(row.job_state)
        assert state["func"] in jobs.JOB_FUNCTIONS.values()  # text, not a pickled callable
        assert callable(ref_to_obj(state["func"]))
        assert json.loads(json.dumps(state["kwargs"])) == state["kwargs"]
        assert state["kwargs"]["job_id"] == row.id and state["kwargs"]["db"] == db
    assert [j.id for j in jobs.list_jobs(db)] == sorted(["nightly", leaders.id])
    with pytest.raises(ValueError, match="already exists"):
        jobs.add_job(db, kind="rebalance", trigger=jobs.make_trigger(every="1h"),
                     kwargs={"coordinator": "memory://x"}, job_id="nightly")
    with pytest.raises(ValueError, match="unknown job kind"):
        jobs.add_job(db, kind="reboot", trigger=jobs.make_trigger(every="1h"), kwargs={})
    with pytest.raises(ValueError, match="bad job id"):
        jobs.add_job(db, kind="rebalance", trigger=jobs.make_trigger(every="1h"),
                     kwargs={}, job_id="no spaces")
    with pytest.raises(ValueError, match="plain JSON"):
        jobs.add_job(db, kind="rebalance", trigger=jobs.make_trigger(every="1h"),
                     kwargs={"coordinator": object()})
    jobs.remove_job(db, "nightly")
    assert [j.id for j in jobs.list_jobs(db)] == [leaders.id]
    with pytest.raises(jobs.JobNotFound):
        jobs.remove_job(db, "nightly")


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h", 3600),
                                               ("1h30m", 5400), ("2d", 172800), ("1.5s", 1.5)])
def test_durations(text: str, seconds: float) -> None:
    assert jobs.parse_duration(text) == seconds
    assert jobs.parse_duration(jobs.format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "5", "5x", "m5", "0s", "-5m", "5m 3"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(jobs.TriggerError, match="bad duration") as info:
        jobs.parse_duration(text)
    assert "\n" not in str(info.value)


def test_bad_schedules_are_one_line_errors() -> None:
    for kwargs, message in [({"cron": "0 3 * *"}, "Wrong number of fields"),
                            ({"cron": "61 * * * *"}, "bad cron expression"),
                            ({}, "exactly one schedule"),
                            ({"cron": "* * * * *", "every": "5m"}, "exactly one schedule"),
                            ({"every": "5m", "timezone": "Mars/Olympus"}, "unknown time zone")]:
        with pytest.raises(jobs.TriggerError, match=message) as info:
            jobs.make_trigger(**kwargs)
        assert "\n" not in str(info.value)


def test_goals() -> None:
    from rebalancer.planner.goals import AddBrokers, Balance, Decommission, RepairRacks

    assert jobs.goals_for("balance") == (Balance(),)
    assert jobs.goals_for("repair-racks") == (RepairRacks(),)
    assert jobs.goals_for("add-brokers", [4]) == (AddBrokers(brokers=frozenset({4})),)
    assert jobs.goals_for("decommission", [2]) == (Decommission(brokers=frozenset({2})),)
    with pytest.raises(ValueError, match="needs the brokers"):
        jobs.goals_for("decommission")
    with pytest.raises(ValueError, match="unknown goal"):
        jobs.goals_for("tidy")


def test_a_job_whose_function_is_gone_is_kept_reported_and_skipped(db: str) -> None:
    """Not APScheduler's default: its store deletes a job it cannot unpickle."""
    job = jobs.add_job(db, kind="preferred-election", trigger=jobs.make_trigger(every="1s"),
                       kwargs={"coordinator": UNREACHABLE, "connect_timeout": 0.5},
                       job_id="orphan")
    engine = create_engine(db)
    table = DurableJobStore(engine=engine).jobs_t
    with engine.begin() as conn:
        state = pickle.loads(conn.execute(select(table.c.job_state)).scalar_one())
        state["func"] = "rebalancer.jobs:renamed_long_ago"
        conn.execute(table.update().values(job_state=pickle.dumps(state), next_run_time=0))
    listed = jobs.list_jobs(db)
    assert [(j.id, j.func_ref) for j in listed] == [("orphan", "rebalancer.jobs:renamed_long_ago")]
    assert "renamed_long_ago" in (listed[0].broken or "")
    with pytest.raises(ValueError, match="cannot be restored"):
        jobs.run_job_now(db, "orphan")
    stop = threading.Event()
    started = time.monotonic()
    runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                              kwargs={"stop": stop, "poll_interval": 0.1})
    runner.start()
    time.sleep(1.0)  # due since 1970: a store that did not skip it would run or spin on it
    stop.set()
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - started < 5
    with engine.connect() as conn:
        assert conn.execute(select(table.c.id)).scalars().all() == ["orphan"]
    engine.dispose()
    with Store.open(db) as store:
        assert store.runs() == []
    jobs.remove_job(db, job.id)
    assert jobs.list_jobs(db) == []


# --- runs --------------------------------------------------------------------------------------


def test_an_unreachable_coordinator_is_a_failed_run_with_one_clear_line(db: str) -> None:
    for run in (jobs.run_preferred_election, jobs.run_rebalance):
        summary = run(job_id="j", coordinator=UNREACHABLE, db=db, connect_timeout=0.5)
        assert summary.outcome is RunOutcome.FAILED
        assert summary.error and "\n" not in summary.error
        assert "connect" in summary.error.lower(), summary.error
    with Store.open(db) as store:
        runs = store.runs()
    assert [r.kind for r in runs] == ["rebalance", "preferred-election"]
    assert all(r.outcome is RunOutcome.FAILED and r.ended_at is not None for r in runs)
    bad = jobs.run_preferred_election(job_id="j", coordinator="nosuch://x", db=db)
    assert bad.outcome is RunOutcome.FAILED and "unknown coordinator scheme" in bad.error


def test_the_scheduler_runs_a_preferred_election_on_a_live_cluster(cluster: Cluster,
                                                                   db: str) -> None:
    make_imbalance(cluster)
    stop = threading.Event()
    runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                              kwargs={"stop": stop, "poll_interval": 0.2})
    runner.start()
    try:
        job = jobs.add_job(db, kind="preferred-election", trigger=jobs.make_trigger(every="1s"),
                           kwargs={"coordinator": cluster.url, "wait": 10})
        store = Store.open(db)

        def outcomes() -> list[RunOutcome]:
            return [r.outcome for r in reversed(store.runs(job_id=job.id))]

        wait_until(lambda: RunOutcome.SUCCEEDED in outcomes(), timeout=15,
                   message="a successful run")
        wait_until(lambda: outcomes()[-1] is RunOutcome.NOTHING_TO_DO, timeout=10,
                   message="a later run with nothing to do")
    finally:
        stop.set()
        runner.join(15)
    assert not runner.is_alive()
    assert cluster.leaders("t")[0] == 1
    runs = list(reversed(store.runs(job_id=job.id)))
    store.close()
    first = next(r for r in runs if r.outcome is RunOutcome.SUCCEEDED)
    assert first.kind == "preferred-election" and first.error is None
    assert first.scores_before["imbalanced_brokers"] == [1]
    assert first.scores_before["not_led"]["1"] == 1
    assert first.scores_after["imbalanced_brokers"] == []
    assert first.details["requested"] == ["t-0"]
    assert all(r.outcome in (RunOutcome.SUCCEEDED, RunOutcome.NOTHING_TO_DO) for r in runs)
    assert all(r.ended_at is not None for r in runs)


def test_a_preferred_election_with_no_controller_writes_nothing(db: str) -> None:
    url = f"memory://nocontroller-{uuid.uuid4().hex[:8]}"
    c = coordinator.connect(url)
    try:
        md = MetadataClient(c)
        md.ensure_layout()
        from coordinator.codecs import BrokerInfo

        for b in (1, 2):
            md.register_broker(BrokerInfo(id=b, host="h", port=1, rack=None))
        Admin(c).create_topic("t", assignment={0: [1, 2], 1: [1, 2]})
        from coordinator import layout
        from coordinator.codecs import PartitionState

        for p in (0, 1):  # led by 2, the non-preferred replica; nobody is controller
            c.create(layout.partition_state("t", p),
                     PartitionState(leader=2, leader_epoch=1, isr=(1, 2),
                                    controller_epoch=1).encode(), make_parents=True)
        summary = jobs.run_preferred_election(job_id="p", coordinator=url, db=db)
        assert summary.outcome is RunOutcome.FAILED
        assert summary.error == "no controller is active to carry out the election"
        assert md.preferred_election() is None
    finally:
        c.close()


def test_a_rebalance_job_plans_executes_verifies_and_records(db: str) -> None:
    c = Cluster((1, 2, 3, 4))
    try:
        # broker 4 holds nothing: balancing moves replicas onto it
        c.create("orders", {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(8)})
        before = c.replicas("orders")
        dry = jobs.run_rebalance(job_id="nightly", coordinator=c.url, db=db, dry_run=True,
                                 max_concurrent_moves=2)
        assert dry.outcome is RunOutcome.DRY_RUN, dry.error
        assert c.replicas("orders") == before and c.md.reassignment() is None
        summary = jobs.run_rebalance(job_id="nightly", coordinator=c.url, db=db,
                                     max_concurrent_moves=2, poll_interval=0.05, timeout=60)
        assert summary.outcome is RunOutcome.SUCCEEDED, summary.error
        after = c.replicas("orders")
        assert any(4 in r for r in after.values())
        with Store.open(db) as store:
            run, dry_run = store.runs(job_id="nightly")
            plan = store.get_plan(run.plan_id)
            ex = store.get_execution(run.execution_id)
            dry_plan = store.get_plan(dry_run.plan_id)
        assert dry_run.outcome is RunOutcome.DRY_RUN and dry_run.execution_id is None
        assert dry_plan.moves > 0 and dry_plan.options["dry_run"] is True
        assert plan.goal == "balance" and plan.moves == len(ex.partitions) > 0
        assert plan.snapshot_digest == dry_plan.snapshot_digest  # same cluster, same digest
        assert plan.options["max_concurrent_moves"] == 2 and plan.options["engine"] == "local"
        assert ex.status is ExecutionStatus.DONE and ex.max_concurrent_moves == 2
        assert all(p.status is PartitionStatus.DONE for p in ex.partitions)
        for p in ex.partitions:
            assert after[p.partition] == p.target_replicas
        assert run.scores_before["replicas_per_broker"]["min"] == 0
        assert run.scores_after["replicas_per_broker"]["spread"] <= 1
        assert run.scores_after["replicas_per_broker"]["spread"] < \
            run.scores_before["replicas_per_broker"]["spread"]
        # balanced now: the next run plans nothing and moves nothing
        again = jobs.run_rebalance(job_id="nightly", coordinator=c.url, db=db)
        assert again.outcome is RunOutcome.NOTHING_TO_DO, again.error
    finally:
        c.close()


def test_a_stopping_scheduler_interrupts_a_running_rebalance(db: str) -> None:
    c = Cluster((1, 2, 3, 4))
    c.catch_up.close()  # moves never finish: the job is still executing when STOP comes
    try:
        c.create("orders", {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(8)})
        result: list[jobs.RunSummary] = []
        worker = threading.Thread(target=lambda: result.append(jobs.run_rebalance(
            job_id="nightly", coordinator=c.url, db=db, max_concurrent_moves=1,
            poll_interval=0.05)))
        worker.start()
        wait_until(lambda: c.md.reassignment() is not None, timeout=15, message="moving")
        jobs.STOP.set()
        worker.join(10)
    finally:
        jobs.STOP.clear()
        c.close()
    assert result and result[0].outcome is RunOutcome.INTERRUPTED
    with Store.open(db) as store:
        run = store.runs()[0]
        ex = store.get_execution(run.execution_id)
    assert run.outcome is RunOutcome.INTERRUPTED and run.ended_at is not None
    assert ex.status is ExecutionStatus.INTERRUPTED and "continue" in ex.error
    statuses = [p.status for p in ex.partitions]
    assert statuses.count(PartitionStatus.IN_PROGRESS) == 1  # one move at a time
    assert set(statuses) <= {PartitionStatus.IN_PROGRESS, PartitionStatus.PENDING}


def test_runs_left_running_by_a_dead_process_are_marked_interrupted(db: str) -> None:
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with Store.open(db) as store:
        gone = store.start_run("j", "rebalance", runner=f"{socket.gethostname()}:"
                                                        f"{dead.stdout.strip()}")
        alive = store.start_run("j", "rebalance", runner=tasks.runner_id())
        elsewhere = store.start_run("j", "rebalance", runner="another-host:1")
        assert jobs.reap_stale_runs(store) == 1
        assert store.get_run(gone.id).outcome is RunOutcome.INTERRUPTED
        assert store.get_run(alive.id).outcome is RunOutcome.RUNNING
        assert store.get_run(elsewhere.id).outcome is RunOutcome.RUNNING


@pytest.mark.postgres
def test_jobs_and_their_runs_in_postgresql() -> None:
    """APScheduler's table and the store's tables side by side in one PostgreSQL database."""
    from sqlalchemy import inspect

    from tests.rebalancer.test_store import postgres_database

    with postgres_database() as url:
        job = jobs.add_job(url, kind="preferred-election", trigger=jobs.make_trigger(every="1s"),
                           kwargs={"coordinator": UNREACHABLE, "connect_timeout": 0.5},
                           job_id="pg")
        assert [j.id for j in jobs.list_jobs(url)] == ["pg"]
        assert jobs.run_job_now(url, job.id).outcome is RunOutcome.FAILED
        stop = threading.Event()
        runner = threading.Thread(target=jobs.run_scheduler, args=(url,),
                                  kwargs={"stop": stop, "poll_interval": 0.1})
        runner.start()
        with Store.open(url) as store:
            wait_until(lambda: len(store.runs(job_id="pg")) >= 2, timeout=10,
                       message="a scheduled run")
            stop.set()
            runner.join(10)
            assert not runner.is_alive()
            runs = store.runs(job_id="pg", limit=None)
            assert all(r.outcome is RunOutcome.FAILED and r.ended_at for r in runs)
            tables = set(inspect(store.engine).get_table_names())
        assert {"apscheduler_jobs", "partctl_job_runs", "partctl_alembic_version"} <= tables
        jobs.remove_job(url, "pg")
        assert jobs.list_jobs(url) == []
