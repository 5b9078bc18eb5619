"""A broker's config watcher: Kafka's ZkConfigManager with its TopicConfigHandler and, for the
broker's dynamic config (``/config/brokers/<id>`` over ``/config/brokers/<default>``), its
BrokerConfigHandler.

It feeds a replica manager (any ``update(topic, overrides)``) the overrides stored at
``/config/topics/<t>``: every topic's at start (a broker that was down while a config changed
starts with the change), then each topic a config change notification names, read again from
its node (the notification is only a trigger), in notification order
(:class:`coordinator.config_changes.ConfigChangeListener`). The replica manager itself knows no
coordinator; a broker node composes the two.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from coordinator.base import Coordinator
from coordinator.broker_config import BROKER_DEFAULT, effective_broker_config
from coordinator.clock import SYSTEM_CLOCK, Clock
from coordinator.config_changes import CHANGE_EXPIRATION_MS, ConfigChangeListener
from coordinator.metadata import MetadataClient

__all__ = ["TopicConfigWatcher"]

log = logging.getLogger(__name__)


class TopicConfigWatcher:
    """Calls ``update(topic, overrides)`` with each topic's stored overrides, at
    :meth:`start` and whenever a notification names the topic (empty overrides for a topic
    whose config node is gone). Reads and updates are serialised, each update made with what
    was read under the same lock, so a later read is never overtaken by an earlier one."""

    def __init__(
        self,
        coordinator: Coordinator,
        update: Callable[[str, Mapping[str, str]], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
        broker: tuple[int, Callable[[Mapping[str, str]], None]] | None = None,
    ) -> None:
        """``broker``: this broker's id and what takes its dynamic config
        (``/config/brokers/<id>`` over the cluster's ``/config/brokers/<default>``: the
        replication throttle rates), at start and whenever either changes."""
        self.metadata = MetadataClient(coordinator)
        self._update = update
        self._broker = broker
        self._lock = threading.Lock()
        self.listener = ConfigChangeListener(coordinator, self._on_change,
                                             clock=clock, expiration_ms=expiration_ms)

    def start(self) -> TopicConfigWatcher:
        """Follow the notifications, then apply every topic's stored config (Kafka's order:
        listener first, so no change falls between the read and the watch)."""
        self.listener.start()
        self.load_all()
        return self

    def close(self) -> None:
        self.listener.close()

    def load_all(self) -> int:
        """Apply every topic's stored overrides; returns how many topics have a config node."""
        with self._lock:
            configs = self.metadata.all_topic_configs()
            for topic, overrides in configs.items():
                self._update(topic, overrides)
            self._load_broker()
            return len(configs)

    def _load_broker(self) -> None:
        """This broker's dynamic config: its own keys over the cluster's defaults."""
        if self._broker is not None:
            defaults = self.metadata.broker_config(BROKER_DEFAULT)
            own = self.metadata.broker_config(self._broker[0])
            self._broker[1](effective_broker_config(
                defaults.value if defaults is not None else {},
                own.value if own is not None else {}))

    def _on_change(self, entity_type: str, name: str) -> None:
        if entity_type == "brokers" and self._broker is not None and name in (
                str(self._broker[0]), BROKER_DEFAULT):
            with self._lock:
                self._load_broker()
            return
        if entity_type != "topics":
            return
        with self._lock:
            node = self.metadata.topic_configs([name]).get(name)
            self._update(name, node.value if node is not None else {})
