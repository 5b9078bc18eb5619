"""Self-healing on four partctl broker processes over a real ZooKeeper, run by `jobs run-now`'s
path (no wall-clock schedule): a broker killed for good is first waited for (the grace period),
then drained onto the live brokers; the next run finds nothing to do; `jobs history` shows the
anomaly, the decision, the plan and the outcome. And a job that reaches its cluster by
bootstrap servers keeps the path of its client properties, never a secret from them, in the
database (SQLite and PostgreSQL)."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import confluent_kafka as ck
import pytest
from sqlalchemy import create_engine, text

import coordinator
from broker.cluster import LaunchedBroker
from broker.cluster import start_broker as launch_and_wait
from coordinator.admin import Admin
from partctl.cli import main
from rebalancer import jobs
from rebalancer.access import ClusterAccess, CoordinatorAccess, open_access
from rebalancer.store import RunOutcome, SeenAnomaly, Store
from tests.broker.processes import TEST_SETTINGS, coordinator_url
from tests.rebalancer.test_store import postgres_database
from tests.servers import Server
from tests.waiting import wait_until

SETTINGS = TEST_SETTINGS + ("zookeeper.session.timeout.ms=6000\nreplica.fetch.wait.max.ms=100\n"
                            "replica.lag.time.max.ms=10000\n")
GRACE = 3.0
SECRET = "s3cret-pw-do-not-store"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Quartet:
    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root
        self.brokers: dict[int, LaunchedBroker] = {}

    def start(self, broker_id: int) -> None:
        self.brokers[broker_id] = launch_and_wait(self.root / f"broker-{broker_id}",
                                                  broker_id, self.url, extra=SETTINGS)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running())

    def access(self) -> CoordinatorAccess:
        return CoordinatorAccess(coordinator.connect(self.url, timeout=10), owns_session=True)


def mount_tmpfs(directory: Path, size: str) -> str | None:
    """Mounts a tmpfs of ``size`` on ``directory``; the reason it could not, or None."""
    if os.geteuid() != 0:
        return "a tmpfs for a broker's directory is mounted as root"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(directory)], capture_output=True, text=True)
    return None if mounted.returncode == 0 else f"cannot mount a tmpfs here: {mounted.stderr}"


@pytest.fixture(scope="module")
def quartet(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Quartet]:
    """Four brokers whose directories sit on a tmpfs of their own where the tests run as root,
    so how full the machine's own volume is never decides what DescribeLogDirs reports."""
    root = tmp_path_factory.mktemp("heal")
    own_volume = mount_tmpfs(root, "1g") is None
    cluster = Quartet(coordinator_url(zookeeper_server), root)
    try:
        for b in (1, 2, 3, 4):
            cluster.start(b)
        yield cluster
    finally:
        for broker in cluster.brokers.values():
            if broker.running():
                broker.stop()
        if own_volume:
            subprocess.run(["umount", str(root)], check=True)


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("PARTCTL_DB", raising=False)
    monkeypatch.setenv("PARTCTL_HOME", str(tmp_path / "home"))
    return f"sqlite:///{tmp_path / 'heal.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_db(request: pytest.FixtureRequest, db: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield db
    else:
        with postgres_database(request.getfixturevalue("postgres_server")) as url:
            yield url


def holders(access: ClusterAccess, topic: str) -> dict[int, tuple[int, ...]]:
    return {p.partition: p.replicas for p in access.view().partitions if p.topic == topic}


