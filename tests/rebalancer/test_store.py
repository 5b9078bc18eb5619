"""The SQL store's repository: plans, executions with progress, job runs; SQLite and PostgreSQL.

PostgreSQL is the server at 127.0.0.1:5432 (database ``test``, trust auth): each run creates a
uniquely named database and drops it afterwards. Unreachable -> skipped loudly, unless
PARTCTL_REQUIRE_SERVERS=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path

import pytest

from rebalancer.plan import Plan, Reassignment, score_plan
from rebalancer.snapshot import Snapshot
from rebalancer.store import (
    ExecutionStatus,
    PartitionStatus,
    RunOutcome,
    Store,
    StoreError,
    default_db_path,
    resolve_db_url,
    scores_json,
    snapshot_digest,
)
from tests.rebalancer.conftest import make_snapshot

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _require_servers() -> bool:
    return os.environ.get("PARTCTL_REQUIRE_SERVERS") == "1"


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, uniquely named database on the local PostgreSQL server; dropped at exit."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - psycopg is a test dependency
        if _require_servers():
            pytest.fail(f"PARTCTL_REQUIRE_SERVERS=1 but psycopg is missing: {exc}")
        pytest.skip(f"SKIPPED LOUDLY: psycopg is not installed ({exc})")
    try:
        admin = psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test",
                                autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL at 127.0.0.1:5432 is unreachable: {str(exc).strip()}"
        if _require_servers():
            pytest.fail(f"PARTCTL_REQUIRE_SERVERS=1 but {reason}")
        pytest.skip(f"SKIPPED LOUDLY: {reason}")
    name = f"partctl_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_database() as url:
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
    plan = Plan(partitions=(Reassignment(topic="t", partition=1, replicas=(4, 2, 3)),))
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
        ("t", 0, (2, 3, 4), PartitionStatus.PENDING),
        ("t", 1, (4, 2, 3), PartitionStatus.PENDING)]
    assert store.set_partition_status(ex.id, {("t", 0): PartitionStatus.IN_PROGRESS}) == 1
    assert store.set_partition_status(ex.id, {("t", 0): "in_progress"}) == 0  # unchanged
    store.set_partition_status(ex.id, {("t", 0): "done", ("t", 1): "failed",
                                       ("nope", 9): "done"},
                               reasons={("t", 1): "refused", ("t", 0): "ignored when done"})
    done = store.finish_execution(ex.id, ExecutionStatus.FAILED, error="t-1 did not finish")
    assert done.status is ExecutionStatus.FAILED and done.error == "t-1 did not finish"
    assert done.finished_at is not None and done.finished_at >= done.started_at
    assert {(p.topic, p.partition): p.status for p in done.partitions} == {
        ("t", 0): PartitionStatus.DONE, ("t", 1): PartitionStatus.FAILED}
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
    assert resolve_db_url(str(tmp_path / "bare.db")) == f"sqlite:///{tmp_path / 'bare.db'}"
    assert resolve_db_url("postgresql://u:p@h/db") == "postgresql://u:p@h/db"


def test_an_unreachable_or_unknown_database_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the store") as info:
        Store.open("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
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
