"""``--log-format json`` of the broker and controller processes: every line they write parses,
their own lines (serving, one-line errors) included."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.controller_process import run as run_controller
from broker.logs import JsonLines, SharedStream, setup_logging, stop_logging
from broker.process import run as run_broker
from interbroker.fencing import FIELD, LOGGER_NAME


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


class _Watched(io.StringIO):
    """A stream that notes which threads wrote to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(text)


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root, changes = logging.getLogger(), logging.getLogger(LOGGER_NAME)
    handlers, level = list(root.handlers), root.level
    yield
    stop_logging()
    for logger in (root, changes):
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    changes.propagate = True


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_broker_s_lines_are_written_by_a_thread_of_their_own(
        tmp_path: Path, log_format: str, restored_logging: None) -> None:
    """The thread that logs does not write (a write would give up the interpreter and queue
    behind the busy threads for it again); every line, traceback and state-change field is in
    the output once the writer has stopped, in the order logged."""
    err = _Watched()
    own = tmp_path / "state-change.log"
    setup_logging(err, log_format=log_format, state_change_file=str(own), background=True)
    log = logging.getLogger("partctl.test")
    for i in range(200):
        log.info("line %d of %s", i, "many")
    try:
        raise ValueError("the cause")
    except ValueError:
        log.exception("failed")
    logging.getLogger(LOGGER_NAME).info("changed", extra={FIELD: {"event": "x", "n": 1}})
    stop_logging()
    assert threading.current_thread().name not in err.writers and err.writers
    out = err.getvalue().splitlines()
    changes = own.read_text().splitlines()
    if log_format == "json":
        records = [json.loads(line) for line in out]
        assert [r["message"] for r in records[:200]] == [f"line {i} of many" for i in range(200)]
        assert records[200]["message"] == "failed"
        assert "ValueError: the cause" in records[200]["exception"]
        assert len(records) == 201
        (change,) = [json.loads(line) for line in changes]
        assert change[FIELD] == {"event": "x", "n": 1} and change["message"] == "changed"
    else:
        assert [line.split(": ", 1)[1] for line in out[:200]] == [
            f"line {i} of many" for i in range(200)]
        assert out[200].endswith("ERROR partctl.test: failed")
        assert out[-1] == "ValueError: the cause"
        assert len(changes) == 1 and changes[0].endswith(f"INFO {LOGGER_NAME}: changed")


def test_a_process_s_own_lines_and_its_log_s_share_the_stream_line_by_line() -> None:
    """print() writes a line's text and its newline apart: another thread's line must not land
    between them (the broker's ready line, which launchers look for, once had a log line
    stuck to its end)."""
    raw = io.StringIO()
    shared = SharedStream(raw)

    def write(tag: str) -> None:
        for i in range(2000):
            print(f"{tag} {i}", file=shared)
            shared.write(f"{tag}-log {i}\n")

    threads = [threading.Thread(target=write, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = raw.getvalue().splitlines()
    assert sorted(lines) == sorted(f"{t}{kind} {i}" for t in "ab" for kind in ("", "-log")
                                   for i in range(2000))
    print("no newline yet", end="", file=shared)
    assert raw.getvalue().endswith("-log 1999\n")
    shared.flush()
    assert raw.getvalue().endswith("no newline yet")
