"""The db, jobs and scheduler commands: add/list/remove/run-now/history against a live embedded
cluster, one-line errors, ``scheduler run`` as a process stopped by SIGTERM, crafted and damaged
job rows never run, and no password shown or stored (SQLite, and PostgreSQL where it matters)."""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

import coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from partctl.cli import main
from rebalancer import jobs
from rebalancer.jobs import JOB_FUNCTIONS
from rebalancer.store import RunOutcome, Store
from rebalancer.store.migrate import head_revision
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.postgres_server import PostgresServer
from tests.rebalancer.test_migrations import Exploit, legacy_store
from tests.rebalancer.test_store import postgres_database
from tests.recording_broker import RecordingBroker, change_isr
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
UNREACHABLE = "zookeeper://127.0.0.1:1/none"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own: what a user sees on stdout and stderr,
    log records and threads' tracebacks included."""
    return subprocess.run([sys.executable, "-m", "partctl", *argv], cwd=REPO,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def sql(url: str, statement: str, **params: object) -> list[dict]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def due_now(db: str, job_id: str, *, kind: str = "preferred-election",
            coordinator_url: str = UNREACHABLE, **arguments: object) -> None:
    """A job that runs every minute, first at once (the CLI's --every starts one interval
    from now)."""
    jobs.add_job(db, kind=kind, job_id=job_id,
                 schedule=jobs.make_schedule(every="1m", first_run=datetime.now(UTC)),
                 arguments={"coordinator": coordinator_url, **arguments})


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_db(request: pytest.FixtureRequest, db: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield db
    else:
        with postgres_database(request.getfixturevalue("postgres_server")) as url:
            yield url


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("PARTCTL_DB", raising=False)
    monkeypatch.setenv("PARTCTL_HOME", str(tmp_path / "home"))  # never the user's own store
    return f"sqlite:///{tmp_path / 'cli.db'}"


class Live:
    """Three participants on a memory coordinator; broker 1 has lost leadership of t-0."""

    def __init__(self) -> None:
        self.url = f"memory://clijobs-{uuid.uuid4().hex[:10]}"
        self.network = InProcessNetwork()
        self.participants = {b: self.start(b) for b in (1, 2, 3)}
        self.client = coordinator.connect(self.url)
        self.md = MetadataClient(self.client)
        wait_until(lambda: self.md.controller() is not None, timeout=10)

    def start(self, broker: int) -> Participant:
        return Participant(self.url, broker, handler=RecordingBroker, rack=f"r{broker % 2}",
                           network=self.network).start()

    def leaders(self) -> dict[int, int]:
        keys = [TopicPartition("t", p) for p in range(3)]
        return {k.partition: s.value.leader
                for k, s in self.md.partition_states(keys).items() if s is not None}

    def drift(self) -> None:
        from coordinator.admin import Admin

        Admin(self.client).create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1],
                                                         2: [3, 1, 2]})
        wait_until(lambda: self.leaders() == {0: 1, 1: 2, 2: 3}, timeout=10)
        self.participants.pop(1).close()
        wait_until(lambda: self.leaders().get(0) == 2, timeout=10, message="failover")
        self.participants[1] = self.start(1)
        wait_until(lambda: 1 in self.md.broker_ids(), timeout=10)
        assert change_isr(self.md, TopicPartition("t", 0), [2, 3, 1])
        wait_until(lambda: self.md.isr_change_notifications() == [], timeout=10)

    def close(self) -> None:
        for p in self.participants.values():
            p.close()
        self.client.close()


@pytest.fixture
def live() -> Iterator[Live]:
    cluster = Live()
    yield cluster
    cluster.close()


def test_db_upgrade_current_downgrade(db: str) -> None:
    code, out, _ = run("db", "current", "--db", db)
    assert code == 0 and "revision none" in out and "partctl db upgrade" in out
    head = head_revision()
    code, out, _ = run("db", "upgrade", "--db", db)
    assert code == 0 and f"upgraded from an empty database to revision {head}" in out
    code, out, _ = run("db", "upgrade", "--db", db)
    assert code == 0 and f"already at revision {head}" in out
    code, out, _ = run("db", "current", "--db", db)
    assert code == 0 and f"revision {head} (up to date)" in out
    code, out, _ = run("db", "downgrade", "--db", db, "--revision", "base")
    assert code == 0 and "base (no tables)" in out


