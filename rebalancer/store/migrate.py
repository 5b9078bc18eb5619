"""Alembic, driven from code: the store's migrations live in the repository's ``migrations/``.

No top-level alembic.ini is needed: ``alembic_config`` builds the Config programmatically
(``migrations/alembic.ini`` exists too, for running the ``alembic`` command by hand).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine


def _migrations_dir() -> Path:
    """The ``migrations`` package's folder, wherever partctl is installed."""
    spec = importlib.util.find_spec("migrations")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()
VERSION_TABLE = "partctl_alembic_version"

_lock = threading.Lock()


def alembic_config(url: str, connection: Connection | None = None) -> Config:
    """A Config for ``url``; with ``connection``, env.py migrates over that connection."""
    _check_installed()
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # configparser interpolation: a literal % in a URL (an escaped password) must be doubled
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _check_installed() -> None:
    if not (MIGRATIONS_DIR / "env.py").exists():
        raise FileNotFoundError(f"the store's migrations are missing: {MIGRATIONS_DIR} (partctl "
                                f"must run from its source tree or an editable install)")


def head_revision() -> str:
    _check_installed()
    heads = ScriptDirectory(str(MIGRATIONS_DIR)).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"the store's migrations have {len(heads)} heads: {heads}")
    return heads[0]


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the migrations up to ``revision`` over ``engine``, in one transaction."""
    with _lock, engine.begin() as conn:
        command.upgrade(alembic_config(engine.url.render_as_string(hide_password=False), conn),
                        revision)


def downgrade(engine: Engine, revision: str) -> None:
    with _lock, engine.begin() as conn:
        command.downgrade(alembic_config(engine.url.render_as_string(hide_password=False), conn),
                          revision)


def ensure_head(engine: Engine) -> bool:
    """Upgrade to head unless already there; True when migrations ran.

    On PostgreSQL a transaction-scoped advisory lock serialises processes that open a fresh
    database at the same moment (a scheduler and a CLI call); the second one finds it done.
    """
    head = head_revision()
    if current_revision(engine) == head:
        return False
    with _lock, engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        if context.get_current_revision() == head:
            return False
        command.upgrade(alembic_config(engine.url.render_as_string(hide_password=False), conn),
                        "head")
    return True


_PG_LOCK_KEY = 0x7061727463746C  # "partctl"
