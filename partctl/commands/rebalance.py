"""``partctl rebalance add-brokers IDS | remove-brokers IDS | demote-brokers IDS |
fix-offline-replicas``: the day-2 operations of Cruise Control's endpoints (add_broker,
remove_broker, demote_broker, fix_offline_replicas), planned by rebalancer.operations with the
one planning kernel.

Each is a dry run unless ``--execute``: it shows the plan's figures (per broker before and
after, balance, replicas, bytes and leaders moved, the partitions skipped and why) and, with
``-o FILE``, writes the plan (Kafka's reassignment JSON). ``--execute`` carries it out as
``reassign execute`` does (the same limits and throttle), takes the throttles off once every
move is done, and for demote-brokers then runs the preferred election that moves leadership.
The cluster is reached through a :class:`~rebalancer.access.ClusterAccess`: by Kafka's Admin API
(``--bootstrap-server``, ``--command-config``) or through the coordinator (``--coordinator``).
"""

from __future__ import annotations

import argparse
import os
from contextlib import closing
from typing import TYPE_CHECKING, TextIO

from partctl.commands.common import (
    cluster_options,
    count,
    open_cluster,
    seconds,
    seconds_or_zero,
)
from partctl.commands.common import sizes as read_sizes
from partctl.errors import UserError

if TYPE_CHECKING:
    from rebalancer.access import ClusterAccess, ClusterView
    from rebalancer.operations import OperationPlan

ACTIONS = (
    ("add-brokers", True, "move replicas and leadership onto new brokers, and only onto them "
                          "(Cruise Control's add_broker)"),
    ("remove-brokers", True, "drain every replica off brokers, keeping replication factors "
                             "and racks (remove_broker)"),
    ("demote-brokers", True, "move leadership off brokers: put them last in every replica "
                             "list, then a preferred election (demote_broker)"),
    ("fix-offline-replicas", False, "re-place the replicas of dead brokers on live ones "
                                    "(fix_offline_replicas)"),
)


# --- reaching the cluster: the one place that knows how ------------------------------------------


def _cluster_options() -> argparse.ArgumentParser:
    """How the commands reach the cluster: Kafka's Admin API (``--bootstrap-server``,
    ``--command-config``) or the coordinator (``--coordinator``), with reassign execute's waits."""
    cluster = argparse.ArgumentParser(add_help=False, parents=[cluster_options()])
    cluster.add_argument("--connect-timeout", type=seconds, default=5.0, metavar="S",
                         help="seconds to wait for the cluster (default 5)")
    cluster.add_argument("--session-timeout", type=seconds, default=10.0, metavar="S",
                         help="seconds the coordinator session outlives a lost connection "
                              "(default 10)")
    return cluster


# --- options -------------------------------------------------------------------------------------


def _broker_ids(text: str) -> list[int]:
    """An argparse type: broker ids like ``4`` or ``4,5``."""
    ids = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit() or len(item) > 10:
            raise argparse.ArgumentTypeError(f"want broker ids like 4 or 4,5, got {text!r:.80}")
        ids.append(int(item))
    if not ids:
        raise argparse.ArgumentTypeError("want broker ids like 4 or 4,5")
    return ids


def _rate(text: str) -> int:
    """An argparse type: a replication throttle rate in bytes per second."""
    from rebalancer.throttles import parse_rate

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run_options() -> argparse.ArgumentParser:
    run = argparse.ArgumentParser(add_help=False)
    run.add_argument("-o", "--output", metavar="FILE",
                     help="also write the plan there (Kafka's reassignment JSON)")
    run.add_argument("--sizes", metavar="FILE",
                     help="partition sizes, for bytes-aware planning where the cluster does "
                          "not report them")
    run.add_argument("--execute", action="store_true",
                     help="carry the plan out (default: a dry run that moves nothing)")
    run.add_argument("--max-concurrent-moves", type=count(1), default=50, metavar="N",
                     help="--execute: partitions moving at once (default 50)")
    run.add_argument("--max-moves-per-broker", type=count(1), default=None, metavar="N",
                     help="--execute: moves changing any one broker at once (default: no "
                          "limit)")
    run.add_argument("--throttle", type=_rate, default=None, metavar="RATE",
                     help="--execute: throttle the moves' replication to RATE per broker "
                          "(50MB/s, 1MiB/s or bytes/s), taken off once every move is done")
    run.add_argument("--timeout", type=seconds, default=None, metavar="S",
                     help="--execute: stop waiting after S seconds; pending moves carry on "
                          "(default: none)")
    run.add_argument("--poll-interval", type=seconds, default=0.5, help=argparse.SUPPRESS)
    run.add_argument("--status-every", type=seconds_or_zero, default=5.0, metavar="S",
                     help="seconds between status lines when not on a terminal (default 5)")
    return run


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    rebalance = sub.add_parser("rebalance", help="day-2 operations as Cruise Control's: add, "
                                                 "remove or demote brokers, fix offline "
                                                 "replicas (a dry run unless --execute)")
    rsub = rebalance.add_subparsers(dest="action", metavar="ACTION", required=True)
    cluster, run = _cluster_options(), _run_options()
    for name, takes_ids, text in ACTIONS:
        action = rsub.add_parser(name, parents=[cluster, run], help=text, description=text)
        if takes_ids:
            action.add_argument("broker_ids", metavar="IDS", type=_broker_ids,
                                help="the brokers, like 4 or 4,5")
        action.set_defaults(func=cmd_operation, operation=name)