def test_the_default_store_is_under_partctl_home(db: str, tmp_path: Path) -> None:
    code, out, _ = run("db", "upgrade")
    assert code == 0 and str(tmp_path / "home" / "partctl.db") in out
    assert (tmp_path / "home" / "partctl.db").exists()


def test_a_store_path_must_exist_unless_db_upgrade_creates_it(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for where in ("notaurl", "postgresql:/127.0.0.1/x"):
        for argv in (["jobs", "list"], ["jobs", "history"], ["db", "current"],
                     ["jobs", "add", "preferred-election", "--every", "5m", "--coordinator",
                      "memory://x"]):
            code, out, err = run(*argv, "--db", where)
            assert code == 1 and out == "", (argv, out)
            assert err.count("\n") == 1 and "neither a database URL" in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no empty store appeared
    code, out, err = run("db", "upgrade", "--db", "new.db")
    assert code == 0 and "upgraded from an empty database" in out, err
    code, out, err = run("jobs", "list", "--db", "new.db")
    assert (code, out) == (0, "No jobs.\n"), err


def test_an_unusable_partctl_home_or_db_path_is_one_line(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setenv("PARTCTL_HOME", str(plain / "home"))
    for argv in (["jobs", "list"], ["db", "upgrade"], ["jobs", "history"],
                 ["jobs", "list", "--db", f"sqlite:///{plain / 'x.db'}"],
                 ["db", "upgrade", "--db", str(plain / "x.db")]):
        code, out, err = run(*argv)
        assert code == 1 and out == "", argv
        assert err.startswith("partctl: error: cannot create the store at "), (argv, err)
        assert err.count("\n") == 1, (argv, err)


def test_jobs_add_list_run_now_history_remove(live: Live, db: str) -> None:
    live.drift()
    code, out, err = run("jobs", "add", "rebalance", "--cron", "0 3 * * *", "--goal", "balance",
                         "--max-concurrent-moves", "10", "--dry-run", "--coordinator", live.url,
                         "--db", db, "--id", "nightly")
    assert code == 0, err
    assert out.startswith("Added job nightly: rebalance, cron 0 3 * * *, next run ")
    code, out, err = run("jobs", "add", "preferred-election", "--every", "5m", "--coordinator",
                         live.url, "--db", db, "--id", "leaders", "--wait", "10s")
    assert code == 0 and "Added job leaders: preferred-election, every 5m" in out, err

    code, out, _ = run("jobs", "list", "--db", db)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["ID", "KIND", "SCHEDULE"]
    assert lines[1].startswith("leaders ") and "every 5m" in lines[1]
    assert "imbalance=10%" in lines[1] and "wait=10s" in lines[1]
    assert lines[2].startswith("nightly ") and "cron 0 3 * * *" in lines[2]
    assert "max-concurrent-moves=10" in lines[2] and "dry-run" in lines[2]
    assert "goal=balance" in lines[2] and f"coordinator={live.url}" in lines[2]

    code, out, err = run("jobs", "run-now", "leaders", "--db", db)
    assert code == 0, out + err
    assert out.startswith("Run 1 of job leaders (preferred-election): succeeded: ")
    assert "imbalanced brokers [1]->[]" in out and "1 election(s) requested" in out
    assert live.leaders()[0] == 1
    code, out, err = run("jobs", "run-now", "nightly", "--db", db)
    assert code == 0 and "(rebalance): " in out, out + err
    outcome = out.split(": ")[1]
    assert outcome in ("dry_run", "nothing_to_do"), out

    code, out, _ = run("jobs", "history", "--db", db)
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and rows[0][:3] == ["RUN", "JOB", "KIND"]
    assert [(r[0], r[1], r[2]) for r in rows[1:]] == [("2", "nightly", "rebalance"),
                                                      ("1", "leaders", "preferred-election")]
    assert rows[1][6] == outcome and rows[1][7] == "1"  # the recorded plan's id
    code, out, _ = run("jobs", "history", "--db", db, "--job", "leaders", "--limit", "5")
    assert code == 0 and len(out.splitlines()) == 2 and "succeeded" in out
    code, out, _ = run("jobs", "history", "--db", db, "--limit", "1")
    assert len(out.splitlines()) == 2 and "nightly" in out
    code, out, _ = run("jobs", "list", "--db", db)
    assert "succeeded" in out.splitlines()[1]  # leaders' last run

    code, out, _ = run("jobs", "remove", "nightly", "--db", db)
    assert code == 0 and "Removed job nightly" in out
    code, out, _ = run("jobs", "list", "--db", db)
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["leaders"]
    code, out, _ = run("jobs", "history", "--db", db, "--job", "nightly")
    assert code == 0 and "nightly" in out  # history outlives the job
    run("jobs", "remove", "leaders", "--db", db)
    assert run("jobs", "list", "--db", db)[1].strip() == "No jobs."


def test_every_stored_job_references_a_registered_function(db: str) -> None:
    for kind in JOB_FUNCTIONS:
        code, _, err = run("jobs", "add", kind, "--every", "1h", "--coordinator", "memory://x",
                           "--db", db)
        assert code == 0, err
    stored = sql(db, "SELECT kind, func_ref FROM partctl_jobs")
    assert sorted(r["func_ref"] for r in stored) == sorted(JOB_FUNCTIONS.values())
    assert all(JOB_FUNCTIONS[r["kind"]] == r["func_ref"] for r in stored)


@pytest.mark.processes
def test_jobs_list_never_unpickles_a_crafted_pickled_row(any_db: str, tmp_path: Path) -> None:
    """A store written by partctl before revision 0002: a crafted row in APScheduler's table ran
    code in `jobs list`, a corrupt one failed it with UnpicklingError. Both are now listed as
    BROKEN, and nothing is run, here or by run-now."""
    marker = tmp_path / "unpickled"
    legacy_store(any_db, marker)
    done = cli("jobs", "list", "--db", any_db)
    assert not marker.exists(), "jobs list unpickled the crafted row"
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert sorted(lines) == ["corrupt", "evil", "legacy"]
    assert all("BROKEN" in line and "jobs remove" in line for line in lines.values())
    assert "preferred-election" in lines["legacy"]
    done = cli("jobs", "run-now", "evil", "--db", any_db)
    assert done.returncode == 1 and not marker.exists()
    assert done.stderr.startswith("partctl: error: job 'evil' is broken and cannot run: ")
    assert done.stderr.count("\n") == 1


def test_a_crafted_or_damaged_job_row_is_broken_and_never_run(any_db: str,
                                                             tmp_path: Path) -> None:
    """Rows written into partctl_jobs by someone else: another function, arguments it does
    not take, a pickle where JSON belongs, nonsense in typed columns. Each is listed as
    BROKEN with the reason; none runs from run-now or from the scheduler."""
    marker = tmp_path / "ran"
    assert run("db", "upgrade", "--db", any_db)[0] == 0
    good = {"coordinator": "memory://x"}
    every = json.dumps({"every": 60, "start": "2026-01-01T00:00:00+00:00"})
    crafted = {
        "other-function": ("rebalance", "pathlib:Path.touch", every, {"self": str(marker)}),
        "unknown-argument": ("rebalance", JOB_FUNCTIONS["rebalance"], every,
                             {**good, "path": str(marker)}),
        "not-json": ("rebalance", JOB_FUNCTIONS["rebalance"], every,
                     pickle.dumps(Exploit(marker)).hex()),
        "pickled-schedule": ("rebalance", JOB_FUNCTIONS["rebalance"],
                             pickle.dumps(Exploit(marker)).hex(), good),
        "no-kind": ("shell", JOB_FUNCTIONS["rebalance"], every, good),
        "too-often": ("rebalance", JOB_FUNCTIONS["rebalance"],
                      json.dumps({"every": 0.0001, "start": "2026-01-01T00:00:00+00:00"}), good),
        "bad id!": ("rebalance", JOB_FUNCTIONS["rebalance"], every, good),
    }
    for job_id, (kind, ref, schedule, arguments) in crafted.items():
        sql(any_db, "INSERT INTO partctl_jobs (id, kind, func_ref, schedule, arguments, "
                    "next_run_time) VALUES (:id, :kind, :ref, :schedule, :arguments, 0)",
            id=job_id, kind=kind, ref=ref, schedule=schedule,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments))
    if any_db.startswith("sqlite"):  # SQLite keeps whatever it is given, whatever the type
        sql(any_db, "INSERT INTO partctl_jobs (id, kind, func_ref, schedule, arguments, "
                    "next_run_time) VALUES ('typeless', 'rebalance', :ref, :schedule, x'00ff', "
                    "'soon')", ref=JOB_FUNCTIONS["rebalance"], schedule=every)
    code, out, err = run("jobs", "list", "--db", any_db)
    assert code == 0 and err == ""
    listed = out.splitlines()[1:]
    assert len(listed) == len(crafted) + any_db.startswith("sqlite")
    assert all("BROKEN" in line and "cannot run: " in line for line in listed), listed
    reasons = {line.split()[0]: line for line in listed}
    assert "is not partctl's rebalance job" in reasons["other-function"]
    assert "unknown argument 'path'" in reasons["unknown-argument"]
    assert "arguments is not valid JSON" in reasons["not-json"]
    assert "schedule is not valid JSON" in reasons["pickled-schedule"]
    assert "unknown job kind 'shell'" in reasons["no-kind"]
    assert "not between 1m and 365d" in reasons["too-often"]
    assert "bad job id" in reasons["bad"]
    for job_id in crafted:
        code, _, err = run("jobs", "run-now", job_id, "--db", any_db)
        assert code == 1 and "is broken and cannot run" in err and err.count("\n") == 1
    stop = threading.Event()
    thread = threading.Thread(target=jobs.run_scheduler, args=(any_db,),
                              kwargs={"stop": stop, "poll_interval": 0.1})
    thread.start()
    try:
        time.sleep(1.0)  # every crafted job has been due since 1970
    finally:
        stop.set()
        thread.join(10)
    assert not marker.exists()
    with Store.open(any_db) as store:
        assert store.runs() == []
    assert len(sql(any_db, "SELECT id FROM partctl_jobs")) == len(listed)  # none deleted


@pytest.mark.processes
def test_overdue_jobs_do_not_make_jobs_commands_print_scheduler_errors(db: str) -> None:
    """Each command started a paused scheduler on the job store, which tried to submit any
    overdue job to an executor already shut down: "cannot schedule new futures after
    shutdown", a traceback on every `jobs add|list|remove|run-now`; and `jobs list` moved
    overdue jobs' next run times on."""
    due_now(db, "overdue", connect_timeout=0.2)
    sql(db, "UPDATE partctl_jobs SET next_run_time = :t", t=datetime.now(UTC).timestamp() - 30)
    before = sql(db, "SELECT next_run_time FROM partctl_jobs")
    for argv in (["jobs", "list"],
                 ["jobs", "add", "preferred-election", "--every", "5m", "--coordinator",
                  "memory://x", "--id", "other"],
                 ["jobs", "remove", "other"],
                 ["jobs", "run-now", "overdue"]):
        done = cli(*argv, "--db", db)
        assert "cannot schedule new futures" not in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr, (argv, done.stderr)
        if argv[1] == "run-now":
            assert done.returncode == 1 and done.stdout.startswith("Run 1 of job overdue")
        else:
            assert done.returncode == 0 and done.stderr == "", (argv, done.stderr)
    assert sql(db, "SELECT next_run_time FROM partctl_jobs") == before


def test_a_disk_rebalance_job_keeps_its_goal_and_sizes_file(db: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    sizes = tmp_path / "sizes.json"
    sizes.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0,
                                                 "size_bytes": 1024}]}))
    monkeypatch.chdir(tmp_path)  # a relative path is kept as an absolute one
    code, out, err = run("jobs", "add", "rebalance", "--every", "1h", "--goal", "disk",
                         "--sizes", "sizes.json", "--count-slack", "0.1", "--coordinator",
                         "memory://x", "--db", db, "--id", "disk")
    assert code == 0 and out.startswith("Added job disk: rebalance, every 1h"), err
    stored = json.loads(sql(db, "SELECT arguments FROM partctl_jobs")[0]["arguments"])
    assert (stored["goal"], stored["sizes"], stored["count_slack"]) == ("disk", str(sizes), 0.1)
    line = run("jobs", "list", "--db", db)[1].splitlines()[1]
    assert "goal=disk" in line and f"sizes={sizes}" in line and "count-slack=0.1" in line


