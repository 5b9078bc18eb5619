"""Apache Kafka's ZooKeeper metadata layout: the paths, exactly as Kafka's ZooKeeper mode names
them. On etcd the same keys sit under the URL's prefix."""

from __future__ import annotations

from collections.abc import Iterable

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS_OWNER = "/admin/reassign_partitions_owner"
"""partctl's own, not Kafka's: the ephemeral node of the run that executes the moves in
``/admin/reassign_partitions`` (see ``codecs.ReassignmentOwner``). Kafka's controller decodes the
reassignment node strictly (an unknown field makes it ignore the whole request), so who owns it
is told beside it, in a node no Kafka tool reads."""
CONTROLLER_NODES = "/partctl/controllers"
"""partctl's own, not Kafka's: the ephemeral registrations of controller-only candidates
(``partctl controller start``), one per node id, with the endpoints brokers reach them on (the
JSON of a broker registration). Brokers register under /brokers/ids; a candidate without a
data plane is no broker, so Kafka's tools and the controller's broker list must not see it."""
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONSUMERS = "/consumers"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_TOPICS = "/config/topics"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
"""Kafka's ConfigType.ALL: one node per entity type under /config."""

# Created (persistent, empty) where missing, as a Kafka broker does at startup (Kafka's
# ZkData.PersistentZkPaths, in its order), and /cluster, the parent of /cluster/id.
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
    CLUSTER,
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def controller_node(node_id: int) -> str:
    return f"{CONTROLLER_NODES}/{node_id}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partitions(name: str) -> str:
    return f"{TOPICS}/{name}/partitions"


def partition(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}"


def partition_state(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}/state"


def partition_states(tps: Iterable[tuple[str, int]]) -> list[str]:
    """:func:`partition_state` of each (topic, partition), in one pass (a cold load reads a
    million)."""
    return [f"{TOPICS}/{name}/partitions/{index}/state" for name, index in tps]


def topic_config(name: str) -> str:
    """A topic's config overrides (Kafka's ConfigEntityZNode for type 'topics')."""
    return f"{CONFIG_TOPICS}/{name}"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def isr_change(name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{name}"


ISR_CHANGE_SEQUENTIAL = f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"
"""Create sequential under this to get isr_change_<10 digits>."""

CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_CHANGE_SEQUENTIAL = f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"
"""Create sequential under this to get config_change_<10 digits> (Kafka's
ConfigEntityChangeNotificationSequenceZNode)."""


def config_entity(entity_type: str, name: str) -> str:
    """A config entity's node, ``/config/<type>/<name>`` (Kafka's ConfigEntityZNode)."""
    return f"{CONFIG}/{entity_type}/{name}"

CONFIG_USERS = f"{CONFIG}/users"


def sanitize_entity(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a node name (URL-encoded, ``*`` as
    ``%2A``, space as ``%20``)."""
    from urllib.parse import quote

    return quote(name, safe="-_.~").replace("*", "%2A")


def desanitize_entity(name: str) -> str:
    from urllib.parse import unquote

    return unquote(name)


def user_config(name: str) -> str:
    """A user's config node, ``/config/users/<sanitized user>`` (SCRAM credentials)."""
    return f"{CONFIG_USERS}/{sanitize_entity(name)}"


LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_LENGTH = 249


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` breaks Kafka's topic name rules (1 to 249 of ``[a-zA-Z0-9._-]``, not ``.``
    nor ``..``), or None for a legal name. For names read from the store, which another tool
    may have written: the reason quotes the name with ``repr`` (no raw control characters)."""
    if len(name) <= MAX_TOPIC_LENGTH and name not in ("", ".", "..") and (
            LEGAL_TOPIC_CHARS.issuperset(name)):
        return None
    try:
        validate_topic(name)
    except ValueError as exc:
        return str(exc)
    return None


def validate_topic(name: str) -> str:
    """Kafka's topic name rules; returns the name or raises ValueError with the reason."""
    if not name:
        raise ValueError("topic name is empty")
    if name in (".", ".."):
        raise ValueError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    bad = sorted(set(name) - LEGAL_TOPIC_CHARS)
    if bad:
        raise ValueError(f"topic name {name!r} has illegal characters {''.join(bad)!r} "
                         "(allowed: ASCII letters, digits, '.', '_', '-')")
    return name
