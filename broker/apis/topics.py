"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37): the admin path,
then the wait for the controller, as Kafka's ZooKeeper-mode brokers served them.

Each is answered the way Kafka's ``ZkAdminManager`` answered it: the admin nodes written
through :class:`coordinator.admin.Admin` on the broker's session (the topic node, the
deletion request, the grown assignment), then the request waits until this broker's metadata
cache shows the controller's work (every partition of a new topic or of a grown one with a
leader; a deleted topic gone from the cache, which happens as soon as the controller starts
deleting it), at most the request's timeout: what is not done by then is REQUEST_TIMED_OUT
(and with a timeout of 0 or less, every topic that went through is REQUEST_TIMED_OUT at once,
as in Kafka). ``validate_only`` checks everything and writes nothing.

Kafka's ZooKeeper-mode brokers refused these requests with NOT_CONTROLLER unless they were the
controller (clients send them to the controller). Here any broker serves them: the admin nodes
are what the controller reads, whoever writes them.

Errors, per topic, in Kafka's order. CreateTopics: a name given twice, or
``__cluster_metadata``, is INVALID_REQUEST; an existing topic (or one marked for deletion)
TOPIC_ALREADY_EXISTS; a config without a value INVALID_CONFIG; counts and an assignment both
given INVALID_REQUEST; -1 takes ``num.partitions`` or ``default.replication.factor``; a count
below 1 INVALID_PARTITIONS; a replication factor below 1 or above the brokers registered
INVALID_REPLICATION_FACTOR; a bad name or one colliding with an existing topic's ('.' and '_'
are one character in metric names) INVALID_TOPIC_EXCEPTION; an assignment whose partitions
have different replica counts, a broker twice, no replicas, partitions not numbered from 0, or
(stricter than Kafka, which does not look) a broker that is not registered,
INVALID_REPLICA_ASSIGNMENT; more partitions than one topic may have here, or an assignment too
large for one coordinator node, POLICY_VIOLATION (partctl's limit, which Kafka's ZooKeeper mode
met as a failed write), and so is an assignment that would take a broker past its share of the
open-file limit (:mod:`broker.open_files`; Kafka has no such check); a config Kafka's LogConfig refuses INVALID_CONFIG (the topic config
library's rules; from version 5 a created topic's answer lists its configs). DeleteTopics:
``delete.topic.enable=false`` answers TOPIC_DELETION_DISABLED (INVALID_REQUEST before version
3); a topic the metadata cache does not know UNKNOWN_TOPIC_OR_PARTITION, an id it cannot
resolve UNKNOWN_TOPIC_ID, a name and an id together INVALID_REQUEST. CreatePartitions: a topic
twice INVALID_REQUEST, being deleted INVALID_TOPIC_EXCEPTION, being reassigned
REASSIGNMENT_IN_PROGRESS, unknown UNKNOWN_TOPIC_OR_PARTITION, a count not above the current one
INVALID_PARTITIONS, an assignment with unknown brokers, another number of partitions than
added, no replicas, a broker twice or another replica count than partition 0's
INVALID_REPLICA_ASSIGNMENT, one past a broker's share of the open-file limit POLICY_VIOLATION
(without an assignment, the new partitions are placed here as the admin path places them, so
the check sees where they go).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking, milliseconds, wait_for
from broker.apis.base import Api, Reply, RequestContext
from broker.apis.topic_ids import ZERO, ensure_topic_ids, uuid_of
from broker.metadata_cache import MetadataSnapshot
from broker.open_files import Budget
from broker.security.acls import Operation, ResourceType
from broker.wire import response_module
from coordinator.admin import Admin, InvalidRequest, colliding_topics
from coordinator.assignment import (
    MAX_PARTITIONS,
    IncompleteRackInfo,
    InvalidPartitions,
    InvalidReplicationFactor,
    assign_replicas,
    start_index_for_added_partitions,
)
from coordinator.configdef import InvalidConfig
from coordinator.errors import CoordinatorError
from coordinator.layout import validate_topic
from coordinator.metadata import AssignmentTooLarge, TopicExists, UnknownTopic
from coordinator.topic_config import (
    ConfigEntry,
    describe_config,
    validate_topic_config,
)
from kafkaclient.messages import build

if TYPE_CHECKING:
    from broker.apis.messages import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )
    from broker.apis.services import TopicServices

