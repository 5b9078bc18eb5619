"""The cluster as an operator looks at it, read once from the coordinator: the view model that
``partctl cluster status`` draws on a terminal and ``partctl ui`` serves as HTML.

One :func:`read_cluster` call makes a handful of bulk reads through the metadata client
(brokers, controller and epoch, assignments, partition states, topic configs, the pending
reassignment, the topics being deleted) and :func:`build_view` turns them into a frozen
:class:`ClusterView`, purely. What counts as what follows Kafka's metrics:

- *offline*: a partition without a leader, or whose leader is not a registered broker
  (OfflinePartitionsCount);
- *under-replicated*: fewer replicas in the ISR than assigned (UnderReplicatedPartitions);
- *under min ISR*: an ISR smaller than the topic's ``min.insync.replicas`` (its override, else
  the cluster-wide dynamic default, else Kafka's default 1) (UnderMinIsrPartitionCount);
- *leader imbalance*: partitions led by another broker than their preferred replica, the first
  of the assignment (PreferredReplicaImbalanceCount), with the per-broker ratios of
  ``elections.leader_imbalance``.

A reassignment in progress is a partition with moves recorded in its assignment (adding or
removing replicas: the controller started it) or a pending entry of
``/admin/reassign_partitions``; its progress is how many of its target replicas are in the ISR.

Bytes per broker are known only when the caller passes partition sizes (the ``--sizes`` file of
``cluster snapshot``): the coordinator does not hold them.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

from coordinator import layout
from coordinator.admin import controller_status
from coordinator.base import Coordinator
from coordinator.codecs import TopicAssignment, TopicPartition, decode_partition_state
from coordinator.metadata import MetadataClient
from coordinator.skipped import readable_assignments
from elections import leader_imbalance
from rebalancer.live_snapshot import metadata_client, target_replicas

__all__ = [
    "DEFAULT_MIN_ISR",
    "BrokerView",
    "ClusterView",
    "PartitionView",
    "ReassignmentView",
    "TopicView",
    "build_view",
    "read_cluster",
]

DEFAULT_MIN_ISR = 1
"""Kafka's default ``min.insync.replicas``."""
MIN_ISR = "min.insync.replicas"
CLUSTER_DEFAULT = "<default>"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerView:
    id: int
    rack: str | None
    live: bool
    """Registered (``/brokers/ids/<id>``); a broker that holds replicas but is not is offline."""
    host: str | None
    port: int | None
    leaders: int
    replicas: int
    preferred: int
    """Partitions whose preferred replica (the first of the assignment) is this broker."""
    not_led: int
    """Of those, how many another broker (or none) leads."""
    bytes: int | None
    """Sum of the sizes of the replicas it holds; None when sizes are unknown."""


