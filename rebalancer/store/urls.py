"""Where the store lives: ``--db`` / ``$PARTCTL_DB`` (any SQLAlchemy URL, or the path of an
existing SQLite file), else SQLite at ``$PARTCTL_HOME/partctl.db`` (``$PARTCTL_HOME`` defaults
to ``~/.local/share/partctl``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from rebalancer.store_location import DB_FILENAME, ENV_DB, ENV_HOME

DEFAULT_HOME = Path("~/.local/share/partctl")

_SECRET_QUERY_KEYS = re.compile(r"pass|secret|token", re.IGNORECASE)
_USERINFO = re.compile(r"(//[^/@:]*):[^/@]*@")


class StoreURLError(ValueError):
    """A database URL that SQLAlchemy cannot parse, or a path where no store is."""


def default_db_path() -> Path:
    home = os.environ.get(ENV_HOME)
    return (Path(home) if home else DEFAULT_HOME).expanduser() / DB_FILENAME


def resolve_db_url(url: str | None = None, *, create: bool = False) -> str:
    """The explicit URL, else ``$PARTCTL_DB``, else the default SQLite file.

    A relative SQLite path is made absolute, so that a job run by a scheduler started elsewhere
    finds the same file. A bare path (no ``scheme://``) is taken as SQLite only when the file
    exists, or when ``create`` is set (``partctl db upgrade`` creating a store): a typo such as
    ``notaurl`` or ``postgresql:/host/db`` would otherwise become a new, empty SQLite store that
    answers "No jobs.". A URL, and the default location, may name a store that does not exist
    yet: it is created on first use.
    """
    if url is not None and not url.strip():
        raise StoreURLError("the database URL is empty")
    raw = url or os.environ.get(ENV_DB) or f"sqlite:///{default_db_path()}"
    if "://" not in raw:
        path = Path(raw).expanduser()
        if not create and not path.is_file():
            source = f"${ENV_DB}" if url is None else "--db"
            raise StoreURLError(
                f"{source} {display_url(raw)!r} is neither a database URL (scheme://...) nor "
                f"an existing SQLite file (`partctl db upgrade --db PATH` creates one)")
        raw = f"sqlite:///{path.resolve()}"
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
    """The URL with its password shown as ``***``, for messages, listings and logs.

    Also masks query parameters that carry a secret (``?password=``, ``sslpassword=``), which
    SQLAlchemy's own masking leaves alone, and the password of a URL it cannot parse.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return _USERINFO.sub(r"\1:***@", url)
    if any(_SECRET_QUERY_KEYS.search(k) for k in parsed.query):
        parsed = parsed.set(query={k: ("***" if _SECRET_QUERY_KEYS.search(k) else v)
                                   for k, v in parsed.query.items()})
    return parsed.render_as_string(hide_password=True).replace("%2A%2A%2A", "***")
