"""Message versions kio (0.6.2) lacks, declared here the way kio declares its own.

- ConsumerGroupHeartbeat v1 (Kafka 4.0, KIP-848 GA; what librdkafka 2.16 requires): v0 plus
  ``SubscribedTopicRegex`` (nullable string) after ``SubscribedTopicNames``; in v1 the member
  id is the client's own. Its response is v0's, field for field, so v0's classes encode it.
"""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.consumer_group_heartbeat.v0.request import TopicPartitions
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta
from kio.static.protocol import RequestPayload

__all__ = ["EXTRA_REQUESTS", "RESPONSE_AS"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(68)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)),
    )
    subscribed_topic_names: tuple[TopicName, ...] | None = field(
        metadata={"kafka_type": "string"}, default=None
    )
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"}, default=None)
    server_assignor: str | None = field(metadata={"kafka_type": "string"}, default=None)
    topic_partitions: tuple[TopicPartitions, ...] | None


EXTRA_REQUESTS: dict[tuple[int, int], type[RequestPayload]] = {(68, 1): ConsumerGroupHeartbeatRequestV1}
"""(api key, version) -> request class, for versions kio does not have."""
RESPONSE_AS: dict[tuple[int, int], tuple[int, int]] = {(68, 1): (68, 0)}
"""(api key, version) -> the kio response version with the same layout."""
