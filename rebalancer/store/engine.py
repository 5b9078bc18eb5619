"""Opening the store's database: an SQLAlchemy engine per URL (SQLite files private to their
owner, in WAL mode with a busy timeout; psycopg 3 for a bare ``postgresql://``), and a database
error met there said in one line, without the password."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import NoSuchModuleError, OperationalError, SQLAlchemyError

from rebalancer.store.records import StoreError
from rebalancer.store.urls import display_url


def create_store_engine(url: str) -> Engine:
    """An engine for ``url``: SQLite files get their directory, foreign keys, WAL and a busy
    timeout (a scheduler and the CLI share the file); a bare ``postgresql://`` uses psycopg 3
    when psycopg2 is not installed."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    options: dict[str, Any] = {}
    if backend == "sqlite":
        db = parsed.database
        if db and db != ":memory:" and not db.startswith("file:"):
            create_private_file(Path(db))
        options["connect_args"] = {"timeout": 30, "check_same_thread": False}
    else:
        options["pool_pre_ping"] = True
    if backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername=_default_postgres_driver())
    try:
        engine = create_engine(parsed, **options)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise StoreError(f"no database driver for {display_url(url)}: {exc} "
                         f"(for PostgreSQL: pip install 'partctl[postgres]')") from None
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def create_private_file(path: Path) -> None:
    """Create the SQLite file (and any missing directory above it) readable by its owner only:
    0700 directories, as the XDG base directory spec asks, and a 0600 file, created before
    SQLite opens it because SQLite gives its -wal, -shm and -journal files the database file's
    mode. An existing file or directory keeps its mode. One line (StoreError) when it cannot
    be done: a path under a regular file, a directory that is not writable."""
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        if parent.parent == parent:
            break
        parent = parent.parent
    try:
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                continue  # made at the same moment by another process
            os.chmod(directory, 0o700)  # whatever the umask
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except FileExistsError:
        if not path.is_file():
            raise StoreError(f"cannot create the store at {path}: it exists and is not a "
                             f"file") from None
    except OSError as exc:
        where = exc.filename or path
        raise StoreError(f"cannot create the store at {path}: {where}: "
                         f"{exc.strerror or exc}") from None


def _default_postgres_driver() -> str:
    import importlib.util

    if importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg"):
        return "postgresql+psycopg"
    return "postgresql"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    # Switching a fresh file to WAL needs it to itself, and SQLite answers "database is locked"
    # at once (no busy wait) when another connection (a scheduler starting beside a CLI call)
    # is opening it too: try again for a while.
    deadline = time.monotonic() + 30
    while True:
        cur.execute("PRAGMA journal_mode")
        if cur.fetchone()[0].lower() in ("memory", "wal"):
            break
        try:
            cur.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    cur.close()


def sql_error(url: str, exc: SQLAlchemyError) -> StoreError:
    """A database error met opening or migrating the store, as one line without the password."""
    if isinstance(exc, OperationalError):
        return StoreError(f"cannot open the store at {display_url(url)}: "
                          f"{first_line(exc.orig or exc)}")
    return StoreError(f"store {display_url(url)}: {first_line(exc)}")


def first_line(exc: BaseException | object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
