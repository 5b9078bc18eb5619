"""The offset APIs of groups: OffsetCommit (8), OffsetFetch (9), TxnOffsetCommit (28) and
OffsetDelete (47).

Each handler translates between kio's messages and the broker's
:class:`~broker.groups.GroupCoordinator` and its group metadata manager, which hold the groups
and their offsets and decide; the request-level checks Kafka's ``KafkaApis`` makes before the
coordinator sees a request are made here: the ACLs, partitions of topics the metadata cache
does not know (UNKNOWN_TOPIC_OR_PARTITION), commit metadata longer than
``offset.metadata.max.bytes`` (OFFSET_METADATA_TOO_LARGE), an empty group id
(INVALID_GROUP_ID). A broker without a group coordinator answers COORDINATOR_NOT_AVAILABLE.

TxnOffsetCommit (KIP-98, with KIP-447's member fields from version 3) is a transactional
producer committing a group's offsets inside its transaction, checked as Kafka checks it: Write
on the TransactionalId (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on
the group (GROUP_AUTHORIZATION_FAILED), Read on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions, the others go on); then the group's coordinator checks the committer and writes
the offsets as a transactional batch of the producer's id and epoch, pending until the
transaction's marker (:mod:`broker.groups.txn_offsets`). Versions 0 and 1 get
COORDINATOR_NOT_AVAILABLE where a newer client gets COORDINATOR_LOAD_IN_PROGRESS, as Kafka
answers clients older than 2.0. OffsetFetch with ``require_stable`` (v7+, KIP-447) answers a
partition with pending transactional offsets UNSTABLE_OFFSET_COMMIT, which the consumer
retries; without it the committed offset is answered.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.base import Api, Reply, RequestContext
from broker.apis.groups import _groups, _may, _ms, _then
from broker.groups.group import CommittedOffset
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.codecs import TopicPartition
from kafkaclient.messages import build
from replication.producer_entry import NO_SEQUENCE
from replication.txn_verification import NO_GUARD

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.offset_fetch.v8
    import kio.schema.offset_fetch.v9
    from typing_extensions import TypeIs

    from broker.apis.messages import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    )
    from broker.apis.services import GroupServices
    from broker.groups.coordinator import GroupCoordinator
    from broker.groups.txn_offsets import Verify

    _BatchedOffsetFetch: TypeAlias = (kio.schema.offset_fetch.v8.OffsetFetchRequest
                                      | kio.schema.offset_fetch.v9.OffsetFetchRequest)

__all__ = ["APIS"]

log = logging.getLogger(__name__)

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
TXN_OFFSET_COMMIT = 28
OFFSET_DELETE = 47

NO_OFFSET = -1
_UNSTABLE = ErrorCode.unstable_offset_commit
OFFSET_COMMIT_V9 = 9
"""A transactional commit into a consumer group is checked as OffsetCommit v9's (Kafka asks no
version of it)."""
_ZERO = timedelta(0)


def offset_commit(ctx: RequestContext[GroupServices],
                  request: OffsetCommitRequest) -> Reply[OffsetCommitResponse]:
    module = response_module(OFFSET_COMMIT, ctx.api_version)
    version = ctx.api_version
    groups = _groups(ctx)
    snap = ctx.broker.metadata.snapshot
    now = groups.manager.now_ms() if groups is not None else 0
    retention = _ms(getattr(request, "retention_time", -1)) if 2 <= version <= 4 else -1
    max_metadata = groups.config.offset_metadata_max_bytes if groups is not None else 4096
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[tuple[str, int], CommittedOffset] = {}
    order: list[tuple[str, list[int]]] = []
    readable: dict[str, bool] = {}
    # Kafka checks Read on the group first: without it every partition of the answer is
    # GROUP_AUTHORIZATION_FAILED, whatever the topics (nothing about them is told)
    group_denied = not _may(ctx, Operation.READ, request.group_id)
    for topic in request.topics:
        indexes: list[int] = []
        order.append((topic.name, indexes))
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            indexes.append(p.partition_index)
            metadata = p.committed_metadata or ""
            if group_denied:
                errors[tp] = ErrorCode.group_authorization_failed
            elif not readable.setdefault(topic.name, ctx.authorized(
                    Operation.READ, ResourceType.TOPIC, topic.name)):
                errors[tp] = ErrorCode.topic_authorization_failed
            elif not snap.contains(TopicPartition(*tp)):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode("utf-8")) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                stamp = getattr(p, "commit_timestamp", -1) if version == 1 else -1
                committed = now if stamp is None or stamp < 0 else stamp
                valid[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=metadata, commit_timestamp=committed,
                    expire_timestamp=committed + retention if retention >= 0 else -1)

    def answer(error: ErrorCode) -> Any:
        for tp in valid:
            errors[tp] = error
        return build(module.OffsetCommitResponse, throttle_time=_ZERO, topics=tuple(
            build(module.OffsetCommitResponseTopic, name=name, partitions=tuple(
                build(module.OffsetCommitResponsePartition, partition_index=i,
                      error_code=errors[(name, i)]) for i in indexes))
            for name, indexes in order))

    if group_denied:
        return answer(ErrorCode.group_authorization_failed)
    if groups is None:
        return answer(ErrorCode.coordinator_not_available)
    if not request.group_id:
        return answer(ErrorCode.invalid_group_id)
    generation = getattr(request, "generation_id_or_member_epoch", -1)
    member_id = getattr(request, "member_id", "") or ""
    instance_id = getattr(request, "group_instance_id", None)
    error, generation, member_id, instance_id = _consumer_group_member(
        groups, request.group_id, member_id, generation, instance_id, version)
    if error is not ErrorCode.none:
        return answer(error)
    future = groups.commit(
        group_id=request.group_id, generation=generation, member_id=member_id,
        group_instance_id=instance_id, offsets=valid)
    return _then(future, answer)


def _fetch_one(ctx: RequestContext, group_id: str, topics: Any | None,
               member: tuple[str, int] = ("", -1), require_stable: bool = False
               ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, CommittedOffset | None,
                                                             ErrorCode]]]]]:
    groups = _groups(ctx)
    wanted = None if topics is None else [(t.name, i) for t in topics
                                          for i in t.partition_indexes]
    checked = None
    if groups is not None and groups.manager.check_group(group_id) is ErrorCode.none:
        checked = groups.consumer.check_offsets_member(group_id, *member)
    found: dict[tuple[str, int], CommittedOffset | None]
    unstable: set[tuple[str, int]] = set()
    if groups is None:
        error, found = ErrorCode.coordinator_not_available, {}
    elif not _may(ctx, Operation.DESCRIBE, group_id):
        error, found = ErrorCode.group_authorization_failed, {}
    elif checked is not None and checked is not ErrorCode.none:
        error, found = checked, {}
    else:
        error, found = groups.manager.fetch_offsets(group_id, wanted)
        if require_stable and error is ErrorCode.none:
            unstable = groups.manager.unstable(group_id, wanted)

    def entry(t: str, i: int, error: ErrorCode) -> tuple[int, CommittedOffset | None, ErrorCode]:
        if (t, i) in unstable:  # KIP-447: an open transaction committed it; ask again later
            return i, None, ErrorCode.unstable_offset_commit
        return i, found.get((t, i)), error

    by_topic: dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]] = {}
    if wanted is None:  # every topic: those the principal may Describe
        for t, i in found:
            if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t):
                by_topic.setdefault(t, []).append(entry(t, i, ErrorCode.none))
    else:
        for t, i in wanted:
            by_topic.setdefault(t, []).append(entry(t, i, error))
    return error, list(by_topic.items())


def offset_fetch(ctx: RequestContext[GroupServices],
                 request: OffsetFetchRequest) -> Reply[OffsetFetchResponse]:
    version = ctx.api_version
    module = response_module(OFFSET_FETCH, version)

    def partitions(cls: Any, items: list) -> tuple:
        return tuple(build(cls, partition_index=i,
                           committed_offset=o.offset if o is not None else NO_OFFSET,
                           committed_leader_epoch=o.leader_epoch if o is not None else -1,
                           metadata=o.metadata if o is not None else "",
                           error_code=e if version < 2 or e is _UNSTABLE else ErrorCode.none)
                     for i, o, e in items)

    if _batched_fetch(request, version):
        answered = []
        for group in request.groups:
            error, topics = _fetch_one(ctx, group.group_id, group.topics,
                                       (getattr(group, "member_id", None) or "",
                                        getattr(group, "member_epoch", -1)),
                                       request.require_stable)
            answered.append(build(
                module.OffsetFetchResponseGroup, group_id=group.group_id, error_code=error,
                topics=() if error is not ErrorCode.none else tuple(
                    build(module.OffsetFetchResponseTopics, name=t,
                          partitions=partitions(module.OffsetFetchResponsePartitions, ps))
                    for t, ps in topics)))
        return build(module.OffsetFetchResponse, throttle_time=_ZERO, groups=tuple(answered))
    error, topics = _fetch_one(ctx, request.group_id, request.topics,
                               require_stable=getattr(request, "require_stable", False))
    if version >= 2 and error is not ErrorCode.none:
        topics = []
    return build(module.OffsetFetchResponse, throttle_time=_ZERO, error_code=error,
                 topics=tuple(build(module.OffsetFetchResponseTopic, name=t,
                                    partitions=partitions(module.OffsetFetchResponsePartition,
                                                          ps))
                              for t, ps in topics))


def txn_offset_commit(ctx: RequestContext[GroupServices],
                      request: TxnOffsetCommitRequest) -> Reply[TxnOffsetCommitResponse]:
    module = response_module(TXN_OFFSET_COMMIT, ctx.api_version)
    version = ctx.api_version
    groups = _groups(ctx)
    snap = ctx.broker.metadata.snapshot
    now = groups.manager.now_ms() if groups is not None else 0
    max_metadata = groups.config.offset_metadata_max_bytes if groups is not None else 4096
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[tuple[str, int], CommittedOffset] = {}
    order: list[tuple[str, list[int]]] = []
    # Kafka: Write on the transactional id, then Read on the group, each for the whole request
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          request.transactional_id):
        everything: ErrorCode | None = ErrorCode.transactional_id_authorization_failed
    elif not _may(ctx, Operation.READ, request.group_id):
        everything = ErrorCode.group_authorization_failed
    else:
        everything = None
    readable: dict[str, bool] = {}
    for topic in request.topics:
        indexes: list[int] = []
        order.append((topic.name, indexes))
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            indexes.append(p.partition_index)
            metadata = p.committed_metadata or ""
            if everything is not None:
                errors[tp] = everything
            elif not readable.setdefault(topic.name, ctx.authorized(
                    Operation.READ, ResourceType.TOPIC, topic.name)):
                errors[tp] = ErrorCode.topic_authorization_failed
            elif not snap.contains(TopicPartition(*tp)):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode("utf-8")) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                valid[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=metadata, commit_timestamp=now)

    def answer(error: ErrorCode) -> Any:
        if version < 2 and error is ErrorCode.coordinator_load_in_progress:
            error = ErrorCode.coordinator_not_available  # what clients before 2.0 retry
        for tp in valid:
            errors[tp] = error
        return build(module.TxnOffsetCommitResponse, throttle_time=_ZERO, topics=tuple(
            build(module.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(
                build(module.TxnOffsetCommitResponsePartition, partition_index=i,
                      error_code=errors[(name, i)]) for i in indexes))
            for name, indexes in order))

    if everything is not None or not valid:
        return answer(ErrorCode.none)
    if groups is None:
        return answer(ErrorCode.coordinator_not_available)
    if not request.group_id:
        return answer(ErrorCode.invalid_group_id)
    generation = getattr(request, "generation_id", -1)
    member_id = getattr(request, "member_id", "") or ""
    instance_id = getattr(request, "group_instance_id", None)
    error, generation, member_id, instance_id = _consumer_group_member(
        groups, request.group_id, member_id, generation, instance_id, OFFSET_COMMIT_V9)
    if error is not ErrorCode.none:
        return answer(error)
    future = groups.txn.commit(
        group_id=request.group_id, producer_id=request.producer_id,
        producer_epoch=request.producer_epoch, generation=generation, member_id=member_id,
        instance_id=instance_id, offsets=valid, verify=_verification(ctx, request))
    return _then(future, answer)


_UNVERIFIED_COMMIT = {ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress}
"""Kafka's translation of a verification error a committer may not retry as it should (the
append errors are :func:`broker.groups.metadata_manager._commit_error`'s)."""


