"""Scheduled jobs: stable function references, schedules, and runs recorded in the store, against
live embedded clusters (memory coordinator + participants with recording brokers).

Recording brokers do not replicate, so an added replica never joins the ISR by itself: the
``CatchUp`` thread plays the data plane and, as a partition leader does for a caught-up follower,
puts the replicas the controller is adding into the ISR (tests.recording_broker.change_isr).
"""

from __future__ import annotations

import inspect
import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.util import ref_to_obj
from sqlalchemy import create_engine, text

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from rebalancer import jobs
from rebalancer.jobs import tasks, triggers
from rebalancer.store import ExecutionStatus, MoveProgress, RunOutcome, Store
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.postgres_server import PostgresServer
from tests.recording_broker import RecordingBroker, change_isr
from tests.waiting import wait_until

UNREACHABLE = "zookeeper://127.0.0.1:1/nothing"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Intervals under a minute (the product's floor), for tests that watch runs repeat."""
    monkeypatch.setattr(triggers, "MIN_INTERVAL", 0.5)


def every(text: str, *, now: bool = False) -> jobs.Schedule:
    """An interval schedule; with ``now``, its first run is due at once."""
    return jobs.make_schedule(every=text, first_run=datetime.now(UTC) if now else None)


def cron(expression: str, timezone: str | None = "UTC") -> jobs.Schedule:
    return jobs.make_schedule(cron=expression, timezone=timezone)


def rows(url: str) -> list[dict]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(text(
                "SELECT * FROM partctl_jobs ORDER BY id"))]
    finally:
        engine.dispose()


def execute(url: str, sql: str, **params: object) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


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
        return Participant(self.url, broker, handler=RecordingBroker, rack=f"r{broker % 2}",
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
    assert set(jobs.JOB_FUNCTIONS) == {"rebalance", "preferred-election", "self-heal"}
    expected = {"rebalance": tasks.run_rebalance,
                "preferred-election": tasks.run_preferred_election,
                "self-heal": jobs.run_self_heal}
    for kind, ref in jobs.JOB_FUNCTIONS.items():
        assert ref.startswith("rebalancer.jobs:")
        assert ref_to_obj(ref) is expected[kind]


def test_the_checked_arguments_are_exactly_the_job_functions_keywords() -> None:
    for kind, ref in jobs.JOB_FUNCTIONS.items():
        params = inspect.signature(ref_to_obj(ref)).parameters
        assert set(jobs.ARGUMENTS[kind]) == set(params) - {"job_id", "db"}, kind
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


def test_stored_jobs_are_plain_rows_with_the_import_string_and_json(db: str) -> None:
    nightly = jobs.add_job(db, kind="rebalance", schedule=cron("0 3 * * *"),
                           arguments={"coordinator": "memory://x", "goal": "balance",
                                      "max_concurrent_moves": 10, "dry_run": True},
                           job_id="nightly")
    leaders = jobs.add_job(db, kind="preferred-election", schedule=every("5m"),
                           arguments={"coordinator": "memory://x"})
    assert nightly.schedule == "cron 0 3 * * *" and leaders.schedule == "every 5m"
    assert leaders.id.startswith("preferred-election-")
    stored = rows(db)
    assert [r["id"] for r in stored] == sorted(["nightly", leaders.id])
    for row in stored:
        assert row["func_ref"] == jobs.JOB_FUNCTIONS[row["kind"]]
        assert callable(ref_to_obj(row["func_ref"]))
        arguments = json.loads(row["arguments"])
        assert arguments["coordinator"] == "memory://x"
        assert "db" not in arguments and "job_id" not in arguments  # given at run time
        assert isinstance(json.loads(row["schedule"]), dict)
        assert isinstance(row["next_run_time"], float) and row["problem"] is None
    by_id = {r["id"]: r for r in stored}
    assert json.loads(by_id["nightly"]["schedule"]) == {"cron": "0 3 * * *", "timezone": "UTC"}
    assert json.loads(by_id[leaders.id]["schedule"])["every"] == 300
    assert [j.id for j in jobs.list_jobs(db)] == sorted(["nightly", leaders.id])
    with pytest.raises(jobs.JobSpecError, match="already exists"):
        jobs.add_job(db, kind="rebalance", schedule=every("1h"),
                     arguments={"coordinator": "memory://x"}, job_id="nightly")
    for kind, arguments, job_id, message in [
            ("reboot", {}, None, "unknown job kind"),
            ("rebalance", {"coordinator": "memory://x"}, "no spaces", "bad job id"),
            ("rebalance", {"coordinator": "memory://x", "db": "sqlite://"}, None,
             "given when the job runs"),
            ("rebalance", {"coordinator": "memory://x", "command": "rm"}, None,
             "unknown argument 'command'"),
            ("rebalance", {}, None, "coordinator is missing"),
            ("rebalance", {"coordinator": "nosuch://x"}, None, "unknown coordinator scheme"),
            ("rebalance", {"coordinator": "memory://x", "max_concurrent_moves": True}, None,
             "whole number"),
            ("rebalance", {"coordinator": "memory://x", "max_concurrent_moves": 0}, None,
             "at least 1"),
            ("rebalance", {"coordinator": "memory://x", "goal": "decommission"}, None,
             "needs the brokers"),
            ("preferred-election", {"coordinator": "memory://x", "percentage": 101}, None,
             "at most 100"),
            ("preferred-election", {"coordinator": "memory://x", "wait": float("nan")}, None,
             "must be a number")]:
        with pytest.raises(ValueError, match=message) as info:
            jobs.add_job(db, kind=kind, schedule=every("1h"), arguments=arguments,
                         job_id=job_id)
        assert "\n" not in str(info.value)
    jobs.remove_job(db, "nightly")
    assert [j.id for j in jobs.list_jobs(db)] == [leaders.id]
    with pytest.raises(jobs.JobNotFound):
        jobs.remove_job(db, "nightly")


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h", 3600),
                                               ("1h30m", 5400), ("2d", 172800), ("1.5s", 1.5)])