class PartitionView(NamedTuple):
    """One partition as the pages show it. A named tuple rather than a dataclass: a view holds
    one per partition, a hundred thousand of them, and building a tuple runs in C."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int | None
    """-1: no leader; None: no state yet (the controller has not created it)."""
    isr: tuple[int, ...]
    min_isr: int
    offline: bool
    under_replicated: bool
    under_min_isr: bool
    preferred_not_leader: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    """The replicas now (with the ones being added)."""
    target: tuple[int, ...]
    isr: tuple[int, ...]
    in_isr: int
    """How many of ``target`` are in the ISR."""
    started: bool
    """The controller recorded the moves in the assignment; False: still pending."""

    @property
    def done(self) -> float:
        return self.in_isr / len(self.target) if self.target else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicView:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    under_min_isr: int
    deleting: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    brokers: tuple[BrokerView, ...]
    controller: int | None
    controller_epoch: int | None
    topics: tuple[TopicView, ...]
    partitions: tuple[PartitionView, ...]
    """Every partition, by topic and number."""
    reassignments: tuple[ReassignmentView, ...]
    offline: int
    under_replicated: int
    under_min_isr: int
    leader_imbalance: int
    imbalanced_brokers: tuple[int, ...]
    taken_at: _dt.datetime

    @property
    def live_brokers(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.brokers if b.live)

    @property
    def troubled(self) -> tuple[PartitionView, ...]:
        """Partitions offline, under-replicated or under their min ISR."""
        return tuple(p for p in self.partitions
                     if p.offline or p.under_replicated or p.under_min_isr)


def read_cluster(coordinator: Coordinator | MetadataClient, *,
                 sizes: Mapping[tuple[str, int], int] | None = None) -> ClusterView:
    """The cluster now, in bulk reads (see the module's docstring)."""
    md = metadata_client(coordinator)
    registered = md.brokers()
    controller = controller_status(md)
    assignments = {t: v.value for t, v in readable_assignments(md).items()}
    tps = [TopicPartition(t, p) for t in sorted(assignments) for p in sorted(
        assignments[t].partitions)]
    leaders = _leaders_and_isrs(md, tps)
    configs = md.all_topic_configs()
    defaults = md.broker_config(CLUSTER_DEFAULT)
    pending = md.reassignment()
    return build_view(
        brokers={b: (r.info.rack, r.info.host, r.info.port) for b, r in registered.items()},
        controller=controller.broker_id, controller_epoch=controller.epoch,
        assignments=assignments, states=leaders,
        min_isr={t: c[MIN_ISR] for t, c in configs.items() if MIN_ISR in c},
        default_min_isr=(defaults.value.get(MIN_ISR) if defaults is not None else None),
        pending=dict(pending.value) if pending is not None else {},
        deleting=frozenset(md.topics_to_delete()), sizes=sizes)


def _leader_and_isr(leader: int, leader_epoch: int, isr: tuple[int, ...],
                    controller_epoch: int, version: int) -> tuple[int, tuple[int, ...]]:
    return leader, isr


def _leaders_and_isrs(md: MetadataClient, tps: list[TopicPartition]
                      ) -> dict[TopicPartition, tuple[int, tuple[int, ...]]]:
    """Leader and ISR of each partition that has a state node, in one bulk read, through the
    controller's decoder of state nodes (``MetadataClient.partition_states`` builds a node
    object per partition, too many for a hundred thousand)."""
    items = md.retry(md.coordinator.get_many,
                     [layout.partition_state(tp.topic, tp.partition) for tp in tps])
    return {tp: decode_partition_state(tp, item[0], item[1].version, _leader_and_isr)
            for tp, item in zip(tps, items, strict=True) if item is not None}


def _int(text: str | None, fallback: int) -> int:
    try:
        return int(text) if text is not None else fallback
    except ValueError:
        return fallback


def build_view(
    *,
    brokers: Mapping[int, tuple[str | None, str | None, int | None]],
    controller: int | None,
    controller_epoch: int | None,
    assignments: Mapping[str, TopicAssignment],
    states: Mapping[TopicPartition, tuple[int, Sequence[int]]],
    min_isr: Mapping[str, str] | None = None,
    default_min_isr: str | None = None,
    pending: Mapping[TopicPartition, Sequence[int]] | None = None,
    deleting: frozenset[str] = frozenset(),
    sizes: Mapping[tuple[str, int], int] | None = None,
    now: _dt.datetime | None = None,
) -> ClusterView:
    """The view from what was read, purely: ``brokers`` the registered ones (id -> rack, host,
    port), ``states`` each partition's (leader, ISR), ``min_isr`` the topics'
    ``min.insync.replicas`` overrides, ``pending`` the entries of ``/admin/reassign_partitions``."""
    live = frozenset(brokers)
    min_isr = min_isr or {}
    pending = pending or {}
    fallback = _int(default_min_isr, DEFAULT_MIN_ISR)
    parts: list[PartitionView] = []
    topics: list[TopicView] = []
    moving: list[ReassignmentView] = []
    append = parts.append
    for name in sorted(assignments):
        a = assignments[name]
        topic_min = _int(min_isr.get(name), fallback)
        adding, removing = a.adding, a.removing
        first = len(parts)
        for p in sorted(a.partitions):
            replicas = a.partitions[p]
            key = (name, p)  # equal to, and hashed as, its TopicPartition
            state = states.get(key)  # type: ignore[call-overload]
            if state is None:
                append(PartitionView(name, p, replicas, None, (), topic_min, False, False,
                                     False, False))
            else:
                leader, isr = state
                append(PartitionView(  # positional, in the fields' order
                    name, p, replicas, leader, isr, topic_min, leader not in live,
                    len(isr) < len(replicas), len(isr) < topic_min,
                    bool(replicas) and leader != replicas[0]))
            if (adding and p in adding) or (removing and p in removing) or key in pending:
                started = bool(adding.get(p) or removing.get(p))
                view = parts[-1]
                moves = pending.get(key)  # type: ignore[call-overload]
                target = tuple(moves or target_replicas(a, p))
                moving.append(ReassignmentView(
                    topic=name, partition=p, replicas=replicas, target=target, isr=view.isr,
                    in_isr=sum(1 for r in target if r in view.isr), started=started))
        mine = parts[first:]
        topics.append(TopicView(
            name=name, partitions=len(mine),
            replication_factor=max((len(r) for r in a.partitions.values()), default=0),
            under_replicated=sum(v.under_replicated for v in mine),
            offline=sum(v.offline for v in mine),
            under_min_isr=sum(v.under_min_isr for v in mine), deleting=name in deleting))
    holds = Counter(chain.from_iterable(v.replicas for v in parts))
    leads = Counter(v.leader for v in parts if v.leader is not None and v.leader >= 0)
    held_bytes: Counter[int] = Counter()
    if sizes is not None:
        for v in parts:
            size = sizes.get((v.topic, v.partition), 0)
            for r in v.replicas:
                held_bytes[r] += size
    imbalance = leader_imbalance(  # by (topic, partition): a slice, cheaper than its named tuple
        {v[:2]: (v.replicas, v.leader, v.isr) for v in parts}, live,
        deleting={v[:2] for v in parts if v.topic in deleting},
        reassigning={(m.topic, m.partition) for m in moving})
    views = []
    for b in sorted(live | holds.keys()):
        rack, host, port = brokers.get(b, (None, None, None))
        ratio = imbalance.brokers.get(b)
        views.append(BrokerView(
            id=b, rack=rack, live=b in live, host=host, port=port, leaders=leads.get(b, 0),
            replicas=holds.get(b, 0), preferred=ratio.preferred if ratio else 0,
            not_led=ratio.not_led if ratio else 0,
            bytes=held_bytes.get(b, 0) if sizes is not None else None))
    return ClusterView(
        brokers=tuple(views), controller=controller, controller_epoch=controller_epoch,
        topics=tuple(topics), partitions=tuple(parts), reassignments=tuple(moving),
        offline=sum(t.offline for t in topics),
        under_replicated=sum(t.under_replicated for t in topics),
        under_min_isr=sum(t.under_min_isr for t in topics),
        leader_imbalance=sum(b.not_led for b in imbalance.brokers.values()),
        imbalanced_brokers=imbalance.imbalanced_brokers,
        taken_at=now or _dt.datetime.now(_dt.UTC))
