"""``partctl broker start``: a broker process serving Kafka's clients (broker/process.py)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.commands.common import log_format_option


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    broker = sub.add_parser("broker", help="a broker process serving Kafka's clients")
    actions = broker.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="run a broker until SIGTERM (exit status: 0 stopped, "
                                             "1 error, 130/143 stopped at once by a signal)")
    start.add_argument("--config", required=True, metavar="server.properties",
                       help="Kafka's broker settings (broker.id, listeners, log.dirs, "
                            "zookeeper.connect or partctl.coordinator, ...)")
    log_format_option(start)
    start.set_defaults(func=cmd_start)


def cmd_start(args: argparse.Namespace, out: TextIO) -> int:
    """The process owns its resources (sessions, sockets, logs) and closes them on every exit
    path itself: it runs until a signal stops it."""
    from broker.process import run

    return run(args.config, log_format=args.log_format)
