"""One fuzzing session: a broker started for it, the regression cases, the mutated seeds for
a while, the checks, the broker stopped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.broker.wire_client import RawClient, request

from .runner import Result, run, run_cases
from .seeds import kio_seeds, recorded_seeds, regression_cases
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
         say: Callable[[str], None] = print, keep_going: bool = False) -> Result:
    """Start a broker in ``directory`` on ``coordinator_url``, fuzz it, stop it. Raises
    :class:`~tests.fuzz.runner.Failure` (after writing what failed under ``out``)."""
    target = start_target(directory, coordinator_url, rss_bound=rss_bound)
    try:
        apis = advertised(target)
        served = {(key, v) for key, low, high in apis for v in range(low, high + 1)}
        seeds = kio_seeds(apis)
        recorded = [s for s in recorded_seeds() if (s.api_key, s.version) in served]
        say(f"fuzz: broker pid {target.pid} at {target.address[0]}:{target.address[1]}, "
            f"{len(served)} api versions; {len(seeds)} kio seeds, {len(recorded)} recorded "
            f"seeds; seed {seed}")
        result = Result()
        if regressions:
            cases = regression_cases(apis)
            run_cases(target, cases, result, out)
            say(f"fuzz: {len(cases)} regression cases passed")
        fuzzed = run(target, seeds + recorded, seconds=seconds, count=count, seed=seed,
                     out=out, say=say, keep_going=keep_going)
        fuzzed.cases = result.cases
        fuzzed.max_rss = max(fuzzed.max_rss, result.max_rss)
        return fuzzed
    finally:
        if target.alive():
            target.stop()
