"""Alembic owns the store's tables: up and down on SQLite and PostgreSQL, the models match the
migrations (autogenerate finds no difference), and jobs APScheduler pickled before revision 0002
are carried over without being unpickled."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from rebalancer import jobs
from rebalancer.store import Store
from rebalancer.store.migrate import VERSION_TABLE, alembic_config, head_revision
from rebalancer.store.models import Base
from tests.rebalancer.test_store import postgres_database

OURS = {"partctl_plans", "partctl_executions", "partctl_execution_partitions",
        "partctl_job_runs", "partctl_jobs", "partctl_anomalies", "partctl_heal_decisions"}
LEGACY_TABLE = "apscheduler_jobs"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
    else:
        with postgres_database(request.getfixturevalue("postgres_server")) as url:
            yield url


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


class Exploit:
    """A pickle that touches a file when it is loaded: what a crafted job row could carry."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.path,))


def legacy_store(url: str, marker: Path) -> None:
    """A store at revision 0001 whose jobs APScheduler's own SQLAlchemyJobStore pickled, as
    partctl did then: a genuine job (its state holds the store's URL with a password), a
    crafted row that runs code when unpickled, and a row that is not a pickle at all."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    with Store.open(url, upgrade=False) as store:
        assert store.upgrade("0001") == "0001"
    jobstore = SQLAlchemyJobStore(url=url)
    scheduler = BackgroundScheduler(jobstores={"default": jobstore})
    scheduler.start(paused=True)
    scheduler.add_job("rebalancer.jobs:run_preferred_election", "interval", minutes=5,
                      id="legacy", kwargs={"job_id": "legacy", "coordinator": "memory://x",
                                           "db": "postgresql://ops:s3cret@db/partctl"})
    scheduler.shutdown(wait=True)
    engine = create_engine(url)
    with engine.begin() as conn:
        for job_id, state in (("evil", pickle.dumps(Exploit(marker))),
                              ("corrupt", b"\x80\x05not a pickle")):
            conn.execute(text(f"INSERT INTO {LEGACY_TABLE} (id, next_run_time, job_state) "
                              f"VALUES (:id, 0, :state)"), {"id": job_id, "state": state})
    engine.dispose()


def test_up_down_and_up_again(db_url: str) -> None:
    store = Store.open(db_url, upgrade=False)
    try:
        assert store.revision() is None
        assert store.upgrade() == head_revision()
        assert tables(db_url) >= OURS | {VERSION_TABLE}
        run = store.start_run("j", "rebalance")
        store.add_job(job_id="j", kind="rebalance", func_ref="rebalancer.jobs:run_rebalance",
                      schedule={"every": 60, "start": datetime.now(UTC).isoformat()},
                      arguments={"coordinator": "memory://x"}, next_run_time=0.0)
        assert store.downgrade("base") is None
        assert tables(db_url) & OURS == set()
        assert store.upgrade() == head_revision()
        assert store.get_run(run.id) is None  # down really dropped the data
        assert store.jobs() == []
        assert store.start_run("j", "rebalance").id == 1
    finally:
        store.close()


def test_pickled_jobs_are_carried_over_as_broken_without_being_unpickled(
        db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    legacy_store(db_url, marker)
    assert not marker.exists()
    with Store.open(db_url) as store:  # upgrades to head
        assert store.revision() == head_revision()
    assert not marker.exists()
    assert LEGACY_TABLE not in tables(db_url)  # the pickles, and the password, are gone
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = [dict(r._mapping) for r in conn.execute(text(
            "SELECT * FROM partctl_jobs ORDER BY id"))]
    engine.dispose()
    assert [(r["id"], r["kind"], r["func_ref"], r["schedule"], r["next_run_time"])
            for r in stored] == [("corrupt", None, None, None, None),
                                 ("evil", None, None, None, None),
                                 ("legacy", "preferred-election", None, None, None)]
    assert all("jobs remove" in r["problem"] for r in stored)
    assert "s3cret" not in repr(stored)
    listed = jobs.list_jobs(db_url)
    assert [(j.id, j.kind, j.next_run_time) for j in listed] == [
        ("corrupt", None, None), ("evil", None, None), ("legacy", "preferred-election", None)]
    assert all(j.broken and "pickle" in j.broken for j in listed)
    with pytest.raises(jobs.JobBroken, match="partctl jobs remove evil"):
        jobs.run_job_now(db_url, "evil")
    jobs.remove_job(db_url, "legacy")
    assert [j.id for j in jobs.list_jobs(db_url)] == ["corrupt", "evil"]
    assert not marker.exists()
    with Store.open(db_url) as store:
        assert store.downgrade("0001") == "0001"
    assert tables(db_url) & OURS == OURS - {"partctl_jobs", "partctl_anomalies",
                                            "partctl_heal_decisions"}


def test_runs_left_running_side_by_side_are_closed_before_the_job_lock_exists(
        db_url: str) -> None:
    """Two `jobs run-now`s of one job could both be running before revision 0003; its
    one-running-run-per-job index needs all but the newest closed first."""
    with Store.open(db_url, upgrade=False) as store:
        store.upgrade("0002")
        engine = store.engine
        with engine.begin() as conn:
            for job_id in ("j", "j", "k", "j"):
                conn.execute(text(
                    "INSERT INTO partctl_job_runs (job_id, kind, started_at, outcome) "
                    "VALUES (:job, 'rebalance', CURRENT_TIMESTAMP, 'running')"), {"job": job_id})
        assert store.upgrade() == head_revision()
        runs = {r.id: r for r in store.runs(limit=None)}
    assert {i: (r.job_id, r.outcome.value) for i, r in runs.items()} == {
        1: ("j", "interrupted"), 2: ("j", "interrupted"), 3: ("k", "running"),
        4: ("j", "running")}
    assert "upgraded to revision 0003" in runs[1].error and runs[1].ended_at is not None


def test_the_models_match_the_migrations(db_url: str) -> None:
    with Store.open(db_url) as store:
        with store.engine.connect() as conn:
            # through env.py, as `alembic check` runs it: no new upgrade operations
            command.check(alembic_config(db_url, conn))
            # the same comparison by hand
            diff = compare_metadata(MigrationContext.configure(conn, opts={
                "compare_type": True, "version_table": VERSION_TABLE}), Base.metadata)
        assert diff == []


def test_opening_the_store_upgrades_it_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with Store.open(url) as store:
        assert store.revision() == head_revision()
        assert tables(url) >= OURS
    with Store.open(url) as store:  # already at head: nothing to do
        assert store.revision() == head_revision()


def test_one_linear_history() -> None:
    from alembic.script import ScriptDirectory

    from rebalancer.store.migrate import MIGRATIONS_DIR

    script = ScriptDirectory(str(MIGRATIONS_DIR))
    assert len(script.get_heads()) == 1 and len(script.get_bases()) == 1
    revisions = list(script.walk_revisions())
    assert all(r.down_revision is None or isinstance(r.down_revision, str) for r in revisions)


def test_missing_migrations_are_one_clear_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from rebalancer.store import StoreError, migrate

    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", tmp_path / "nowhere")
    with pytest.raises(StoreError, match="migrations are missing"):
        Store.open(f"sqlite:///{tmp_path / 'x.db'}")
