"""Alembic environment for partctl's SQL store.

The models' metadata is the target: every table partctl keeps, jobs included. The URL comes
from the Config (set by ``rebalancer.store.migrate``), else from ``$PARTCTL_DB`` / the default
SQLite file. A caller may hand over an open connection in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine, pool

from rebalancer.store.migrate import VERSION_TABLE
from rebalancer.store.models import Base
from rebalancer.store.urls import resolve_db_url

config = context.config
target_metadata = Base.metadata


def _options(dialect_name: str) -> dict[str, Any]:
    return {
        "target_metadata": target_metadata,
        "version_table": VERSION_TABLE,
        "render_as_batch": dialect_name == "sqlite",  # SQLite alters tables by copying them
        "compare_type": True,
    }


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or resolve_db_url()


def run_offline() -> None:
    url = _url()
    context.configure(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"},
                      **_options(url.split(":", 1)[0].split("+", 1)[0]))
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, **_options(connection.dialect.name))
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, **_options(conn.dialect.name))
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
