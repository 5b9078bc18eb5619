"""Kafka's command-line tools run one after another in one JVM (``ToolShell.java``), so that a
test module that runs dozens of them pays for one JVM start per Kafka version instead of one per
invocation (1.5 to 3.5 s each here). A tool is still its main class called with the script's
arguments; only the process is shared: each invocation's stdout and stderr (Kafka's log lines
included) are its own, and its exit status is what it passed to Kafka's ``Exit``.
:meth:`ToolShell.run` answers as :func:`harness.run_tool` does (a ``CompletedProcess``)."""

from __future__ import annotations

import atexit
import os
import subprocess
import tempfile
import threading

from tests.class_archive import archive_for, compiled_jar

from .harness import HERE, TOOL_JVM_OPTIONS, kafka_classpath, main_class, run_tool

__all__ = ["ToolShell", "run_shared"]

SOURCE = HERE / "ToolShell.java"


class ToolShell:
    """One JVM running ``version``'s tools on request (not a value: it has a lifetime). The
    JVM's own output, outside any invocation, goes to a temporary file, read on a failure.
    The shell runs compiled (a jar in the class archives' cache, built once), so that its start
    compiles nothing and its JVM can map a class archive (:mod:`tests.class_archive`); where it
    cannot be built, as a source program."""

    def __init__(self, version: str) -> None:
        self.version = version
        try:
            classpath = f"{compiled_jar('ToolShell', [SOURCE])}:{kafka_classpath(version)}"
            main = "ToolShell"
        except (OSError, subprocess.SubprocessError):
            classpath, main = kafka_classpath(version), str(SOURCE)
        self._archive = archive_for(classpath, main, TOOL_JVM_OPTIONS)
        command = ["java", *TOOL_JVM_OPTIONS, *self._archive.options,
                   f"-Dlog4j.configuration=file:{HERE / 'log4j-shell.properties'}",
                   f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
                   "-cp", classpath, main]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log)
        self._lock = threading.Lock()

    def run(self, tool: str, *args: str, timeout: float = 120.0
            ) -> subprocess.CompletedProcess[str]:
        """Run one tool (a main class or a script's name) and wait for its answer; after
        ``timeout`` the shell is killed and :class:`subprocess.TimeoutExpired` raised."""
        main = main_class(self.version, tool)
        if any("\n" in a or "\0" in a for a in (main, *args)):
            raise ValueError("a tool argument holds a newline or a NUL")
        with self._lock:
            stdin, stdout = self._process.stdin, self._process.stdout
            assert stdin is not None and stdout is not None
            killed = threading.Event()

            def kill() -> None:
                killed.set()
                self._process.kill()

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                stdin.write("\0".join((main, *args)).encode() + b"\n")
                stdin.flush()
                header = stdout.readline().split()
                if len(header) == 3:
                    status, out, err = (int(x) for x in header)
                    answer = stdout.read(out), stdout.read(err)
            except OSError:
                header = []
            finally:
                timer.cancel()
            if killed.is_set():
                raise subprocess.TimeoutExpired([main, *args], timeout)
            if len(header) != 3:
                raise RuntimeError(f"the tool shell of Kafka {self.version} ended: "
                                   f"{self.output()[-2000:]}")
        return subprocess.CompletedProcess([main, *args], status,
                                           answer[0].decode(errors="replace"),
                                           answer[1].decode(errors="replace"))

    def alive(self) -> bool:
        return self._process.poll() is None

    def output(self) -> str:
        """What the JVM wrote outside the invocations (its own errors)."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            # a shell that dumps its class archive at exit takes a few seconds more
            self._process.wait(timeout=10 if self._archive.pending is None else 60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._archive.finish(self._process.returncode)
        self._log.close()

    def __enter__(self) -> ToolShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: dict[str, ToolShell] = {}
_SHARED_LOCK = threading.Lock()


def _close_shared() -> None:
    for shell in _SHARED.values():
        shell.close()


atexit.register(_close_shared)


def run_shared(version: str, tool: str, *args: str, timeout: float = 120.0
               ) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's admin tools in this process's shell for ``version``, started on
    first use and again if it ended (a timeout kills it), closed when the process exits: a
    pytest worker pays for one JVM start per Kafka version across all its modules. With
    ``PARTCTL_KAFKA_TOOL_PROCESSES=1``, a process per invocation (:func:`harness.run_tool`).
    For the short admin tools only; a load generator (a perf test, a console consumer) gets
    a JVM of its own."""
    if os.environ.get("PARTCTL_KAFKA_TOOL_PROCESSES") == "1":
        return run_tool(version, tool, *args, timeout=timeout)
    with _SHARED_LOCK:
        shell = _SHARED.get(version)
        if shell is None or not shell.alive():
            if shell is not None:
                shell.close()
            shell = _SHARED[version] = ToolShell(version)
    return shell.run(tool, *args, timeout=timeout)
