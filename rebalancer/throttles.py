"""Replication throttles for a reassignment, set and removed as Kafka's reassignment tool does.

Setting (``execute --throttle RATE``): every broker a move involves (its current replicas and
its target's) gets ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` in its dynamic config (``/config/brokers/<id>``); every
topic with a moving partition gets ``leader.replication.throttled.replicas`` (the moving
partitions' current replicas, which may lead) and ``follower.replication.throttled.replicas``
(their adding replicas), as "partition:broker" lists. Removing (``verify`` once every move is
done): the rates go from every broker's config and the two replica lists from the plan's
topics. The brokers' data plane enforces them (:mod:`replication.quota`).

Talks to the coordinator only, through its admin operations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coordinator.admin import CONFIG_WRITE_ATTEMPTS, Admin
from coordinator.base import Coordinator
from coordinator.codecs import TopicPartition
from coordinator.errors import BadVersion, CoordinatorError
from coordinator.metadata import MetadataClient
from rebalancer.live_snapshot import metadata_client
from rebalancer.plan import Plan

__all__ = [
    "BROKER_RATE_KEYS",
    "TOPIC_REPLICA_KEYS",
    "ThrottleChange",
    "parse_rate",
    "remove_throttles",
    "set_throttles",
    "throttle_targets",
]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_REPLICA_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_RATE = re.compile(r"(-?\d+(?:\.\d+)?)\s*([kmg]i?b|b)?(?:/s)?", re.IGNORECASE)


def parse_rate(text: str) -> int:
    """Bytes per second from ``50MB/s``, ``1.5MiB/s``, ``200KB``, ``1000000`` (decimal units as
    Kafka's tool prints them; KiB/MiB/GiB binary). ValueError, saying what is accepted,
    for anything else, a negative rate or zero."""
    m = _RATE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a rate: {text!r} (bytes per second, e.g. 50MB/s, 1MiB/s or "
                         f"1000000)")
    rate = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if rate < 1:
        raise ValueError(f"the rate must be at least 1 byte per second, got {text!r}")
    return rate


@dataclass(frozen=True, slots=True, kw_only=True)
class ThrottleChange:
    """What was set or removed: the brokers' rate configs and the topics' replica lists."""

    brokers: tuple[int, ...] = ()
    topics: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    rate: int | None = None


def throttle_targets(current: Mapping[TopicPartition, Iterable[int]],
                     plan: Plan) -> tuple[set[int], dict[str, dict[str, str]]]:
    """The brokers a plan's moves involve, and per topic its two throttled replica lists:
    leaders = the moving partitions' current replicas, followers = the replicas they add.
    Partitions already at their target are left out. Pure."""
    brokers: set[int] = set()
    lists: dict[str, tuple[list[str], list[str]]] = {}
    for r in sorted(plan.partitions, key=lambda r: (r.topic, r.partition)):
        now = tuple(current.get(TopicPartition(r.topic, r.partition), ()))
        if not now or now == tuple(r.replicas):
            continue
        adding = [b for b in r.replicas if b not in now]
        brokers |= set(now) | set(r.replicas)
        leaders, followers = lists.setdefault(r.topic, ([], []))
        leaders += [f"{r.partition}:{b}" for b in now]
        followers += [f"{r.partition}:{b}" for b in adding]
    return brokers, {t: {LEADER_REPLICAS: ",".join(ls), FOLLOWER_REPLICAS: ",".join(fs)}
                     for t, (ls, fs) in lists.items()}


def _merge_broker(md: MetadataClient, broker: int, change: Mapping[str, str | None]) -> None:
    """Set (a value) or remove (None) keys of a broker's dynamic config, conditionally,
    re-read on a conflict; a config left empty stays as an empty node (as Kafka's)."""
    for _ in range(CONFIG_WRITE_ATTEMPTS):
        node = md.broker_config(broker)
        current = dict(node.value) if node is not None else {}
        new = {k: v for k, v in {**current, **change}.items() if v is not None}
        if new == current and (node is not None or not new):
            return
        try:
            md.set_broker_config(broker, new, node.version if node is not None else None)
            return
        except BadVersion:
            continue
    raise CoordinatorError(f"the config of broker {broker} kept changing; try again")


def set_throttles(coordinator: Coordinator | MetadataClient, plan: Plan, rate: int
                  ) -> ThrottleChange:
    """Throttle the plan's moves at ``rate`` bytes per second (see the module's docstring).
    Call before the moves start, so no byte of theirs goes unthrottled."""
    if rate < 1:
        raise ValueError(f"rate must be >= 1 byte per second, got {rate}")
    md = metadata_client(coordinator)
    names = {r.topic for r in plan.partitions}
    current = {TopicPartition(t, p): tuple(reps)
               for t, v in md.assignments(names).items() for p, reps in v.value.partitions.items()}
    brokers, topics = throttle_targets(current, plan)
    for b in sorted(brokers):
        _merge_broker(md, b, {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)})
    admin = Admin(md)
    for topic, lists in sorted(topics.items()):
        admin.alter_topic_config(topic, set={k: v for k, v in lists.items() if v},
                                 delete=[k for k, v in lists.items() if not v])
    return ThrottleChange(brokers=tuple(sorted(brokers)), topics=topics, rate=rate)


def remove_throttles(coordinator: Coordinator | MetadataClient, topics: Iterable[str]
                     ) -> ThrottleChange:
    """Remove the throttle rates from every registered broker's config (and any broker with
    a config node) and the throttled replica lists from ``topics`` (those that exist), as
    Kafka's tool does once a reassignment is complete."""
    md = metadata_client(coordinator)
    cleared: list[int] = []
    try:
        with_nodes = {int(n) for n in md.coordinator.children("/config/brokers") if n.isdigit()}
    except CoordinatorError:
        with_nodes = set()
    for b in sorted(with_nodes):
        node = md.broker_config(b)
        if node is not None and any(k in node.value for k in BROKER_RATE_KEYS):
            _merge_broker(md, b, dict.fromkeys(BROKER_RATE_KEYS))
            cleared.append(b)
    admin = Admin(md)
    names = sorted(set(topics))
    existing = md.assignments(names)
    done: dict[str, dict[str, str]] = {}
    for topic in names:
        if topic not in existing:
            continue
        config = admin.topic_config(topic)
        keys = [k for k in TOPIC_REPLICA_KEYS if k in config]
        if keys:
            admin.alter_topic_config(topic, delete=keys)
            done[topic] = {k: config[k] for k in keys}
    return ThrottleChange(brokers=tuple(cleared), topics=done)
