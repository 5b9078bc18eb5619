"""``partctl scheduler run``: the job scheduler in the foreground, for a service manager."""

from __future__ import annotations

import argparse
import logging
from typing import Any, TextIO

from partctl.commands.common import database_options, log_format_option
from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    database = database_options()
    scheduler = sub.add_parser("scheduler", help="the job scheduler")
    ssub = scheduler.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = ssub.add_parser("run", parents=[database],
                          help="run the scheduler in the foreground (for a service manager)")
    run.add_argument("--poll", default="5s", metavar="DURATION",
                     help="how often to look for jobs added or removed elsewhere (default 5s)")
    run.add_argument("--max-workers", type=int, default=4, metavar="N",
                     help="jobs running at once (default 4)")
    log_format_option(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    import signal
    import threading

    from rebalancer import jobs
    from rebalancer.store import display_url, resolve_db_url

    poll = jobs.parse_duration(args.poll)
    if poll < 0.1:
        raise UserError("--poll must be at least 0.1s")
    if args.max_workers < 1:
        raise UserError("--max-workers must be at least 1")
    if args.log_format == "json":  # text keeps the CLI's own lines (partctl/cli.py)
        import sys

        from broker.logs import setup_logging

        setup_logging(sys.stderr, log_format="json", level=logging.ERROR,
                      quiet=())
    # the jobs' modules log under their package (every logger is named by its module)
    logging.getLogger("rebalancer.jobs").setLevel(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # jobs log their runs themselves
    url = resolve_db_url(args.db)
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}

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
