"""Following config changes: Kafka's ZkNodeChangeNotificationListener over ``/config/changes``.

A tool that changes an entity's config writes ``/config/<type>/<name>`` and announces it with a
sequential ``/config/changes/config_change_<seq>`` naming the entity (``coordinator.metadata``:
``set_topic_config``). A listener watches the children of ``/config/changes``; on each report it
takes the notifications with a sequence above the last it processed, in sequence order, and
hands each entity to its callback (which reads the entity's config node: the notification is
only a trigger, so two quick changes may be seen as one, and a listener that was down misses
nothing once it reads every config at start, as Kafka's brokers do). The last sequence
processed is remembered; notifications processed and older than ``expiration_ms`` (Kafka's
changeExpirationMs, 15 minutes) are deleted, by any listener.

Kafka ages a notification by its znode's creation time; the coordinator protocol has no such
time (etcd keeps none), so a listener ages each by when it first saw it, on its own clock. A
live listener sees a notification within moments of its creation; one that starts later keeps
old notifications longer, never shorter, which errs on the side of a broker still down.

The callback runs on the coordinator's watch thread (reading nodes from it is allowed): the
watch re-reports the children after a reconnect or a new session, which processes whatever was
missed meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from coordinator import layout
from coordinator.base import Coordinator
from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from coordinator.model import ChildrenEvent, Watch

__all__ = ["CHANGE_EXPIRATION_MS", "ConfigChangeListener"]

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Kafka's changeExpirationMs: how long a processed notification is kept for others."""


def change_number(name: str) -> int:
    """The sequence of ``config_change_<seq>``; -1 for a name of another form."""
    suffix = name.removeprefix(layout.CONFIG_CHANGE_PREFIX)
    return int(suffix) if suffix != name and suffix.isdigit() else -1


class ConfigChangeListener:
    """Calls ``on_change(entity_type, entity_name)`` for each new config change notification,
    in order. ``clock``'s monotonic time ages notifications for the purge. Thread-safe: one
    batch of notifications is processed at a time."""

    def __init__(
        self,
        coordinator: Coordinator,
        on_change: Callable[[str, str], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.coordinator = coordinator
        self.metadata = MetadataClient(coordinator)
        self._on_change = on_change
        self._clock = clock
        self._expiration_ms = expiration_ms
        self._lock = threading.Lock()
        self._last = -1
        self._first_seen: dict[str, int] = {}
        self._watch: Watch | None = None
        self._closed = False

    @property
    def last_processed(self) -> int:
        """The sequence of the last notification processed (-1 before any)."""
        return self._last

    def start(self) -> ConfigChangeListener:
        """Watch ``/config/changes``: its first report processes every notification there
        (all are new to a listener that just started, as in Kafka)."""
        if self._watch is None:
            self._watch = self.coordinator.watch_children(layout.CONFIG_CHANGES, self._on_event)
        return self

    def close(self) -> None:
        self._closed = True
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    def _on_event(self, event: ChildrenEvent) -> None:
        if self._closed:
            return
        try:
            self.process(event.children)
        except CoordinatorError as exc:
            # What was not processed waits for the next report (the next change, or the
            # watch re-reporting after a reconnect).
            log.warning("config change notifications not processed: %s", exc)

    def process(self, children: list[str] | None = None) -> int:
        """Process the new notifications among ``children`` (read when None), then purge the
        expired ones; returns how many were processed."""
        with self._lock:
            if children is None:
                children = self.metadata.config_change_notifications()
            names = sorted((n for n in children if change_number(n) >= 0), key=change_number)
            now = round(self._clock.monotonic() * 1000)  # ms
            for name in names:
                self._first_seen.setdefault(name, now)
            new = [n for n in names if change_number(n) > self._last]
            done = 0
            if new:
                for name, entity in self.metadata.read_config_changes(new):
                    if entity is not None:
                        try:
                            self._on_change(*entity)
                        except Exception:
                            log.exception("processing config change %s for %s failed", name,
                                          "/".join(entity))
                    self._last = change_number(name)
                    done += 1
            expired = [n for n in names if change_number(n) <= self._last
                       and now - self._first_seen[n] > self._expiration_ms]
            if expired:
                self.metadata.delete_config_changes(expired)
            present = set(names).difference(expired)
            for name in list(self._first_seen):
                if name not in present:
                    del self._first_seen[name]
            return done