@pytest.mark.servers
def test_a_broker_killed_for_good_is_drained_after_the_grace_period(
        quartet: Quartet, db: str) -> None:
    assignment = {0: [1, 4], 1: [4, 2], 2: [3, 4], 3: [2, 3]}
    client = coordinator.connect(quartet.url, timeout=10)
    try:
        Admin(client).create_topic("orders", assignment=assignment)
    finally:
        client.close()
    access = quartet.access()
    try:
        wait_until(lambda: all(p.leader >= 0 and len(p.isr) == 2 for p in
                               access.view().partitions if p.topic == "orders")
                   and len(holders(access, "orders")) == 4, timeout=60,
                   message="orders led and in sync")
        producer = ck.Producer({"bootstrap.servers": quartet.bootstrap, "acks": "all"})
        for i in range(200):
            producer.produce("orders", value=b"%d" % i, partition=i % 4)
        assert producer.flush(60) == 0
        del producer

        job = jobs.add_job(db, kind="self-heal", schedule=jobs.make_schedule(every="1h"),
                           arguments={"coordinator": quartet.url, "grace": GRACE,
                                      "max_concurrent_moves": 2, "poll_interval": 0.1,
                                      "timeout": 120},
                           job_id="heal")
        healthy = jobs.run_job_now(db, job.id)
        assert healthy.outcome is RunOutcome.NOTHING_TO_DO and healthy.summary == "no anomaly"

        quartet.brokers[4].kill()
        wait_until(lambda: access.view().offline_brokers == (4,), timeout=60,
                   message="broker 4 gone from the coordinator")

        waited = jobs.run_job_now(db, job.id)
        assert waited.outcome is RunOutcome.NOTHING_TO_DO, waited
        assert "broker-gone broker 4 seen for" in waited.summary
        assert holders(access, "orders") == {p: tuple(r) for p, r in assignment.items()}

        with Store.open(db) as store:
            (anomaly,) = store.open_anomalies("heal")
            assert (anomaly.kind, anomaly.subject, dict(anomaly.figures)) == (
                "broker-gone", "broker 4", {"replicas": 3})
            wait_until(lambda: store.now() - anomaly.first_seen >= timedelta(seconds=GRACE),
                       timeout=30, message="the grace period over")

        acted = jobs.run_job_now(db, job.id)
        assert acted.outcome is RunOutcome.SUCCEEDED, acted
        after = holders(access, "orders")
        assert all(4 not in r and len(r) == 2 for r in after.values()), after
        assert access.view().offline_brokers == ()
        for p in access.view().partitions:  # drained onto live brokers, in sync
            assert p.leader in p.replicas and set(p.isr) == set(p.replicas), p

        quiet = jobs.run_job_now(db, job.id)
        assert (quiet.outcome, quiet.summary) == (RunOutcome.NOTHING_TO_DO, "no anomaly")
    finally:
        access.close()

    with Store.open(db) as store:
        runs = store.runs(job_id="heal", limit=None)[::-1]
        assert [r.details["decision"] for r in runs] == ["nothing_to_do", "wait", "act",
                                                         "nothing_to_do"]
        decisions = store.decisions(job_id="heal", limit=None)[::-1]
        assert [d.decision for d in decisions] == ["nothing_to_do", "wait", "act",
                                                   "nothing_to_do"]
        fix = decisions[2]
        assert (fix.action, fix.anomalies) == ("remove-brokers", (anomaly.id,))
        plan = store.get_plan(fix.plan_id)
        assert fix.plan_id == runs[2].plan_id and plan is not None
        assert plan.goal == "decommission" and plan.moves == fix.figures["moves"] >= 3
        assert fix.figures["replicas_moved"] == 3  # broker 4's three replicas, copied
        execution = store.get_execution(fix.execution_id)
        assert execution is not None and execution.status.value == "done"
        assert {p.status.value for p in execution.partitions} == {"done"}
        assert store.open_anomalies("heal") == []
        (resolved,) = store.anomalies(job_id="heal")
        assert resolved.resolved_at is not None

    code, out, err = run("jobs", "history", "--db", db, "--job", "heal")
    assert code == 0, err
    assert "broker-gone broker 4" in out
    assert f"act: remove-brokers 4, moved {plan.moves} partition(s)" in out
    assert "Anomalies:" in out and "Decisions:" in out
    assert f"{fix.plan_id} ({plan.moves} moves)" in out and f"{fix.execution_id} done" in out
    assert "wait: broker-gone broker 4 seen for" in out


