"""The long-run command's arguments and summary (no cluster: the smoke set runs one)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from tests.faults.__main__ import _parser, _table, main, parse_kinds, parse_seeds, summarise
from tests.faults.checker import ErrorRate, Verdict
from tests.faults.nemesis import KINDS
from tests.faults.runner import SeedResult

ROOT = Path(__file__).resolve().parents[2]


def test_seeds_and_kinds_parse() -> None:
    assert parse_seeds("1-3,7, 9-10") == [1, 2, 3, 7, 9, 10]
    assert parse_seeds("5") == [5]
    for bad in ("", "a", "3-1", "1-", "1-2-3"):
        with pytest.raises(argparse.ArgumentTypeError, match="bad seeds"):
            parse_seeds(bad)
    assert parse_kinds(f"{KINDS[0]},{KINDS[1]}") == [KINDS[0], KINDS[1]]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown fault kind.*nope"):
        parse_kinds(f"{KINDS[0]},nope")


def test_where_runs_are_kept_is_an_absolute_path(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's processes start elsewhere and are handed paths below it: a relative one
    (the default) named nothing there."""
    monkeypatch.chdir(tmp_path)
    assert _parser().parse_args([]).out == tmp_path.resolve() / "fault-runs"
    assert _parser().parse_args(["--out", "runs/a"]).out == tmp_path.resolve() / "runs" / "a"


@pytest.mark.processes
@pytest.mark.parametrize("argv", [["--seeds", "x"], ["--coordinator", "consul"],
                                  ["--faults", "meteor"], ["--brokers", "9"]])
def test_bad_arguments_are_one_error_and_exit_2(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.faults", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in done.stderr


def test_a_short_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--duration", "3"]) == 2
    assert capsys.readouterr().err.strip() == "error: --duration must be at least 10 seconds"


def test_the_summary_adds_up_runs_per_coordinator(tmp_path: Path) -> None:
    clean = Verdict(acknowledged=1000, availability_by_fault={"kill-leader": 0.8, "none": 1.0},
                    write_availability_by_fault={"kill-leader": 0.5},
                    error_rates={"kill-leader": ErrorRate(attempts=100, errors=7)})
    lossy = Verdict(acknowledged=500, availability_by_fault={"kill-leader": 0.6})
    lossy.lost.add("alpha-0 offset 3")
    clean.resent.add("'v' at alpha-0 offsets [3, 9] (producer 1: epoch 0 seq 3, epoch 1 seq 0)")
    results = [
        SeedResult(seed=1, kind="zookeeper", duration=60, directory=tmp_path, verdict=clean,
                   injected=Counter({"kill-leader": 2}), fault_seconds=20.0, seconds=90.0),
        SeedResult(seed=2, kind="zookeeper", duration=60, directory=tmp_path, verdict=lossy,
                   injected=Counter({"kill-leader": 1, "split": 1}), fault_seconds=15.0),
        SeedResult(seed=3, kind="etcd", duration=60, directory=tmp_path,
                   error="ServerStartError: no leader"),
    ]
    summary = summarise(results)
    zk = summary["zookeeper"]
    assert zk["runs"] == 2 and zk["clean"] == 1 and zk["failed_seeds"] == [2]
    assert zk["faults"] == {"kill-leader": 3, "split": 1}
    assert zk["acknowledged"] == 1500 and zk["seconds_under_fault"] == 35.0
    assert zk["violations"]["lost"] == 1 and zk["violations"]["zombie"] == 0  # type: ignore[index]
    assert zk["availability_by_fault"] == {"kill-leader": 0.7, "none": 1.0}
    assert zk["write_availability_by_fault"] == {"kill-leader": 0.5}
    assert zk["produce_errors_by_fault"] == {"kill-leader": {"attempts": 100, "errors": 7}}
    assert summary["etcd"]["error_seeds"] == [3] and summary["etcd"]["clean"] == 0
    console = Console(record=True, width=200)
    console.print(_table("zookeeper", zk))
    text = console.export_text()
    assert "kill-leader" in text and "70.0%" in text and "50.0%" in text and "7/100" in text
    assert "failed seeds [2]" in text
    assert zk["resent_by_client"] == 1 and zk["resent_seeds"] == [1] and results[0].ok
    assert "new producer epoch (not a violation) 1 in seeds [1]" in " ".join(text.split())
    assert "FAILED lost 1" in results[1].line() and "ERROR ServerStartError" in results[2].line()
