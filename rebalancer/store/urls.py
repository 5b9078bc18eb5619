"""Where the store lives: ``--db`` / ``$PARTCTL_DB`` (any SQLAlchemy URL), else SQLite at
``$PARTCTL_HOME/partctl.db`` (``$PARTCTL_HOME`` defaults to ``~/.local/share/partctl``)."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

ENV_DB = "PARTCTL_DB"
ENV_HOME = "PARTCTL_HOME"
DEFAULT_HOME = Path("~/.local/share/partctl")
DB_FILENAME = "partctl.db"


class StoreURLError(ValueError):
    """A database URL that SQLAlchemy cannot parse."""


def default_db_path() -> Path:
    home = os.environ.get(ENV_HOME)
    return (Path(home) if home else DEFAULT_HOME).expanduser() / DB_FILENAME


def resolve_db_url(url: str | None = None) -> str:
    """The explicit URL, else ``$PARTCTL_DB``, else the default SQLite file.

    A relative SQLite path is made absolute, so that a job stored with it finds the same file
    whatever directory the scheduler runs in. A bare path (no ``://``) is taken as SQLite.
    """
    raw = url or os.environ.get(ENV_DB) or f"sqlite:///{default_db_path()}"
    if "://" not in raw:
        raw = f"sqlite:///{Path(raw).expanduser().resolve()}"
    try:
        parsed = make_url(raw)
    except (ArgumentError, ValueError) as exc:
        raise StoreURLError(f"bad database URL {display_url(raw)!r}: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        parsed = _absolute_sqlite(parsed)
    return parsed.render_as_string(hide_password=False)


def _absolute_sqlite(url: URL) -> URL:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return url
    return url.set(database=str(Path(db).expanduser().resolve()))


def display_url(url: str) -> str:
    """The URL with any password masked, for messages and listings."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return url.split("@", 1)[-1] if "@" in url else url
