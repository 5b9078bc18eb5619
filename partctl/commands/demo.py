"""``partctl demo``: an embedded cluster loses a leader and gets it back (partctl/demo.py)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", help="an embedded 3-broker cluster loses a leader and "
                                       "gets it back; checks every acknowledged message")
    demo.add_argument("--messages", type=int, default=10_000,
                      help="messages per produce phase (three phases; default 10000)")
    demo.add_argument("--partitions", type=int, default=3, help="partitions (default 3)")
    demo.add_argument("--batch", type=int, default=20, help="messages per batch (default 20)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.demo import DemoOptions, run_demo

    if args.messages < 1 or args.partitions < 1 or args.batch < 1:
        raise UserError("--messages, --partitions and --batch must be positive")
    result = run_demo(DemoOptions(messages=args.messages, partitions=args.partitions,
                                  batch=args.batch), out)
    return 0 if result.ok else 1