# --- the command ---------------------------------------------------------------------------------


def _check_output(path: str) -> None:
    """Refuse, before anything is read, a plan file that cannot be written."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: Is a directory")
    if not os.path.isdir(parent):
        raise UserError(f"cannot write {path}: No such file or directory")


def _plan(name: str, view: ClusterView, ids: list[int],
          sizes: dict[tuple[str, int], int] | None) -> OperationPlan:
    from rebalancer import operations

    match name:
        case "add-brokers":
            return operations.add_brokers(view, ids, sizes=sizes)
        case "remove-brokers":
            return operations.remove_brokers(view, ids, sizes=sizes)
        case "demote-brokers":
            return operations.demote_brokers(view, ids)
    return operations.fix_offline_replicas(view, sizes=sizes)


def cmd_operation(args: argparse.Namespace, out: TextIO) -> int:
    if args.output:
        _check_output(args.output)
    sizes = read_sizes(args)
    with closing(open_cluster(args)) as access:
        view = access.view(sizes=True)
        op = _plan(args.operation, view, getattr(args, "broker_ids", []), sizes)
        _show(op, access.description, out)
        if args.output:
            _write(op, args.output, out)
        if not args.execute:
            print("Dry run: nothing was moved. Run it again with --execute to carry it out.",
                  file=out)
            return 0
        return _execute(op, access, args, out)


def _show(op: OperationPlan, where: str, out: TextIO) -> None:
    from partctl.render import broker_loads, render_loads, render_scores

    ids = ",".join(map(str, op.brokers))
    moves = len(op.plan.partitions)
    print(f"{op.operation} {ids} on {where}: {moves} partition(s) to reassign.", file=out)
    print("Current -> proposed assignment, per broker:", file=out)
    print(render_loads(broker_loads(op.snapshot, op.plan)), file=out)
    print("", file=out)
    print("Scores (current -> proposed):", file=out)
    print(render_scores(op.before, op.after), file=out)
    if op.elect:
        print(f"Then a preferred election moves the leadership of {len(op.elect)} "
              f"partition(s) off broker(s) {ids}.", file=out)
    if op.skipped:
        print(f"Skipped {len(op.skipped)} partition(s):", file=out)
        for s in op.skipped[:50]:
            print(f"  {s}", file=out)
        if len(op.skipped) > 50:
            print(f"  ... and {len(op.skipped) - 50} more", file=out)
    print("", file=out)


def _write(op: OperationPlan, path: str, out: TextIO) -> None:
    from rebalancer.plan import render_plan

    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_plan(op.plan) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(f"Plan of {len(op.plan.partitions)} partition(s) written to {path}.", file=out)


def _execute(op: OperationPlan, access: ClusterAccess, args: argparse.Namespace,
             out: TextIO) -> int:
    from partctl.render import ProgressDisplay, render_result

    ok = True
    if op.plan.partitions:
        plan = access.validate(op.plan)
        header = (f"Executing {op.operation}: {len(plan.partitions)} partition(s), at most "
                  f"{args.max_concurrent_moves} at a time"
                  + (f" and {args.max_moves_per_broker} per broker"
                     if args.max_moves_per_broker else "")
                  + (f", replication throttled to {args.throttle} B/s per broker"
                     if args.throttle else "") + ".")
        try:
            with ProgressDisplay(out, every=args.status_every, header=header) as display:
                result = access.execute(plan, max_concurrent_moves=args.max_concurrent_moves,
                                        max_moves_per_broker=args.max_moves_per_broker,
                                        throttle=args.throttle, timeout=args.timeout,
                                        poll_interval=args.poll_interval, progress=display,
                                        label=f"partctl rebalance {op.operation}")
        except KeyboardInterrupt:
            print("Interrupted: the moves already submitted carry on; `partctl reassign "
                  "verify` follows them, `partctl reassign cancel` reverts them.", file=out)
            raise
        print(render_result(result), file=out)
        ok = result.ok
        if ok and args.throttle is not None:
            # the Admin API's execute takes them off itself once every move is done, so
            # there may be none left to remove here: say so rather than "from none"
            removed = access.remove_throttles({m.topic for m in plan.partitions})
            if removed.brokers or removed.topics:
                print(f"Throttles removed from broker(s) "
                      f"{','.join(map(str, removed.brokers)) or 'none'} and topic(s) "
                      f"{', '.join(sorted(removed.topics)) or 'none'}.", file=out)
            else:
                print("Throttles removed: none is left on the brokers or the topics moved.",
                      file=out)
    if ok and op.elect:
        elected = access.elect_preferred(op.elect)
        print(f"Preferred leader election: {len(elected.elected)} elected, "
              f"{len(elected.requested)} handed to the controller, {len(elected.not_needed)} "
              f"not needed, {len(elected.failed)} failed.", file=out)
        for tp, why in elected.failed.items():
            print(f"  {tp}: {why}", file=out)
        ok = not elected.failed
    elif not op.plan.partitions and not op.elect:
        print("Nothing to do.", file=out)
    return 0 if ok else 1
