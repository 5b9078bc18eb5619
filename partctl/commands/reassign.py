"""``partctl reassign generate | execute | verify | cancel | list``: Kafka's
kafka-reassign-partitions, with partctl's planner (rebalancer.engines) in place of its
round-robin generator. Each reaches the cluster either way in (rebalancer.access): Kafka's Admin
API by ``--bootstrap-server`` (with ``--command-config``), or the coordinator by
``--coordinator``; the command code is the same for both."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from partctl.commands.common import (
    ENV_COORDINATOR,
    cluster_given,
    cluster_options,
    command_config_security,
    count,
    fraction,
    id_list,
    open_cluster,
    read_text,
    seconds,
    seconds_or_zero,
    sizes,
    timeout_option,
)
from partctl.errors import UserError
from rebalancer.goals import GOALS

if TYPE_CHECKING:
    from rebalancer.planner.goals import Goal
    from rebalancer.snapshot import Snapshot


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    reassign = sub.add_parser("reassign", help="plan, execute, verify, cancel and list partition "
                                               "reassignments")
    rsub = reassign.add_subparsers(dest="action", metavar="ACTION", required=True)
    cluster = cluster_options()
    wait = timeout_option()
    gen = rsub.add_parser("generate", parents=[cluster, wait],
                          help="plan a reassignment from a snapshot file or the live cluster")
    gen.add_argument("--snapshot", metavar="FILE", help="a snapshot (.json or .parquet)")
    gen.add_argument("--goal", choices=GOALS, default="balance",
                     help="balance: even replicas and leaders, the fewest bytes moved; disk: "
                          "even bytes per broker, replica counts within --count-slack")
    gen.add_argument("--count-slack", type=fraction, default=None, metavar="F",
                     help="--goal disk: how far a broker's replica count may stray from its "
                          "balanced quota, as a fraction (default 0.05)")
    gen.add_argument("--brokers", metavar="1,2,3",
                     help="the brokers the moved topics may use (Kafka's --broker-list)")
    gen.add_argument("--topics-to-move-json-file", metavar="FILE",
                     help='only these topics move: {"version":1,"topics":[{"topic":"t"}]}')
    gen.add_argument("--decommission", metavar="5,9", help="brokers to drain")
    gen.add_argument("--new-brokers", metavar="7,8", help="brokers just added")
    gen.add_argument("--replication-factor", metavar="t=3,u=2",
                     help="new replication factors (--goal replication-factor)")
    gen.add_argument("--sizes", metavar="FILE",
                     help="partition sizes (default: read from the cluster with "
                          "--bootstrap-server, unknown with --coordinator)")
    gen.add_argument("--engine", choices=("auto", "local", "spark"), default="auto")
    gen.add_argument("--spark-master", default="local[*]", metavar="URL")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="where to write the plan (Kafka's reassignment JSON)")
    gen.add_argument("--plot", metavar="FILE",
                     help="also draw replicas, leaders and bytes per broker before and after, "
                          "grouped by rack (plan.png; needs the plot extra)")
    gen.set_defaults(func=cmd_generate)

    plan_file = argparse.ArgumentParser(add_help=False)
    plan_file.add_argument("--reassignment-json-file", required=True, metavar="FILE")
    session = argparse.ArgumentParser(add_help=False)
    session.add_argument("--connect-timeout", type=seconds, default=5.0, metavar="S",
                         help="seconds to wait for the cluster (default 5)")
    session.add_argument("--session-timeout", type=seconds, default=10.0, metavar="S",
                         help="seconds the coordinator session outlives a lost connection; "
                              "execute rides out an outage of up to twice this (default 10)")
    ex = rsub.add_parser("execute", parents=[cluster, session, plan_file],
                         help="have the controller carry out a plan, N partitions at a time")
    ex.add_argument("--max-concurrent-moves", type=count(1), default=50, metavar="N",
                    help="partitions moving at once (default 50)")
    ex.add_argument("--max-moves-per-broker", type=count(1), default=None, metavar="N",
                    help="moves changing any one broker at once (default: no limit)")
    ex.add_argument("--throttle", type=_rate, default=None, metavar="RATE",
                    help="throttle the moves' replication to RATE per broker (50MB/s, 1MiB/s "
                         "or bytes/s); taken off once every move is done (by verify; with "
                         "--bootstrap-server, by execute too when it sees them all done)")
    ex.add_argument("--additional", action="store_true",
                    help="add the plan's moves to a reassignment already in progress (one no "
                         "partctl execute is running), as Kafka's tool does, instead of "
                         "refusing (a partition already moving elsewhere is still refused)")
    ex.add_argument("--timeout", type=seconds, default=None, metavar="S",
                    help="stop waiting after S seconds; pending moves carry on (default: none)")
    ex.add_argument("--poll-interval", type=seconds, default=0.5, help=argparse.SUPPRESS)
    ex.add_argument("--status-every", type=seconds_or_zero, default=5.0, metavar="S",
                    help="seconds between status lines when not on a terminal (default 5)")
    ex.set_defaults(func=cmd_execute)
    ver = rsub.add_parser("verify", parents=[cluster, wait, plan_file],
                          help="per partition: done, in progress or failed")
    ver.set_defaults(func=cmd_verify)
    can = rsub.add_parser("cancel", parents=[cluster, wait],
                          help="revert the pending moves (back to the original replicas)")
    can.add_argument("--wait", type=seconds_or_zero, default=30.0, metavar="S",
                     help="seconds to wait for the controller to revert (default 30)")
    can.set_defaults(func=cmd_cancel)
    ls = rsub.add_parser("list", parents=[cluster, wait],
                         help="the reassignments in progress, whoever started them")
    ls.set_defaults(func=cmd_list)


# --- generate ------------------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace, out: TextIO) -> int:
    from dataclasses import replace

    from partctl.render import broker_loads, render_loads, render_scores
    from rebalancer.engines import plan_reassignment
    from rebalancer.goals import CLI, check_goal_options
    from rebalancer.live_snapshot import parse_topics_to_move, scope_snapshot
    from rebalancer.plan import render_plan, score_plan
    from rebalancer.planner.goals import BalanceDisk
    from rebalancer.scoring import lower_bounds
    from rebalancer.snapshot import load_snapshot

    if args.snapshot and (args.coordinator or args.bootstrap_server):
        raise UserError("give --snapshot FILE or a cluster (--bootstrap-server or "
                        "--coordinator), not both")
    if args.command_config and not args.bootstrap_server:  # as cluster_way says it
        command_config_security(args.command_config)
        raise UserError("--command-config goes with --bootstrap-server")
    if not args.snapshot and not cluster_given(args):
        raise UserError(f"give --snapshot FILE, or a cluster: --bootstrap-server HOST:PORT or "
                        f"--coordinator URL (or set {ENV_COORDINATOR})")
    check_goal_options(args.goal, count_slack=args.count_slack,
                       replication_factor=args.replication_factor, spelling=CLI)
    if args.plot:
        from partctl.plot import check_plot_target

        check_plot_target(args.plot)
    decommission = id_list(args.decommission, "--decommission")
    new_brokers = id_list(args.new_brokers, "--new-brokers")
    if args.snapshot:
        if args.sizes:
            raise UserError("--sizes goes with a cluster (a snapshot file has sizes)")
        try:
            snap = load_snapshot(args.snapshot)
        except OSError as exc:
            raise UserError(f"cannot read --snapshot {args.snapshot}: "
                            f"{exc.strerror or exc}") from None
        snap = replace(snap, decommission=snap.decommission | set(decommission),
                       new_brokers=snap.new_brokers | set(new_brokers))
    else:
        override = sizes(args)
        with closing(open_cluster(args)) as access:
            view = access.view(sizes=override is None)
        snap = view.snapshot(decommission=decommission, new_brokers=new_brokers,
                             sizes=override)
    topics = (parse_topics_to_move(read_text(args.topics_to_move_json_file,
                                             "--topics-to-move-json-file"))
              if args.topics_to_move_json_file else None)
    brokers = id_list(args.brokers, "--brokers") if args.brokers else None
    scoped = scope_snapshot(snap, brokers=brokers, topics=topics)
    goal = _goal(args, snap)
    with _stopping_spark():
        plan = plan_reassignment(scoped, [goal], engine=args.engine, seed=args.seed,
                                 master=args.spark_master)
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(render_plan(plan) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    loads = broker_loads(snap, plan)
    print("Current -> proposed assignment, per broker:", file=out)
    print(render_loads(loads), file=out)
    print("", file=out)
    print("Scores (current -> proposed):", file=out)
    print(render_scores(score_plan(scoped), score_plan(scoped, plan),
                        bounds=lower_bounds(scoped), disk=args.goal == "disk"), file=out)
    if args.goal == "disk":
        slack = goal.count_slack if isinstance(goal, BalanceDisk) else 0.0
        print(f"Disk goal: replica counts kept within {slack:.0%} of their balanced quota.",
              file=out)
    print("", file=out)
    if args.plot:
        from partctl.plot import plot_loads

        plot_loads(loads, args.plot, title=f"partctl reassign generate --goal {args.goal}: "
                                           f"{len(plan.partitions)} partition(s) move")
        print(f"Picture of the load before and after written to {args.plot}.", file=out)
    if plan.partitions:
        print(f"Proposed reassignment of {len(plan.partitions)} partition(s) written to "
              f"{args.output}.", file=out)
    else:
        print(f"Nothing to move: the cluster already meets the goal ({args.output} lists no "
              f"partitions).", file=out)
    return 0


def _rate(text: str) -> int:
    """An argparse type: a replication throttle rate in bytes per second."""
    from rebalancer.throttles import parse_rate

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _goal(args: argparse.Namespace, snap: Snapshot) -> Goal:
    """The goal of ``--goal`` and its options (rebalancer.goals, the jobs' parser too): the
    brokers to add or drain are the snapshot's, with ``--new-brokers`` and ``--decommission``."""
    from rebalancer.goals import CLI, parse_goal, parse_replication_factors

    brokers = snap.new_brokers if args.goal == "add-brokers" else snap.decommission
    return parse_goal(args.goal, brokers=brokers, count_slack=args.count_slack,
                      replication_factor=parse_replication_factors(args.replication_factor),
                      spelling=CLI)


@contextmanager
def _stopping_spark() -> Iterator[None]:
    """Stop the Spark session the planner started in the block, if it started one.

    The Spark engine takes the process's session (getOrCreate) and leaves it running, for the
    next plan. A session that was running before the command belongs to whoever started it (an
    application calling main(), the test suite) and is left alone; one the command started is
    the command's to stop, whether planning ended, failed or was interrupted.
    """
    running_before = _running_spark() is not None
    try:
        yield
    finally:
        if not running_before:
            started = _running_spark()
            if started is not None:
                started.stop()


def _running_spark() -> Any:
    """The process's running Spark session, else None (pyspark never imported: none)."""
    sql = sys.modules.get("pyspark.sql")
    if sql is None:
        return None
    try:
        return sql.SparkSession.active()
    except RuntimeError:  # PySparkRuntimeError: no active or default session
        return None


# --- execute, verify, cancel ---------------------------------------------------------------------


def _plan_file(args: argparse.Namespace) -> str:
    return read_text(args.reassignment_json_file, "--reassignment-json-file")


def cmd_execute(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import ProgressDisplay, render_result
    from rebalancer.access import CoordinatorAccess

    text = _plan_file(args)
    with closing(open_cluster(args)) as access:
        plan = access.validate(text)
        removal = ("verify removes the throttle once every move is done"
                   if isinstance(access, CoordinatorAccess) else
                   "removed when every move has finished; else verify removes it")
        header = (f"Executing a reassignment of {len(plan.partitions)} partition(s), at most "
                  f"{args.max_concurrent_moves} at a time"
                  + (f" and {args.max_moves_per_broker} per broker"
                     if args.max_moves_per_broker else "")
                  + (f", replication throttled to {args.throttle} B/s per broker ({removal})"
                     if args.throttle else "")
                  + (", in addition to the moves in progress" if args.additional else "")
                  + ".")
        try:
            with ProgressDisplay(out, every=args.status_every, header=header) as display:
                result = access.execute(plan, max_concurrent_moves=args.max_concurrent_moves,
                                        max_moves_per_broker=args.max_moves_per_broker,
                                        throttle=args.throttle, additional=args.additional,
                                        poll_interval=args.poll_interval, timeout=args.timeout,
                                        progress=display, label=args.reassignment_json_file)
        except KeyboardInterrupt:
            print("Interrupted: the moves already submitted carry on; `partctl reassign "
                  "execute` again resumes the plan, `partctl reassign verify` follows the "
                  "moves, `partctl reassign cancel` reverts them.", file=out)
            raise
    print(render_result(result), file=out)
    return 0 if result.ok else 1


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_verify
    from rebalancer.validation import read_plan

    plan = read_plan(_plan_file(args))
    with closing(open_cluster(args)) as access:
        report = access.verify(plan)
        removed = (access.remove_throttles({r.topic for r in plan.partitions})
                   if report.all_done else None)
    print(render_verify(report), file=out)
    if removed is not None and (removed.brokers or removed.topics):
        print(f"Throttles removed: the rates of broker(s) "
              f"{', '.join(map(str, removed.brokers)) or 'none'} and the throttled replicas of "
              f"topic(s) {', '.join(sorted(removed.topics)) or 'none'}.", file=out)
    return 0 if report.all_done else 1


def cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_cancel

    with closing(open_cluster(args)) as access:
        report = access.cancel(wait=args.wait)
    print(render_cancel(report), file=out)
    return 0


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_in_progress

    with closing(open_cluster(args)) as access:
        moving = access.in_progress()
    print(render_in_progress(moving), file=out)
    return 0
