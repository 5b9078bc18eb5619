"""Alembic owns the store's tables: up and down on SQLite and PostgreSQL, the models match the
migrations (autogenerate finds no difference), and APScheduler's table is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import create_engine, inspect

from rebalancer.store import Store
from rebalancer.store.migrate import VERSION_TABLE, alembic_config, head_revision
from rebalancer.store.models import Base
from rebalancer.store.scheduler_tables import SCHEDULER_JOBS_TABLE
from tests.rebalancer.test_store import postgres_database

OURS = {"partctl_plans", "partctl_executions", "partctl_execution_partitions",
        "partctl_job_runs"}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
    else:
        with postgres_database() as url:
            yield url


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def add_scheduler_table(url: str) -> None:
    """What APScheduler's job store does when a scheduler starts: create its own table."""
    store = SQLAlchemyJobStore(url=url)
    store.jobs_t.create(store.engine, checkfirst=True)
    store.engine.dispose()


def test_up_down_and_up_again_leaves_the_scheduler_table_alone(db_url: str) -> None:
    store = Store.open(db_url, upgrade=False)
    try:
        assert store.revision() is None
        add_scheduler_table(db_url)
        assert store.upgrade() == head_revision()
        assert tables(db_url) >= OURS | {VERSION_TABLE, SCHEDULER_JOBS_TABLE}
        run = store.start_run("j", "rebalance")
        assert store.downgrade("base") is None
        assert tables(db_url) & OURS == set()
        assert SCHEDULER_JOBS_TABLE in tables(db_url)
        assert store.upgrade() == head_revision()
        assert store.get_run(run.id) is None  # down really dropped the data
        assert store.start_run("j", "rebalance").id == 1
    finally:
        store.close()


def test_the_models_match_the_migrations_and_autogenerate_ignores_apscheduler(
        db_url: str) -> None:
    with Store.open(db_url) as store:
        add_scheduler_table(db_url)
        engine = store.engine
        with engine.connect() as conn:
            # through env.py, as `alembic check` runs it: no new upgrade operations
            command.check(alembic_config(db_url, conn))
            # the same comparison by hand, with and without env.py's filter
            from rebalancer.store.migrate import include_object

            filtered = compare_metadata(MigrationContext.configure(conn, opts={
                "include_object": include_object, "compare_type": True,
                "version_table": VERSION_TABLE}), Base.metadata)
            assert filtered == []
            unfiltered = compare_metadata(MigrationContext.configure(conn, opts={
                "compare_type": True, "version_table": VERSION_TABLE}), Base.metadata)
        removed = [d for d in unfiltered if d[0] == "remove_table"]
        assert [d[1].name for d in removed] == [SCHEDULER_JOBS_TABLE]


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
