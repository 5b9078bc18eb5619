"""How partctl's long-running processes log: text or json lines on a stream, and the
state-change log (:mod:`statemachines.state_change`) to a file of its own if asked.

``text`` is the classic line, ``[time] LEVEL logger: message``. ``json`` is one object per line
with ``time`` (UTC, ISO 8601, milliseconds), ``level``, ``logger`` and ``message``, the
state-change log's structured fields under ``state_change`` and a traceback, if any, under
``exception``: a log shipper reads it without a pattern. The broker and controller processes,
the scheduler and the demo all set up their logging here (``--log-format``).

The broker and controller processes write their lines from one thread of their own
(:class:`LineWriter`): a request thread that logs a line per partition would otherwise give up
the interpreter's lock at every write and wait for it again behind the busy threads (with a
switch interval of 0.5 ms, about that long per line: most of a 1,667-partition LeaderAndIsr).
"""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import threading
import time
import weakref
from typing import Any, NoReturn, TextIO, cast

from interbroker.fencing import FIELD, LOGGER_NAME

__all__ = ["FORCED_EXIT_WRITE", "LOG_FORMATS", "JsonFormatter", "JsonLines", "LineWriter",
           "WrittenLines", "exit_now", "formatter", "lines_for", "setup_logging"]

FORCED_EXIT_WRITE = 1.0
"""Seconds a forced exit (:func:`exit_now`) gives the log writers to write what is queued."""
_WRITERS: weakref.WeakSet[LineWriter] = weakref.WeakSet()

LOG_FORMATS = ("text", "json")
TEXT_LINE = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"
_MARK = "_partctl_handler"
"""Set on the handlers :func:`setup_logging` adds, so that a second call replaces them."""


