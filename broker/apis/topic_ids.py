"""Topic ids (KIP-516): Kafka's text form in the coordinator, UUIDs on the wire, and the lookup
that fills the metadata cache.

``/brokers/topics/<t>`` holds a topic's id as Kafka writes it: the URL-safe base64 of its 16
bytes, unpadded (``create_topic`` generates it). The protocol carries the 16 bytes (kio: a
``uuid.UUID``; the zero UUID, or None, for "no id"). The controller's UpdateMetadata carries
the ids it has; for a topic it gave none, the first request that needs the id reads its topic
node (one bulk read for all the topics missing one, off the event loop) and records it in the
metadata cache (:meth:`~broker.metadata_cache.MetadataCache.set_topic_ids`); later requests
find it there.
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.metadata_cache import NO_TOPIC_ID, MetadataCache, MetadataSnapshot
from coordinator.admin import Admin
from coordinator.errors import CoordinatorError

if TYPE_CHECKING:
    from broker.apis.services import TopicIdServices

__all__ = ["ZERO", "ensure_topic_ids", "read_topic_ids", "text_of", "uuid_of"]

log = logging.getLogger(__name__)

ZERO = NO_TOPIC_ID


def uuid_of(text: str | None) -> uuid.UUID | None:
    """The UUID of a topic id in Kafka's text form; None for no id or one that is not 16
    bytes of base64."""
    if not text:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


def text_of(value: uuid.UUID) -> str:
    """Kafka's text form of a topic id."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def read_topic_ids(admin: Admin, cache: MetadataCache, names: Iterable[str]
                   ) -> MetadataSnapshot:
    """Read the ids of ``names`` from their topic nodes and record them (blocking). A topic
    whose node is gone is left without one, a topic node without an id is recorded with the
    zero id; a coordinator error is logged and leaves them all without (the request answers as
    for an unknown id)."""
    wanted = list(names)
    try:
        found = admin.metadata.assignments(wanted)
    except CoordinatorError as exc:
        log.warning("cannot read the ids of %d topic(s): %s", len(wanted), exc)
        return cache.snapshot
    ids = {}
    for name, versioned in found.items():
        value = uuid_of(versioned.value.topic_id)
        ids[name] = value if value is not None else NO_TOPIC_ID  # none: not looked up again
    return cache.set_topic_ids(ids)


async def ensure_topic_ids(services: TopicIdServices, names: Iterable[str] | None = None
                           ) -> MetadataSnapshot:
    """The metadata snapshot with the ids of ``names`` (every topic held when None) looked up
    where missing; unchanged when nothing is missing or there is no admin path."""
    snap = services.metadata.snapshot
    wanted = snap.topics if names is None else names
    missing = [n for n in wanted if n in snap.topics and n not in snap.topic_ids]
    if not missing or services.admin is None:
        return snap
    return await services.loop.run_in_executor(
        None, read_topic_ids, services.admin, services.metadata, missing)
