"""The protocol fuzzer's bounded runs, in the normal suite: the regression cases (issue 28's
length lies: an array or string length claiming 2^32-1 elements or more bytes than remain, a
null where the schema has none, an unknown tagged field, for every advertised API and
version), then mutations of the recorded and kio-built seeds for a fixed seed, bounded by
count and by time; and a shorter run on a SASL_PLAINTEXT listener before authentication. The
broker must stay up, answer a fresh client, stay under the memory bound and log no traceback.
``python -m tests.fuzz --seconds N`` is the long run (docs/fuzzing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.runner import Failure, Result
from tests.fuzz.session import fuzz
from tests.servers import Server

pytestmark = pytest.mark.servers

SEED = 20261129


def _fuzz(server: Server, tmp_path: Path, *, seconds: float, count: int,
          sasl: bool = False) -> Result:
    out = tmp_path / "out"
    lines: list[str] = []
    try:
        result = fuzz(tmp_path / "broker", server.url("/"), seconds=seconds, count=count,
                      seed=SEED, out=out, say=lines.append, sasl=sasl)
    except Failure as exc:
        failure = str(exc)
    else:
        failure = None
    if failure is not None:
        culprit = out / "culprit.txt"
        detail = culprit.read_text()[:3000] if culprit.exists() else ""
        pytest.fail(f"{failure}\n{detail}\n(details in {out})", pytrace=False)
    assert result.cases > 0 and result.sent > 0, lines
    assert result.answers > 0 and result.closes > 0, lines  # it reached handlers and parsers
    return result


def test_broker_survives_the_regression_cases_and_a_bounded_fuzz(
        zookeeper_server: Server, tmp_path: Path) -> None:
    _fuzz(zookeeper_server, tmp_path, seconds=20.0, count=4000)


def test_a_sasl_listener_survives_a_bounded_fuzz_before_authentication(
        zookeeper_server: Server, tmp_path: Path) -> None:
    _fuzz(zookeeper_server, tmp_path, seconds=8.0, count=2000, sasl=True)