@pytest.mark.servers
def test_a_bootstrap_job_drains_a_broker_killed_for_good(quartet: Quartet, db: str) -> None:
    """The same by Kafka's Admin API: the job stores bootstrap servers, no coordinator; the
    broker gone is the one Metadata no longer lists while replicas are still assigned to it."""
    live = sorted(b for b, broker in quartet.brokers.items() if broker.running())
    assert len(live) >= 3, live
    victim, survivors = live[-1], live[:-1]
    assignment = {0: [survivors[0], victim], 1: [victim, survivors[1]],
                  2: [survivors[1], survivors[0]]}
    client = coordinator.connect(quartet.url, timeout=10)
    try:
        Admin(client).create_topic("payments", assignment=assignment)
    finally:
        client.close()
    bootstrap = ",".join(quartet.brokers[b].bootstrap for b in survivors)
    access = open_access(bootstrap=bootstrap, timeout=30)
    try:
        def settled() -> bool:
            parts = access.view(sizes=False).partitions
            return len([p for p in parts if p.topic == "payments"]) == 3 and all(
                p.leader in p.replicas and set(p.isr) == set(p.replicas) for p in parts)

        wait_until(settled, timeout=60, interval=0.2, message="payments led and in sync")
        job = jobs.add_job(db, kind="self-heal", schedule=jobs.make_schedule(every="1h"),
                           arguments={"bootstrap": bootstrap, "grace": GRACE,
                                      "max_concurrent_moves": 2, "poll_interval": 0.1,
                                      "timeout": 120},
                           job_id="heal-kafka")
        healthy = jobs.run_job_now(db, job.id)
        assert (healthy.outcome, healthy.summary) == (RunOutcome.NOTHING_TO_DO, "no anomaly")

        quartet.brokers[victim].kill()
        wait_until(lambda: access.view(sizes=False).offline_brokers == (victim,), timeout=60,
                   interval=0.2, message=f"broker {victim} gone from Metadata")
        before = holders(access, "payments")
        waited = jobs.run_job_now(db, job.id)
        assert waited.outcome is RunOutcome.NOTHING_TO_DO, waited
        assert f"broker-gone broker {victim} seen for" in waited.summary
        assert holders(access, "payments") == before
        with Store.open(db) as store:
            (anomaly,) = store.open_anomalies("heal-kafka")
            assert (anomaly.kind, anomaly.subject) == ("broker-gone", f"broker {victim}")
            wait_until(lambda: store.now() - anomaly.first_seen >= timedelta(seconds=GRACE),
                       timeout=30, message="the grace period over")

        acted = jobs.run_job_now(db, job.id)
        assert acted.outcome is RunOutcome.SUCCEEDED, acted
        view = access.view(sizes=False)
        assert view.offline_brokers == () and set(view.brokers) == set(survivors)
        for p in view.partitions:  # drained onto the live brokers, in sync
            assert victim not in p.replicas and len(p.replicas) == 2, p
        wait_until(settled, timeout=60, interval=0.2, message="the drained replicas in sync")

        quiet = jobs.run_job_now(db, job.id)
        assert (quiet.outcome, quiet.summary) == (RunOutcome.NOTHING_TO_DO, "no anomaly")
    finally:
        access.close()
    with Store.open(db) as store:
        decisions = store.decisions(job_id="heal-kafka", limit=None)[::-1]
        assert [d.decision for d in decisions] == ["nothing_to_do", "wait", "act",
                                                   "nothing_to_do"]
        fix = decisions[2]
        plan = store.get_plan(fix.plan_id)
        assert fix.action == "remove-brokers" and plan is not None
        assert plan.options["cluster"] == f"bootstrap {bootstrap}"
        execution = store.get_execution(fix.execution_id)
        assert execution is not None and execution.status.value == "done"
    code, out, err = run("jobs", "history", "--db", db, "--job", "heal-kafka")
    assert code == 0, err
    assert f"broker-gone broker {victim}" in out
    assert f"act: remove-brokers {victim}, moved {plan.moves} partition(s)" in out
    assert f"{fix.plan_id} ({plan.moves} moves)" in out and f"{fix.execution_id} done" in out


