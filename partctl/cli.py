"""The partctl command line: thin over the library (parse, build clients, call, render).

A user error prints one line, ``partctl: error: ...``, and exits 1; nothing is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from partctl import __version__

ENV_COORDINATOR = "PARTCTL_COORDINATOR"


class UserError(Exception):
    """An error to report in one line, without a traceback."""


def _coordinator_url(args: argparse.Namespace) -> str:
    url = args.coordinator or os.environ.get(ENV_COORDINATOR)
    if not url:
        raise UserError(f"no coordinator: pass --coordinator URL or set {ENV_COORDINATOR}")
    return url


def _admin(args: argparse.Namespace):  # noqa: ANN202 - statemachines imported lazily
    import coordinator
    from statemachines import Admin

    client = coordinator.connect(_coordinator_url(args), timeout=args.timeout)
    args._opened.append(client)
    return Admin(client)


def _parse_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's --replica-assignment: partitions separated by ',', replicas by ':'."""
    out: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            out[index] = [int(b) for b in part.split(":")]
        except ValueError:
            raise UserError(f"bad --replica-assignment {text!r}: want e.g. 1:2,2:3,3:1") from None
    return out


# --- topics ------------------------------------------------------------------------------------


def cmd_topics_create(args: argparse.Namespace, out: TextIO) -> int:
    admin = _admin(args)
    if args.replica_assignment:
        if args.partitions or args.replication_factor:
            raise UserError("--replica-assignment excludes --partitions/--replication-factor")
        created = admin.create_topic(args.topic,
                                     assignment=_parse_assignment(args.replica_assignment))
    else:
        if not args.partitions or not args.replication_factor:
            raise UserError("give --partitions and --replication-factor, "
                            "or --replica-assignment")
        created = admin.create_topic(args.topic, args.partitions, args.replication_factor)
    print(f"Created topic {created.topic} ({len(created.partitions)} partitions, "
          f"topic id {created.topic_id}).", file=out)
    return 0


def cmd_topics_list(args: argparse.Namespace, out: TextIO) -> int:
    for name in _admin(args).list_topics():
        print(name, file=out)
    return 0


