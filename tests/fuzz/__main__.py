"""``python -m tests.fuzz --seconds N [--seed S] [--out DIR]``: fuzz a broker process (on a
ZooKeeper this command starts) for N seconds; exit 0 when every check held, 1 with what failed
under DIR otherwise."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from coordinator.servers import ServerError, start_zookeeper

from .runner import Failure
from .session import fuzz
from .target import RSS_BOUND


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--count", type=int, default=None,
                        help="stop after this many mutated requests (default: no limit)")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write a failure (default: a new temporary directory)")
    parser.add_argument("--rss-mib", type=int, default=RSS_BOUND >> 20)
    parser.add_argument("--no-regressions", action="store_true",
                        help="skip the fixed regression cases")
    parser.add_argument("--keep-going", action="store_true",
                        help="a traceback does not end the run (each distinct one is "
                             "reproduced and written under --out), and a broker that dies "
                             "is replaced (for hunting; the exit status still says)")
    parser.add_argument("--sasl", action="store_true",
                        help="fuzz a SASL_PLAINTEXT listener before authentication")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    work = Path(tempfile.mkdtemp(prefix="partctl-fuzz-"))
    out = args.out or work / "out"
    try:
        server = start_zookeeper(directory=work / "zookeeper", fsync=False)
    except ServerError as exc:
        print(f"fuzz: cannot start ZooKeeper: {exc}", file=sys.stderr)
        return 2
    try:
        result = fuzz(work / "broker", server.url("/"), seconds=args.seconds,
                      count=args.count, seed=seed, out=out,
                      regressions=not args.no_regressions, rss_bound=args.rss_mib << 20,
                      keep_going=args.keep_going, sasl=args.sasl)
    except Failure as exc:
        print(f"fuzz: FAILED (seed {seed}): {exc}\nfuzz: details in {out}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    if result.tracebacks or result.failure:
        print(f"fuzz: FAILED (seed {seed}): {len(result.tracebacks)} distinct tracebacks: "
              + "; ".join(result.tracebacks) + f"; broker deaths: {result.failure or 'none'}"
              + f"\nfuzz: details in {out}", file=sys.stderr)
        return 1
    print(f"fuzz: passed (seed {seed}): {result.sent} requests, {result.cases} regression "
          f"cases, max rss {result.max_rss >> 20} MiB; mutations {dict(result.by_mutation)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