@pytest.mark.servers
def test_a_full_log_dir_reported_by_describe_log_dirs_is_an_anomaly(quartet: Quartet,
                                                                    db: str) -> None:
    """A fifth broker whose directory is a 32 MiB tmpfs, filled to over 80% by a file beside
    its log: DescribeLogDirs reports the volume's total and usable bytes, the job by bootstrap
    servers sees the log directory over ``disk_usage`` and waits out the grace period."""
    directory = quartet.root / "broker-5"
    directory.mkdir()
    refused = mount_tmpfs(directory, "32m")
    if refused is not None:
        pytest.skip(refused.strip())
    try:
        quartet.start(5)
        with open(directory / "filler", "wb") as f:
            f.write(b"\0" * (28 << 20))
        job = jobs.add_job(db, kind="self-heal", schedule=jobs.make_schedule(every="1h"),
                           arguments={"bootstrap": quartet.brokers[5].bootstrap,
                                      "grace": 3600, "disk_usage": 0.8},
                           job_id="heal-disk")
        waited = jobs.run_job_now(db, job.id)
        assert waited.outcome is RunOutcome.NOTHING_TO_DO, waited
        assert waited.summary.startswith("log-dir-full broker 5 "), waited.summary
        with Store.open(db) as store:
            (anomaly,) = store.open_anomalies("heal-disk")
            assert anomaly.kind == "log-dir-full" and anomaly.subject.startswith("broker 5 /")
            assert 0.8 < anomaly.figures["used"] < 1 and anomaly.figures["threshold"] == 0.8
            assert [d.decision for d in store.decisions(job_id="heal-disk")] == ["wait"]
    finally:
        broker = quartet.brokers.pop(5, None)
        if broker is not None and broker.running():
            broker.stop()
        subprocess.run(["umount", str(directory)], check=True)


