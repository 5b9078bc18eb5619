"""The db, jobs and scheduler commands on SQLite: add/list/remove/run-now/history against a live
embedded cluster, one-line errors, and ``scheduler run`` as a process stopped by SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from partctl.cli import main
from rebalancer.jobs import JOB_FUNCTIONS
from rebalancer.store import RunOutcome, Store
from statemachines.broker import change_isr
from statemachines.channel import InProcessNetwork
from statemachines.participant import Participant
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
UNREACHABLE = "zookeeper://127.0.0.1:1/none"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


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
        return Participant(self.url, broker, rack=f"r{broker % 2}",
                           network=self.network).start()

    def leaders(self) -> dict[int, int]:
        keys = [TopicPartition("t", p) for p in range(3)]
        return {k.partition: s.value.leader
                for k, s in self.md.partition_states(keys).items() if s is not None}

    def drift(self) -> None:
        from statemachines.admin import Admin

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
    code, out, _ = run("db", "upgrade", "--db", db)
    assert code == 0 and "upgraded from an empty database to revision 0001" in out
    code, out, _ = run("db", "upgrade", "--db", db)
    assert code == 0 and "already at revision 0001" in out
    code, out, _ = run("db", "current", "--db", db)
    assert code == 0 and "revision 0001 (up to date)" in out
    code, out, _ = run("db", "downgrade", "--db", db, "--revision", "base")
    assert code == 0 and "base (no tables)" in out


def test_the_default_store_is_under_partctl_home(db: str, tmp_path: Path) -> None:
    code, out, _ = run("db", "upgrade")
    assert code == 0 and str(tmp_path / "home" / "partctl.db") in out
    assert (tmp_path / "home" / "partctl.db").exists()


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
    from rebalancer.jobs.scheduler import DurableJobStore
    from rebalancer.store import create_store_engine

    for kind in JOB_FUNCTIONS:
        code, _, err = run("jobs", "add", kind, "--every", "1h", "--coordinator", "memory://x",
                           "--db", db)
        assert code == 0, err
    store = DurableJobStore(engine=create_store_engine(db))
    states = store.raw_states()
    store.engine.dispose()
    assert sorted(s["func"] for s in states.values()) == sorted(JOB_FUNCTIONS.values())


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
        (["jobs", "add", "preferred-election", "--every", "1m", "--wait", "soon",
          "--coordinator", m], "bad duration 'soon'"),
        (["jobs", "add", "preferred-election", "--every", "1m"], "no coordinator"),
        (["jobs", "add", "preferred-election", "--every", "1m", "--coordinator", "nosuch://x"],
         "unknown coordinator scheme"),
        (["jobs", "add", "rebalance", "--every", "1h", "--goal", "decommission",
          "--coordinator", m], "needs the brokers"),
        (["jobs", "add", "rebalance", "--every", "1h", "--brokers", "a,b", "--coordinator", m],
         "bad --brokers"),
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
    ]
    for argv, message in cases:
        code, out, err = run(*argv, "--db", db)
        assert code == 1, (argv, out, err)
        assert err.count("\n") == 1 and err.startswith("partctl: error: "), (argv, err)
        assert message in err, (argv, err)
    assert run("jobs", "list", "--db", db)[1].strip() == "No jobs."
    code, _, err = run("jobs", "list", "--db", "postgresql+psycopg://u:secret@127.0.0.1:1/x")
    assert code == 1 and err.count("\n") == 1 and "cannot open the store" in err
    assert "secret" not in err
    code, _, err = run("jobs", "list", "--db", "bad url://x")
    assert code == 1 and "bad database URL" in err


def test_scheduler_run_records_failures_and_stops_cleanly_on_sigterm(db: str) -> None:
    """A job whose coordinator is unreachable fails run after run; the scheduler carries on,
    and SIGTERM stops it: exit 0, every run closed. Each run outlasts the interval, so runs fall
    due while the scheduler shuts down (APScheduler would submit them to a closed pool)."""
    code, _, err = run("jobs", "add", "preferred-election", "--every", "1s", "--coordinator",
                       UNREACHABLE, "--timeout", "1.2", "--db", db, "--id", "flaky")
    assert code == 0, err
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "partctl", "scheduler", "run", "--db", db,
                             "--poll", "0.2s"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        store = Store.open(db)
        wait_until(lambda: len(store.runs(outcome=RunOutcome.FAILED)) >= 2, timeout=20,
                   interval=0.1, message="two failed runs")
        assert proc.poll() is None  # failures do not stop the scheduler
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "running 1 job(s)" in out and "SIGTERM: stopping" in out
    assert out.rstrip().endswith("partctl scheduler: stopped")
    assert "Traceback" not in err
    runs = store.runs(job_id="flaky", limit=None)
    store.close()
    assert runs and all(r.outcome is not RunOutcome.RUNNING for r in runs)
    failed = [r for r in runs if r.outcome is RunOutcome.FAILED]
    assert all(r.error and "\n" not in r.error and "connect" in r.error for r in failed)
    assert "flaky (preferred-election)" in err and "failed" in err  # the scheduler's log
