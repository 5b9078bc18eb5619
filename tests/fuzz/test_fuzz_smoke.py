"""The protocol fuzzer's bounded run, in the normal suite: the regression cases (issue 28's
length lies: an array or string length claiming 2^32-1 elements or more bytes than remain, a
null where the schema has none, an unknown tagged field, for every advertised API and
version), then mutations of the recorded and kio-built seeds for a fixed seed, bounded by
count and by time. The broker must stay up, answer a fresh client, stay under the memory bound
and log no traceback. ``python -m tests.fuzz --seconds N`` is the long run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.runner import Failure
from tests.fuzz.session import fuzz
from tests.servers import Server

pytestmark = pytest.mark.servers

SEED = 20261129
SECONDS = 20.0
COUNT = 4000


def test_broker_survives_the_regression_cases_and_a_bounded_fuzz(
        zookeeper_server: Server, tmp_path: Path) -> None:
    out = tmp_path / "out"
    lines: list[str] = []
    try:
        result = fuzz(tmp_path / "broker", zookeeper_server.url("/"), seconds=SECONDS,
                      count=COUNT, seed=SEED, out=out, say=lines.append)
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