def test_a_bootstrap_job_keeps_the_properties_path_and_no_secret(any_db: str,
                                                                 tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule"
                     f' required username="alice" password="{SECRET}";\n')
    code, out, err = run("jobs", "add", "self-heal", "--db", any_db, "--every", "1m",
                         "--grace", "10m", "--bootstrap-server", "127.0.0.1:9092,[::1]:9093",
                         "--command-config", str(props), "--replica-spread", "2",
                         "--id", "heal")
    assert code == 0, err
    code, out, err = run("jobs", "add", "rebalance", "--db", any_db, "--every", "1h",
                         "--goal", "disk", "--bootstrap-server", "kafka-1.example:9092",
                         "--command-config", str(props), "--throttle", "1000000",
                         "--id", "disk")
    assert code == 0, err  # by bootstrap servers the cluster reports its sizes: no file needed
    engine = create_engine(any_db)
    try:
        with engine.connect() as conn:
            stored = [dict(r._mapping) for r in conn.execute(text(
                "SELECT * FROM partctl_jobs ORDER BY id"))]
    finally:
        engine.dispose()
    assert SECRET not in repr(stored) and "alice" not in repr(stored)
    arguments = {r["id"]: json.loads(r["arguments"]) for r in stored}
    assert arguments["heal"] == {"bootstrap": "127.0.0.1:9092,[::1]:9093",
                                 "command_config": str(props), "connect_timeout": 5.0,
                                 "grace": 600.0, "rack_violations": True,
                                 "max_concurrent_moves": 50, "replica_spread": 2}
    assert arguments["disk"]["bootstrap"] == "kafka-1.example:9092"
    assert arguments["disk"]["throttle"] == 1000000 and "sizes" not in arguments["disk"]
    code, out, err = run("jobs", "list", "--db", any_db)
    assert code == 0 and SECRET not in out
    assert "bootstrap=127.0.0.1:9092,[::1]:9093" in out and "grace=10m" in out
    assert f"command-config={props}" in out

    # a row changed behind partctl's back: checked as hostile, listed broken, never run
    engine = create_engine(any_db)
    try:
        with engine.begin() as conn:
            bad = {**arguments["heal"], "bootstrap": "evil host:9092"}
            conn.execute(text("UPDATE partctl_jobs SET arguments = :a WHERE id = 'heal'"),
                         {"a": json.dumps(bad)})
            both = {**arguments["disk"], "coordinator": "memory://x"}
            conn.execute(text("UPDATE partctl_jobs SET arguments = :a WHERE id = 'disk'"),
                         {"a": json.dumps(both)})
    finally:
        engine.dispose()
    # a coordinator URL with credentials, given to the library: stored without them
    jobs.add_job(any_db, kind="preferred-election", schedule=jobs.make_schedule(every="1h"),
                 arguments={"coordinator": f"zookeeper://alice:{SECRET}@zk1:2181/kafka"},
                 job_id="leaders")
    engine = create_engine(any_db)
    try:
        with engine.connect() as conn:
            (row,) = conn.execute(text("SELECT arguments FROM partctl_jobs WHERE id = "
                                       "'leaders'")).all()
    finally:
        engine.dispose()
    assert json.loads(row.arguments)["coordinator"] == "zookeeper://zk1:2181/kafka"
    broken = {j.id: j.broken for j in jobs.list_jobs(any_db)}
    assert "'evil host:9092' is not HOST:PORT" in broken["heal"]
    assert "by coordinator or by bootstrap servers, not both" in broken["disk"]
    with pytest.raises(jobs.JobBroken, match="not HOST:PORT"):
        jobs.run_job_now(any_db, "heal")


