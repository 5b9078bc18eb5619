"""``--log-format json`` of the broker and controller processes: every line they write parses,
their own lines (serving, one-line errors) included."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from broker.controller_process import run as run_controller
from broker.logs import JsonLines, LineWriter, setup_logging
from broker.process import run as run_broker
from interbroker.fencing import LOGGER_NAME


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


class _Recorded(io.StringIO):
    """A stream that notes which threads wrote to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(text)


def test_the_line_writer_writes_every_line_in_order_from_a_thread_of_its_own() -> None:
    """A thread that logs makes no system call for it: a request thread logging a line per
    partition would otherwise wait for the interpreter again after every write."""
    raw, other = _Recorded(), _Recorded()
    writer = LineWriter(name="test-writer")
    out, second = writer.stream(raw), writer.stream(other)

    def lines(tag: str) -> None:
        for n in range(500):
            print(f"{tag} {n}", file=out)
            second.write(f"{tag} {n}\n")

    threads = [threading.Thread(target=lines, args=(t,), name=f"caller-{t}") for t in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    for stream in (raw, other):
        got = stream.getvalue().splitlines()
        assert len(got) == 1500
        for tag in "abc":  # each caller's lines in its own order
            assert [line for line in got if line.startswith(tag)] == [
                f"{tag} {n}" for n in range(500)]
        assert stream.writers == {"test-writer"}
    print("after", file=out)  # once closed, straight through
    assert raw.getvalue().endswith("after\n")
    assert raw.writers == {"test-writer", threading.current_thread().name}


def test_the_line_writer_closes_an_owned_stream_after_its_lines_and_survives_a_broken_one(
        tmp_path: Path) -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    writer = LineWriter()
    path = tmp_path / "own.log"
    owned = writer.stream(open(path, "a", encoding="utf-8"), owned=True)  # noqa: SIM115
    broken, fine = writer.stream(Broken()), writer.stream(io.StringIO())
    owned.write("first\n")
    broken.write("lost\n")
    owned.write("second\n")
    owned.close()
    owned.write("after close\n")  # a closed stream takes nothing more
    fine.write("still written\n")
    writer.close()
    assert path.read_text() == "first\nsecond\n"
    assert fine._raw.getvalue() == "still written\n"  # type: ignore[attr-defined]


def test_a_process_s_state_change_file_is_written_by_its_line_writer(
        tmp_path: Path, restored_logging: None) -> None:
    changes = logging.getLogger(LOGGER_NAME)
    writer = LineWriter(name="test-writer")
    own = tmp_path / "state-change.log"
    main = _Recorded()
    try:
        setup_logging(writer.stream(main), state_change_file=str(own))
        logging.getLogger("partctl.test").info("main line")
        changes.info("a state change")
        writer.close()
        assert main.getvalue().endswith("partctl.test: main line\n")
        assert own.read_text().endswith(f"{LOGGER_NAME}: a state change\n")
        assert main.writers == {"test-writer"}
    finally:
        writer.close()


_FORCED_EXIT = """
import sys, time
from broker.logs import LineWriter, exit_now

class Slow:
    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")
        self.first = True
    def write(self, text):
        if self.first:  # the writer is busy when the exit comes
            self.first = False
            time.sleep(0.3)
        return self.file.write(text)
    def flush(self):
        self.file.flush()

out = LineWriter().stream(Slow(sys.argv[1]))
for n in range(2000):
    out.write(f"line {n}\\n")
exit_now(7)
"""


def test_a_forced_exit_writes_the_queued_lines_first(tmp_path: Path) -> None:
    """A repeated signal ends a broker or controller process at once (``exit_now``), but not
    before its log writer has written what was queued: those are the lines that say why."""
    path = tmp_path / "out.log"
    done = subprocess.run([sys.executable, "-c", _FORCED_EXIT, str(path)],
                          cwd=Path(__file__).resolve().parents[3], timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 7, done.stderr
    assert path.read_text().splitlines() == [f"line {n}" for n in range(2000)]


def test_lines_of_several_threads_never_tear() -> None:
    """A thread's partial line is held until it ends it: another thread's line written in
    between comes out whole, before it (print writes a line and its newline apart)."""
    raw = _Recorded()
    writer = LineWriter(name="test-writer")
    out = writer.stream(raw)
    out.write("part")
    other = threading.Thread(target=lambda: print("whole", file=out))
    other.start()
    other.join()
    out.write("ial\nrest")
    out.flush()  # a flush hands on the partial line
    writer.close()
    assert raw.getvalue() == "whole\npartial\nrest"
