"""The partctl command line: thin over the library (parse, build clients, call, render)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="partctl",
        description="Controller and election service for partitioned, replicated logs.",
    )
    parser.add_argument("--version", action="version", version="partctl 0.1.0")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