def _time(created: float) -> str:
    millis = int(created * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{millis:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in a message are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELD, None)
        if fields is not None:
            out[FIELD] = fields
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


class JsonLines(io.TextIOBase):
    """A text stream that writes each line printed to it as a JSON object on ``raw``: a
    process's own lines (its serving line, its one-line errors) in the json log format, so
    that every line of its output parses. ``logger`` names the process; a line starting with
    ``partctl: error:`` is an ERROR, any other an INFO."""

    def __init__(self, raw: TextIO, logger: str) -> None:
        super().__init__()
        self._raw = raw
        self._logger = logger
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *complete, self._pending = self._pending.split("\n")
        for line in complete:
            level = "ERROR" if line.startswith("partctl: error:") else "INFO"
            self._raw.write(json.dumps({"time": _time(time.time()), "level": level,
                                        "logger": self._logger, "message": line},
                                       ensure_ascii=False) + "\n")
        return len(text)

    def flush(self) -> None:
        self._raw.flush()


class LineWriter:
    """One thread that writes what :class:`WrittenLines` streams are given, in the order given:
    it takes everything queued, writes it to each stream with one write and one flush, and
    waits for more. A write costs its caller no system call. :meth:`close` writes what is
    queued and stops the thread; the streams then write at once, as plain streams do."""

    def __init__(self, name: str = "partctl-log-writer") -> None:
        self._queue: queue.SimpleQueue[tuple[TextIO, str | None] | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _WRITERS.add(self)

    def stream(self, raw: TextIO, *, owned: bool = False) -> TextIO:
        """A text stream onto ``raw`` whose writes this thread carries out (``owned``: closing
        it closes ``raw``, after what was written before): a :class:`WrittenLines`."""
        return cast(TextIO, WrittenLines(self, raw, owned=owned))

    def put(self, raw: TextIO, text: str | None) -> None:
        """Write ``text`` to ``raw`` (None: close ``raw``), after what was put before."""
        if self._closed:
            _write(raw, text)
        else:
            self._queue.put((raw, text))

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            pending: dict[int, tuple[TextIO, list[str]]] = {}
            while item is not None:
                raw, text = item
                if text is None:  # a close: what came before it first
                    done = pending.pop(id(raw), None)
                    _write(raw, "".join(done[1]) if done else "")
                    _write(raw, None)
                else:
                    pending.setdefault(id(raw), (raw, []))[1].append(text)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            for raw, texts in pending.values():
                _write(raw, "".join(texts))
            if item is None:
                return


def exit_now(status: int) -> NoReturn:
    """End the process with ``status`` at once (a signal repeated: no more waiting), once the
    log writers have written what is queued, or :data:`FORCED_EXIT_WRITE` seconds have
    passed: the lines that say why it stopped are the ones a forced exit would drop."""
    deadline = time.monotonic() + FORCED_EXIT_WRITE
    for writer in list(_WRITERS):
        writer.close(max(0.0, deadline - time.monotonic()))
    os._exit(status)


def _write(raw: TextIO, text: str | None) -> None:
    try:
        if text is None:
            raw.close()
        elif text:
            raw.write(text)
            raw.flush()
    except (OSError, ValueError):  # the stream is gone (closed, a broken pipe): nowhere to log
        pass


class WrittenLines(io.TextIOBase):
    """A text stream whose writes a :class:`LineWriter` carries out, in order, a whole line at
    a time: what a thread writes is held until it ends a line (or flushes), so that lines
    written by several threads never tear (``print`` writes a line and its newline apart).
    ``flush`` hands on the calling thread's partial line and does not wait for the writer
    (:meth:`LineWriter.close` does)."""

    def __init__(self, writer: LineWriter, raw: TextIO, *, owned: bool = False) -> None:
        super().__init__()
        self.writer = writer
        self._raw = raw
        self._owned = owned
        self._held = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.closed:
            return len(text)
        held = getattr(self._held, "text", "")
        cut = text.rfind("\n")
        if cut < 0:
            self._held.text = held + text
        else:
            self._held.text = text[cut + 1:]
            self.writer.put(self._raw, held + text[:cut + 1])
        return len(text)

    def flush(self) -> None:
        """Hand on this thread's partial line; nothing to wait for."""
        held = getattr(self._held, "text", "")
        if held and not self.closed:
            self._held.text = ""
            self.writer.put(self._raw, held)

    def close(self) -> None:
        if not self.closed:
            self.flush()
            if self._owned:
                self.writer.put(self._raw, None)
        super().close()


def lines_for(err: TextIO, log_format: str, logger: str) -> TextIO:
    """``err`` itself for the text format, else ``err`` behind :class:`JsonLines`."""
    return JsonLines(err, logger) if log_format == "json" else err  # type: ignore[return-value]


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (one of :data:`LOG_FORMATS`)."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_LINE)
    raise ValueError(f"log format {log_format!r}: one of {', '.join(LOG_FORMATS)}")


class _ClosingStreamHandler(logging.StreamHandler):
    """A handler onto a stream of its own: closing the handler closes the stream."""

    def close(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self.stream.close()
        super().close()


def setup_logging(
    err: TextIO,
    *,
    log_format: str = "text",
    level: int = logging.INFO,
    state_change_file: str | None = None,
    quiet: tuple[str, ...] = ("kazoo", "asyncio"),
) -> None:
    """Log ``level`` and up to ``err`` in ``log_format``, for a process of its own (the root
    logger's handlers are replaced). With ``state_change_file`` the state-change log goes to
    that file (appended, same format) instead of ``err``, as Kafka's state-change.log does.
    The ``quiet`` loggers (client libraries that log every reconnect) log warnings only.

    When ``err`` is a :class:`WrittenLines`, its writer writes the state-change file too.

    Raises OSError when the file cannot be opened (nothing is changed then)."""
    shape = formatter(log_format)
    file_handler: logging.Handler | None = None
    if state_change_file is not None:
        if isinstance(err, WrittenLines):
            file_handler = _ClosingStreamHandler(err.writer.stream(
                open(state_change_file, "a", encoding="utf-8"), owned=True))  # noqa: SIM115
        else:
            file_handler = logging.FileHandler(state_change_file, encoding="utf-8")
        file_handler.setFormatter(shape)
        setattr(file_handler, _MARK, True)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    changes = logging.getLogger(LOGGER_NAME)
    for handler in list(changes.handlers):
        if getattr(handler, _MARK, False):
            changes.removeHandler(handler)
            handler.close()
    handler = logging.StreamHandler(err)
    handler.setFormatter(shape)
    setattr(handler, _MARK, True)
    root.addHandler(handler)
    root.setLevel(level)
    changes.propagate = file_handler is None
    if file_handler is not None:
        changes.addHandler(file_handler)
    for noisy in quiet:
        logging.getLogger(noisy).setLevel(logging.WARNING)
