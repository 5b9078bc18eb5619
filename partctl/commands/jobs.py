"""``partctl jobs add | list | remove | run-now | history``: scheduled rebalances, preferred
elections and self-healing, stored in the SQL store (rebalancer.jobs), on any cluster (by
``--bootstrap-server`` or by ``--coordinator``); ``partctl scheduler run`` runs them."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from typing import TextIO

from partctl.commands.common import (
    cluster_way,
    count,
    database_options,
    finite,
    fraction,
    seconds,
    sizes,
)
from partctl.errors import UserError
from rebalancer.goals import GOALS, Spelling

SPELLING = Spelling(goal="--goal", count_slack="--count-slack", sizes="--sizes FILE",
                    replication_factor="--replication-factor",
                    new_brokers="the brokers to add (--brokers)",
                    decommission="the brokers to drain (--brokers)")
"""How ``jobs add rebalance`` names the goal's options in the goal parser's lines."""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    database = database_options()
    jobs = sub.add_parser("jobs", help="scheduled rebalances, preferred elections and "
                                       "self-healing")
    jsub = jobs.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = jsub.add_parser("add", help="schedule a job")
    ksub = add.add_subparsers(dest="kind", metavar="KIND", required=True)
    schedule = argparse.ArgumentParser(add_help=False)
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar='"M H DOM MON DOW"',
                      help='crontab fields, e.g. "0 3 * * *" (day of week 0 or 7: Sunday)')
    when.add_argument("--every", metavar="DURATION",
                      help="an interval of 1m to 365d: 5m, 1h, 1h30m (first run one interval "
                           "from now)")
    schedule.add_argument("--timezone", metavar="TZ",
                          help="time zone of --cron (default: this host's local zone, kept with "
                                   "the job)")
    schedule.add_argument("--id", metavar="ID", help="the job's id (default: generated)")
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                         help="reach the cluster by Kafka's Admin API (any Kafka 3.x/4.x "
                              "cluster, KRaft or not), instead of --coordinator")
    cluster.add_argument("--command-config", metavar="FILE",
                         help="client properties (security.protocol, sasl.*, ssl.*), with "
                              "--bootstrap-server; the job keeps the path and reads the file "
                              "at each run, never its secrets")
    parents = [common, cluster, database, schedule]
    rb = ksub.add_parser("rebalance", parents=parents,
                         help="snapshot, plan, execute within limits, verify, record")
    rb.add_argument("--goal", choices=GOALS, default="balance",
                    help="as reassign generate's; disk needs --sizes")
    rb.add_argument("--brokers", metavar="1,2",
                    help="the brokers to add or to decommission (those goals)")
    rb.add_argument("--sizes", metavar="FILE",
                    help="partition sizes, read at each run (the job keeps the path): the "
                         "planner moves the fewest bytes, --goal disk evens them")
    rb.add_argument("--replication-factor", metavar="t=3,u=2",
                    help="new replication factors (--goal replication-factor)")
    rb.add_argument("--count-slack", type=fraction, default=None, metavar="F",
                    help="--goal disk: how far a broker's replica count may stray from its "
                         "balanced quota (default 0.05)")
    rb.add_argument("--max-concurrent-moves", type=int, default=50, metavar="N",
                    help="partitions moving at once (default 50)")
    rb.add_argument("--throttle", type=int, default=None, metavar="BYTES/S",
                    help="throttle the moves' replication (taken off when they are done)")
    rb.add_argument("--dry-run", action="store_true", help="record the plan, move nothing")
    rb.add_argument("--engine", choices=("local", "spark", "auto"), default="local")
    rb.add_argument("--spark-master", default="local[*]", metavar="URL")
    rb.add_argument("--seed", type=int, default=0)
    rb.add_argument("--execution-timeout", type=seconds, default=None, metavar="S",
                    help="give up waiting after S seconds (moves carry on; default: none)")
    rb.set_defaults(func=cmd_add)
    pe = ksub.add_parser("preferred-election", parents=parents,
                         help="preferred elections where leadership drifted")
    pe.add_argument("--imbalance-percentage", type=float, default=10.0, metavar="P",
                    help="a broker is imbalanced past P%% of its partitions led elsewhere "
                         "(Kafka's leader.imbalance.per.broker.percentage; default 10)")
    pe.add_argument("--wait", default="30s", metavar="DURATION",
                    help="how long to wait for the controller to elect (default 30s)")
    pe.set_defaults(func=cmd_add)
    sh = ksub.add_parser("self-heal", parents=parents,
                         help="watch the cluster and fix anomalies after a grace period")
    sh.add_argument("--grace", default="30m", metavar="DURATION",
                    help="how long an anomaly must last before it is acted on: seconds, or "
                         "30s, 10m, 1h (default 30m, as Cruise Control's self-healing "
                         "threshold for a failed broker)")
    sh.add_argument("--replica-spread", type=count(0), default=None, metavar="N",
                    help="rebalance when replicas per broker spread (max - min) beyond N")
    sh.add_argument("--leader-spread", type=count(0), default=None, metavar="N",
                    help="rebalance when preferred leaders per broker spread beyond N")
    sh.add_argument("--disk-max-over-mean", type=finite, default=None, metavar="R",
                    help="move bytes when the fullest broker holds more than R times the mean "
                         "(sizes come with --bootstrap-server)")
    sh.add_argument("--disk-usage", type=finite, default=None, metavar="F",
                    help="move bytes when a log directory's volume is fuller than F (0-1; "
                         "brokers report it to the Admin API, Kafka 3.3+)")
    sh.add_argument("--ignore-rack-violations", action="store_true",
                    help="do not rebalance for partitions whose replicas share a rack")
    sh.add_argument("--max-concurrent-moves", type=int, default=50, metavar="N",
                    help="partitions moving at once (default 50)")
    sh.add_argument("--throttle", type=int, default=None, metavar="BYTES/S",
                    help="throttle the fix's replication (taken off when it is done)")
    sh.add_argument("--execution-timeout", type=seconds, default=None, metavar="S",
                    help="follow a fix for S seconds at most; moves still going are left to "
                         "the cluster and followed by the next run (default: until done)")
    sh.set_defaults(func=cmd_add)
    jsub.add_parser("list", parents=[database], help="the stored jobs"
                    ).set_defaults(func=cmd_list)
    rm = jsub.add_parser("remove", parents=[database], help="delete a job (history stays)")
    rm.add_argument("job_id", metavar="ID")
    rm.set_defaults(func=cmd_remove)
    now = jsub.add_parser("run-now", parents=[database],
                          help="run a job once, here, in the foreground (schedule unchanged)")
    now.add_argument("job_id", metavar="ID")
    now.set_defaults(func=cmd_run_now)
    hist = jsub.add_parser("history", parents=[database], help="recorded runs, newest first")
    hist.add_argument("--job", metavar="ID", help="only this job's runs")
    hist.add_argument("--limit", type=int, default=20, metavar="N", help="(default 20)")
    hist.set_defaults(func=cmd_history)


def _cluster_kwargs(args: argparse.Namespace) -> dict:
    """The job's cluster: a coordinator URL (without its credentials) or bootstrap servers and
    the absolute path of a properties file, checked now (not at 3 a.m.); giving both ways in,
    or neither, is one line; an unreadable properties file is said first, as everywhere."""
    bootstrap, command_config, url = cluster_way(args)
    if bootstrap is None:
        assert url is not None
        import coordinator
        from coordinator.url import without_credentials

        coordinator.parse(url)  # a malformed URL is refused now, not at 3 a.m.
        # A job record is stored and listed: never a password. The job authenticates with the
        # credentials of the environment it runs in (PARTCTL_COORDINATOR_USER and its
        # password).
        return {"coordinator": without_credentials(url)}
    from rebalancer.jobs.cluster import check_bootstrap

    kwargs = {"bootstrap": check_bootstrap("--bootstrap-server", bootstrap)}
    if command_config is not None:
        kwargs["command_config"] = os.path.abspath(command_config)
    return kwargs


def _grace(text: str) -> float:
    from rebalancer.jobs import parse_duration

    try:
        value = float(text)
    except ValueError:
        return parse_duration(text)
    if not 0 <= value <= 365 * 86400:
        raise UserError(f"--grace must be 0 to a year of seconds, not {text}")
    return value


def _job_kwargs(args: argparse.Namespace) -> dict:
    kwargs: dict = {**_cluster_kwargs(args), "connect_timeout": args.timeout}
    if getattr(args, "throttle", None) is not None and args.throttle < 1:
        raise UserError("--throttle must be at least 1 byte per second")
    if args.kind in ("rebalance", "self-heal") and args.max_concurrent_moves < 1:
        raise UserError("--max-concurrent-moves must be at least 1")
    if args.kind == "self-heal":
        if args.disk_usage is not None and not 0 < args.disk_usage <= 1:
            raise UserError("--disk-usage must be more than 0 and at most 1")
        if args.disk_max_over_mean is not None and args.disk_max_over_mean < 1:
            raise UserError("--disk-max-over-mean must be at least 1")
        kwargs.update(grace=_grace(args.grace), rack_violations=not args.ignore_rack_violations,
                      max_concurrent_moves=args.max_concurrent_moves)
        for name in ("replica_spread", "leader_spread", "disk_max_over_mean", "disk_usage",
                     "throttle"):
            if getattr(args, name) is not None:
                kwargs[name] = getattr(args, name)
        if args.execution_timeout is not None:
            kwargs["timeout"] = args.execution_timeout
        return kwargs
    if args.kind == "rebalance":
        from rebalancer.goals import parse_replication_factors
        from rebalancer.jobs import goals_for

        try:
            brokers = [int(b) for b in args.brokers.split(",")] if args.brokers else []
        except ValueError:
            raise UserError(f"bad --brokers {args.brokers!r}: want e.g. 4,5") from None
        rf = parse_replication_factors(args.replication_factor)
        reported = "reported" if "bootstrap" in kwargs else None  # DescribeLogDirs gives sizes
        goals_for(args.goal, brokers, count_slack=args.count_slack,  # they make sense
                  sizes=args.sizes or reported, replication_factor=rf, spelling=SPELLING)
        if args.throttle is not None:
            kwargs["throttle"] = args.throttle
        if args.sizes:
            sizes(args)  # a file that cannot be read or parsed is refused now
            kwargs["sizes"] = os.path.abspath(args.sizes)
        if args.count_slack is not None:
            kwargs["count_slack"] = args.count_slack
        if rf:
            kwargs["replication_factor"] = rf
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


def cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs

    schedule = jobs.make_schedule(cron=args.cron, every=args.every, timezone=args.timezone)
    info = jobs.add_job(args.db, kind=args.kind, schedule=schedule, arguments=_job_kwargs(args),
                        job_id=args.id)
    print(f"Added job {info.id}: {info.kind}, {info.schedule}, next run "
          f"{_when(info.next_run_time)} UTC.", file=out)
    return 0


def _job_args(kind: str, kwargs: dict) -> str:
    from rebalancer.jobs import ARGUMENTS

    hidden = {"job_id", "db", "connect_timeout", "spark_master", "seed", "timeout", "engine"}
    shown = []
    order = list(ARGUMENTS.get(kind, ()))
    for key, value in sorted(kwargs.items(), key=lambda kv: (
            order.index(kv[0]) if kv[0] in order else len(order), kv[0])):
        if key in hidden or value in (None, [], False):
            continue
        if key == "dry_run":
            shown.append("dry-run")
            continue
        if key in ("wait", "grace"):
            from rebalancer.jobs import format_duration

            value = format_duration(value) if value else "0s"
        if key == "coordinator":
            from coordinator.url import redact

            value = redact(value)  # stored without credentials; a crafted row may hold some
        if key == "rack_violations":
            continue
        if key == "throttle":
            value = f"{value}B/s"
        if key == "percentage":
            key, value = "imbalance", f"{value:g}%"
        if isinstance(value, dict):
            text = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        else:
            text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        shown.append(f"{key.replace('_', '-')}={text}")
    if kwargs.get("engine") not in (None, "local"):
        shown.append(f"engine={kwargs['engine']}")
    if kwargs.get("rack_violations") is False:
        shown.append("ignore-rack-violations")
    return " ".join(shown)


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
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
                     f"cannot run: {j.broken}" if j.broken
                     else _job_args(j.kind or "", dict(j.arguments))])
    _table(rows, out)
    return 0


def cmd_remove(args: argparse.Namespace, out: TextIO) -> int:
    from rebalancer import jobs

    jobs.remove_job(args.db, args.job_id)
    print(f"Removed job {args.job_id} (its run history stays).", file=out)
    return 0


def cmd_run_now(args: argparse.Namespace, out: TextIO) -> int:
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


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
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
    healing = sorted({r.job_id for r in runs if r.kind == "self-heal"})
    if healing:
        _healing(args.db, healing, [r.id for r in runs], args.limit, out)
    return 0


def _healing(db: str | None, job_ids: list[str], run_ids: list[int], limit: int,
             out: TextIO) -> None:
    """Self-healing's records beside its runs: the anomalies seen, and each run's decision with
    the fix's plan and how its execution ended."""
    from rebalancer.store import Store

    with Store.open(db) as store:
        anomalies = [a for j in job_ids for a in store.anomalies(job_id=j, limit=limit)]
        decisions = store.decisions(run_ids=run_ids, limit=None)
        executions = {d.execution_id: store.get_execution(d.execution_id)
                      for d in decisions if d.execution_id is not None}
    if anomalies:
        print("\nAnomalies:", file=out)
        rows = [["ID", "JOB", "KIND", "SUBJECT", "FIRST SEEN (UTC)", "LAST SEEN (UTC)",
                 "STATE", "FIGURES"]]
        for a in sorted(anomalies, key=lambda a: -a.id):
            rows.append([str(a.id), a.job_id, a.kind, a.subject, _when(a.first_seen),
                         _when(a.last_seen),
                         "open" if a.resolved_at is None
                         else f"resolved {_when(a.resolved_at)}",
                         " ".join(f"{k}={v}" for k, v in sorted(a.figures.items()))])
        _table(rows, out)
    if decisions:
        print("\nDecisions:", file=out)
        rows = [["RUN", "DECISION", "ACTION", "ANOMALIES", "PLAN", "EXECUTION", "REASON"]]
        for d in decisions:
            ex = executions.get(d.execution_id) if d.execution_id is not None else None
            figures = d.figures or {}
            plan = "-" if d.plan_id is None else f"{d.plan_id} ({figures.get('moves', '?')} moves)"
            done = "-" if ex is None else f"{ex.id} {ex.status.value}"
            rows.append(["-" if d.run_id is None else str(d.run_id), d.decision,
                         d.action or "-", ",".join(map(str, d.anomalies)) or "-", plan, done,
                         d.reason])
        _table(rows, out)


def _when(dt: datetime | None) -> str:
    return "-" if dt is None else dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _printable(text: str) -> str:
    """Control characters escaped: a table cell can come from a damaged or crafted store row."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _table(rows: list[list[str]], out: TextIO) -> None:
    rows = [[_printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1],
              file=out)
