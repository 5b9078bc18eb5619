"""The one goal parser: a rebalance goal as a user names it, checked and made the planner's Goal.

``partctl reassign generate --goal ...``, ``partctl jobs add rebalance --goal ...`` and a stored
job's ``goal`` argument all come here, so every goal one takes the others take too (the
replication-factor goal included), and a bad goal gets the same line from each. Only the names
of the options differ, as each surface spells them (a flag on the command line, an argument in
a stored job): :class:`Spelling`.

Pure: no I/O, no snapshot (the caller says which brokers a goal is about). The planner's goal
types are imported when a goal is made, so the CLI can name the goals without loading numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rebalancer.planner.goals import Goal

__all__ = [
    "CLI",
    "GOALS",
    "JOB",
    "GoalError",
    "Spelling",
    "check_goal_options",
    "parse_goal",
    "parse_replication_factors",
]

GOALS = ("balance", "disk", "add-brokers", "decommission", "replication-factor", "repair-racks")
"""Every goal, by the name users give it."""


class GoalError(ValueError):
    """A goal that cannot be planned as asked: one line saying why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Spelling:
    """How a surface names a goal's options in its error lines."""

    goal: str
    count_slack: str
    sizes: str
    replication_factor: str
    new_brokers: str
    decommission: str


JOB = Spelling(goal="goal", count_slack="count_slack", sizes="sizes",
               replication_factor="replication_factor", new_brokers="the brokers to add",
               decommission="the brokers to drain")
"""A stored job's arguments."""

CLI = Spelling(goal="--goal", count_slack="--count-slack", sizes="--sizes FILE",
               replication_factor="--replication-factor",
               new_brokers="--new-brokers (or a snapshot that lists new brokers)",
               decommission="--decommission (or a snapshot that lists brokers to decommission)")
"""``partctl reassign generate``'s flags."""


def check_goal_options(goal: str, *, count_slack: float | None = None,
                       replication_factor: Mapping[str, int] | str | None = None,
                       sizes: bool | None = None, spelling: Spelling = JOB) -> None:
    """The checks that need no brokers: a known goal, and options that go with it.
    ``replication_factor`` is anything given for it (a mapping, or the CLI's text); ``sizes``
    says whether partition sizes will be known (None: not this caller's concern, a snapshot
    file brings its own), and goal disk needs them. GoalError says what does not fit."""
    if goal not in GOALS:
        raise GoalError(f"unknown {spelling.goal} {goal!r:.80} (expected one of "
                        f"{', '.join(GOALS)})")
    if replication_factor and goal != "replication-factor":
        raise GoalError(f"{spelling.replication_factor} goes with {spelling.goal} "
                        f"replication-factor")
    if count_slack is not None and goal != "disk":
        raise GoalError(f"{spelling.count_slack} goes with {spelling.goal} disk")
    if sizes is False and goal == "disk":
        raise GoalError(f"{spelling.goal} disk needs {spelling.sizes} (the partition sizes, "
                        f"read at each run)")


def parse_goal(goal: str, *, brokers: Iterable[int] = (), count_slack: float | None = None,
               replication_factor: Mapping[str, int] | None = None, sizes: bool | None = None,
               spelling: Spelling = JOB, allow_no_new_brokers: bool = False) -> Goal:
    """The planner's goal for ``goal`` with its options; GoalError, one line, when they do not
    make sense. ``brokers`` are the brokers the goal is about: those to add (add-brokers) or
    to drain (decommission); the other goals ignore them. ``allow_no_new_brokers``: stored
    jobs have always accepted add-brokers with no brokers (it then plans as balance)."""
    from rebalancer.planner.goals import (
        DEFAULT_COUNT_SLACK,
        AddBrokers,
        Balance,
        BalanceDisk,
        ChangeReplicationFactor,
        Decommission,
        RepairRacks,
    )

    check_goal_options(goal, count_slack=count_slack, replication_factor=replication_factor,
                       sizes=sizes, spelling=spelling)
    chosen = frozenset(brokers)
    match goal:
        case "balance":
            return Balance()
        case "disk":
            return BalanceDisk(count_slack=DEFAULT_COUNT_SLACK if count_slack is None
                               else count_slack)
        case "add-brokers":
            if not chosen and not allow_no_new_brokers:
                raise GoalError(f"{spelling.goal} add-brokers needs {spelling.new_brokers}")
            return AddBrokers(brokers=chosen)
        case "decommission":
            if not chosen:
                raise GoalError(f"{spelling.goal} decommission needs {spelling.decommission}")
            return Decommission(brokers=chosen)
        case "replication-factor":
            if not replication_factor:
                raise GoalError(f"{spelling.goal} replication-factor needs "
                                f"{spelling.replication_factor} (the new replication factor "
                                f"of each topic)")
            return ChangeReplicationFactor.of(replication_factor)
    return RepairRacks()


def parse_replication_factors(text: str | None) -> dict[str, int]:
    """The command line's ``--replication-factor t=3,u=2``; GoalError when it is not that."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        topic, eq, rf = item.strip().rpartition("=")
        if not item.strip():
            continue
        if not eq or not topic or not rf.strip().isdigit() or len(rf.strip()) > 9:
            raise GoalError(f"bad --replication-factor {text!r:.200}: want topic=rf,topic=rf")
        out[topic] = int(rf)
    return out
