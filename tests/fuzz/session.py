"""One fuzzing session: a broker started for it, the regression cases, the mutated seeds for
a while, the checks, the broker stopped."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.broker.wire_client import RawClient, request

from .runner import Failure, Result, run, run_cases
from .seeds import kio_seeds, recorded_seeds, regression_cases, sasl_seeds
from .target import RSS_BOUND, Target, start_target

__all__ = ["advertised", "fuzz"]


def advertised(target: Target) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every API the broker lists in ApiVersions."""
    with RawClient(target.address) as client:
        answer = client.call(request(18, 3, client_software_name="fuzz",
                                     client_software_version="1"))
    return [(int(k.api_key), int(k.min_version), int(k.max_version)) for k in answer.api_keys]


def fuzz(directory: Path, coordinator_url: str, *, seconds: float, count: int | None = None,
         seed: int = 0, out: Path, regressions: bool = True, rss_bound: int = RSS_BOUND,
         say: Callable[[str], None] = print, keep_going: bool = False,
         sasl: bool = False) -> Result:
    """Start a broker in ``directory`` on ``coordinator_url``, fuzz it, stop it. Raises
    :class:`~tests.fuzz.runner.Failure` (after writing what failed under ``out``).

    With ``keep_going`` (for hunting, not for CI) a traceback does not end the run, and a
    broker that dies is replaced by a new one until the time is up: each death is written
    under ``out/run-N/`` and counted in the result's ``failure``. With ``sasl`` the fuzzed
    listener is SASL_PLAINTEXT, before authentication: every request on a new connection,
    the SASL seeds weighing as much as all the others."""
    deadline: float | None = None  # the mutations' time starts after the regression cases
    deaths: list[str] = []
    total = Result()
    for n in range(1000):
        where = out / f"run-{n}" if keep_going else out
        target = start_target(directory / f"run-{n}", coordinator_url, rss_bound=rss_bound,
                              sasl=sasl)
        try:
            apis = advertised(target)
            served = {(key, v) for key, low, high in apis for v in range(low, high + 1)}
            seeds = kio_seeds(apis)
            recorded = [s for s in recorded_seeds() if (s.api_key, s.version) in served]
            if sasl:
                pre_auth = sasl_seeds()
                recorded += pre_auth * max(1, (len(seeds) + len(recorded)) // len(pre_auth))
            say(f"fuzz: broker pid {target.pid} at {target.address[0]}:{target.address[1]}, "
                f"{len(served)} api versions; {len(seeds)} kio seeds, {len(recorded)} "
                f"recorded seeds; seed {seed + n}")
            if regressions and n == 0:
                cases = regression_cases(apis)
                began = time.monotonic()
                run_cases(target, cases, total, where)
                say(f"fuzz: {len(cases)} regression cases passed in "
                    f"{time.monotonic() - began:.1f}s")
            if deadline is None:
                deadline = time.monotonic() + seconds
            result = run(target, seeds + recorded, seconds=deadline - time.monotonic(),
                         count=count, seed=seed + n, out=where, say=say,
                         keep_going=keep_going, one_per_connection=sasl)
        except Failure as exc:
            if not keep_going or target.alive() or deadline is None \
                    or deadline - time.monotonic() < 10:
                raise
            deaths.append(f"run-{n}: {exc}")
            say(f"fuzz: {exc}; details in {where}; starting another broker")
            continue
        finally:
            if target.alive():
                target.stop()
        result.cases = total.cases
        result.max_rss = max(result.max_rss, total.max_rss)
        if deaths:
            result.failure = "; ".join(deaths)
        return result
    raise AssertionError("unreachable")
