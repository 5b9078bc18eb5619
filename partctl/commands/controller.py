"""``partctl controller status``: which broker is the active controller, at which epoch;
``partctl controller start``: a controller-only candidate process (broker/controller_process.py)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.commands.common import admin, log_format_option
from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    controller = sub.add_parser("controller", help="the active controller")
    csub = controller.add_subparsers(dest="action", metavar="ACTION", required=True)
    csub.add_parser("status", parents=[common], help="who is controller, at which epoch"
                    ).set_defaults(func=cmd_status)
    start = csub.add_parser("start", help="run a controller-only candidate until SIGTERM (exit "
                                          "status: 0 stopped, 1 error, 130/143 stopped by a "
                                          "signal)")
    start.add_argument("--config", required=True, metavar="controller.properties",
                       help="node.id, zookeeper.connect or partctl.coordinator, listeners, "
                            "and the controller's settings")
    log_format_option(start)
    start.set_defaults(func=cmd_start)


def cmd_start(args: argparse.Namespace, out: TextIO) -> int:
    """The process owns its session and sockets and closes them itself on every exit path."""
    from broker.controller_process import run

    return run(args.config, log_format=args.log_format)


def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    with admin(args) as a:
        status = a.controller_status()
    if status.broker_id is None:
        raise UserError(f"no controller is active (controller epoch {status.epoch})"
                        if status.epoch is not None else "no controller has ever been elected")
    print(f"Controller: broker {status.broker_id}\tEpoch: {status.epoch}", file=out)
    return 0
