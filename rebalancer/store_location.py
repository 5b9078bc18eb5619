"""The names that say where partctl's SQL store is (``$PARTCTL_DB``, ``$PARTCTL_HOME`` and the
SQLite file's name), in a module of their own so that the command line can name them in its
help without loading SQLAlchemy and Alembic: every ``partctl`` process builds that help,
brokers included. :mod:`rebalancer.store.urls` resolves them."""

from __future__ import annotations

__all__ = ["DB_FILENAME", "ENV_DB", "ENV_HOME"]

ENV_DB = "PARTCTL_DB"
ENV_HOME = "PARTCTL_HOME"
DB_FILENAME = "partctl.db"