def test_durations(text: str, seconds: float) -> None:
    assert jobs.parse_duration(text) == seconds
    assert jobs.parse_duration(jobs.format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "5", "5x", "m5", "0s", "-5m", "5m 3", "999999999999d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(jobs.TriggerError, match="bad duration") as info:
        jobs.parse_duration(text)
    assert "\n" not in str(info.value)


def test_bad_schedules_are_one_line_errors() -> None:
    for kwargs, message in [({"cron": "0 3 * *"}, "Wrong number of fields"),
                            ({"cron": "61 * * * *"}, "bad cron expression"),
                            ({}, "exactly one schedule"),
                            ({"cron": "* * * * *", "every": "5m"}, "exactly one schedule"),
                            ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"},
                             "unknown time zone"),
                            ({"every": "5m", "timezone": "UTC"}, "--timezone goes with --cron"),
                            ({"cron": "0 3 * * 8"}, "bad day of week '8'"),
                            ({"cron": "0 3 * * 5-1"}, "runs backwards")]:
        with pytest.raises(jobs.TriggerError, match=message) as info:
            jobs.make_schedule(**kwargs)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(("every_text", "message"), [
    ("0.0001s", "not between 1m and 365d"), ("59s", "not between 1m and 365d"),
    ("999999999999d", "at most 365d"), ("366d", "at most 365d")])
def test_an_interval_is_between_a_minute_and_a_year(every_text: str, message: str) -> None:
    """0.0001s ran 128 times (and stored 128 plans) in 10 s; 999999999999d overflowed."""
    with pytest.raises(jobs.TriggerError, match=message) as info:
        jobs.make_schedule(every=every_text)
    assert "\n" not in str(info.value)
    assert every("1m").seconds == jobs.MIN_INTERVAL == 60
    assert every("365d").seconds == jobs.MAX_DURATION


