"""The CLI's command groups, one module each; ``GROUPS`` is the order ``partctl --help`` lists
them in.

A group module has ``register(sub, common)``: it adds its parser to the top-level sub-parsers
``sub`` (``common`` is the parent parser of ``--coordinator`` and ``--timeout``), its actions'
parsers under it, and sets each action's handler with ``set_defaults(func=cmd_...)``. A handler
is ``cmd_...(args, out) -> exit status``: it checks what argparse cannot, opens what it needs in
a ``with`` block (``common.connect``, ``common.admin``, ``Store.open``), calls the library and
prints the result (rendering shared by several commands is in partctl/render.py). It raises
``partctl.errors.UserError`` for what it checks itself and lets the library's errors through:
partctl/errors.py says which of those are the user's, and main() (partctl/cli.py) reports them.

A new group is a module here with ``register`` and its handlers, added to GROUPS.
"""

from __future__ import annotations

from types import ModuleType

from partctl.commands import (
    acls,
    broker,
    cluster,
    controller,
    db,
    demo,
    elect,
    groups,
    jobs,
    reassign,
    rebalance,
    scheduler,
    topics,
    transactions,
    ui,
    users,
)

GROUPS: tuple[ModuleType, ...] = (
    topics, groups, controller, elect, demo, cluster, reassign, rebalance, db, jobs, scheduler,
    broker, users, acls, transactions, ui,
)
