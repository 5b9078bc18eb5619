"""DescribeProducers (key 61, version 0, KIP-664): the producers a partition leader knows, as
``kafka-transactions describe-producers`` and the Admin API's describeProducers read them.

Per topic, as Kafka 3.9 answers: an illegal topic name is INVALID_TOPIC_EXCEPTION, a topic the
principal may not READ TOPIC_AUTHORIZATION_FAILED, one the metadata does not know
UNKNOWN_TOPIC_OR_PARTITION, for each of its partitions. Per partition: only its leader answers
(NOT_LEADER_OR_FOLLOWER on a follower or a broker that does not host it while the metadata
knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise), with every producer of its producer state
(:mod:`replication.producer_state`): producer id and epoch, last sequence (-1: none, e.g. only
a coordinator's writes or markers), last timestamp, coordinator epoch (-1: no marker yet) and
the first offset of its open transaction (-1: none).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.fetch import leader_partition
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from coordinator.layout import validate_topic
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import DescribeProducersRequest, DescribeProducersResponse
    from broker.apis.services import ProduceServices

__all__ = ["APIS", "API_KEY"]

API_KEY = 61


def handle(ctx: RequestContext[ProduceServices],
           request: DescribeProducersRequest) -> Reply[DescribeProducersResponse]:
    module = response_module(API_KEY, ctx.api_version)
    snap = ctx.broker.metadata.snapshot
    topics = []
    for topic in request.topics:
        error: ErrorCode | None = None
        try:
            validate_topic(topic.name)
        except ValueError:
            error = ErrorCode.invalid_topic_exception
        if error is None and not ctx.authorized(Operation.READ, ResourceType.TOPIC, topic.name):
            error = ErrorCode.topic_authorization_failed
        if error is None and topic.name not in snap.topics:
            error = ErrorCode.unknown_topic_or_partition
        partitions = [_partition(ctx, module, TopicPartition(topic.name, index), error)
                      for index in topic.partition_indexes]
        topics.append(build(module.TopicResponse, name=topic.name,
                            partitions=tuple(partitions)))
    return build(module.DescribeProducersResponse, throttle_time=timedelta(0),
                 topics=tuple(topics))


def _partition(ctx: RequestContext, module: Any, tp: TopicPartition,
               error: ErrorCode | None) -> Any:
    def refused(code: ErrorCode) -> Any:
        return build(module.PartitionResponse, partition_index=tp.partition, error_code=code,
                     error_message=None, active_producers=())

    if error is not None:
        return refused(error)
    partition, code = leader_partition(ctx, tp, -1)
    if partition is None or code is not ErrorCode.none:
        return refused(code)
    producers = tuple(
        build(module.ProducerState, producer_id=pid, producer_epoch=entry.epoch,
              last_sequence=entry.last_seq, last_timestamp=entry.last_timestamp,
              coordinator_epoch=entry.coordinator_epoch,
              current_txn_start_offset=entry.current_txn_first_offset)
        for pid, entry in sorted(partition.log.producer_entries().items()))
    return build(module.PartitionResponse, partition_index=tp.partition,
                 error_code=ErrorCode.none, error_message=None, active_producers=producers)


APIS = [Api(key=API_KEY, name="DescribeProducers", min_version=0, max_version=0,
            handle=handle)]
