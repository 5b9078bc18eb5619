"""The two tiers of partitions (KIP-405) as a client of the brokers sees them: what ``partctl
topics describe`` shows for a topic with ``remote.storage.enable``.

Asked of each partition's leader over Kafka's protocol, with the connections and the leader
lookup of :class:`~kafkaclient.groups.GroupAdmin`:

- the log start: ListOffsets EARLIEST (-2), remote storage included;
- the local log start: ListOffsets EARLIEST_LOCAL (-4);
- the bytes in remote storage: DescribeLogDirs at the leader, whose answer carries the remote
  tier as one more log directory, named by the broker's ``remote.log.storage.url`` (see
  :mod:`broker.apis.log_dirs`).

And, for ``partctl topics create | alter-config`` of a tiered topic, whether each live broker
sets ``remote.log.storage.system.enable`` (DescribeConfigs of the broker).

A leader that moves between the questions is asked again within the timeout; a leader that
serves no DescribeLogDirs, or reports no remote tier, gives no remote bytes (None).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.codecs import TopicPartition
from kafkaclient.connection import BrokerUnreachable
from kafkaclient.groups import EARLIEST, GroupAdmin, GroupAdminError, Node
from kafkaclient.messages import build

__all__ = ["EARLIEST_LOCAL", "TierAdmin", "TierFigures"]

EARLIEST_LOCAL = -4
DESCRIBE_CONFIGS = 32
DESCRIBE_LOG_DIRS = 35
BROKER_RESOURCE = 4
SYSTEM_ENABLE = "remote.log.storage.system.enable"


@dataclass(frozen=True, slots=True, kw_only=True)
class TierFigures:
    """One partition's two tiers as its leader sees them (None: not known)."""

    log_start: int | None
    local_log_start: int | None
    remote_bytes: int | None


class TierAdmin(GroupAdmin):
    """:class:`GroupAdmin`'s connections, asked about the tiers of partitions."""

    def __init__(self, bootstrap: list[tuple[str, int]], *, timeout: float) -> None:
        super().__init__(bootstrap, timeout=timeout, client_id="partctl-topics")

    def tiers(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, TierFigures]:
        """Log start, local log start and remote bytes of each partition, from its leader."""
        tps = sorted(set(partitions))
        if not tps:
            return {}
        starts = self.offsets(tps, EARLIEST)
        local_starts = self.offsets(tps, EARLIEST_LOCAL)
        leaders = self.partitions(tp.topic for tp in tps)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            leader = leaders.get(tp.topic, {}).get(tp.partition, -1)
            if leader >= 0 and leader in self._nodes:
                by_leader.setdefault(leader, []).append(tp)
        remote: dict[TopicPartition, int] = {}
        for leader, led in by_leader.items():
            remote.update(self.remote_bytes(self._nodes[leader], led))
        return {tp: TierFigures(log_start=starts.get(tp), local_log_start=local_starts.get(tp),
                                remote_bytes=remote.get(tp)) for tp in tps}

    def remote_bytes(self, node: Node, partitions: list[TopicPartition]
                     ) -> dict[TopicPartition, int]:
        """DescribeLogDirs at ``node``: the remote bytes of those of ``partitions`` it reports
        in its remote tier (the result whose log dir is a URL, not a local path)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(m: ModuleType, version: int) -> Any:
            return build(m.DescribeLogDirsRequest, topics=tuple(
                build(m.DescribableLogDirTopic, topic=t, partitions=tuple(ps))
                for t, ps in sorted(by_topic.items())))

        try:
            response = self._call((node.host, node.port), DESCRIBE_LOG_DIRS, 0, 4, make)
        except (BrokerUnreachable, GroupAdminError):
            return {}
        if ErrorCode(getattr(response, "error_code", 0)) is not ErrorCode.none:
            return {}
        out: dict[TopicPartition, int] = {}
        for result in response.results:
            if ErrorCode(result.error_code) is not ErrorCode.none or result.log_dir.startswith("/"):
                continue
            for topic in result.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, int(p.partition_index))] = int(
                        p.partition_size)
        return out

    def remote_storage_system_enabled(self) -> dict[int, bool]:
        """Each live broker's ``remote.log.storage.system.enable`` (DescribeConfigs of the
        broker resource; a broker that does not set it: False). GroupAdminError when a broker
        cannot be asked."""
        out: dict[int, bool] = {}
        for node in self.brokers():
            def make(m: ModuleType, version: int, node: Node = node) -> Any:
                return build(m.DescribeConfigsRequest, resources=(build(
                    m.DescribeConfigsResource, resource_type=BROKER_RESOURCE,
                    resource_name=str(node.node_id), configuration_keys=(SYSTEM_ENABLE,)),),
                    include_synonyms=False, include_documentation=False)

            try:
                response = self._call((node.host, node.port), DESCRIBE_CONFIGS, 0, 4, make)
            except BrokerUnreachable as exc:
                raise GroupAdminError(f"cannot ask broker {node.node_id} ({node}): {exc}"
                                      ) from exc
            result = response.results[0]
            error = ErrorCode(result.error_code)
            if error is not ErrorCode.none:
                raise GroupAdminError(f"broker {node.node_id} answered DescribeConfigs with "
                                      f"{error.name.upper()}")
            value = next((c.value for c in result.configs if c.name == SYSTEM_ENABLE), None)
            out[node.node_id] = (value or "false").strip().lower() == "true"
        return out