@pytest.mark.parametrize(("argv", "message"), [
    (("--bootstrap-server", "h:9092", "--coordinator", "memory://x"),
     "give --bootstrap-server or --coordinator, not both"),
    ((), "no cluster: pass --bootstrap-server HOST:PORT"),
    (("--coordinator", "memory://x", "--command-config", "/dev/null"),
     "--command-config goes with --bootstrap-server"),
    (("--bootstrap-server", "h:99999"),
     "bootstrap server 'h:99999': the port must be a number from 1 to 65535"),
    (("--bootstrap-server", "h:9092", "--command-config", "/nonexistent/x.properties"),
     "cannot read --command-config file /nonexistent/x.properties"),
])
def test_jobs_add_names_one_way_in(db: str, argv: tuple[str, ...], message: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    code, out, err = run("jobs", "add", "self-heal", "--db", db, "--every", "1m",
                         "--grace", "60", *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and message in err, err


def test_anomalies_and_decisions_in_the_store(any_db: str) -> None:
    """The store's side of self-healing, on both databases: an anomaly seen again keeps its
    first sighting, one no longer seen is resolved, a fix whose execution runs is found."""
    t0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
    seen = SeenAnomaly(kind="broker-gone", subject="broker 4", first_seen=t0, last_seen=t0,
                       figures={"replicas": 3})
    with Store.open(any_db) as store:
        run_id = store.start_run("heal", "self-heal").id
        (first,) = store.record_anomalies("heal", [seen], now=t0)
        later = t0 + timedelta(minutes=1)
        (again,) = store.record_anomalies("heal", [SeenAnomaly(
            kind="broker-gone", subject="broker 4", first_seen=t0, last_seen=later,
            figures={"replicas": 2})], now=later)
        assert again.id == first.id and again.first_seen == t0 and again.last_seen == later
        assert dict(again.figures) == {"replicas": 2}
        plan = store.add_plan(snapshot_digest="0" * 64, goal="decommission", options={},
                              scores={}, plan={"version": 1, "partitions": [
                                  {"topic": "t", "partition": 0, "replicas": [1, 2]}]})
        execution = store.start_execution(plan.id, max_concurrent_moves=1)
        made = store.add_decision(run_id=run_id, job_id="heal", decision="act",
                                  action="remove-brokers", reason="gone", anomalies=[first.id],
                                  plan_id=plan.id, figures={"moves": 1})
        store.update_decision(made.id, execution_id=execution.id)
        assert [d.id for d in store.running_fixes("heal")] == [made.id]
        store.finish_execution(execution.id, "done")
        assert store.running_fixes("heal") == []
        assert store.record_anomalies("heal", [], now=later + timedelta(minutes=1)) == []
        (resolved,) = store.anomalies(job_id="heal")
        assert resolved.resolved_at == later + timedelta(minutes=1)
        (decision,) = store.decisions(run_ids=[run_id])
        assert (decision.decision, decision.anomalies, decision.execution_id) == (
            "act", (first.id,), execution.id)


def test_a_fix_still_running_is_not_started_again(db: str) -> None:
    """Brokers that never catch up (recording brokers do not replicate): the fix of a rack
    violation cannot finish, its run times out with the moves left in the cluster and the
    execution recorded as running; the next run skips, though the view (the moves' targets)
    looks healthy; once the moves are cancelled, the run after that records the fix as failed
    and acts afresh on the anomaly, still seen since its first sighting."""
    from tests.cli.memory_cluster import Cluster

    cluster = Cluster()  # racks r1, r0, r1: t-2 on brokers 3 and 1 shares rack r1
    access = CoordinatorAccess(cluster.client)
    try:
        jobs.add_job(db, kind="self-heal", schedule=jobs.make_schedule(every="1h"),
                     arguments={"coordinator": cluster.url, "grace": 0, "timeout": 1.0,
                                "poll_interval": 0.05}, job_id="heal")

        first = jobs.run_job_now(db, "heal")
        assert first.outcome is RunOutcome.FAILED, first
        assert first.error is not None and "the moves continue" in first.error
        moving = set(access.in_progress())
        assert moving, "the fix's moves are left in the cluster"
        with Store.open(db) as store:
            (fix,) = store.running_fixes("heal")
            assert fix.action == "rebalance" and fix.plan_id is not None
            (anomaly,) = store.open_anomalies("heal")
            assert (anomaly.kind, dict(anomaly.figures)) == ("rack-violation", {"partitions": 1})

        second = jobs.run_job_now(db, "heal")
        assert second.outcome is RunOutcome.NOTHING_TO_DO, second
        assert second.summary == (
            f"a fix is already running: rebalance (plan {fix.plan_id}, execution "
            f"{fix.execution_id}) with {len(moving)} partition(s) still moving")
        with Store.open(db) as store:
            assert len(store.plans()) == 1  # not planned, nor moved, twice
            assert [d.decision for d in store.decisions(job_id="heal")] == ["skip", "act"]
            assert [a.id for a in store.open_anomalies("heal")] == [anomaly.id]

        access.cancel(wait=15)
        wait_until(lambda: not access.in_progress(), timeout=15, message="moves cancelled")
        third = jobs.run_job_now(db, "heal")  # the fix ended short of its goal: act afresh
        assert third.outcome is RunOutcome.FAILED and "the moves continue" in (third.error or "")
        with Store.open(db) as store:
            ended = store.get_execution(fix.execution_id)
            assert ended is not None and ended.status.value == "failed"
            assert ended.error is not None and "not at their target" in ended.error
            assert [d.decision for d in store.decisions(job_id="heal")] == ["act", "skip",
                                                                            "act"]
            assert len(store.plans()) == 2
            (still,) = store.open_anomalies("heal")
            assert still.id == anomaly.id and still.first_seen == anomaly.first_seen
        access.cancel(wait=15)
    finally:
        cluster.close()
