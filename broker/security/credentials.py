"""SCRAM credentials at ``/config/users/<user>``, as Kafka's ZooKeeper mode keeps them.

The node is a config entity (``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,
server_key=...,iterations=4096"}}``); a change is announced with a ``users/<user>``
notification under ``/config/changes``. A broker keeps every user's credentials in memory
(:class:`CredentialCache`, read whole at start and again for each user a notification names,
as Kafka's CredentialProvider is fed by its ZkConfigManager), so authenticating reads nothing
from the coordinator. The writes (:func:`upsert`, :func:`remove`) serve AlterUserScramCredentials
and ``partctl users``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from coordinator.base import Coordinator
from coordinator.config_changes import ConfigChangeListener
from coordinator.errors import BadVersion
from coordinator.metadata import MetadataClient
from kafkaclient.security.scram import MAX_ITERATIONS, MECHANISMS, ScramCredential

__all__ = ["CredentialCache", "CredentialError", "CredentialInfo", "describe", "remove",
           "upsert"]

log = logging.getLogger(__name__)


class CredentialError(ValueError):
    """A credential change refused (Kafka's error for it in ``error``); nothing written."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialInfo:
    mechanism: str
    iterations: int


def _credentials(config: Mapping[str, str], user: str) -> dict[str, ScramCredential]:
    out = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            out[mechanism] = ScramCredential.decode(text)
        except ValueError:
            log.warning("ignoring the %s credential of user %r: not Kafka's format", mechanism,
                        user)
    return out


class CredentialCache:
    """Users' SCRAM credentials by mechanism, following ``/config/users`` (start/close)."""

    def __init__(self, coordinator: Coordinator | None = None) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._coordinator = coordinator
        self._listener: ConfigChangeListener | None = None

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(user, {}).get(mechanism)

    def update(self, user: str, config: Mapping[str, str] | None) -> None:
        creds = _credentials(config or {}, user)
        with self._lock:
            if creds:
                self._users[user] = creds
            else:
                self._users.pop(user, None)

    def start(self) -> CredentialCache:
        """Follow the change notifications, then read every user (listener first, so no change
        falls between the read and the watch)."""
        assert self._coordinator is not None
        metadata = MetadataClient(self._coordinator)

        def on_change(entity_type: str, name: str) -> None:
            if entity_type != "users" or "/" in name:
                return
            from coordinator.layout import desanitize_entity

            user = desanitize_entity(name)
            node = metadata.user_config(user)
            self.update(user, node.value if node is not None else None)

        self._listener = ConfigChangeListener(self._coordinator, on_change).start()
        for user, config in metadata.all_user_configs().items():
            self.update(user, config)
        return self

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


def _check(user: str, mechanism: str) -> None:
    if not user:
        raise CredentialError("UNACCEPTABLE_CREDENTIAL", "Username must not be empty")
    if mechanism not in MECHANISMS:
        raise CredentialError("UNSUPPORTED_SASL_MECHANISM",
                              f"Unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256, "
                              "SCRAM-SHA-512)")


def check_iterations(mechanism: str, iterations: int) -> None:
    low = MECHANISMS[mechanism][1]
    if iterations < low:
        raise CredentialError("UNACCEPTABLE_CREDENTIAL",
                              f"Too few iterations: {iterations} (at least {low})")
    if iterations > MAX_ITERATIONS:
        raise CredentialError("UNACCEPTABLE_CREDENTIAL",
                              f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})")


def upsert(metadata: MetadataClient, user: str, mechanism: str,
           credential: ScramCredential) -> None:
    """Set ``user``'s credential for ``mechanism`` (other mechanisms' kept)."""
    _check(user, mechanism)
    check_iterations(mechanism, credential.iterations)
    _change(metadata, user, lambda config: {**config, mechanism: credential.encode()})


def remove(metadata: MetadataClient, user: str, mechanism: str) -> None:
    """Delete ``user``'s credential for ``mechanism``; RESOURCE_NOT_FOUND when it has none."""
    _check(user, mechanism)

    def change(config: dict[str, str]) -> dict[str, str]:
        if mechanism not in config:
            raise CredentialError("RESOURCE_NOT_FOUND",
                                  f"Attempt to delete a user credential that does not exist: "
                                  f"{user} has no {mechanism} credential")
        return {k: v for k, v in config.items() if k != mechanism}

    _change(metadata, user, change)


def alter(metadata: MetadataClient, user: str, upserts: Mapping[str, ScramCredential],
          deletions: Iterable[str]) -> None:
    """Apply one user's deletions and upserts together (one write and notification)."""
    deletions = list(deletions)
    for mechanism in [*upserts, *deletions]:
        _check(user, mechanism)
    for mechanism, credential in upserts.items():
        check_iterations(mechanism, credential.iterations)

    def change(config: dict[str, str]) -> dict[str, str]:
        for mechanism in deletions:
            if mechanism not in config:
                raise CredentialError("RESOURCE_NOT_FOUND",
                                      "Attempt to delete a user credential that does not exist")
            del config[mechanism]
        for mechanism, credential in upserts.items():
            config[mechanism] = credential.encode()
        return config

    _change(metadata, user, change)


def _change(metadata: MetadataClient, user: str,
            change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    for _ in range(10):
        node = metadata.user_config(user)
        config = dict(node.value) if node is not None else {}
        new = change(config)
        try:
            metadata.set_user_config(user, new, node.version if node is not None else None)
            return
        except BadVersion:
            continue
    raise CredentialError("UNKNOWN_SERVER_ERROR", f"user {user!r}: its config kept changing")


def describe(metadata: MetadataClient, users: Iterable[str] | None
             ) -> dict[str, list[CredentialInfo]]:
    """The mechanisms and iterations of each user's credentials (every user with one when
    ``users`` is None); a named user without any maps to an empty list."""
    if users is None:
        configs = metadata.all_user_configs()
        wanted = sorted(configs)
    else:
        wanted = list(dict.fromkeys(users))
        configs = {}
        for user in wanted:
            node = metadata.user_config(user) if user else None
            if node is not None:
                configs[user] = node.value
    out: dict[str, list[CredentialInfo]] = {}
    for user in wanted:
        creds = _credentials(configs.get(user, {}), user)
        infos = [CredentialInfo(mechanism=m, iterations=c.iterations) for m, c in creds.items()]
        if infos or users is not None:
            out[user] = infos
    return out