def _verification(ctx: RequestContext[GroupServices],
                  request: TxnOffsetCommitRequest) -> Verify | None:
    """KIP-890 part 1 for a TxnOffsetCommit: the question to the transaction coordinator
    about the group's partition (None when the broker does not verify)."""
    transactions = ctx.broker.transactions
    if transactions is None or not transactions.verifier.enabled:
        return None
    verifier = transactions.verifier
    tid, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch

    async def verify(tp: TopicPartition) -> tuple[ErrorCode, int | None]:
        partition = ctx.broker.replica_manager.partition(tp)
        if partition is None:
            return ErrorCode.not_coordinator, None
        guard = partition.log.start_txn_verification(pid, NO_SEQUENCE, epoch)
        if guard == NO_GUARD:
            return ErrorCode.none, guard
        unverified = await verifier.verify(tid, pid, epoch, [(tp.topic, tp.partition)])
        error = unverified.get((tp.topic, tp.partition))
        if error is None:
            return ErrorCode.none, guard
        if error is ErrorCode.transaction_abortable and ctx.api_version < 4:
            error = ErrorCode.invalid_txn_state
        return _UNVERIFIED_COMMIT.get(error, error), None
    return verify


def offset_delete(ctx: RequestContext[GroupServices],
                  request: OffsetDeleteRequest) -> Reply[OffsetDeleteResponse]:
    module = response_module(OFFSET_DELETE, ctx.api_version)
    groups = _groups(ctx)
    snap = ctx.broker.metadata.snapshot
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    readable = {t: ctx.authorized(Operation.READ, ResourceType.TOPIC, t) for t, _p in asked}
    # Kafka: a partition of a topic the principal may not Read is refused, the others go on
    known = [tp for tp in asked if readable[tp[0]] and snap.contains(TopicPartition(*tp))]

    def answer(outcome: tuple[ErrorCode, dict]) -> Any:
        error, results = outcome
        results = {**results, **{tp: ErrorCode.topic_authorization_failed
                                 for tp in asked if not readable[tp[0]]}}
        topics: dict[str, list[Any]] = {}
        if error is ErrorCode.none:
            for tp in asked:
                e = results.get(tp, ErrorCode.unknown_topic_or_partition)
                topics.setdefault(tp[0], []).append(build(
                    module.OffsetDeleteResponsePartition, partition_index=tp[1], error_code=e))
        return build(module.OffsetDeleteResponse, error_code=error, throttle_time=_ZERO,
                     topics=tuple(build(module.OffsetDeleteResponseTopic, name=t,
                                        partitions=tuple(ps)) for t, ps in topics.items()))

    if groups is None:
        return answer((ErrorCode.coordinator_not_available, {}))
    if not _may(ctx, Operation.DELETE, request.group_id):
        return answer((ErrorCode.group_authorization_failed, {}))
    return _then(groups.manager.delete_offsets(request.group_id, known), answer)


