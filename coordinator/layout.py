"""Apache Kafka's ZooKeeper metadata layout: the paths, exactly as Kafka's ZooKeeper mode names
them. On etcd the same keys sit under the URL's prefix."""

from __future__ import annotations

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"

# Created once (persistent, empty) so that watches and creates below them have a parent.
PERSISTENT_PATHS = (
    BROKER_IDS,
    TOPICS,
    BROKER_SEQID,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    CLUSTER,
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partitions(name: str) -> str:
    return f"{TOPICS}/{name}/partitions"


def partition(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}"


def partition_state(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}/state"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def isr_change(name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{name}"


ISR_CHANGE_SEQUENTIAL = f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"
"""Create sequential under this to get isr_change_<10 digits>."""

LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_LENGTH = 249


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