def test_bad_input_is_one_line_and_changes_nothing(db: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    m = "memory://x"
    cases = [
        (["jobs", "add", "rebalance", "--cron", "0 3 * *", "--coordinator", m],
         "bad cron expression '0 3 * *'"),
        (["jobs", "add", "rebalance", "--cron", "0 25 * * *", "--coordinator", m],
         "bad cron expression"),
        (["jobs", "add", "preferred-election", "--every", "5x", "--coordinator", m],
         "bad duration '5x'"),
        (["jobs", "add", "preferred-election", "--every", "0s", "--coordinator", m],
         "more than zero"),
        (["jobs", "add", "preferred-election", "--every", "0.0001s", "--coordinator", m],
         "an interval of 0.0001s is not between 1m and 365d"),
        (["jobs", "add", "preferred-election", "--every", "999999999999d", "--coordinator", m],
         "at most 365d"),
        (["jobs", "add", "preferred-election", "--cron", "0 3 31 2 *", "--coordinator", m],
         "never fires"),
        (["jobs", "add", "preferred-election", "--cron", "0 3 1 * 1", "--coordinator", m],
         "not both"),
        (["jobs", "add", "preferred-election", "--every", "5m", "--timezone", "UTC",
          "--coordinator", m], "--timezone goes with --cron"),
        (["jobs", "add", "preferred-election", "--every", "5m", "--wait", "999999999999d",
          "--coordinator", m], "at most 365d"),
        (["jobs", "add", "preferred-election", "--every", "1m", "--wait", "soon",
          "--coordinator", m], "bad duration 'soon'"),
        (["jobs", "add", "preferred-election", "--every", "1m"], "no cluster: pass --bootstrap-server"),
        (["jobs", "add", "preferred-election", "--every", "1m", "--coordinator", "nosuch://x"],
         "unknown coordinator scheme"),
        (["jobs", "add", "rebalance", "--every", "1h", "--goal", "decommission",
          "--coordinator", m], "needs the brokers"),
        (["jobs", "add", "rebalance", "--every", "1h", "--brokers", "a,b", "--coordinator", m],
         "bad --brokers"),
        (["jobs", "add", "rebalance", "--every", "1h", "--goal", "disk", "--coordinator", m],
         "--goal disk needs --sizes FILE"),
        (["jobs", "add", "rebalance", "--every", "1h", "--count-slack", "0.1",
          "--coordinator", m], "--count-slack goes with --goal disk"),
        (["jobs", "add", "rebalance", "--every", "1h", "--goal", "disk", "--sizes",
          "/nonexistent/sizes.json", "--coordinator", m], "cannot read --sizes file"),
        (["jobs", "add", "rebalance", "--every", "1h", "--max-concurrent-moves", "0",
          "--coordinator", m], "at least 1"),
        (["jobs", "add", "rebalance", "--every", "1h", "--id", "bad id", "--coordinator", m],
         "bad job id"),
        (["jobs", "add", "rebalance", "--cron", "0 3 * * *", "--timezone", "Nowhere/Land",
          "--coordinator", m], "unknown time zone"),
        (["jobs", "remove", "nope"], "no job 'nope'"),
        (["jobs", "run-now", "nope"], "no job 'nope'"),
        (["jobs", "history", "--limit", "0"], "--limit"),
        (["scheduler", "run", "--poll", "never"], "bad duration 'never'"),
        (["scheduler", "run", "--poll", "999999999999d"], "at most 365d"),
        (["scheduler", "run", "--poll", "0.0001s"], "--poll must be at least 0.1s"),
    ]
    for argv, message in cases:
        code, out, err = run(*argv, "--db", db)
        assert code == 1, (argv, out, err)
        assert err.count("\n") == 1 and err.startswith("partctl: error: "), (argv, err)
        assert message in err, (argv, err)
    with pytest.raises(SystemExit) as usage:  # argparse refuses a zero timeout with its usage
        run("jobs", "add", "preferred-election", "--every", "5m", "--timeout", "0",
            "--coordinator", m, "--db", db)
    assert usage.value.code == 2
    assert run("jobs", "list", "--db", db)[1].strip() == "No jobs."
    code, _, err = run("jobs", "list", "--db", "postgresql+psycopg://u:secret@127.0.0.1:1/x")
    assert code == 1 and err.count("\n") == 1 and "cannot open the store" in err
    assert "secret" not in err
    code, _, err = run("jobs", "list", "--db", "bad url://x")
    assert code == 1 and "bad database URL" in err


@pytest.mark.processes
def test_scheduler_run_records_failures_and_stops_cleanly_on_sigterm(db: str) -> None:
    """Jobs whose coordinator is unreachable fail; the scheduler carries on, and SIGTERM stops
    it: exit 0, every run closed. One worker for three due jobs that each outlast a second, so
    runs are still waiting for the pool while the scheduler shuts down."""
    for n in range(3):
        due_now(db, f"flaky-{n}", connect_timeout=1.2)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "partctl", "scheduler", "run", "--db", db,
                             "--poll", "0.2s", "--max-workers", "1"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        store = Store.open(db)
        wait_until(lambda: len(store.runs(outcome=RunOutcome.FAILED)) >= 1, timeout=20,
                   interval=0.1, message="a failed run")
        assert proc.poll() is None  # failures do not stop the scheduler
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "running 3 job(s)" in out and "SIGTERM: stopping" in out
    assert out.rstrip().endswith("partctl scheduler: stopped")
    assert "Traceback" not in err
    runs = store.runs(limit=None)
    store.close()
    assert runs and all(r.outcome is not RunOutcome.RUNNING for r in runs)
    failed = [r for r in runs if r.outcome is RunOutcome.FAILED]
    assert failed and all(r.error and "\n" not in r.error and "connect" in r.error
                          for r in failed)
    assert "(preferred-election)" in err and "failed" in err  # the scheduler's log


@pytest.mark.postgres
def test_no_password_is_shown_or_stored(postgres_server: PostgresServer) -> None:
    """A PostgreSQL store's password never appears in what partctl prints or logs, nor in the
    jobs and runs it stores (a job's pickled state used to hold the store's URL)."""
    with postgres_database(postgres_server) as plain:
        url = plain.replace("postgres@", "postgres:s3cret@")  # trust auth: any password works
        masked = plain.replace("postgres@", "postgres:***@")
        code, out, err = run("db", "upgrade", "--db", url)
        assert code == 0 and out.startswith(f"{masked}: upgraded from"), out + err
        code, out, err = run("db", "current", "--db", url)
        assert code == 0 and out.startswith(f"{masked}: revision"), out + err
        code, out, err = run("jobs", "add", "preferred-election", "--every", "5m", "--id", "pe",
                             "--coordinator", UNREACHABLE, "--timeout", "0.5", "--db", url)
        assert code == 0, err
        due_now(url, "due", connect_timeout=0.5)
        code, out, err = run("jobs", "list", "--db", url)
        assert code == 0 and "s3cret" not in out + err
        code, out, err = run("jobs", "run-now", "pe", "--db", url)
        assert code == 1 and "s3cret" not in out + err and "failed" in out
        proc = subprocess.Popen([sys.executable, "-m", "partctl", "scheduler", "run",
                                 "--poll", "0.2s"], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PARTCTL_DB": url, "PYTHONUNBUFFERED": "1"})
        try:
            with Store.open(plain) as store:
                wait_until(lambda: store.runs(job_id="due"), timeout=20, message="a run")
                wait_until(lambda: store.runs(job_id="due")[0].ended_at, timeout=20)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert f"running 2 job(s) from {masked};" in out, out
        assert "due (preferred-election)" in err  # the scheduler's log of the run
        assert "s3cret" not in out + err
        engine = create_engine(plain)
        names = inspect(engine).get_table_names()
        engine.dispose()
        stored = {name: sql(plain, f'SELECT * FROM "{name}"') for name in names}
        assert len(stored["partctl_jobs"]) == 2 and len(stored["partctl_job_runs"]) == 2
        assert "s3cret" not in repr(stored)  # in no table, no column, pickled or not
        here = f"127.0.0.1:{postgres_server.port}"
        for bad in (url.replace(here, "127.0.0.1:1"),
                    f"{plain.replace(here, '127.0.0.1:1')}?password=s3cret"):
            code, out, err = run("jobs", "list", "--db", bad)
            assert code == 1 and err.count("\n") == 1 and "cannot open the store" in err
            assert "s3cret" not in err and "***" in err


@pytest.fixture
def silent() -> Iterator[str]:
    """A coordinator URL whose server accepts connections and never answers: a run against it
    waits out its connect timeout, holding its job meanwhile."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"zookeeper://127.0.0.1:{listener.getsockname()[1]}/silent"
    listener.close()


@pytest.mark.processes
def test_two_run_nows_of_one_job_never_run_at_once(any_db: str, silent: str) -> None:
    """The second one prints which run holds the job and records nothing; once the holder is
    killed with SIGKILL, the next one takes the job over at once (its process is gone)."""
    due_now(any_db, "slow", coordinator_url=silent, connect_timeout=120.0)
    first = subprocess.Popen([sys.executable, "-m", "partctl", "jobs", "run-now", "slow",
                              "--db", any_db], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    second = None
    store = Store.open(any_db)
    try:
        running = wait_until(lambda: store.runs(job_id="slow", outcome="running"),
                             timeout=30, message="the first run")
        assert running[0].runner.endswith(f":{first.pid}")
        code, out, err = run("jobs", "run-now", "slow", "--db", any_db)
        assert (code, out) == (1, "")
        assert err == (f"partctl: error: job slow is already running: run {running[0].id} on "
                       f"{running[0].runner}, started "
                       f"{running[0].started_at:%Y-%m-%d %H:%M:%S} UTC; not started again\n")
        assert [r.id for r in store.runs(job_id="slow", limit=None)] == [running[0].id]
        first.kill()
        first.communicate()
        second = subprocess.Popen([sys.executable, "-m", "partctl", "jobs", "run-now", "slow",
                                   "--db", any_db], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        taken = wait_until(lambda: [r for r in store.runs(job_id="slow", outcome="running")
                                    if r.runner.endswith(f":{second.pid}")],
                           timeout=30, message="the job taken over")
        old = store.get_run(running[0].id)
        assert old.outcome is RunOutcome.INTERRUPTED and "exited before it finished" in old.error
        assert taken[0].id != old.id
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        store.close()


def test_a_killed_schedulers_run_and_execution_are_interrupted_on_restart(
        db: str, etcd_server) -> None:  # noqa: ANN001
    """kill -9 of a scheduler in the middle of a rebalance: the next scheduler marks the run
    interrupted, and the execution it was carrying out too (it stayed 'running', partitions
    pending)."""
    url = f"etcd://{etcd_server.address}/k{uuid.uuid4().hex[:10]}"
    network = InProcessNetwork()
    participants = [Participant(url, b, handler=RecordingBroker, rack=f"r{b % 2}",
                                network=network).start()
                    for b in (1, 2, 3, 4)]
    scheduler = restarted = None
    try:
        md = participants[0].metadata
        wait_until(lambda: md.controller() is not None and len(md.broker_ids()) == 4,
                   timeout=30, message="a controller and four brokers")
        from coordinator.admin import Admin

        Admin(participants[0].coordinator).create_topic(  # broker 4 holds nothing
            "orders", assignment={p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)})
        # nobody copies data here: a replica being added never joins the ISR, moves never end
        due_now(db, "nightly", kind="rebalance", coordinator_url=url,
                max_concurrent_moves=1, poll_interval=0.05)
        command = [sys.executable, "-m", "partctl", "scheduler", "run", "--db", db,
                   "--poll", "0.2s"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        scheduler = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        store = Store.open(db)
        run_row = wait_until(lambda: [r for r in store.runs(job_id="nightly")
                                      if r.execution_id is not None], timeout=60,
                             message="an execution under way")[0]
        execution = store.get_execution(run_row.execution_id)
        assert execution.status.value == "running"
        scheduler.kill()  # SIGKILL: no chance to record anything
        scheduler.communicate()
        assert store.get_run(run_row.id).outcome is RunOutcome.RUNNING
        restarted = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert "running 1 job(s)" in restarted.stdout.readline()  # reaped before it starts
        run_after = store.get_run(run_row.id)
        assert run_after.outcome is RunOutcome.INTERRUPTED
        assert "exited before it finished" in run_after.error
        execution = store.get_execution(run_row.execution_id)
        assert execution.status.value == "interrupted" and execution.finished_at is not None
        assert "moves already submitted continue in the controller" in execution.error
        assert {p.status.value for p in execution.partitions} <= {"pending", "in_progress"}
        restarted.send_signal(signal.SIGTERM)
        restarted.communicate(timeout=30)
        store.close()
    finally:
        for proc in (scheduler, restarted):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        for p in participants:
            p.close()
