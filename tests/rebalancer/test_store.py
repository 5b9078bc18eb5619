"""The SQL store's repository: plans, executions with progress, job runs; SQLite and PostgreSQL.

PostgreSQL is the test session's own server (the ``postgres_server`` fixture: initdb in a
temporary directory, a free loopback port, trust auth): each use creates a uniquely named database
and drops it afterwards. Without PostgreSQL's programs -> skipped loudly, unless
PARTCTL_REQUIRE_SERVERS=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rebalancer.plan import PartitionMove, Plan, score_plan
from rebalancer.snapshot import Snapshot
from rebalancer.store import (
    ExecutionStatus,
    JobRun,
    MoveProgress,
    RunConflict,
    RunOutcome,
    Store,
    StoreError,
    StoreURLError,
    default_db_path,
    display_url,
    resolve_db_url,
    scores_json,
    snapshot_digest,
)
from tests.postgres_server import PostgresServer
from tests.rebalancer.conftest import make_snapshot


@contextmanager
def postgres_database(server: PostgresServer) -> Iterator[str]:
    """A fresh, uniquely named database on the session's PostgreSQL (the ``postgres_server``
    fixture); dropped at exit. (psycopg comes with the test extra: without it these tests fail,
    they do not skip.)"""
    import psycopg

    name = f"partctl_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.conninfo(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield server.url(name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    with postgres_database(postgres_server) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    s = Store.open(url)
    yield s
    if request.param == "postgresql":  # the database lives for the module: start clean
        s.downgrade("base")
    s.close()


def snapshot() -> Snapshot:
    return make_snapshot({1: "a", 2: "b", 3: "c", 4: "a"},
                         [("t", 0, [1, 2, 3]), ("t", 1, [1, 2, 3]), ("u", 0, [2, 3, 1])])


def test_a_plan_round_trips_with_its_digest_goal_options_and_scores(store: Store) -> None:
    snap = snapshot()
    plan = Plan(partitions=(PartitionMove(topic="t", partition=1, replicas=(4, 2, 3)),))
    scores = scores_json(score_plan(snap, plan))
    rec = store.add_plan(snapshot_digest=snapshot_digest(snap), goal="balance",
                         options={"engine": "local", "seed": 0}, scores=scores,
                         plan=plan.as_dict())
    got = store.get_plan(rec.id)
    assert got == rec
    assert got.moves == 1 and got.goal == "balance" and got.options == {"engine": "local",
                                                                         "seed": 0}
    assert got.plan == {"version": 1,
                        "partitions": [{"topic": "t", "partition": 1, "replicas": [4, 2, 3]}]}
    assert got.scores["replicas_per_broker"]["spread"] == scores["replicas_per_broker"]["spread"]
    assert got.created_at.tzinfo is UTC
    assert len(got.snapshot_digest) == 64
    second = store.add_plan(snapshot_digest="0" * 64, goal="repair-racks", options={},
                            scores={}, plan={"version": 1, "partitions": []})
    assert [p.id for p in store.plans()] == [second.id, rec.id]
    assert [p.id for p in store.plans(snapshot_digest=rec.snapshot_digest)] == [rec.id]
    assert store.get_plan(second.id + 100) is None


def test_the_snapshot_digest_is_canonical_and_ignores_free_form_meta() -> None:
    a = snapshot()
    b = Snapshot(brokers=tuple(reversed(a.brokers))[::-1], partitions=a.partitions,
                 meta={"taken_at": "now", "source": "x"})
    assert snapshot_digest(a) == snapshot_digest(b)
    moved = make_snapshot({1: "a", 2: "b", 3: "c", 4: "a"},
                          [("t", 0, [1, 2, 3]), ("t", 1, [4, 2, 3]), ("u", 0, [2, 3, 1])])
    assert snapshot_digest(moved) != snapshot_digest(a)
    sized = make_snapshot({1: "a", 2: "b", 3: "c", 4: "a"},
                          [("t", 0, [1, 2, 3]), ("t", 1, [1, 2, 3]), ("u", 0, [2, 3, 1])],
                          sizes={("t", 0): 10})
    assert snapshot_digest(sized) != snapshot_digest(a)


def test_an_execution_tracks_progress_per_partition(store: Store) -> None:
    plan = store.add_plan(snapshot_digest="d" * 64, goal="balance", options={}, scores={},
                          plan={"version": 1, "partitions": [
                              {"topic": "t", "partition": 0, "replicas": [2, 3, 4]},
                              {"topic": "t", "partition": 1, "replicas": [4, 2, 3]}]})
    ex = store.start_execution(plan.id, max_concurrent_moves=1)
    assert ex.status is ExecutionStatus.RUNNING and ex.finished_at is None
    assert [(p.topic, p.partition, p.target_replicas, p.status) for p in ex.partitions] == [
        ("t", 0, (2, 3, 4), MoveProgress.PENDING),
        ("t", 1, (4, 2, 3), MoveProgress.PENDING)]
    assert store.set_partition_status(ex.id, {("t", 0): MoveProgress.IN_PROGRESS}) == 1
    assert store.set_partition_status(ex.id, {("t", 0): "in_progress"}) == 0  # unchanged
    store.set_partition_status(ex.id, {("t", 0): "done", ("t", 1): "failed",
                                       ("nope", 9): "done"},
                               reasons={("t", 1): "refused", ("t", 0): "ignored when done"})
    done = store.finish_execution(ex.id, ExecutionStatus.FAILED, error="t-1 did not finish")
    assert done.status is ExecutionStatus.FAILED and done.error == "t-1 did not finish"
    assert done.finished_at is not None and done.finished_at >= done.started_at
    assert {(p.topic, p.partition): p.status for p in done.partitions} == {
        ("t", 0): MoveProgress.DONE, ("t", 1): MoveProgress.FAILED}
    assert [p.reason for p in done.partitions] == [None, "refused"]
    assert store.get_execution(ex.id) == done
    assert [e.id for e in store.executions(plan_id=plan.id)] == [ex.id]
    explicit = store.start_execution(plan.id, max_concurrent_moves=5,
                                     targets=[("t", 1, [4, 2, 3])])
    assert len(explicit.partitions) == 1
    with pytest.raises(StoreError, match="no plan"):
        store.start_execution(9999, max_concurrent_moves=1)


def test_job_runs_record_outcome_scores_and_plan(store: Store) -> None:
    plan = store.add_plan(snapshot_digest="e" * 64, goal="balance", options={}, scores={},
                          plan={"version": 1, "partitions": []})
    first = store.start_run("nightly", "rebalance", runner="host:1")
    assert first.outcome is RunOutcome.RUNNING and first.ended_at is None
    store.update_run(first.id, scores_before={"replicas_per_broker": {"spread": 4}})
    done = store.finish_run(first.id, RunOutcome.SUCCEEDED, plan_id=plan.id,
                            scores_after={"replicas_per_broker": {"spread": 0}},
                            details={"moves": 3})
    assert done.outcome is RunOutcome.SUCCEEDED and done.plan_id == plan.id
    assert done.scores_before == {"replicas_per_broker": {"spread": 4}}
    assert done.scores_after == {"replicas_per_broker": {"spread": 0}}
    assert done.details == {"moves": 3} and done.ended_at is not None
    second = store.start_run("leaders", "preferred-election")
    failed = store.finish_run(second.id, "failed", error="could not connect")
    assert failed.error == "could not connect"
    assert [r.id for r in store.runs()] == [second.id, first.id]
    assert [r.id for r in store.runs(job_id="nightly")] == [first.id]
    assert [r.id for r in store.runs(limit=1)] == [second.id]
    assert [r.id for r in store.runs(outcome="failed")] == [second.id]
    stale = store.start_run("nightly", "rebalance", runner="host:2")
    assert store.interrupt_runs([stale.id, first.id], "scheduler died") == 1  # only running
    assert store.get_run(stale.id).outcome is RunOutcome.INTERRUPTED
    assert store.get_run(first.id).outcome is RunOutcome.SUCCEEDED
    with pytest.raises(TypeError):
        store.update_run(first.id, outcome="failed")
    # deleting a plan's row is not part of the API, but the schema keeps runs consistent
    assert store.get_run(10_000) is None


def test_concurrent_writers_share_one_store(store: Store) -> None:
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(10):
                run = store.start_run(f"job-{n}", "preferred-election")
                store.finish_run(run.id, "nothing_to_do")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(store.runs(limit=None)) == 40


def test_default_location_and_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_DB", raising=False)
    monkeypatch.delenv("PARTCTL_HOME", raising=False)
    assert default_db_path() == Path("~/.local/share/partctl/partctl.db").expanduser()
    monkeypatch.setenv("PARTCTL_HOME", str(tmp_path / "home"))
    assert resolve_db_url() == f"sqlite:///{tmp_path / 'home' / 'partctl.db'}"
    with Store.open() as s:  # creates the directory and the schema on first use
        assert s.revision() is not None
    assert (tmp_path / "home" / "partctl.db").exists()
    monkeypatch.setenv("PARTCTL_DB", f"sqlite:///{tmp_path / 'env.db'}")
    assert resolve_db_url() == f"sqlite:///{tmp_path / 'env.db'}"
    assert resolve_db_url("sqlite:///x.db").endswith("/x.db")
    assert resolve_db_url("sqlite:///x.db") == f"sqlite:///{Path('x.db').resolve()}"
    (tmp_path / "bare.db").touch()
    assert resolve_db_url(str(tmp_path / "bare.db")) == f"sqlite:///{tmp_path / 'bare.db'}"
    assert resolve_db_url(str(tmp_path / "new.db"), create=True) == \
        f"sqlite:///{tmp_path / 'new.db'}"
    assert resolve_db_url("postgresql://u:p@h/db") == "postgresql://u:p@h/db"


@pytest.mark.parametrize("text", ["notaurl", "postgresql:/127.0.0.1/x", "sqlite:/x.db", "   "])
def test_what_is_neither_a_url_nor_an_existing_file_is_refused(
        text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not silently a new, empty SQLite store that reports "No jobs."."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError) as info:
        Store.open(text)
    assert "\n" not in str(info.value)
    monkeypatch.setenv("PARTCTL_DB", text)
    with pytest.raises(StoreURLError):
        Store.open()
    assert list(tmp_path.iterdir()) == []  # nothing created
    if text.strip():
        from sqlalchemy.engine import make_url

        assert make_url(resolve_db_url(text, create=True)).database == str(tmp_path / text)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_new_sqlite_store_and_its_directories_are_owner_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_umask = os.umask(0o022)  # what a login shell usually has: 0644 files, 0755 dirs
    try:
        monkeypatch.delenv("PARTCTL_DB", raising=False)
        monkeypatch.setenv("PARTCTL_HOME", str(tmp_path / "a" / "b"))
        with Store.open() as s:
            s.start_run("j", "rebalance")
            files = sorted(p.name for p in (tmp_path / "a" / "b").iterdir())
            assert files == ["partctl.db", "partctl.db-shm", "partctl.db-wal"]
            assert {_mode(tmp_path / "a" / "b" / f) for f in files} == {0o600}
        assert _mode(tmp_path / "a") == _mode(tmp_path / "a" / "b") == 0o700
        # a rollback journal (a store not in WAL mode yet) is as private as the file
        with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as s, s.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=DELETE")
            conn.exec_driver_sql("CREATE TABLE t (x)")
            conn.exec_driver_sql("BEGIN")
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            assert _mode(tmp_path / "x.db-journal") == 0o600
            conn.rollback()
        assert _mode(tmp_path / "x.db") == 0o600
        existing = tmp_path / "mine.db"
        existing.touch(mode=0o640)
        os.chmod(existing, 0o640)
        Store.open(str(existing)).close()
        assert _mode(existing) == 0o640  # an existing store keeps the mode its owner gave it
    finally:
        os.umask(old_umask)


def test_a_store_that_cannot_be_created_is_one_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not a directory")
    monkeypatch.delenv("PARTCTL_DB", raising=False)
    monkeypatch.setenv("PARTCTL_HOME", str(plain))
    with pytest.raises(StoreError, match="cannot create the store") as info:
        Store.open()
    assert "\n" not in str(info.value) and str(plain) in str(info.value)
    with pytest.raises(StoreError, match="cannot create the store"):
        Store.open(f"sqlite:///{plain / 'sub' / 'x.db'}")
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="not a file"):
        Store.open(f"sqlite:///{tmp_path / 'dir.db'}")
    assert plain.read_text() == "not a directory"


def test_passwords_are_masked_wherever_a_url_is_shown() -> None:
    assert display_url("postgresql+psycopg://u:s3cret@h:5432/db") == \
        "postgresql+psycopg://u:***@h:5432/db"
    shown = display_url("postgresql://u@h/db?password=s3cret&sslpassword=k3y&sslmode=require")
    assert "s3cret" not in shown and "k3y" not in shown and "sslmode=require" in shown
    assert "password=***" in shown
    assert display_url("not a url://u:s3cret@h/x") == "not a url://u:***@h/x"


def test_an_unreachable_or_unknown_database_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the store") as info:
        Store.open("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
    assert "secret" not in str(info.value) and "\n" not in str(info.value)
    unopened = Store.open("postgresql+psycopg://nobody:secret@127.0.0.1:1/none", upgrade=False)
    with unopened, pytest.raises(StoreError, match="cannot open the store") as info:
        unopened.revision()  # the first to reach the server (db current, db upgrade)
    assert "secret" not in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(StoreError, match="no database driver"):
        Store.open("mysql+nosuchdriver://h/db")
    with pytest.raises(ValueError, match="bad database URL"):
        Store.open("bad url://x")
    # a database migrated by a newer partctl: refused, not mangled
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    with Store.open(url) as s, s.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE partctl_alembic_version SET version_num = 'zzzz'")
    from rebalancer.store import repository

    repository._upgraded.discard(url)
    with pytest.raises(StoreError, match="newer than this partctl"):
        Store.open(url)


def test_one_running_run_per_job_is_the_jobs_lock(store: Store) -> None:
    held = store.start_run("nightly", "rebalance", runner="h:1")
    assert held.heartbeat_at is not None and held.heartbeat_at.tzinfo is UTC
    with pytest.raises(RunConflict, match=f"job nightly is already running: run {held.id} "
                                          f"on h:1, started ") as info:
        store.start_run("nightly", "rebalance", runner="h:2")
    assert info.value.holder.id == held.id and "\n" not in str(info.value)
    other = store.start_run("leaders", "preferred-election")  # another job: its own lock
    assert len(store.runs(outcome="running")) == 2  # the loser recorded nothing
    # a holder whose process is gone is closed by the next claim, which then holds the lock
    seen = []

    def gone(run: JobRun, now: datetime) -> str | None:
        seen.append((run.id, now.tzinfo))
        return "its process exited"

    taken = store.claim_run("nightly", "rebalance", runner="h:3", is_gone=gone)
    assert seen == [(held.id, UTC)]
    assert store.get_run(held.id).outcome is RunOutcome.INTERRUPTED
    assert store.get_run(held.id).error == "its process exited"
    assert store.beat(taken.id) and not store.beat(held.id)  # the old holder learns it lost
    store.finish_run(taken.id, "succeeded")
    assert store.start_run("nightly", "rebalance").id > taken.id  # released by finishing
    store.finish_run(other.id, "failed")
    assert store.now().tzinfo is UTC


def test_claims_at_the_same_moment_let_exactly_one_run(store: Store) -> None:
    rounds, claimants = 8, 4
    winners: list[list[int]] = [[] for _ in range(rounds)]
    losers: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(claimants)

    def claim(n: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait()
                try:
                    run = store.claim_run(f"job-{r}", "rebalance", runner=f"h:{n}",
                                          is_gone=lambda _run, _now: None)
                    winners[r].append(run.id)
                except RunConflict:
                    losers.append(n)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(claimants)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [len(w) for w in winners] == [1] * rounds
    assert len(losers) == rounds * (claimants - 1)
    assert len(store.runs(limit=None)) == rounds


def test_interrupting_a_run_closes_the_execution_it_was_carrying_out(store: Store) -> None:
    """A scheduler killed mid-rebalance left its execution 'running' with partitions pending
    after its run was marked interrupted."""
    plan = store.add_plan(snapshot_digest="f" * 64, goal="balance", options={}, scores={},
                          plan={"version": 1, "partitions": [
                              {"topic": "t", "partition": 0, "replicas": [2, 3]},
                              {"topic": "t", "partition": 1, "replicas": [3, 4]}]})
    run = store.start_run("nightly", "rebalance", runner="h:1")
    ex = store.start_execution(plan.id, max_concurrent_moves=1)
    store.update_run(run.id, plan_id=plan.id, execution_id=ex.id)
    store.set_partition_status(ex.id, {("t", 0): "in_progress"})
    done_run = store.start_run("other", "rebalance")
    done_ex = store.start_execution(plan.id, max_concurrent_moves=1)
    store.update_run(done_run.id, execution_id=done_ex.id)
    store.finish_execution(done_ex.id, "done")
    store.finish_run(done_run.id, "succeeded")
    assert store.interrupt_runs([run.id, done_run.id], "its process exited") == 1
    interrupted = store.get_execution(ex.id)
    assert interrupted.status is ExecutionStatus.INTERRUPTED
    assert interrupted.finished_at is not None
    assert interrupted.error.startswith("its process exited; moves already submitted continue")
    assert [p.status for p in interrupted.partitions] == [MoveProgress.IN_PROGRESS,
                                                          MoveProgress.PENDING]
    assert store.get_execution(done_ex.id).status is ExecutionStatus.DONE
    assert store.get_run(done_run.id).outcome is RunOutcome.SUCCEEDED