def _batched_fetch(request: OffsetFetchRequest, version: int) -> TypeIs[_BatchedOffsetFetch]:
    return version >= 8  # groups, not group_id and topics


APIS = [
    Api(key=OFFSET_COMMIT, name="OffsetCommit", min_version=0, max_version=9,
        handle=offset_commit),
    Api(key=OFFSET_FETCH, name="OffsetFetch", min_version=0, max_version=9, handle=offset_fetch),
    Api(key=TXN_OFFSET_COMMIT, name="TxnOffsetCommit", min_version=0, max_version=4,
        handle=txn_offset_commit),
    Api(key=OFFSET_DELETE, name="OffsetDelete", min_version=0, max_version=0,
        handle=offset_delete),
]


def _consumer_group_member(groups: GroupCoordinator, group_id: str, member_id: str,
                           generation: int, instance_id: str | None, version: int
                           ) -> tuple[ErrorCode, int, str, str | None]:
    """A commit into a consumer group (KIP-848) has its member and epoch checked here (Kafka:
    one without a member only into an empty group); the offsets then go into the group's
    memberless classic shell, as an admin's: (error, generation, member, instance) to commit
    with. A classic group's commit passes unchanged."""
    if groups.manager.check_group(group_id) is ErrorCode.none:
        checked = groups.consumer.check_offsets_member(group_id, member_id, generation,
                                                       commit_version=version)
        if checked is not None:
            return checked, -1, "", None
    return ErrorCode.none, generation, member_id, instance_id