@pytest.mark.parametrize("expression", ["0 3 31 2 *", "0 3 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_never_fires_is_refused(expression: str) -> None:
    with pytest.raises(jobs.TriggerError, match="never fires") as info:
        jobs.make_schedule(cron=expression, timezone="UTC")
    assert "\n" not in str(info.value)
    leap = cron("0 3 29 2 *")  # once in four years is still a schedule
    assert triggers.first_run_time(leap).day == 29


@pytest.mark.parametrize(("field", "days"), [
    ("0", {"Sun"}), ("7", {"Sun"}), ("sun", {"Sun"}), ("1-5", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
    ("5-7", {"Fri", "Sat", "Sun"}), ("0-6", {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}),
    ("*/2", {"Sun", "Tue", "Thu", "Sat"}), ("1,3", {"Mon", "Wed"}), ("SAT", {"Sat"})])
def test_day_of_week_is_crontabs_with_sunday_as_0_or_7(field: str, days: set[str]) -> None:
    """APScheduler 3 counts weekdays from Monday: "0 3 * * 0" ran on Mondays."""
    schedule = cron(f"0 3 * * {field}")
    trigger = triggers.to_trigger(schedule)
    fired, when = set(), datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(14):
        when = trigger.get_next_fire_time(None, when + timedelta(seconds=1))
        fired.add(when.strftime("%a"))
    assert fired == days


def test_a_day_of_month_with_a_day_of_week_is_refused() -> None:
    """Crontab runs on either, APScheduler only on days that match both: a silent change."""
    with pytest.raises(jobs.TriggerError, match="not both"):
        jobs.make_schedule(cron="0 3 1 * 1", timezone="UTC")
    assert cron("0 3 1 * *") and cron("0 3 * * 1") and cron("0 3 */2 * 1")


def test_schedules_round_trip_through_json_and_are_checked_when_read() -> None:
    for schedule in (cron("0 3 * * 1-5", "Europe/Paris"), every("1h30m"), cron("*/5 * * * *")):
        doc = json.loads(json.dumps(triggers.schedule_to_json(schedule)))
        assert triggers.schedule_from_json(doc) == schedule
        assert triggers.schedule_of(triggers.to_trigger(schedule)) == schedule
    for doc, message in [({"every": 0.0001, "start": "2026-01-01T00:00:00+00:00"},
                          "not between"),
                         ({"every": 60, "start": "2026-01-01T00:00:00"}, "no time zone"),
                         ({"cron": "0 3 31 2 *", "timezone": "UTC"}, "never fires"),
                         ({"cron": "0 3 * * *", "timezone": "Nowhere/Land"}, "unknown time zone"),
                         ({"cron": "0 3 * * *"}, "not a schedule"),
                         ({"every": True, "start": "x"}, "not a schedule"),
                         (["0 3 * * *"], "not a schedule")]:
        with pytest.raises(jobs.TriggerError, match=message):
            triggers.schedule_from_json(doc)


def test_goals() -> None:
    from rebalancer.planner.goals import AddBrokers, Balance, Decommission, RepairRacks

    assert jobs.goals_for("balance") == (Balance(),)
    assert jobs.goals_for("repair-racks") == (RepairRacks(),)
    assert jobs.goals_for("add-brokers", [4]) == (AddBrokers(brokers=frozenset({4})),)
    assert jobs.goals_for("decommission", [2]) == (Decommission(brokers=frozenset({2})),)
    with pytest.raises(jobs.JobSpecError, match="needs the brokers"):
        jobs.goals_for("decommission")
    with pytest.raises(jobs.JobSpecError, match="unknown goal"):
        jobs.goals_for("tidy")


def test_a_job_whose_function_is_gone_is_kept_reported_and_skipped(db: str) -> None:
    """Not APScheduler's default: its store deletes a job it cannot unpickle."""
    job = jobs.add_job(db, kind="preferred-election", schedule=every("1m", now=True),
                       arguments={"coordinator": UNREACHABLE, "connect_timeout": 0.5},
                       job_id="orphan")
    execute(db, "UPDATE partctl_jobs SET func_ref = 'rebalancer.jobs:renamed_long_ago', "
                "next_run_time = 0")
    listed = jobs.list_jobs(db)
    assert [(j.id, j.func_ref) for j in listed] == [("orphan", "rebalancer.jobs:renamed_long_ago")]
    assert "renamed_long_ago" in (listed[0].broken or "")
    with pytest.raises(jobs.JobBroken, match="broken and cannot run"):
        jobs.run_job_now(db, "orphan")
    stop = threading.Event()
    runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                              kwargs={"stop": stop, "poll_interval": 0.1})
    runner.start()
    time.sleep(1.0)  # due since 1970: a store that did not skip it would run it
    stop.set()
    runner.join(10)
    assert not runner.is_alive()
    assert [r["id"] for r in rows(db)] == ["orphan"]
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


def test_the_scheduler_runs_a_preferred_election_on_a_live_cluster(cluster: Cluster, db: str,
                                                                   fast: None) -> None:
    make_imbalance(cluster)
    stop = threading.Event()
    runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                              kwargs={"stop": stop, "poll_interval": 0.2})
    runner.start()
    try:
        job = jobs.add_job(db, kind="preferred-election", schedule=every("1s", now=True),
                           arguments={"coordinator": cluster.url, "wait": 10})
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
        from coordinator.codecs import PartitionStateNode

        for p in (0, 1):  # led by 2, the non-preferred replica; nobody is controller
            c.create(layout.partition_state("t", p),
                     PartitionStateNode(leader=2, leader_epoch=1, isr=(1, 2),
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
        assert all(p.status is MoveProgress.DONE for p in ex.partitions)
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


def test_a_disk_job_keeps_its_goal_and_evens_the_bytes_of_the_sizes_it_reads(
        db: str, tmp_path: Path) -> None:
    """A stored job with goal disk: each run reads its sizes file, plans with BalanceDisk,
    records the plan under its goal and options, and the bytes per broker come out even; a
    sizes file that is gone makes a failed run with one line, nothing moved."""
    c = Cluster((1, 2, 3, 4))
    try:
        # counts even (four replicas a broker), bytes not: 1 and 2 hold the big partitions
        assignment = {p: [1 + p % 4, 1 + (p + 1) % 4] for p in range(8)}
        c.create("logs", assignment)
        mib = 1 << 20
        sized = {p: (80 if 1 in r and 2 in r else 10 if 3 in r and 4 in r else 30) * mib
                 for p, r in assignment.items()}
        sizes = tmp_path / "sizes.json"
        sizes.write_text(json.dumps({"partitions": [
            {"topic": "logs", "partition": p, "size_bytes": n} for p, n in sized.items()]}))
        job = jobs.add_job(db, kind="rebalance", schedule=every("1h"), job_id="disk",
                           arguments={"coordinator": c.url, "goal": "disk",
                                      "sizes": str(sizes), "count_slack": 0.25,
                                      "poll_interval": 0.05, "timeout": 60})
        assert jobs.list_jobs(db)[0].arguments["goal"] == "disk"  # the job keeps its goal
        summary = jobs.run_job_now(db, job.id)
        assert summary.outcome is RunOutcome.SUCCEEDED, summary.error
        with Store.open(db) as store:
            run = store.runs(job_id="disk")[0]
            plan = store.get_plan(run.plan_id)
        assert plan.goal == "disk" and plan.moves > 0
        assert plan.options["count_slack"] == 0.25 and plan.options["sizes"] == str(sizes)
        before, after = run.scores_before["bytes_per_broker"], run.scores_after["bytes_per_broker"]
        assert before["max_over_mean"] > 1.3
        assert after["max_over_mean"] < before["max_over_mean"]
        assert after["max_over_mean"] <= 1.1
        moved = c.replicas("logs")
        sizes.unlink()
        failed = jobs.run_job_now(db, job.id)
        assert failed.outcome is RunOutcome.FAILED
        assert failed.error == f"cannot read the sizes file {sizes}: No such file or directory"
        assert c.replicas("logs") == moved
    finally:
        c.close()
    for arguments, message in [
            ({"goal": "disk"}, "goal disk needs sizes"),
            ({"goal": "balance", "count_slack": 0.1, "sizes": str(sizes)},
             "count_slack goes with goal disk"),
            ({"goal": "disk", "sizes": "sizes.json"}, "absolute path"),
            ({"goal": "disk", "sizes": str(sizes), "count_slack": 1}, "below 1")]:
        with pytest.raises(jobs.JobSpecError, match=message):
            jobs.add_job(db, kind="rebalance", schedule=every("1h"),
                         arguments={"coordinator": "memory://x", **arguments})


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
    assert statuses.count(MoveProgress.IN_PROGRESS) == 1  # one move at a time
    assert set(statuses) <= {MoveProgress.IN_PROGRESS, MoveProgress.PENDING}


@pytest.mark.processes
def test_runs_left_running_by_a_dead_process_are_marked_interrupted(db: str) -> None:
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with Store.open(db) as store:
        gone = store.start_run("a", "rebalance", runner=f"{socket.gethostname()}:"
                                                        f"{dead.stdout.strip()}")
        plan = store.add_plan(snapshot_digest="0" * 64, goal="balance", options={}, scores={},
                              plan={"version": 1, "partitions": [
                                  {"topic": "t", "partition": 0, "replicas": [1, 2]}]})
        ex = store.start_execution(plan.id, max_concurrent_moves=1)
        store.update_run(gone.id, execution_id=ex.id)
        alive = store.start_run("b", "rebalance", runner=tasks.runner_id())
        elsewhere = store.start_run("c", "rebalance", runner="another-host:1")
        silent = store.start_run("d", "rebalance", runner="another-host:2")
        execute(db, "UPDATE partctl_job_runs SET heartbeat_at = '2000-01-01 00:00:00' "
                    "WHERE id = :id", id=silent.id)
        assert jobs.reap_stale_runs(store) == 2
        assert store.get_run(gone.id).outcome is RunOutcome.INTERRUPTED
        assert "exited before it finished" in store.get_run(gone.id).error
        assert store.get_execution(ex.id).status is ExecutionStatus.INTERRUPTED
        assert store.get_run(silent.id).outcome is RunOutcome.INTERRUPTED
        assert "gave no sign of life" in store.get_run(silent.id).error
        assert store.get_run(alive.id).outcome is RunOutcome.RUNNING
        assert store.get_run(elsewhere.id).outcome is RunOutcome.RUNNING


def test_a_run_holder_is_gone_when_its_process_is_or_its_heartbeat_is_old() -> None:
    from rebalancer.jobs.lock import holder_gone
    from rebalancer.store import JobRun

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def run(runner: str | None, heartbeat_age: float | None) -> JobRun:
        beat = None if heartbeat_age is None else now - timedelta(seconds=heartbeat_age)
        return JobRun(id=1, job_id="j", kind="rebalance", started_at=now - timedelta(hours=1),
                      ended_at=None, outcome=RunOutcome.RUNNING, error=None,
                      scores_before=None, scores_after=None, details=None, plan_id=None,
                      execution_id=None, runner=runner, heartbeat_at=beat)

    def gone(r: JobRun) -> str | None:
        return holder_gone(r, now, host="here", alive=lambda pid: pid == 7, lease=60)

    assert gone(run("here:7", 1)) is None  # alive and beating
    assert "exited" in gone(run("here:8", 1))  # its pid is gone from this host
    assert gone(run("there:8", 59)) is None  # another host: only the heartbeat tells
    assert "no sign of life for 61s" in gone(run("there:8", 61))
    assert "no sign of life" in gone(run("here:7", 61))  # a pid reused, or a hung process
    assert "no sign of life for 3600s" in gone(run(None, None))  # no heartbeat: since start


def test_a_run_that_lost_its_lock_stops_at_its_next_checkpoint(db: str) -> None:
    from rebalancer.jobs.lock import Heartbeat

    with Store.open(db) as store:
        run = store.start_run("j", "rebalance", runner=tasks.runner_id())
        with Heartbeat(store, run.id, every=0.02) as heartbeat:
            first = store.get_run(run.id).heartbeat_at
            execute(db, "UPDATE partctl_job_runs SET heartbeat_at = NULL WHERE id = :id",
                    id=run.id)
            wait_until(lambda: store.get_run(run.id).heartbeat_at is not None, timeout=10,
                       message="a heartbeat")
            assert first is not None and not heartbeat.lost.is_set()
            store.interrupt_runs([run.id], "taken for dead")  # what another claimant does
            wait_until(heartbeat.lost.is_set, timeout=10, message="the lock lost")
            assert "another process closed this run" in heartbeat.reason
            tasks._current.heartbeat = heartbeat
            try:
                with pytest.raises(tasks.Interrupted, match="lost the job's lock"):
                    tasks._checkpoint()
            finally:
                tasks._current.heartbeat = None


def test_the_scheduler_skips_a_job_another_process_is_running(
        db: str, fast: None, caplog: pytest.LogCaptureFixture) -> None:
    """Its due run is not started and records nothing; once the other run ends, it runs."""
    jobs.add_job(db, kind="preferred-election", schedule=every("1s", now=True),
                 arguments={"coordinator": UNREACHABLE, "connect_timeout": 0.2}, job_id="held")
    store = Store.open(db)
    holder = store.start_run("held", "preferred-election", runner=tasks.runner_id())
    stop = threading.Event()
    runner = threading.Thread(target=jobs.run_scheduler, args=(db,),
                              kwargs={"stop": stop, "poll_interval": 0.1})
    caplog.set_level("WARNING")
    runner.start()
    try:
        wait_until(lambda: any("held not run: job held is already running: run "
                               f"{holder.id} on {tasks.runner_id()}" in r.getMessage()
                               for r in caplog.records), timeout=10, message="a skipped run")
        assert [r.id for r in store.runs(job_id="held")] == [holder.id]
        store.finish_run(holder.id, "succeeded")
        wait_until(lambda: len(store.runs(job_id="held")) > 1, timeout=10,
                   message="a run once the lock is free")
    finally:
        stop.set()
        runner.join(10)
        store.close()
    assert not runner.is_alive()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []  # no traceback


@pytest.mark.postgres
def test_jobs_and_their_runs_in_postgresql(fast: None, postgres_server: PostgresServer) -> None:
    """Jobs and their runs side by side in one PostgreSQL database."""
    from sqlalchemy import inspect

    from tests.rebalancer.test_store import postgres_database

    with postgres_database(postgres_server) as url:
        job = jobs.add_job(url, kind="preferred-election", schedule=every("1s", now=True),
                           arguments={"coordinator": UNREACHABLE, "connect_timeout": 0.5},
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
        assert {"partctl_jobs", "partctl_job_runs", "partctl_alembic_version"} <= tables
        assert "apscheduler_jobs" not in tables
        jobs.remove_job(url, "pg")
        assert jobs.list_jobs(url) == []
