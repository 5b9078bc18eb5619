"""The background log cleaner (``log.cleaner.*``, Kafka's LogCleaner and LogCleanerManager): it
picks the dirtiest log whose dirty ratio reaches ``min.cleanable.dirty.ratio`` (or whose
``max.compaction.lag.ms`` has passed, or whose delete horizon has come) and cleans it with
:func:`replication.cleaner.clean_log`, on ``log.cleaner.threads`` threads, keeping the first
dirty offset of each log (the cleaner-offset-checkpoint). A segment that does not parse costs
its log this pass, with one warning, and changes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coordinator.clock import Clock
from replication.cleaner import CleanerConfig, CleanResult, OffsetMap, clean_log, cleanable_range
from replication.errors import CorruptRecordError, StorageError
from replication.log import Log

__all__ = ["LogCleaner"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Candidate:
    key: object
    log: Log
    high_watermark: int
    first_dirty: int
    ratio: float
    forced: bool


class LogCleaner:
    """Cleans compacted logs in the background (``log.cleaner.threads`` threads).

    ``logs()`` lists the logs to consider, as ``key -> (log, high watermark)``; the keys name
    the logs in the cleaner's checkpoint (``first dirty offset`` per log, kept in memory and
    handed to ``on_checkpoint`` after each pass so a broker can persist it)."""

    def __init__(
        self,
        config: CleanerConfig,
        logs: Callable[[], Mapping[object, tuple[Log, int]]],
        clock: Clock,
        *,
        checkpoints: Mapping[object, int] | None = None,
        on_checkpoint: Callable[[Mapping[object, int]], None] | None = None,
    ) -> None:
        self.config = config
        self._logs = logs
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoints: dict[object, int] = dict(checkpoints or {})
        self._in_progress: set[object] = set()
        self._on_checkpoint = on_checkpoint
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.passes = 0

    def checkpoints(self) -> dict[object, int]:
        """Each log's first dirty offset (a copy)."""
        with self._lock:
            return dict(self._checkpoints)

    def forget(self, key: object) -> None:
        """Drop a log's checkpoint (deleted, or truncated below it)."""
        with self._lock:
            self._checkpoints.pop(key, None)

    def _pick(self, now: int) -> _Candidate | None:
        """The dirtiest compacted log above its ``min.cleanable.dirty.ratio``, one whose
        ``max.compaction.lag.ms`` has passed, or one whose delete horizon has come (Kafka's
        grabFilthiestCompactedLog). Marks it in progress."""
        best: _Candidate | None = None
        with self._lock:
            for key, (log, hw) in self._logs().items():
                cfg = log.config
                if key in self._in_progress:
                    continue
                truncated = log.take_truncation()
                if truncated is not None and key in self._checkpoints:
                    self._checkpoints[key] = min(self._checkpoints[key], truncated)
                if not cfg.compact:
                    continue
                try:
                    first_dirty, upto = cleanable_range(log, self._checkpoints.get(key, 0), hw,
                                                        now)
                    clean_bytes, dirty_bytes, dirty_first_ts = log.dirty_stats(first_dirty,
                                                                               upto)
                except StorageError:
                    continue
                total = clean_bytes + dirty_bytes
                ratio = dirty_bytes / total if total else 0.0
                forced = (dirty_bytes > 0 and dirty_first_ts >= 0
                          and now - dirty_first_ts > cfg.max_compaction_lag_ms)
                eligible = (dirty_bytes > 0 and ratio > cfg.min_cleanable_dirty_ratio) \
                    or forced or log.delete_horizon_due(now)
                if not eligible:
                    continue
                cand = _Candidate(key=key, log=log, high_watermark=hw, first_dirty=first_dirty,
                                  ratio=ratio, forced=forced)
                if best is None or (cand.forced, cand.ratio) > (best.forced, best.ratio):
                    best = cand
            if best is not None:
                self._in_progress.add(best.key)
        return best

    def clean_once(self, offset_map: OffsetMap | None = None) -> CleanResult | None:
        """Pick a log and clean it; None if no log needed cleaning. A segment that does not
        parse is one warning and leaves that log as it was."""
        now = self._clock.now_ms()
        cand = self._pick(now)
        if cand is None:
            return None
        omap = offset_map or OffsetMap(self.config.map_slots)
        try:
            result = clean_log(cand.log, first_dirty=cand.first_dirty,
                               high_watermark=cand.high_watermark, offset_map=omap, now_ms=now)
        except CorruptRecordError as exc:
            _logger.warning("cleaner: %s not cleaned, a segment does not parse: %s",
                            cand.log.directory.name, exc)
            return None
        except StorageError as exc:
            _logger.warning("cleaner: %s not cleaned: %s", cand.log.directory.name, exc)
            return None
        finally:
            with self._lock:
                self._in_progress.discard(cand.key)
        self.passes += 1
        if result is not None:
            with self._lock:
                self._checkpoints[cand.key] = result.end_offset
                snapshot = dict(self._checkpoints)
            if self._on_checkpoint is not None:
                self._on_checkpoint(snapshot)
        return result

    def start(self) -> None:
        """Start the cleaner threads (none when disabled or with zero threads)."""
        if not self.config.enable or self._threads:
            return
        self._stop.clear()
        for i in range(self.config.threads):
            thread = threading.Thread(target=self._run, name=f"log-cleaner-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _run(self) -> None:
        omap = OffsetMap(self.config.map_slots)
        while not self._stop.is_set():
            try:
                result = self.clean_once(omap)
            except Exception:
                _logger.exception("cleaner pass failed")
                result = None
            if result is None:
                self._stop.wait(self.config.backoff_ms / 1000)

    def stop(self) -> None:
        """Stop the threads, letting a pass in progress finish."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

