"""DescribeLogDirs (key 35): the partitions this broker hosts, per log directory, with their sizes.

As Kafka's broker answers it: one result for the broker's log directory (``log.dir``, or the
first of ``log.dirs``), listing each hosted partition asked for (every one when ``topics`` is
null) with the bytes of its local segments and its offset lag (the high watermark minus the log
end offset, never below 0). A partition not hosted here is left out, not an error.

On a broker with ``remote.log.storage.system.enable``, a second result stands for the remote
tier (KIP-405): its ``log_dir`` is ``remote.log.storage.url`` (or the
``remote.log.storage.manager.class.name``), never a local path, and it lists each hosted
partition of a tiered topic with the bytes of its log in remote storage, as this replica's
lineage counts them (what a reader may be served). Kafka's brokers expose those bytes only as
a metric; this is how ``partctl topics describe`` reads them over the protocol. Its total and
usable bytes are -1 (unknown), as for a volume Kafka cannot measure.

The remote log metadata may be read from its store, so the answer is built off the event loop.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, BrokerServices, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
    from broker.apis.services import LogDirServices

__all__ = ["API_KEY", "APIS", "remote_tier_name"]

API_KEY = 35
UNKNOWN_BYTES = -1


def remote_tier_name(services: LogDirServices) -> str | None:
    """The ``log_dir`` the remote tier is reported under; None when this broker tiers
    nothing."""
    remote = services.config.remote_log
    if not remote.system_enable:
        return None
    return remote.storage_url or remote.manager_class_name or "remote"


def _wanted(request: Any, hosted: Iterable[TopicPartition]) -> list[TopicPartition]:
    if request.topics is None:
        return sorted(hosted)
    hosted = set(hosted)
    return sorted({TopicPartition(t.topic, int(p)) for t in request.topics
                   for p in t.partitions} & hosted)


def _describe(services: LogDirServices, request: Any, version: int) -> Any:
    module = response_module(API_KEY, version)
    rm = services.replica_manager
    partitions = rm.partitions()
    wanted = _wanted(request, partitions)
    local: dict[str, list[Any]] = {}
    remote: dict[str, list[Any]] = {}
    for tp in wanted:
        partition = partitions.get(tp)
        if partition is None:
            continue
        status = partition.status()
        local.setdefault(tp.topic, []).append(build(
            module.DescribeLogDirsPartition, partition_index=tp.partition,
            partition_size=partition.log.size_bytes,
            offset_lag=max(status.high_watermark - status.log_end_offset, 0),
            is_future_key=False))
        remote_size = rm.tiered.remote_log_size(tp)
        if remote_size is not None:
            remote.setdefault(tp.topic, []).append(build(
                module.DescribeLogDirsPartition, partition_index=tp.partition,
                partition_size=remote_size, offset_lag=0, is_future_key=False))

    def result(name: str, by_topic: dict[str, list[Any]], total: int, usable: int) -> Any:
        return build(module.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=name,
                     topics=tuple(build(module.DescribeLogDirsTopic, name=topic,
                                        partitions=tuple(ps))
                                  for topic, ps in sorted(by_topic.items())),
                     total_bytes=total, usable_bytes=usable)

    log_dir = rm.log_dir.resolve()
    try:
        usage = shutil.disk_usage(log_dir)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = UNKNOWN_BYTES
    results = [result(str(log_dir), local, total, usable)]
    tier = remote_tier_name(services)
    if tier is not None:
        results.append(result(tier, remote, UNKNOWN_BYTES, UNKNOWN_BYTES))
    return build(module.DescribeLogDirsResponse, throttle_time=timedelta(0),
                 error_code=ErrorCode.none, results=tuple(results))


async def handle(ctx: RequestContext[LogDirServices],
                 request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    services = ctx.broker
    assert isinstance(services, BrokerServices)
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):  # as Kafka's: no dirs
        module = response_module(API_KEY, ctx.api_version)
        return build(module.DescribeLogDirsResponse, throttle_time=timedelta(0),
                     error_code=ErrorCode.cluster_authorization_failed, results=())
    return await blocking(ctx, _describe, services, request, ctx.api_version)


APIS = [Api(key=API_KEY, name="DescribeLogDirs", min_version=0, max_version=4, handle=handle)]