__all__ = ["APIS", "CREATE_PARTITIONS", "CREATE_TOPICS", "DELETE_TOPICS", "Outcome"]

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
NO_COUNT = -1
FIRST_VERSION_WITH_CONFIGS = 5
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
NO_LEADER = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One topic's answer: the error (and message), and what a success created."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    partitions: tuple[int, ...] = ()
    """The partitions to wait for (with leaders)."""
    replication_factor: int = NO_COUNT
    topic_id: uuid.UUID | None = None
    configs: tuple[ConfigEntry, ...] = field(default=())
    """The new topic's configs (CreateTopics v5+ answers them)."""

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.none


def _fail(error: ErrorCode, message: str | None = None) -> Outcome:
    return Outcome(error=error, message=message)


def _leaderless(snap: MetadataSnapshot, topic: str, partitions: Sequence[int]) -> bool:
    held = snap.topics.get(topic)
    if held is None:
        return True
    return any((p not in held) or held[p].leader == NO_LEADER for p in partitions)


async def _settle(ctx: RequestContext, timeout_ms: int, validate_only: bool,
                  outcomes: dict[str, Outcome]) -> dict[str, Outcome]:
    """Wait for the leaders of every partition created (Kafka's DelayedCreatePartitions)."""
    done = {t: o for t, o in outcomes.items() if o.ok}
    if validate_only or not done:
        return outcomes
    metadata = ctx.broker.metadata

    def leaderless() -> list[str]:
        snap = metadata.snapshot
        return [t for t, o in done.items() if _leaderless(snap, t, o.partitions)]

    if timeout_ms > 0:
        await wait_for(ctx, timeout_ms, lambda: not leaderless())
        late = leaderless()
    else:
        late = list(done)
    return {t: (_fail(ErrorCode.request_timed_out) if t in late else o)
            for t, o in outcomes.items()}


# --- CreateTopics -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Wanted:
    name: str
    num_partitions: int
    replication_factor: int
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str | None]