def cmd_topics_describe(args: argparse.Namespace, out: TextIO) -> int:
    topics = [args.topic] if args.topic else None
    for desc in _admin(args).describe_topics(topics):
        rf = len(desc.partitions[0].replicas) if desc.partitions else 0
        flag = "\tMarkedForDeletion: true" if desc.deleting else ""
        print(f"Topic: {desc.name}\tTopicId: {desc.topic_id}\tPartitionCount: "
              f"{len(desc.partitions)}\tReplicationFactor: {rf}{flag}", file=out)
        for p in desc.partitions:
            leader = "none" if p.leader in (None, -1) else p.leader
            line = (f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                    f"LeaderEpoch: {p.leader_epoch if p.leader_epoch is not None else '-'}\t"
                    f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
            if p.adding or p.removing:
                line += f"\tAdding: {_ids(p.adding)}\tRemoving: {_ids(p.removing)}"
            print(line, file=out)
    return 0


def cmd_topics_delete(args: argparse.Namespace, out: TextIO) -> int:
    _admin(args).delete_topic(args.topic)
    print(f"Topic {args.topic} is marked for deletion.", file=out)
    return 0


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


# --- controller and elections ------------------------------------------------------------------


def cmd_controller_status(args: argparse.Namespace, out: TextIO) -> int:
    status = _admin(args).controller_status()
    if status.broker_id is None:
        raise UserError(f"no controller is active (controller epoch {status.epoch})"
                        if status.epoch is not None else "no controller has ever been elected")
    print(f"Controller: broker {status.broker_id}\tEpoch: {status.epoch}", file=out)
    return 0


def cmd_elect_preferred(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition

    if (args.partition is None) != (args.topic is None) and args.partition is not None:
        raise UserError("--partition needs --topic")
    admin = _admin(args)
    if args.topic is None:
        partitions = None
    elif args.partition is None:
        described = admin.describe_topics([args.topic])[0]
        partitions = [TopicPartition(args.topic, p.partition) for p in described.partitions]
    else:
        partitions = [TopicPartition(args.topic, args.partition)]
    if admin.controller_status().broker_id is None:
        raise UserError("no controller is active to carry out the election")
    requested = admin.elect_preferred(partitions)
    print(f"Requested a preferred replica election for {len(requested)} partition(s).",
          file=out)
    return 0


# --- demo ------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.demo import DemoOptions, run_demo

    if args.messages < 1 or args.partitions < 1 or args.batch < 1:
        raise UserError("--messages, --partitions and --batch must be positive")
    result = run_demo(DemoOptions(messages=args.messages, partitions=args.partitions,
                                  batch=args.batch), out)
    return 0 if result.ok else 1


# --- cluster snapshot and reassignment (planner) -----------------------------------------------


def _coordinator(args: argparse.Namespace):  # noqa: ANN202 - coordinator imported lazily
    import coordinator

    timeout = getattr(args, "connect_timeout", None) or args.timeout
    client = coordinator.connect(_coordinator_url(args), timeout=timeout)
    args._opened.append(client)
    return client


def _problems(exc: Exception) -> UserError:
    """A plan, snapshot or planning error as ``partctl: error:`` lines, one per problem."""
    problems = getattr(exc, "problems", None) or (str(exc),)
    return UserError("\npartctl: error: ".join(problems))


def _id_list(text: str | None, option: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"bad {option} {text!r}: want broker ids like 1,2,3") from None


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _sizes(args: argparse.Namespace) -> dict[tuple[str, int], int] | None:
    from rebalancer.execution import parse_sizes

    return parse_sizes(_read(args.sizes, "--sizes file")) if args.sizes else None


def _write_snapshot(snap, path: str) -> None:  # noqa: ANN001
    from rebalancer.snapshot import save_snapshot

    try:
        save_snapshot(snap, path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def cmd_cluster_snapshot(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.execution import snapshot_from_coordinator
    from rebalancer.snapshot import SnapshotError

    try:
        snap = snapshot_from_coordinator(
            _coordinator(args), sizes=_sizes(args),
            decommission=_id_list(args.decommission, "--decommission"),
            new_brokers=_id_list(args.new_brokers, "--new-brokers"))
    except SnapshotError as exc:
        raise _problems(exc) from None
    _write_snapshot(snap, args.output)
    racks = sorted({b.rack for b in snap.brokers if b.rack is not None})
    print(f"Wrote a snapshot of {len(snap.brokers)} brokers ({len(racks)} racks) and "
          f"{len(snap.partitions)} partitions ({len({p.topic for p in snap.partitions})} "
          f"topics) to {args.output}.", file=out)
    return 0


_GOALS = ("balance", "add-brokers", "decommission", "replication-factor", "repair-racks")


def _rf_changes(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        topic, eq, rf = item.strip().rpartition("=")
        if not item.strip():
            continue
        if not eq or not topic or not rf.strip().isdigit():
            raise UserError(f"bad --replication-factor {text!r}: want topic=rf,topic=rf")
        out[topic] = int(rf)
    return out


def _goal(args: argparse.Namespace, snap):  # noqa: ANN001, ANN202 - planner imported lazily
    from rebalancer.planner.goals import (
        AddBrokers,
        Balance,
        ChangeReplicationFactor,
        Decommission,
        RepairRacks,
    )

    match args.goal:
        case "balance":
            return Balance()
        case "add-brokers":
            if not snap.new_brokers:
                raise UserError("--goal add-brokers needs --new-brokers (or a snapshot that "
                                "lists new brokers)")
            return AddBrokers(brokers=snap.new_brokers)
        case "decommission":
            if not snap.decommission:
                raise UserError("--goal decommission needs --decommission (or a snapshot that "
                                "lists brokers to decommission)")
            return Decommission(brokers=snap.decommission)
        case "replication-factor":
            changes = _rf_changes(args.replication_factor)
            if not changes:
                raise UserError("--goal replication-factor needs --replication-factor t=rf,...")
            return ChangeReplicationFactor.of(changes)
        case _:
            return RepairRacks()


def cmd_reassign_generate(args: argparse.Namespace, out: TextIO) -> int:
    from dataclasses import replace

    from partctl.render import broker_loads, render_loads, render_scores
    from rebalancer.engines import plan_reassignment
    from rebalancer.execution import (
        parse_topics_to_move,
        scope_snapshot,
        snapshot_from_coordinator,
    )
    from rebalancer.plan import render_plan, score_plan
    from rebalancer.planner.model import PlanningError
    from rebalancer.snapshot import SnapshotError, load_snapshot

    if args.snapshot and args.coordinator:
        raise UserError("give --snapshot FILE or --coordinator URL, not both")
    if not args.snapshot and not (args.coordinator or os.environ.get(ENV_COORDINATOR)):
        raise UserError(f"give --snapshot FILE or --coordinator URL (or set {ENV_COORDINATOR})")
    if args.replication_factor and args.goal != "replication-factor":
        raise UserError("--replication-factor goes with --goal replication-factor")
    decommission = _id_list(args.decommission, "--decommission")
    new_brokers = _id_list(args.new_brokers, "--new-brokers")
    try:
        if args.snapshot:
            if args.sizes:
                raise UserError("--sizes goes with --coordinator (a snapshot file has sizes)")
            snap = load_snapshot(args.snapshot)
            snap = replace(snap, decommission=snap.decommission | set(decommission),
                           new_brokers=snap.new_brokers | set(new_brokers))
        else:
            snap = snapshot_from_coordinator(_coordinator(args), sizes=_sizes(args),
                                             decommission=decommission,
                                             new_brokers=new_brokers)
        topics = (parse_topics_to_move(_read(args.topics_to_move_json_file,
                                             "--topics-to-move-json-file"))
                  if args.topics_to_move_json_file else None)
        brokers = _id_list(args.brokers, "--brokers") if args.brokers else None
        scoped = scope_snapshot(snap, brokers=brokers, topics=topics)
        goal = _goal(args, snap)
        plan = plan_reassignment(scoped, [goal], engine=args.engine, seed=args.seed,
                                 master=args.spark_master)
    except FileNotFoundError as exc:
        raise UserError(f"cannot read {exc.filename}: no such file") from None
    except (SnapshotError, PlanningError) as exc:
        raise _problems(exc) from None
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(render_plan(plan) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print("Current -> proposed assignment, per broker:", file=out)
    print(render_loads(broker_loads(snap, plan)), file=out)
    print("", file=out)
    print("Scores (current -> proposed):", file=out)
    print(render_scores(score_plan(scoped), score_plan(scoped, plan)), file=out)
    print("", file=out)
    if plan.partitions:
        print(f"Proposed reassignment of {len(plan.partitions)} partition(s) written to "
              f"{args.output}.", file=out)
    else:
        print(f"Nothing to move: the cluster already meets the goal ({args.output} lists no "
              f"partitions).", file=out)
    return 0


def _plan_file(args: argparse.Namespace) -> str:
    return _read(args.reassignment_json_file, "--reassignment-json-file")


def cmd_reassign_execute(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import ProgressDisplay, render_result
    from rebalancer.execution import execute_plan, validate_plan
    from rebalancer.plan import PlanError

    if args.max_concurrent_moves < 1:
        raise UserError("--max-concurrent-moves must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise UserError("--timeout must be positive")
    text = _plan_file(args)
    client = _coordinator(args)
    try:
        plan = validate_plan(client, text)
    except PlanError as exc:
        raise _problems(exc) from None
    header = (f"Executing a reassignment of {len(plan.partitions)} partition(s), at most "
              f"{args.max_concurrent_moves} at a time.")
    try:
        with ProgressDisplay(out, every=args.status_every, header=header) as display:
            result = execute_plan(client, plan, max_concurrent_moves=args.max_concurrent_moves,
                                  poll_interval=args.poll_interval, timeout=args.timeout,
                                  progress=display)
    except KeyboardInterrupt:
        print("Interrupted: the moves already submitted carry on; `partctl reassign verify` "
              "follows them, `partctl reassign cancel` reverts them.", file=out)
        raise
    print(render_result(result), file=out)
    if not result.ok:
        print("Check with `partctl reassign verify`; `partctl reassign cancel` reverts the "
              "moves still pending.", file=out)
    return 0 if result.ok else 1


def cmd_reassign_verify(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_verify
    from rebalancer.execution import read_plan, verify_plan
    from rebalancer.plan import PlanError

    try:
        plan = read_plan(_plan_file(args))
    except PlanError as exc:
        raise _problems(exc) from None
    report = verify_plan(_coordinator(args), plan)
    print(render_verify(report), file=out)
    return 0 if report.all_done else 1


def cmd_reassign_cancel(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_cancel
    from rebalancer.execution import cancel_reassignment

    report = cancel_reassignment(_coordinator(args), wait=args.wait)
    print(render_cancel(report), file=out)
    return 0


def _add_planner_parsers(sub, common: argparse.ArgumentParser) -> None:  # noqa: ANN001
    """``cluster snapshot`` and ``reassign generate|execute|verify|cancel``."""
    cluster = sub.add_parser("cluster", help="the cluster as a planner snapshot")
    clsub = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    snap = clsub.add_parser("snapshot", parents=[common],
                            help="write brokers, racks and replicas to a JSON or Parquet file")
    snap.add_argument("-o", "--output", required=True, metavar="FILE",
                      help="snap.json or snap.parquet")
    snap.add_argument("--decommission", metavar="5,9", help="brokers to be removed")
    snap.add_argument("--new-brokers", metavar="7,8", help="brokers just added")
    snap.add_argument("--sizes", metavar="FILE",
                      help='partition sizes: {"partitions": [{"topic", "partition", '
                           '"size_bytes"}]} (default: sizes unknown)')
    snap.set_defaults(func=cmd_cluster_snapshot)

    reassign = sub.add_parser("reassign", help="plan, execute, verify and cancel partition "
                                               "reassignments")
    rsub = reassign.add_subparsers(dest="action", metavar="ACTION", required=True)
    gen = rsub.add_parser("generate", parents=[common],
                          help="plan a reassignment from a snapshot file or the live cluster")
    gen.add_argument("--snapshot", metavar="FILE", help="a snapshot (.json or .parquet)")
    gen.add_argument("--goal", choices=_GOALS, default="balance")
    gen.add_argument("--brokers", metavar="1,2,3",
                     help="the brokers the moved topics may use (Kafka's --broker-list)")
    gen.add_argument("--topics-to-move-json-file", metavar="FILE",
                     help='only these topics move: {"version":1,"topics":[{"topic":"t"}]}')
    gen.add_argument("--decommission", metavar="5,9", help="brokers to drain")
    gen.add_argument("--new-brokers", metavar="7,8", help="brokers just added")
    gen.add_argument("--replication-factor", metavar="t=3,u=2",
                     help="new replication factors (--goal replication-factor)")
    gen.add_argument("--sizes", metavar="FILE", help="partition sizes (with --coordinator)")
    gen.add_argument("--engine", choices=("auto", "local", "spark"), default="auto")
    gen.add_argument("--spark-master", default="local[*]", metavar="URL")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="where to write the plan (Kafka's reassignment JSON)")
    gen.set_defaults(func=cmd_reassign_generate)

    plan_file = argparse.ArgumentParser(add_help=False)
    plan_file.add_argument("--reassignment-json-file", required=True, metavar="FILE")
    connect = argparse.ArgumentParser(add_help=False)
    connect.add_argument("--coordinator", metavar="URL",
                         help=f"the coordinator URL (default: ${ENV_COORDINATOR})")
    connect.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                         help="seconds to wait for the coordinator (default 5)")
    ex = rsub.add_parser("execute", parents=[connect, plan_file],
                         help="have the controller carry out a plan, N partitions at a time")
    ex.add_argument("--max-concurrent-moves", type=int, default=50, metavar="N",
                    help="partitions moving at once (default 50)")
    ex.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="stop waiting after S seconds; pending moves carry on (default: none)")
    ex.add_argument("--poll-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    ex.add_argument("--status-every", type=float, default=5.0, metavar="S",
                    help="seconds between status lines when not on a terminal (default 5)")
    ex.set_defaults(func=cmd_reassign_execute)
    ver = rsub.add_parser("verify", parents=[common, plan_file],
                          help="per partition: done, in progress or failed")
    ver.set_defaults(func=cmd_reassign_verify)
    can = rsub.add_parser("cancel", parents=[common],
                          help="revert the pending moves (back to the original replicas)")
    can.add_argument("--wait", type=float, default=30.0, metavar="S",
                     help="seconds to wait for the controller to revert (default 30)")
    can.set_defaults(func=cmd_reassign_cancel)


# --- SQL store, scheduled jobs and the scheduler ------------------------------------------------


def _store_errors(func: Callable[[argparse.Namespace, TextIO], int]
                  ) -> Callable[[argparse.Namespace, TextIO], int]:
    """The store's and the job store's errors are user errors: one line, exit 1."""
    import functools

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace, out: TextIO) -> int:
        from rebalancer.jobs import JobNotFound
        from rebalancer.store import StoreError

        try:
            return func(args, out)
        except (StoreError, JobNotFound) as exc:
            raise UserError(str(exc).strip("'\"")) from None

    return wrapper


def _when(dt) -> str:  # noqa: ANN001 - a datetime or None
    from datetime import UTC

    return "-" if dt is None else dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1],
              file=out)


@_store_errors
def cmd_db_upgrade(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url

    with Store.open(args.db, upgrade=False) as store:
        before = store.revision()
        after = store.upgrade(args.revision)
        where = display_url(store.url)
    if before == after:
        print(f"{where}: already at revision {after}.", file=out)
    else:
        print(f"{where}: upgraded from {before or 'an empty database'} to revision {after}.",
              file=out)
    return 0


@_store_errors
def cmd_db_downgrade(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url

    with Store.open(args.db, upgrade=False) as store:
        after = store.downgrade(args.revision)
        print(f"{display_url(store.url)}: downgraded to revision {after or 'base (no tables)'}.",
              file=out)
    return 0


@_store_errors
def cmd_db_current(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.store import Store, display_url
    from rebalancer.store.migrate import head_revision

    with Store.open(args.db, upgrade=False) as store:
        current = store.revision()
        head = head_revision()
        state = "up to date" if current == head else f"head is {head}: run `partctl db upgrade`"
        print(f"{display_url(store.url)}: revision {current or 'none'} ({state}).", file=out)
    return 0


def _job_kwargs(args: argparse.Namespace) -> dict:
    import coordinator

    url = _coordinator_url(args)
    coordinator.parse(url)  # a malformed URL is refused now, not at 3 a.m.
    kwargs: dict = {"coordinator": url, "connect_timeout": args.timeout}
    if args.kind == "rebalance":
        from rebalancer.jobs import goals_for

        try:
            brokers = [int(b) for b in args.brokers.split(",")] if args.brokers else []
        except ValueError:
            raise UserError(f"bad --brokers {args.brokers!r}: want e.g. 4,5") from None
        goals_for(args.goal, brokers)  # the goal and its brokers make sense
        if args.max_concurrent_moves < 1:
            raise UserError("--max-concurrent-moves must be at least 1")
        kwargs.update(goal=args.goal, brokers=brokers,
                      max_concurrent_moves=args.max_concurrent_moves, dry_run=args.dry_run,
                      engine=args.engine, seed=args.seed, spark_master=args.spark_master,
                      timeout=args.execution_timeout)
    else:
        if not 0 <= args.imbalance_percentage <= 100:
            raise UserError("--imbalance-percentage must be between 0 and 100")
        from rebalancer.jobs import parse_duration

        kwargs.update(percentage=args.imbalance_percentage, wait=parse_duration(args.wait))
    return kwargs


@_store_errors
def cmd_jobs_add(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs

    trigger = jobs.make_trigger(cron=args.cron, every=args.every, timezone=args.timezone)
    info = jobs.add_job(args.db, kind=args.kind, trigger=trigger, kwargs=_job_kwargs(args),
                        job_id=args.id)
    print(f"Added job {info.id}: {info.kind}, {info.schedule}, next run "
          f"{_when(info.next_run_time)} UTC.", file=out)
    return 0


def _job_args(kwargs: dict) -> str:
    hidden = {"job_id", "db", "connect_timeout", "spark_master", "seed", "timeout", "engine"}
    shown = []
    for key, value in kwargs.items():
        if key in hidden or value in (None, [], False):
            continue
        if key == "dry_run":
            shown.append("dry-run")
            continue
        if key == "wait":
            from rebalancer.jobs import format_duration

            value = format_duration(value)
        if key == "percentage":
            key, value = "imbalance", f"{value:g}%"
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        shown.append(f"{key.replace('_', '-')}={text}")
    if kwargs.get("engine") not in (None, "local"):
        shown.append(f"engine={kwargs['engine']}")
    return " ".join(shown)


@_store_errors
def cmd_jobs_list(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs
    from rebalancer.store import Store

    listed = jobs.list_jobs(args.db)
    if not listed:
        print("No jobs.", file=out)
        return 0
    with Store.open(args.db) as store:
        last = {j.id: next(iter(store.runs(job_id=j.id, limit=1)), None) for j in listed}
    rows = [["ID", "KIND", "SCHEDULE", "NEXT RUN (UTC)", "LAST RUN", "ARGS"]]
    for j in listed:
        run = last[j.id]
        rows.append([j.id, j.kind or "?", j.schedule,
                     "BROKEN" if j.broken else _when(j.next_run_time),
                     "-" if run is None else f"{run.outcome.value} {_when(run.started_at)}",
                     f"cannot be restored: {j.broken}" if j.broken else _job_args(dict(j.kwargs))])
    _table(rows, out)
    return 0


@_store_errors
def cmd_jobs_remove(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs

    jobs.remove_job(args.db, args.job_id)
    print(f"Removed job {args.job_id} (its run history stays).", file=out)
    return 0


@_store_errors
def cmd_jobs_run_now(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs
    from rebalancer.jobs.report import describe_run
    from rebalancer.store import RunOutcome, Store

    summary = jobs.run_job_now(args.db, args.job_id)
    with Store.open(args.db) as store:
        run = store.get_run(summary.run_id)
    text = describe_run(run) if run is not None else summary.error or summary.summary
    print(f"Run {summary.run_id} of job {summary.job_id} ({summary.kind}): "
          f"{summary.outcome.value}: {text}", file=out)
    return 1 if summary.outcome in (RunOutcome.FAILED, RunOutcome.INTERRUPTED) else 0


@_store_errors
def cmd_jobs_history(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer.jobs.report import describe_run
    from rebalancer.store import Store

    if args.limit < 1:
        raise UserError("--limit must be at least 1")
    with Store.open(args.db) as store:
        runs = store.runs(job_id=args.job, limit=args.limit)
    if not runs:
        print("No runs." if args.job is None else f"No runs of job {args.job}.", file=out)
        return 0
    rows = [["RUN", "JOB", "KIND", "STARTED (UTC)", "TOOK", "OUTCOME", "PLAN", "SUMMARY"]]
    for r in runs:
        took = "-" if r.ended_at is None else f"{(r.ended_at - r.started_at).total_seconds():.1f}s"
        rows.append([str(r.id), r.job_id, r.kind, _when(r.started_at), took, r.outcome.value,
                     "-" if r.plan_id is None else str(r.plan_id), describe_run(r)])
    _table(rows, out)
    return 0


@_store_errors
def cmd_scheduler_run(args: argparse.Namespace, out: TextIO) -> int:
    import signal
    import threading

    from rebalancer import jobs
    from rebalancer.store import display_url, resolve_db_url

    poll = jobs.parse_duration(args.poll)
    if args.max_workers < 1:
        raise UserError("--max-workers must be at least 1")
    for name in ("rebalancer.jobs", "rebalancer.jobs.tasks"):
        logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # jobs log their runs themselves
    url = resolve_db_url(args.db)
    stop = threading.Event()
    previous = {}

    def on_signal(signum: int, _frame: object) -> None:
        # a second signal kills at once (the service manager's patience has limits)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print(f"partctl scheduler: {signal.Signals(signum).name}: stopping; running jobs "
              f"finish or record themselves interrupted", file=out, flush=True)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, on_signal)

    def started(scheduler) -> None:  # noqa: ANN001
        print(f"partctl scheduler: running {len(scheduler.get_jobs())} job(s) from "
              f"{display_url(url)}; SIGTERM or Ctrl-C stops it", file=out, flush=True)

    try:
        jobs.run_scheduler(url, stop=stop, poll_interval=poll, max_workers=args.max_workers,
                           on_started=started)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("partctl scheduler: stopped", file=out, flush=True)
    return 0


def _add_jobs_parsers(sub, common: argparse.ArgumentParser) -> None:  # noqa: ANN001
    """``db upgrade|downgrade|current``, ``jobs add|list|remove|run-now|history`` and
    ``scheduler run``."""
    from rebalancer.store.urls import DB_FILENAME, ENV_DB, ENV_HOME

    database = argparse.ArgumentParser(add_help=False)
    database.add_argument("--db", metavar="URL",
                          help=f"any SQLAlchemy URL (default: ${ENV_DB}, else SQLite at "
                               f"${ENV_HOME}/{DB_FILENAME}, ~/.local/share/partctl/{DB_FILENAME})")

    db = sub.add_parser("db", help="the SQL store of plans, executions and job runs")
    dsub = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = dsub.add_parser("upgrade", parents=[database], help="run the migrations (to head)")
    up.add_argument("--revision", default="head")
    up.set_defaults(func=cmd_db_upgrade)
    down = dsub.add_parser("downgrade", parents=[database],
                           help="undo migrations down to a revision ('base' drops the tables)")
    down.add_argument("--revision", required=True)
    down.set_defaults(func=cmd_db_downgrade)
    dsub.add_parser("current", parents=[database], help="the database's revision"
                    ).set_defaults(func=cmd_db_current)

    jobs = sub.add_parser("jobs", help="scheduled rebalances and preferred elections")
    jsub = jobs.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = jsub.add_parser("add", help="schedule a job")
    ksub = add.add_subparsers(dest="kind", metavar="KIND", required=True)
    schedule = argparse.ArgumentParser(add_help=False)
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar='"M H DOM MON DOW"', help='crontab fields, e.g. '
                                                                  '"0 3 * * *"')
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 1h, 1h30m")
    schedule.add_argument("--timezone", metavar="TZ",
                          help="time zone of --cron (default: this host's local zone, kept with "
                                   "the job)")
    schedule.add_argument("--id", metavar="ID", help="the job's id (default: generated)")
    parents = [common, database, schedule]
    rb = ksub.add_parser("rebalance", parents=parents,
                         help="snapshot, plan, execute within limits, verify, record")
    rb.add_argument("--goal", choices=("balance", "add-brokers", "decommission",
                                       "repair-racks"), default="balance")
    rb.add_argument("--brokers", metavar="1,2",
                    help="the brokers to add or to decommission (those goals)")
    rb.add_argument("--max-concurrent-moves", type=int, default=50, metavar="N",
                    help="partitions moving at once (default 50)")
    rb.add_argument("--dry-run", action="store_true", help="record the plan, move nothing")
    rb.add_argument("--engine", choices=("local", "spark", "auto"), default="local")
    rb.add_argument("--spark-master", default="local[*]", metavar="URL")
    rb.add_argument("--seed", type=int, default=0)
    rb.add_argument("--execution-timeout", type=float, default=None, metavar="S",
                    help="give up waiting after S seconds (moves carry on; default: none)")
    rb.set_defaults(func=cmd_jobs_add)
    pe = ksub.add_parser("preferred-election", parents=parents,
                         help="preferred elections where leadership drifted")
    pe.add_argument("--imbalance-percentage", type=float, default=10.0, metavar="P",
                    help="a broker is imbalanced past P%% of its partitions led elsewhere "
                         "(Kafka's leader.imbalance.per.broker.percentage; default 10)")
    pe.add_argument("--wait", default="30s", metavar="DURATION",
                    help="how long to wait for the controller to elect (default 30s)")
    pe.set_defaults(func=cmd_jobs_add)
    jsub.add_parser("list", parents=[database], help="the stored jobs"
                    ).set_defaults(func=cmd_jobs_list)
    rm = jsub.add_parser("remove", parents=[database], help="delete a job (history stays)")
    rm.add_argument("job_id", metavar="ID")
    rm.set_defaults(func=cmd_jobs_remove)
    now = jsub.add_parser("run-now", parents=[database],
                          help="run a job once, here, in the foreground (schedule unchanged)")
    now.add_argument("job_id", metavar="ID")
    now.set_defaults(func=cmd_jobs_run_now)
    hist = jsub.add_parser("history", parents=[database], help="recorded runs, newest first")
    hist.add_argument("--job", metavar="ID", help="only this job's runs")
    hist.add_argument("--limit", type=int, default=20, metavar="N", help="(default 20)")
    hist.set_defaults(func=cmd_jobs_history)

    scheduler = sub.add_parser("scheduler", help="the job scheduler")
    ssub = scheduler.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = ssub.add_parser("run", parents=[database],
                          help="run the scheduler in the foreground (for a service manager)")
    run.add_argument("--poll", default="5s", metavar="DURATION",
                     help="how often to look for jobs added or removed elsewhere (default 5s)")
    run.add_argument("--max-workers", type=int, default=4, metavar="N",
                     help="jobs running at once (default 4)")
    run.set_defaults(func=cmd_scheduler_run)


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="partctl",
        description="Controller and election service for partitioned, replicated logs.",
    )
    parser.add_argument("--version", action="version", version=f"partctl {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--coordinator", metavar="URL",
                        help=f"memory://NAME, zookeeper://h:p/chroot or etcd://h:p/prefix "
                             f"(default: ${ENV_COORDINATOR})")
    common.add_argument("--timeout", type=float, default=5.0,
                        help="seconds to wait for the coordinator (default 5)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = tsub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument("--replica-assignment", metavar="1:2,2:3",
                        help="explicit replicas per partition, first = preferred leader")
    create.set_defaults(func=cmd_topics_create)
    tsub.add_parser("list", parents=[common], help="list topics").set_defaults(
        func=cmd_topics_list)
    describe = tsub.add_parser("describe", parents=[common], help="leaders, ISR, replicas")
    describe.add_argument("--topic")
    describe.set_defaults(func=cmd_topics_describe)
    delete = tsub.add_parser("delete", parents=[common], help="mark a topic for deletion")
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=cmd_topics_delete)

    controller = sub.add_parser("controller", help="the active controller")
    csub = controller.add_subparsers(dest="action", metavar="ACTION", required=True)
    csub.add_parser("status", parents=[common], help="who is controller, at which epoch"
                    ).set_defaults(func=cmd_controller_status)

    elect = sub.add_parser("elect", help="leader elections")
    esub = elect.add_subparsers(dest="action", metavar="ACTION", required=True)
    preferred = esub.add_parser("preferred", parents=[common],
                                help="move leadership back to preferred replicas")
    preferred.add_argument("--topic")
    preferred.add_argument("--partition", type=int)
    preferred.set_defaults(func=cmd_elect_preferred)

    demo = sub.add_parser("demo", help="an embedded 3-broker cluster loses a leader and "
                                       "gets it back; checks every acknowledged message")
    demo.add_argument("--messages", type=int, default=10_000,
                      help="messages per produce phase (three phases; default 10000)")
    demo.add_argument("--partitions", type=int, default=3, help="partitions (default 3)")
    demo.add_argument("--batch", type=int, default=20, help="messages per batch (default 20)")
    demo.set_defaults(func=cmd_demo)
    _add_planner_parsers(sub, common)
    _add_jobs_parsers(sub, common)
    return parser


def _quiet_client_logs() -> None:
    """Client libraries log every reconnect attempt; the CLI reports failures itself, once."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.ERROR, format="partctl: %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    from coordinator import CoordinatorError

    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_client_logs()
    func: Callable[[argparse.Namespace, TextIO], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(out)
        return 0
    args._opened = []
    try:
        return func(args, out)
    except (UserError, CoordinatorError, ValueError) as exc:
        print(f"partctl: error: {exc}", file=err)
        return 1
    except KeyboardInterrupt:
        print("partctl: interrupted", file=err)
        return 130
    finally:
        for client in args._opened:
            client.close()


if __name__ == "__main__":
    sys.exit(main())
