"""``partctl demo``: an embedded cluster loses a leader and gets it back (partctl/demo.py)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.commands.common import log_format_option
from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", help="an embedded 3-broker cluster loses a leader and "
                                       "gets it back; checks every acknowledged message")
    demo.add_argument("--messages", type=int, default=10_000,
                      help="messages per produce phase (three phases; default 10000)")
    demo.add_argument("--partitions", type=int, default=3, help="partitions (default 3)")
    demo.add_argument("--batch", type=int, default=20, help="messages per batch (default 20)")
    log_format_option(demo)
    demo.add_argument("--state-changes", action="store_true",
                      help="log the controller's state changes (the state-change log) to "
                           "stderr")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.demo import DemoOptions, run_demo

    if args.messages < 1 or args.partitions < 1 or args.batch < 1:
        raise UserError("--messages, --partitions and --batch must be positive")
    if args.log_format == "json" or args.state_changes:
        import logging
        import sys

        from broker.logs import setup_logging
        from interbroker.fencing import LOGGER_NAME

        setup_logging(sys.stderr, log_format=args.log_format, level=logging.ERROR,
                      quiet=())
        if args.state_changes:
            logging.getLogger(LOGGER_NAME).setLevel(logging.INFO)
    result = run_demo(DemoOptions(messages=args.messages, partitions=args.partitions,
                                  batch=args.batch), out)
    return 0 if result.ok else 1
