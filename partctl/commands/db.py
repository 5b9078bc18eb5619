"""``partctl db upgrade | downgrade | current``: the SQL store's schema (Alembic migrations)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.commands.common import database_options


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    database = database_options()
    db = sub.add_parser("db", help="the SQL store of plans, executions and job runs")
    dsub = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = dsub.add_parser("upgrade", parents=[database], help="run the migrations (to head)")
    up.add_argument("--revision", default="head")
    up.set_defaults(func=cmd_upgrade)
    down = dsub.add_parser("downgrade", parents=[database],
                           help="undo migrations down to a revision ('base' drops the tables)")
    down.add_argument("--revision", required=True)
    down.set_defaults(func=cmd_downgrade)
    dsub.add_parser("current", parents=[database], help="the database's revision"
                    ).set_defaults(func=cmd_current)


def cmd_upgrade(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url

    with Store.open(args.db, upgrade=False, create=True) as store:
        before = store.revision()
        after = store.upgrade(args.revision)
        where = display_url(store.url)
    if before == after:
        print(f"{where}: already at revision {after}.", file=out)
    else:
        print(f"{where}: upgraded from {before or 'an empty database'} to revision {after}.",
              file=out)
    return 0


def cmd_downgrade(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url

    with Store.open(args.db, upgrade=False) as store:
        after = store.downgrade(args.revision)
        where = display_url(store.url)
    print(f"{where}: downgraded to revision {after or 'base (no tables)'}.", file=out)
    return 0


def cmd_current(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url
    from rebalancer.store.migrate import head_revision

    with Store.open(args.db, upgrade=False) as store:
        current = store.revision()
        head = head_revision()
        where = display_url(store.url)
    state = "up to date" if current == head else f"head is {head}: run `partctl db upgrade`"
    print(f"{where}: revision {current or 'none'} ({state}).", file=out)
    return 0