def _create_one(admin: Admin, services: TopicServices, want: _Wanted, validate_only: bool,
                existing: set[str], deleting: set[str], racks: dict[int, str | None],
                budget: Budget) -> Outcome:
    """Kafka's ZkAdminManager.createTopics for one topic (blocking)."""
    name = want.name
    if name in services.metadata.snapshot.topics or name in existing:
        return _fail(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    unset = [k for k, v in want.configs.items() if v is None]
    if unset:
        return _fail(ErrorCode.invalid_config,
                     f"Null value not supported for topic configs: {','.join(unset)}")
    if (want.num_partitions != NO_COUNT or want.replication_factor != NO_COUNT) \
            and want.assignment:
        return _fail(ErrorCode.invalid_request,
                     "Both numPartitions or replicationFactor and replicasAssignments were set. "
                     "Both cannot be used at the same time.")
    config = services.config
    count = config.num_partitions if want.num_partitions == NO_COUNT else want.num_partitions
    rf = (config.default_replication_factor if want.replication_factor == NO_COUNT
          else want.replication_factor)
    if want.assignment:
        assignment = want.assignment
    else:
        if count > MAX_PARTITIONS:
            return _fail(ErrorCode.policy_violation,
                         f"a topic has at most {MAX_PARTITIONS:,} partitions here, asked for "
                         f"{count:,}")
        try:
            assignment = {p: tuple(r) for p, r in assign_replicas(racks, count, rf).items()}
        except InvalidPartitions:
            return _fail(ErrorCode.invalid_partitions,
                         "Number of partitions must be larger than 0.")
        except InvalidReplicationFactor:
            message = ("Replication factor must be larger than 0." if rf < 1 else
                       f"Replication factor: {rf} larger than available brokers: "
                       f"{len(racks)}.")
            return _fail(ErrorCode.invalid_replication_factor, message)
        except IncompleteRackInfo as exc:  # Kafka's AdminOperationException: no API error
            return _fail(ErrorCode.unknown_server_error, str(exc))
    problem = _check_create(name, assignment, existing, deleting, set(racks))
    if problem is not None:
        return problem
    overrides = {k: v for k, v in want.configs.items() if v is not None}
    broker_config = config.applied_properties()
    try:
        validate_topic_config(overrides, broker_config)
    except InvalidConfig as exc:
        return _fail(ErrorCode.invalid_config, str(exc))
    too_many = budget.admit(assignment)
    if too_many is not None:
        return _fail(ErrorCode.policy_violation, too_many)
    replication = len(next(iter(assignment.values())))
    described = tuple(describe_config(overrides, broker_config))
    if validate_only:
        return Outcome(partitions=tuple(sorted(assignment)), replication_factor=replication,
                       configs=described)
    try:
        created = admin.create_topic(name, assignment=assignment, config=overrides,
                                     broker_config=broker_config)
    except TopicExists:
        return _fail(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    except AssignmentTooLarge as exc:
        return _fail(ErrorCode.policy_violation, str(exc))
    except InvalidConfig as exc:
        return _fail(ErrorCode.invalid_config, str(exc))
    except InvalidRequest as exc:
        return _fail(ErrorCode.invalid_request, str(exc))
    existing.add(name)
    return Outcome(partitions=tuple(sorted(created.partitions)), replication_factor=replication,
                   topic_id=uuid_of(created.topic_id), configs=described)


def _check_create(name: str, assignment: Mapping[int, Sequence[int]], existing: set[str],
                  deleting: set[str], registered: set[int]) -> Outcome | None:
    """Kafka's AdminZkClient.validateTopicCreate, and partctl's own limits (pure)."""
    try:
        validate_topic(name)
    except ValueError as exc:
        return _fail(ErrorCode.invalid_topic_exception, str(exc))
    if name in deleting:
        return _fail(ErrorCode.topic_already_exists, f"Topic '{name}' is marked for deletion.")
    colliding = colliding_topics(name, existing)
    if colliding:
        return _fail(ErrorCode.invalid_topic_exception,
                     f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
    if len({len(r) for r in assignment.values()}) != 1:
        return _fail(ErrorCode.invalid_replica_assignment,
                     "All partitions should have the same number of replicas")
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            return _fail(ErrorCode.invalid_replica_assignment,
                         f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            return _fail(ErrorCode.invalid_replica_assignment,
                         f"Duplicate replica assignment found: {list(replicas)} for partition "
                         f"id {p}")
    if sorted(assignment) != list(range(len(assignment))):
        return _fail(ErrorCode.invalid_replica_assignment,
                     "partitions should be a consecutive 0-based integer sequence")
    if len(assignment) > MAX_PARTITIONS:
        return _fail(ErrorCode.policy_violation,
                     f"a topic has at most {MAX_PARTITIONS:,} partitions here, the assignment "
                     f"has {len(assignment):,}")
    unknown = sorted({b for r in assignment.values() for b in r} - registered)
    if unknown:
        return _fail(ErrorCode.invalid_replica_assignment,
                     f"Unknown broker(s) in replica assignment: "
                     f"{', '.join(map(str, unknown))}.")
    return None


def _create_all(services: TopicServices, wanted: list[_Wanted], validate_only: bool
                ) -> dict[str, Outcome]:
    admin = services.admin
    assert admin is not None
    md = admin.metadata
    try:
        existing = set(md.topics())
        deleting = set(md.topics_to_delete())
        racks = {b: r.info.rack for b, r in md.brokers().items()}
    except CoordinatorError as exc:
        return {w.name: _fail(ErrorCode.unknown_server_error, str(exc)) for w in wanted}
    out = {}
    budget = Budget.now(services.broker_id, services.metadata.snapshot)
    for want in wanted:
        try:
            out[want.name] = _create_one(admin, services, want, validate_only, existing,
                                         deleting, racks, budget)
        except CoordinatorError as exc:
            out[want.name] = _fail(ErrorCode.unknown_server_error, str(exc))
    return out


def handle_create_topics(ctx: RequestContext[TopicServices],
                         request: CreateTopicsRequest) -> Reply[CreateTopicsResponse]:
    return _create_topics(ctx, request)


async def _create_topics(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    names = Counter(t.name for t in request.topics)
    outcomes: dict[str, Outcome] = {}
    wanted: list[_Wanted] = []
    on_cluster = ctx.authorized(Operation.CREATE, ResourceType.CLUSTER)
    for topic in request.topics:
        if names[topic.name] > 1:
            outcomes[topic.name] = _fail(ErrorCode.invalid_request,
                                         "Found multiple entries for this topic.")
        elif not on_cluster and not ctx.authorized(Operation.CREATE, ResourceType.TOPIC,
                                                   topic.name):
            outcomes[topic.name] = _fail(ErrorCode.topic_authorization_failed,
                                         "Authorization failed.")
        elif topic.name == CLUSTER_METADATA_TOPIC:
            outcomes[topic.name] = _fail(ErrorCode.invalid_request,
                                         f"Creation of internal topic {CLUSTER_METADATA_TOPIC} "
                                         f"is prohibited.")
        elif ctx.broker.admin is None:
            outcomes[topic.name] = _fail(ErrorCode.unknown_server_error,
                                         "this broker has no admin path")
        else:
            wanted.append(_Wanted(
                name=topic.name, num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignment={a.partition_index: tuple(a.broker_ids) for a in topic.assignments},
                configs={c.name: c.value for c in topic.configs}))
    validate_only = bool(getattr(request, "validate_only", False))
    if wanted:
        outcomes.update(await blocking(ctx, _create_all, ctx.broker, wanted, validate_only))
    outcomes = await _settle(ctx, milliseconds(request.timeout), validate_only, outcomes)
    module = response_module(CREATE_TOPICS, version)
    results = []
    described = version >= FIRST_VERSION_WITH_CONFIGS
    for topic in request.topics:
        o = outcomes[topic.name]
        configs = o.configs if described else ()
        results.append(build(
            module.CreatableTopicResult, name=topic.name, topic_id=o.topic_id,
            error_code=o.error, error_message=o.message, topic_config_error_code=0,
            num_partitions=len(o.partitions) if o.ok else NO_COUNT,
            replication_factor=o.replication_factor if o.ok else NO_COUNT,
            configs=tuple(build(module.CreatableTopicConfigs, name=e.name, value=e.value,
                                read_only=e.read_only, config_source=e.source.value,
                                is_sensitive=e.sensitive) for e in configs)))
    return build(module.CreateTopicsResponse, throttle_time=timedelta(0), topics=tuple(results))


# --- DeleteTopics -----------------------------------------------------------------------------


def _delete_all(admin: Admin, names: list[str]) -> dict[str, Outcome]:
    out = {}
    for name in names:
        try:
            admin.delete_topic(name)
            out[name] = Outcome()
        except UnknownTopic:
            out[name] = _fail(ErrorCode.unknown_topic_or_partition)
        except InvalidRequest as exc:
            out[name] = _fail(ErrorCode.invalid_topic_exception, str(exc))
        except CoordinatorError as exc:
            out[name] = _fail(ErrorCode.unknown_server_error, str(exc))
    return out


def handle_delete_topics(ctx: RequestContext[TopicServices],
                         request: DeleteTopicsRequest) -> Reply[DeleteTopicsResponse]:
    return _delete_topics(ctx, request)


async def _delete_topics(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    if version >= 6:
        given = [(t.name, t.topic_id if t.topic_id != ZERO else None) for t in request.topics]
    else:
        given = [(name, None) for name in request.topic_names]
    answers: list[tuple[str | None, uuid.UUID | None, Outcome]] = []
    if not broker.config.delete_topic_enable:
        error = ErrorCode.topic_deletion_disabled if version >= 3 else ErrorCode.invalid_request
        answers = [(n, i, _fail(error, "Topic deletion is disabled.")) for n, i in given]
        return _delete_response(ctx, answers)
    snap = broker.metadata.snapshot
    if any(i is not None for _n, i in given):
        snap = await ensure_topic_ids(broker)
    to_delete: list[str] = []
    for name, topic_id in given:
        if name is not None and topic_id is not None:
            answers.append((name, topic_id, _fail(ErrorCode.invalid_request,
                                                  "Topic name and topic ID can not both be "
                                                  "specified.")))
            continue
        if topic_id is not None:
            name = snap.topic_names.get(topic_id)
            if name is None:
                answers.append((None, topic_id, _fail(ErrorCode.unknown_topic_id)))
                continue
        if name is not None and not ctx.authorized(Operation.DELETE, ResourceType.TOPIC, name):
            answers.append((name, topic_id, _fail(ErrorCode.topic_authorization_failed)))
            continue
        if name is None or name not in snap.topics:
            answers.append((name, topic_id, _fail(ErrorCode.unknown_topic_or_partition)))
            continue
        answers.append((name, topic_id, Outcome()))
        if name not in to_delete:
            to_delete.append(name)
    if to_delete:
        if broker.admin is None:
            done = {n: _fail(ErrorCode.unknown_server_error, "this broker has no admin path")
                    for n in to_delete}
        else:
            done = await blocking(ctx, _delete_all, broker.admin, to_delete)
        timeout_ms = milliseconds(request.timeout)
        metadata = broker.metadata
        deleted = [n for n, o in done.items() if o.ok]

        def still_there() -> list[str]:
            topics = metadata.snapshot.topics
            return [n for n in deleted if n in topics]

        if deleted and timeout_ms > 0:
            await wait_for(ctx, timeout_ms, lambda: not still_there())
        late = set(still_there()) if timeout_ms > 0 else set(deleted)
        answers = [(n, i, done[n] if n in done and not done[n].ok
                    else _fail(ErrorCode.request_timed_out) if n in late else o)
                   for n, i, o in answers]
    return _delete_response(ctx, answers)


def _delete_response(ctx: RequestContext,
                     answers: list[tuple[str | None, uuid.UUID | None, Outcome]]) -> Any:
    module = response_module(DELETE_TOPICS, ctx.api_version)
    results = tuple(  # the id as the request gave it (zero when named), as Kafka answers
        build(module.DeletableTopicResult, name=name, topic_id=topic_id, error_code=o.error,
              error_message=o.message)
        for name, topic_id, o in answers)
    return build(module.DeleteTopicsResponse, throttle_time=timedelta(0), responses=results)


# --- CreatePartitions -------------------------------------------------------------------------


def _grow_one(admin: Admin, name: str, count: int,
              assignments: list[tuple[int, ...]] | None, validate_only: bool,
              registered: set[int], deleting: set[str], budget: Budget) -> Outcome:
    """Kafka's ZkAdminManager.createPartitions for one topic (blocking)."""
    if name in deleting:
        return _fail(ErrorCode.invalid_topic_exception, "The topic is queued for deletion.")
    current = admin.metadata.assignments([name]).get(name)
    if current is None:
        return _fail(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    a = current.value
    if a.adding or a.removing:
        return _fail(ErrorCode.reassignment_in_progress,
                     f"A partition reassignment is in progress for the topic '{name}'.")
    have = len(a.partitions)
    if count < have:
        return _fail(ErrorCode.invalid_partitions,
                     f"Topic currently has {have} partitions, which is higher than the "
                     f"requested {count}.")
    if count == have:
        return _fail(ErrorCode.invalid_partitions, f"Topic already has {have} partitions.")
    if count > MAX_PARTITIONS:
        return _fail(ErrorCode.policy_violation,
                     f"a topic has at most {MAX_PARTITIONS:,} partitions here, asked for "
                     f"{count:,}")
    rf = len(a.partitions[min(a.partitions)])
    explicit: dict[int, tuple[int, ...]] | None = None
    if assignments is not None:
        unknown = sorted({b for r in assignments for b in r} - registered)
        if unknown:
            return _fail(ErrorCode.invalid_replica_assignment,
                         f"Unknown broker(s) in replica assignment: "
                         f"{', '.join(map(str, unknown))}.")
        if len(assignments) != count - have:
            return _fail(ErrorCode.invalid_replica_assignment,
                         f"Increasing the number of partitions by {count - have} but "
                         f"{len(assignments)} assignments provided.")
        explicit = {have + i: r for i, r in enumerate(assignments)}
        for p, replicas in explicit.items():
            if not replicas:
                return _fail(ErrorCode.invalid_replica_assignment,
                             f"Cannot have replication factor of 0 for partition id {p}.")
            if len(set(replicas)) != len(replicas):
                return _fail(ErrorCode.invalid_replica_assignment,
                             f"Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {p}.")
        odd = {p: len(r) for p, r in explicit.items() if len(r) != rf}
        if odd:
            return _fail(ErrorCode.invalid_replica_assignment,
                         f"Inconsistent replication factor between partitions, partition 0 has "
                         f"{rf} while partitions [{', '.join(map(str, odd))}] have replication "
                         f"factors [{', '.join(map(str, odd.values()))}], respectively.")
    elif rf > len(registered):
        return _fail(ErrorCode.invalid_replication_factor,
                     f"Replication factor: {rf} larger than available brokers: "
                     f"{len(registered)}.")
    else:  # placed here as the admin path would, so the open-file check sees where
        placed = _placed(admin, a.partitions, have, count, rf)
        if isinstance(placed, Outcome):
            return placed
        explicit = placed
    too_many = budget.admit(explicit)
    if too_many is not None:
        return _fail(ErrorCode.policy_violation, too_many)
    if validate_only:
        return Outcome(partitions=tuple(range(count)), replication_factor=rf)
    try:
        grown = admin.add_partitions(name, count, assignment=explicit)
    except UnknownTopic:
        return _fail(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    except AssignmentTooLarge as exc:
        return _fail(ErrorCode.policy_violation, str(exc))
    except InvalidRequest as exc:
        return _fail(ErrorCode.invalid_request, str(exc))
    return Outcome(partitions=tuple(sorted(grown.partitions)), replication_factor=rf)


def _placed(admin: Admin, partitions: Mapping[int, Sequence[int]], have: int, count: int,
            rf: int) -> dict[int, tuple[int, ...]] | Outcome:
    """The replicas of partitions ``have`` to ``count`` - 1, placed as Kafka places added
    partitions (what :meth:`Admin.add_partitions` does without an assignment)."""
    racks = {b: r.info.rack for b, r in admin.metadata.brokers().items()}
    start = (start_index_for_added_partitions(racks, partitions[0][0]) if 0 in partitions
             else None)
    try:
        added = assign_replicas(racks, count - have, rf, start_index=start,
                                start_partition_id=have)
    except ValueError as exc:
        return _fail(ErrorCode.invalid_request, str(exc))
    return {p: tuple(r) for p, r in added.items()}


def _grow_all(services: TopicServices,
              wanted: list[tuple[str, int, list[tuple[int, ...]] | None]],
              validate_only: bool) -> dict[str, Outcome]:
    admin = services.admin
    assert admin is not None
    try:
        registered = set(admin.metadata.broker_ids())
        deleting = set(admin.metadata.topics_to_delete())
    except CoordinatorError as exc:
        return {n: _fail(ErrorCode.unknown_server_error, str(exc)) for n, _c, _a in wanted}
    out = {}
    budget = Budget.now(services.broker_id, services.metadata.snapshot)
    for name, count, assignments in wanted:
        try:
            out[name] = _grow_one(admin, name, count, assignments, validate_only, registered,
                                  deleting, budget)
        except CoordinatorError as exc:
            out[name] = _fail(ErrorCode.unknown_server_error, str(exc))
    return out


def handle_create_partitions(ctx: RequestContext[TopicServices],
                             request: CreatePartitionsRequest) -> Reply[CreatePartitionsResponse]:
    return _create_partitions(ctx, request)


async def _create_partitions(ctx: RequestContext, request: Any) -> Any:
    names = Counter(t.name for t in request.topics)
    outcomes: dict[str, Outcome] = {}
    wanted = []
    for topic in request.topics:
        if names[topic.name] > 1:
            outcomes[topic.name] = _fail(ErrorCode.invalid_request, "Duplicate topic in request.")
        elif not ctx.authorized(Operation.ALTER, ResourceType.TOPIC, topic.name):
            outcomes[topic.name] = _fail(ErrorCode.topic_authorization_failed,
                                         "Authorization failed.")
        elif ctx.broker.admin is None:
            outcomes[topic.name] = _fail(ErrorCode.unknown_server_error,
                                         "this broker has no admin path")
        else:
            assignments = (None if topic.assignments is None
                           else [tuple(a.broker_ids) for a in topic.assignments])
            wanted.append((topic.name, topic.count, assignments))
    validate_only = bool(request.validate_only)
    if wanted:
        outcomes.update(await blocking(ctx, _grow_all, ctx.broker, wanted, validate_only))
    outcomes = await _settle(ctx, milliseconds(request.timeout), validate_only, outcomes)
    module = response_module(CREATE_PARTITIONS, ctx.api_version)
    results = []
    seen = set()
    for topic in request.topics:
        if topic.name in seen:
            continue
        seen.add(topic.name)
        o = outcomes[topic.name]
        results.append(build(module.CreatePartitionsTopicResult, name=topic.name,
                             error_code=o.error, error_message=o.message))
    return build(module.CreatePartitionsResponse, throttle_time=timedelta(0),
                 results=tuple(results))


APIS = [
    Api(key=CREATE_TOPICS, name="CreateTopics", min_version=0, max_version=7,
        handle=handle_create_topics),
    Api(key=DELETE_TOPICS, name="DeleteTopics", min_version=0, max_version=6,
        handle=handle_delete_topics),
    Api(key=CREATE_PARTITIONS, name="CreatePartitions", min_version=0, max_version=3,
        handle=handle_create_partitions),
]
