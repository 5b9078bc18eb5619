"""One log line per interval for an error that repeats: out of file descriptors, above all.

A process that runs out of descriptors fails every accept, every segment it opens and every
file it reads until some are freed; a line (with a traceback) for each failure writes
megabytes a second while nothing changes. :class:`ThrottledLog` writes the first, then at most
one line per interval, each saying how many were left out since the last, and never a
traceback.
"""

from __future__ import annotations

import errno
import logging
import threading

from coordinator.clock import SYSTEM_CLOCK, Clock

__all__ = ["OUT_OF_DESCRIPTORS", "ThrottledLog", "out_of_descriptors"]

OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
"""The process's (EMFILE) or the system's (ENFILE) open-file table is full."""


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether ``exc`` says the open-file limit was reached."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS


class ThrottledLog:
    """Logs to ``logger`` at most once per ``interval`` seconds (``clock``'s monotonic time;
    thread-safe): the first call logs, the calls within the interval after it are only counted,
    and the next line that goes out says how many were left out."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.logger = logger
        self.interval = interval
        self._monotonic = clock.monotonic
        self._next = float("-inf")
        self._suppressed = 0
        self._lock = threading.Lock()

    @property
    def suppressed(self) -> int:
        """The calls left out since the last line."""
        return self._suppressed

    def log(self, level: int, message: str, *args: object) -> bool:
        """Log ``message % args`` unless a line went out less than ``interval`` ago; True when
        it was logged."""
        now = self._monotonic()
        with self._lock:
            if now < self._next:
                self._suppressed += 1
                return False
            left_out, self._suppressed = self._suppressed, 0
            self._next = now + self.interval
        if left_out:
            message += " (%d more like it in the last %.0f s)"
            args = (*args, left_out, self.interval)
        self.logger.log(level, message, *args)
        return True

    def warning(self, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, message, *args)
