"""The partctl command line: thin over the library (parse, build clients, call, render).

This module assembles the parser from the command groups (partctl/commands/, one module each)
and runs the chosen command. A user error (partctl/errors.py) prints one line, ``partctl:
error: ...``, and exits 1; nothing is written. A bad option value is argparse's usage and error,
exit 2. Anything else is a bug: one ``partctl: internal error:`` line and exit 2
(``PARTCTL_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from partctl import __version__
from partctl.commands import GROUPS
from partctl.commands.common import ENV_COORDINATOR, seconds
from partctl.errors import user_error

ENV_DEBUG = "PARTCTL_DEBUG"


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
    common.add_argument("--timeout", type=seconds, default=5.0,
                        help="seconds to wait for the coordinator (default 5)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub, common)
    return parser


def _quiet_client_logs() -> None:
    """Client libraries log every reconnect attempt; the CLI reports failures itself, once."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.ERROR, format="partctl: %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_client_logs()
    func: Callable[[argparse.Namespace, TextIO], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(out)
        return 0
    try:
        code = func(args, out)
        out.flush()  # a closed pipe shows here, not as noise at exit
        return code
    except KeyboardInterrupt:
        print("partctl: interrupted", file=err)
        return 130
    except BrokenPipeError:
        return _reader_went_away(out)
    except Exception as exc:
        problem = user_error(exc)
        if problem is not None:
            print(f"partctl: error: {problem}", file=err)
            return 1
        if os.environ.get(ENV_DEBUG):
            raise
        # the safety net: a bug, said in one line (every known bad input has its own message)
        print(f"partctl: internal error: {type(exc).__name__}: {_one_line(exc)}; rerun with "
              f"{ENV_DEBUG}=1 for the traceback", file=err)
        return 2


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "(no message)"


def _reader_went_away(out: TextIO) -> int:
    """``partctl topics describe | head``: the reader closed the pipe. Exit as a tool killed by
    SIGPIPE does (status 128 + 13, no message), and point stdout at /dev/null so that the
    interpreter's last flush at exit has nowhere to fail ("Exception ignored ...")."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
