"""Entity configs in Kafka's layout (``/config/<type>/<name>``) and their change
notifications (``/config/changes``): topics, users, brokers."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from coordinator import layout
from coordinator.codecs import (
    CorruptMetadata,
    decode_config_change,
    decode_entity_config,
    encode_config_change,
    encode_entity_config,
)
from coordinator.errors import (
    BadVersion,
    CoordinatorError,
    MultiFailed,
    NodeExists,
    NoNode,
)
from coordinator.metadata_base import MetadataBase, UnknownTopic, Versioned
from coordinator.model import Check, Create, Op, SetData

log = logging.getLogger(__name__)


class ConfigNodes(MetadataBase):
    """Topic, user and broker config nodes and their change notifications."""

    def topic_config(self, topic: str) -> dict[str, str] | None:
        """A topic's config overrides (``/config/topics/<t>``); None without a config node."""
        try:
            data, _ = self._get(layout.topic_config(topic))
        except NoNode:
            return None
        return decode_entity_config(layout.topic_config(topic), data)

    def topic_configs(self, topics: Iterable[str]) -> dict[str, Versioned[dict[str, str]]]:
        """Config overrides of the given topics, with their node versions, in one bulk read;
        topics without a config node are left out."""
        names = list(topics)
        items = self._get_many([layout.topic_config(t) for t in names])
        out: dict[str, Versioned[dict[str, str]]] = {}
        for name, item in zip(names, items, strict=True):
            if item is not None:
                data, stat = item
                out[name] = Versioned(value=decode_entity_config(layout.topic_config(name), data),
                                      version=stat.version)
        return out

    def all_topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's config overrides (Kafka's fetchAllEntityConfigs for topics)."""
        try:
            names = self._children(layout.CONFIG_TOPICS)
        except NoNode:
            return {}
        return {t: v.value for t, v in self.topic_configs(names).items()}

    def set_topic_config(self, topic: str, config: Mapping[str, str], version: int | None
                         ) -> str:
        """Replace a topic's overrides, conditional on the config node's ``version`` (None: the
        node is created, as Kafka's setOrCreateEntityConfigs does for a topic without one),
        and announce the change (``/config/changes/config_change_<seq>``,
        ``{"version":2,"entity_path":"topics/<t>"}``), in one atomic multi that also checks the
        topic exists. Kafka writes the node and then the notification, so a tool that dies
        between the two leaves a change no broker hears of until it restarts; here both land or
        neither does. An admin write, not fenced. Returns the notification's name.

        :class:`UnknownTopic` when the topic is gone; BadVersion when the config node changed
        (or appeared, or went) since it was read: read again and retry."""
        layout.validate_topic(topic)
        config_path = layout.topic_config(topic)
        data = encode_entity_config(config)
        ops: list[Op] = [
            Check(path=layout.topic(topic), version=-1),
            Create(path=config_path, data=data) if version is None
            else SetData(path=config_path, data=data, version=version),
            Create(path=layout.CONFIG_CHANGE_SEQUENTIAL,
                   data=encode_config_change(f"topics/{topic}"), sequential=True),
        ]
        for attempt in range(2):
            try:
                results = self.coordinator.multi(ops)
            except MultiFailed as failure:
                cause = failure.cause
                if failure.index == 0 and isinstance(cause, (NoNode, BadVersion)):
                    raise UnknownTopic(topic) from None
                if failure.index == 1 and isinstance(cause, (NoNode, NodeExists, BadVersion)):
                    if isinstance(cause, NoNode) and version is None and attempt == 0:
                        self.ensure_layout()  # /config/topics is missing
                        continue
                    raise BadVersion(config_path) from None
                if failure.index == 2 and isinstance(cause, NoNode) and attempt == 0:
                    self.ensure_layout()  # /config/changes is missing
                    continue
                raise cause from None
            created = results[2]
            assert isinstance(created, str)
            return created.rsplit("/", 1)[1]
        raise CoordinatorError(f"{config_path}: the config layout kept missing")

    def user_config(self, user: str) -> Versioned[dict[str, str]] | None:
        """A user's config (``/config/users/<user>``: SCRAM credentials by mechanism), with
        the node's version; None without a node."""
        path = layout.user_config(user)
        try:
            data, stat = self._get(path)
        except NoNode:
            return None
        return Versioned(value=decode_entity_config(path, data), version=stat.version)

    def all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config, by (desanitized) user name."""
        try:
            names = self._children(layout.CONFIG_USERS)
        except NoNode:
            return {}
        paths = [f"{layout.CONFIG_USERS}/{n}" for n in names]
        out: dict[str, dict[str, str]] = {}
        for name, path, item in zip(names, paths, self._get_many(paths), strict=True):
            if item is not None:
                try:
                    out[layout.desanitize_entity(name)] = decode_entity_config(path, item[0])
                except CorruptMetadata as exc:
                    log.warning("ignoring user config: %s", exc)
        return out

    def set_user_config(self, user: str, config: Mapping[str, str], version: int | None
                        ) -> str:
        """Write a user's config, conditional on ``version`` (None: create the node), and
        announce it (``{"version":2,"entity_path":"users/<user>"}``) in one multi, as Kafka's
        AdminZkClient.changeUserOrUserClientIdConfig. BadVersion when the node changed since
        it was read (or appeared). Returns the notification's name."""
        path = layout.user_config(user)
        return self._set_entity_config(
            path, config, version, f"users/{layout.sanitize_entity(user)}")

    def broker_config(self, broker_id: int | str) -> Versioned[dict[str, str]] | None:
        """A broker's dynamic config (``/config/brokers/<id>``; ``<default>`` for the
        cluster's defaults), with the node's version; None without a node."""
        path = layout.config_entity("brokers", str(broker_id))
        try:
            data, stat = self._get(path)
        except NoNode:
            return None
        return Versioned(value=decode_entity_config(path, data), version=stat.version)

    def set_broker_config(self, broker_id: int | str, config: Mapping[str, str],
                          version: int | None) -> str:
        """Write a broker's dynamic config, conditional on ``version`` (None: create the
        node), and announce it (``{"version":2,"entity_path":"brokers/<id>"}``) in one multi,
        as Kafka's AdminZkClient.changeBrokerConfig. BadVersion when the node changed since
        it was read (or appeared). Returns the notification's name."""
        path = layout.config_entity("brokers", str(broker_id))
        return self._set_entity_config(path, config, version, f"brokers/{broker_id}")

    def _set_entity_config(self, path: str, config: Mapping[str, str], version: int | None,
                           entity_path: str) -> str:
        """Write an entity's config node at ``path`` conditionally on ``version`` (None:
        create it) and announce ``entity_path`` under /config/changes, in one multi; creates
        the config layout once if a parent is missing. Returns the notification's name."""
        ops: list[Op] = [
            Create(path=path, data=encode_entity_config(config)) if version is None
            else SetData(path=path, data=encode_entity_config(config), version=version),
            Create(path=layout.CONFIG_CHANGE_SEQUENTIAL, data=encode_config_change(entity_path),
                   sequential=True),
        ]
        for attempt in range(2):
            try:
                results = self.coordinator.multi(ops)
            except MultiFailed as failure:
                cause = failure.cause
                if isinstance(cause, NoNode) and attempt == 0 and (
                        failure.index == 1 or version is None):
                    self.ensure_layout()  # /config/<entities> or /config/changes is missing
                    continue
                if failure.index == 0 and isinstance(cause, (NoNode, NodeExists, BadVersion)):
                    raise BadVersion(path) from None
                raise cause from None
            created = results[1]
            assert isinstance(created, str)
            return created.rsplit("/", 1)[1]
        raise CoordinatorError(f"{path}: the config layout kept missing")

    def config_change_notifications(self) -> list[str]:
        """Names of the config change notifications, oldest first (by sequence)."""
        try:
            names = self._children(layout.CONFIG_CHANGES)
        except NoNode:
            return []
        return sorted(n for n in names if n.startswith(layout.CONFIG_CHANGE_PREFIX))

    def read_config_changes(self, names: Sequence[str]
                            ) -> list[tuple[str, tuple[str, str] | None]]:
        """Each notification's entity (type, name), None where it is gone or unreadable."""
        items = self._get_many([f"{layout.CONFIG_CHANGES}/{n}" for n in names])
        out: list[tuple[str, tuple[str, str] | None]] = []
        for name, item in zip(names, items, strict=True):
            entity = None
            if item is not None:
                try:
                    entity = decode_config_change(f"{layout.CONFIG_CHANGES}/{name}", item[0])
                except CorruptMetadata as exc:
                    log.warning("ignoring config change notification: %s", exc)
            out.append((name, entity))
        return out

    def delete_config_changes(self, names: Sequence[str]) -> None:
        """Delete notifications (the purge of expired ones); those already gone are fine."""
        for name in names:
            try:
                self.coordinator.delete(f"{layout.CONFIG_CHANGES}/{name}")
            except NoNode:
                pass
