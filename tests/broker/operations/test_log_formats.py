"""``--log-format json`` of the broker and controller processes: every line they write parses,
their own lines (serving, one-line errors) included."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from broker.controller_process import run as run_controller
from broker.logs import JsonLines
from broker.process import run as run_broker


def test_a_process_s_own_error_line_is_a_json_object_in_the_json_format(tmp_path: Path
                                                                        ) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=1\nlog.dirs=/x\nzookeeper.connect=127.0.0.1:1\n"
                      "partctl.state.change.log.file=" + str(tmp_path / "no" / "such.log") + "\n")
    for run, role in ((run_broker, "broker"), (run_controller, "controller")):
        err = io.StringIO()
        assert run(str(config), err=err, log_format="json") == 1
        lines = [json.loads(line) for line in err.getvalue().splitlines()]
        assert len(lines) == 1, err.getvalue()
        assert (lines[0]["level"], lines[0]["logger"]) == ("ERROR", f"partctl.{role}")
        assert lines[0]["message"].startswith("partctl: error: partctl.state.change.log.file")
        err = io.StringIO()
        assert run(str(tmp_path / "missing.properties"), err=err, log_format="json") == 1
        assert json.loads(err.getvalue())["message"].startswith("partctl: error: ")


def test_json_lines_waits_for_the_end_of_a_line() -> None:
    raw = io.StringIO()
    out = JsonLines(raw, "partctl.broker")
    print("partctl broker 1: serving", end="", file=out)
    assert raw.getvalue() == ""
    print(" PLAINTEXT://127.0.0.1:1 on memory://x\nsecond", file=out)
    lines = [json.loads(line) for line in raw.getvalue().splitlines()]
    assert [m["message"] for m in lines] == [
        "partctl broker 1: serving PLAINTEXT://127.0.0.1:1 on memory://x", "second"]
    assert {m["level"] for m in lines} == {"INFO"}


def test_a_broker_or_controller_process_shortens_the_interpreter_s_switch_interval(
        tmp_path: Path) -> None:
    """Threads that make system calls wait for the interpreter after each: a broker process
    lets a waiting thread in ten times sooner than Python's default (broker.process)."""
    from broker.process import SWITCH_INTERVAL

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        assert run_broker(str(tmp_path / "missing.properties"), err=io.StringIO()) == 1
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
        sys.setswitchinterval(0.005)
        assert run_controller(str(tmp_path / "missing.properties"), err=io.StringIO()) == 1
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
    finally:
        sys.setswitchinterval(before)
    assert SWITCH_INTERVAL <= 0.005 / 5
