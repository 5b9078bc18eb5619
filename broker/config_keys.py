"""A broker process's static keys, declared once (:data:`BROKER_CONFIG`): Kafka's names,
types and defaults, with their validators, importance and a short doc each.

``server.properties`` is parsed by them (:mod:`broker.config`), DescribeConfigs lists them for
a broker resource (every key: set ones as STATIC_BROKER_CONFIG, the rest as DEFAULT_CONFIG) and
``docs/configuration.md`` is written from them (:mod:`broker.configdoc`). The controller's keys
are declared in :data:`statemachines.config.CONTROLLER_CONFIG` and belong to a broker too; a
controller-only process reads :data:`CONTROLLER_PROCESS_CONFIG`. The TLS and SASL keys
(``ssl.*``, ``sasl.*``, per listener) are read by :mod:`broker.security`.
"""

from __future__ import annotations

from coordinator.configdef import (
    AtLeast,
    Between,
    Check,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Effect,
    Importance,
    ListOf,
)
from replication.records import BATCH_OVERHEAD
from replication.tiered.config import FORGET_DELETED_AFTER_MS, MIN_STALE_RECORDS
from statemachines.config import CONTROLLER_CONFIG

__all__ = ["BROKER_CONFIG", "CONTROLLER_PROCESS_CONFIG", "IBP_RANGE"]

IBP_RANGE = ((2, 8), (3, 9))
"""The ``inter.broker.protocol.version`` values a partctl broker follows: from 2.8, the oldest
whose ZooKeeper-mode controller sends the LeaderAndIsr (5), UpdateMetadata (7) and StopReplica
(3) versions it serves, to 3.9, the last with ZooKeeper mode."""


def _ibp(name: str, value: object) -> str | None:
    """Kafka's ``X.Y``, ``X.Y.Z`` or ``X.Y-IVn``, within :data:`IBP_RANGE`."""
    parts = str(value).split("-", 1)[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return "not a Kafka version (such as 3.9 or 3.9-IV0)"
    (lo_major, lo_minor), (hi_major, hi_minor) = IBP_RANGE
    if not (lo_major, lo_minor) <= (major, minor) <= (hi_major, hi_minor):
        return (f"partctl follows {lo_major}.{lo_minor} to {hi_major}.{hi_minor} (it serves "
                "LeaderAndIsr 5-7, UpdateMetadata 7-8 and StopReplica 3-4; 4.0 and later have "
                "no ZooKeeper mode)")
    return None


_B, _S, _I, _L, _D, _LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                           ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)
_H, _M, _LO = Importance.HIGH, Importance.MEDIUM, Importance.LOW
_LONG_MAX = str((1 << 63) - 1)


def _k(name: str, type: ConfigType, default: str | None, importance: Importance, doc: str,
       validator: AtLeast | Between | ListOf | Check | None = None, *,
       ignored: str = "") -> ConfigKey:
    """One key; ``ignored``: accepted (Kafka has it) but not applied, and why."""
    return ConfigKey(name=name, type=type, default=default, importance=importance, doc=doc,
                     validator=validator, effect=Effect.STORED if ignored else Effect.APPLIED,
                     note=ignored)


_PROCESS = (
    _k("broker.id", _I, None, _H, "This broker's id, unique in the cluster (a controller "
       "process takes node.id as well).", AtLeast(0)),
    _k("listeners", _LS, "PLAINTEXT://:9092", _H, "The NAME://host:port addresses to listen "
       "on; an empty host binds every interface, port 0 a free port."),
    _k("advertised.listeners", _LS, None, _H, "The addresses registered for clients and "
       "other brokers, when not the listeners'."),
    _k("listener.security.protocol.map", _LS,
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", _LO,
       "Each listener name's security protocol, as NAME:PROTOCOL pairs."),
    _k("inter.broker.listener.name", _S, None, _M, "The listener brokers and the controller "
       "use to reach one another."),
    _k("security.inter.broker.protocol", _S, "PLAINTEXT", _M, "The inter-broker listener by "
       "its protocol, when inter.broker.listener.name is not given."),
    _k("zookeeper.connect", _S, None, _H, "The ZooKeeper ensemble as host:port,host:port/chroot "
       "(or give partctl.coordinator)."),
    _k("partctl.coordinator", _S, None, _H, "A coordinator URL (zookeeper://, etcd://, "
       "memory://) instead of zookeeper.connect."),
    _k("zookeeper.session.timeout.ms", _I, "18000", _H, "The coordinator session's timeout; "
       "a broker silent this long loses its registration.", AtLeast(1)),
    _k("zookeeper.connection.timeout.ms", _I, None, _H, "How long to wait for the first "
       "connection to the coordinator; unset: the session timeout.", AtLeast(1)),
    _k("zookeeper.set.acl", _B, "false", _H, "Write the metadata nodes with ACLs that only "
       "this identity may change (ZooKeeper digest)."),
    _k("zookeeper.digest.user", _S, None, _M, "The ZooKeeper digest user of this process."),
    _k("zookeeper.digest.password.file", _S, None, _M, "A file holding the ZooKeeper digest "
       "password."),
    _k("etcd.user", _S, None, _M, "The etcd user of this process."),
    _k("etcd.password.file", _S, None, _M, "A file holding the etcd password."),
    _k("etcd.ssl.cafile", _S, None, _M, "The CA certificates that sign etcd's (TLS to etcd)."),
    _k("etcd.ssl.certfile", _S, None, _M, "This process's client certificate for etcd."),
    _k("etcd.ssl.keyfile", _S, None, _M, "The key of etcd.ssl.certfile."),
    _k("etcd.max.txn.ops", _I, None, _LO, "The etcd servers' --max-txn-ops when not etcd's "
       "default 128: the operations one transaction of this process may hold. Raised (with "
       "the servers') it writes mass changes in fewer, larger transactions.", AtLeast(3)),
    _k("etcd.max.request.bytes", _I, None, _LO, "The etcd servers' --max-request-bytes when "
       "not etcd's default 1.5 MiB: the largest transaction this process sends.",
       AtLeast(256 << 10)),
    _k("socket.request.max.bytes", _I, str(100 * 1024 * 1024), _H, "The largest request "
       "read; a larger one closes the connection.", AtLeast(1)),
    _k("connections.max.idle.ms", _L, "600000", _M, "A connection idle this long is closed; "
       "-1: never.", AtLeast(-1)),
    _k("partctl.state.change.log.file", _S, None, _LO, "A file the state-change log is "
       "appended to instead of the process's log."),
    _k("metrics.listener", _S, None, _LO, "http://host:port to serve Prometheus metrics on "
       "(port 0: a free one); unset: no metrics."),
)

_DATA = (
    _k("inter.broker.protocol.version", _S, "3.9-IV0", _M, "The Kafka version whose "
       "controller-to-broker requests the cluster speaks.", Check(_ibp, "2.8 to 3.9")),
    _k("log.dirs", _LS, None, _H, "The log directory (exactly one)."),
    _k("log.dir", _S, "/tmp/kafka-logs", _H, "The log directory, when log.dirs is not given."),
    _k("broker.rack", _S, None, _M, "This broker's rack, for rack-aware replica placement."),
    _k("num.partitions", _I, "1", _M, "Partitions of an automatically created topic.",
       AtLeast(1)),
    _k("default.replication.factor", _I, "1", _M, "Replicas of an automatically created "
       "topic.", AtLeast(1)),
    _k("min.insync.replicas", _I, "1", _H, "How many in-sync replicas an acks=all write "
       "needs, for topics that do not set it.", AtLeast(1)),
    _k("auto.create.topics.enable", _B, "true", _H, "Create a topic when a client asks for "
       "one that does not exist."),
    _k("replica.lag.time.max.ms", _L, "30000", _H, "A follower that has not caught up for "
       "this long leaves the ISR.", AtLeast(1)),
    _k("log.segment.bytes", _I, str(1 << 30), _H, "The size at which a segment is rolled.",
       AtLeast(BATCH_OVERHEAD)),
    _k("log.retention.hours", _I, "168", _H, "How long segments are kept, in hours; -1: no "
       "limit.", AtLeast(-1)),
    _k("log.retention.minutes", _I, None, _H, "As log.retention.hours, in minutes (wins over "
       "it).", AtLeast(-1)),
    _k("log.retention.ms", _L, None, _H, "As log.retention.hours, in milliseconds (wins over "
       "both).", AtLeast(-1)),
    _k("log.retention.bytes", _L, "-1", _H, "How many bytes a partition keeps; -1: no limit.",
       AtLeast(-1)),
    _k("log.flush.interval.ms", _L, None, _H, "How often logs are fsynced; unset: left to "
       "the operating system.", AtLeast(1)),
    _k("log.flush.interval.messages", _L, _LONG_MAX, _H, "Fsync a log after this many "
       "records.", AtLeast(1),
       ignored="logs are flushed by time (log.flush.interval.ms) only"),
    _k("log.cleanup.policy", _LS, "delete", _M, "The cleanup.policy of topics that do not set "
       "one: delete, compact or both.", ListOf(("compact", "delete"))),
    _k("log.cleaner.enable", _B, "true", _M, "Run the log cleaner, which compacts compacted "
       "topics."),
    _k("log.cleaner.min.cleanable.ratio", _D, "0.5", _M, "The min.cleanable.dirty.ratio of "
       "topics that do not set one.", Between(0, 1)),
    _k("log.cleaner.threads", _I, "1", _M, "Threads of the log cleaner.", AtLeast(0)),
    _k("log.cleaner.dedupe.buffer.size", _L, str(128 << 20), _M, "Memory the cleaner uses "
       "to map keys to their last offsets.", AtLeast(24)),
    _k("log.cleaner.backoff.ms", _L, "15000", _M, "How long the cleaner sleeps when no log "
       "needs cleaning.", AtLeast(0)),
    _k("log.cleaner.delete.retention.ms", _L, "86400000", _M, "The delete.retention.ms of "
       "topics that do not set one.", AtLeast(0)),
    _k("log.cleaner.min.compaction.lag.ms", _L, "0", _M, "The min.compaction.lag.ms of "
       "topics that do not set one.", AtLeast(0)),
    _k("log.cleaner.max.compaction.lag.ms", _L, _LONG_MAX, _M, "The max.compaction.lag.ms "
       "of topics that do not set one.", AtLeast(1)),
    _k("controlled.shutdown.enable", _B, "true", _M, "Hand leaderships over through the "
       "controller before stopping."),
    _k("controlled.shutdown.max.retries", _I, "3", _M, "Attempts at a controlled shutdown "
       "before stopping anyway.", AtLeast(0)),
    _k("controlled.shutdown.retry.backoff.ms", _L, "5000", _M, "The wait between controlled "
       "shutdown attempts.", AtLeast(0)),
    _k("message.max.bytes", _I, "1048588", _H, "The largest record batch taken, for topics "
       "that do not set max.message.bytes.", AtLeast(0)),
    _k("replica.fetch.max.bytes", _I, "1048576", _M, "Bytes a follower asks for per "
       "partition in one fetch.", AtLeast(1)),
    _k("replica.fetch.wait.max.ms", _I, "500", _M, "How long a follower's fetch waits for "
       "data; below replica.lag.time.max.ms.", AtLeast(0)),
    _k("replica.fetch.backoff.ms", _I, "1000", _M, "How long a follower waits after a failed "
       "fetch.", AtLeast(0)),
    _k("max.incremental.fetch.session.cache.slots", _I, "1000", _M, "Incremental fetch "
       "sessions (KIP-227) the broker keeps for followers and consumers; 0: none.",
       AtLeast(0)),
    _k("num.network.threads", _I, "3", _H, "Threads that serve the network.", AtLeast(1),
       ignored="one event loop serves every connection"),
    _k("num.io.threads", _I, "8", _H, "Threads that handle requests.", AtLeast(1),
       ignored="requests are handled on the event loop"),
    _k("offsets.topic.num.partitions", _I, "50", _H, "Partitions of __consumer_offsets.",
       AtLeast(1)),
    _k("offsets.topic.replication.factor", _I, "3", _H, "Replicas of __consumer_offsets "
       "(fewer while fewer brokers are alive).", AtLeast(1)),
    _k("offsets.topic.segment.bytes", _I, str(100 * 1024 * 1024), _H, "The segment size of "
       "__consumer_offsets.", AtLeast(1)),
    _k("offsets.retention.minutes", _I, "10080", _H, "How long a group's committed offsets "
       "outlive its last member.", AtLeast(1)),
    _k("offsets.retention.check.interval.ms", _L, "600000", _H, "How often expired offsets "
       "are looked for.", AtLeast(1)),
    _k("offsets.commit.timeout.ms", _I, "5000", _H, "How long an offset commit waits for its "
       "replicas.", AtLeast(1)),
    _k("offset.metadata.max.bytes", _I, "4096", _H, "The largest metadata string of a "
       "committed offset.", AtLeast(0)),
    _k("transaction.state.log.num.partitions", _I, "50", _H, "Partitions of "
       "__transaction_state.", AtLeast(1)),
    _k("transaction.state.log.replication.factor", _I, "3", _H, "Replicas of "
       "__transaction_state (fewer while fewer brokers are alive).", AtLeast(1)),
    _k("transaction.state.log.min.isr", _I, "2", _H, "The min.insync.replicas of "
       "__transaction_state.", AtLeast(1)),
    _k("transaction.state.log.segment.bytes", _I, str(100 * 1024 * 1024), _H, "The segment "
       "size of __transaction_state.", AtLeast(1)),
    _k("transaction.max.timeout.ms", _I, "900000", _H, "The longest transaction.timeout.ms a "
       "producer may ask for.", AtLeast(1)),
    _k("transactional.id.expiration.ms", _I, "604800000", _H, "How long a transactional id "
       "with no transaction is kept.", AtLeast(1)),
    _k("transaction.partition.verification.enable", _B, "true", _LO, "Before a "
       "transaction's first batch reaches a partition, its leader asks the transaction "
       "coordinator whether the partition is in the transaction (KIP-890)."),
    _k("partctl.transaction.add.hold.ms", _I, "1000", _LO, "How long an AddPartitionsToTxn "
       "or AddOffsetsToTxn that finds the producer's previous transaction still ending (its "
       "markers under way) waits for the end before it is answered CONCURRENT_TRANSACTIONS; "
       "0 answers at once, as Kafka does.", AtLeast(0)),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, "10000", _LO, "How "
       "often transactions past their timeout are looked for and aborted.", AtLeast(1)),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", _I, "3600000", _LO, "How "
       "often expired transactional ids are removed.", AtLeast(1)),
    _k("group.min.session.timeout.ms", _I, "6000", _M, "The shortest session a classic "
       "group member may ask for.", AtLeast(0)),
    _k("group.max.session.timeout.ms", _I, "1800000", _M, "The longest session a classic "
       "group member may ask for.", AtLeast(0)),
    _k("group.initial.rebalance.delay.ms", _I, "3000", _M, "How long a new classic group "
       "waits for more members before its first rebalance.", AtLeast(0)),
    _k("group.max.size", _I, str((1 << 31) - 1), _M, "The most members a group may have.",
       AtLeast(1)),
    _k("group.consumer.session.timeout.ms", _I, "45000", _M, "The session of a consumer "
       "group member (KIP-848).", AtLeast(1)),
    _k("group.consumer.heartbeat.interval.ms", _I, "5000", _M, "How often a consumer group "
       "member (KIP-848) heartbeats.", AtLeast(1)),
    _k("group.consumer.assignors", _LS, "uniform,range", _M, "The server-side assignors of "
       "consumer groups (KIP-848), the first the default: uniform, range or Kafka's class "
       "names."),
    _k("log.retention.check.interval.ms", _L, "300000", _M, "How often logs are checked for "
       "segments to delete.", AtLeast(1)),
    _k("log.local.retention.ms", _L, "-2", _M, "The local.retention.ms of topics that do not "
       "set one; -2: their retention.ms.", AtLeast(-2)),
    _k("log.local.retention.bytes", _L, "-2", _M, "The local.retention.bytes of topics that "
       "do not set one; -2: their retention.bytes.", AtLeast(-2)),
    _k("remote.log.storage.system.enable", _B, "false", _M, "Enable tiered storage "
       "(KIP-405) on this broker."),
    _k("remote.log.storage.url", _S, None, _M, "Where remote segments go: file:///path or "
       "s3://bucket/prefix."),
    _k("remote.log.storage.manager.class.name", _S, None, _M, "A remote storage manager "
       "class, instead of remote.log.storage.url."),
    _k("remote.log.storage.s3.endpoint", _S, None, _LO, "The S3 endpoint URL, for an "
       "S3-compatible store."),
    _k("partctl.remote.log.metadata.dir", _S, None, _LO, "Where the remote segments' "
       "metadata is kept, when not beside them."),
    _k("remote.log.manager.task.interval.ms", _L, "30000", _LO, "How often segments are "
       "copied to and expired from remote storage.", AtLeast(1)),
    _k("remote.log.reader.threads", _I, "10", _M, "Threads that read from remote storage.",
       AtLeast(1)),
    _k("remote.log.manager.task.retry.backoff.ms", _L, "500", _LO, "The first wait after a "
       "failed remote storage task.", AtLeast(0)),
    _k("remote.log.manager.task.retry.backoff.max.ms", _L, "30000", _LO, "The longest wait "
       "after failed remote storage tasks.", AtLeast(0)),
    _k("remote.log.manager.task.retry.jitter", _D, "0.2", _LO, "The random share added to or "
       "taken from each wait.", Between(0, 1)),
    _k("partctl.remote.log.metadata.compaction.min.stale.records", _I,
       str(MIN_STALE_RECORDS), _LO, "Stale records in the remote metadata log before it is "
       "compacted.", AtLeast(1)),
    _k("partctl.remote.log.metadata.compaction.delete.retention.ms", _L,
       str(FORGET_DELETED_AFTER_MS), _LO, "How long the metadata of deleted remote segments "
       "is remembered.", AtLeast(0)),
    _k("authorizer.class.name", _S, "", _LO, "The ACL authorizer: "
       "kafka.security.authorizer.AclAuthorizer or partctl.AclAuthorizer; empty: none."),
    _k("super.users", _S, "", _LO, "Principals allowed everything, separated by ';' "
       "(User:admin)."),
    _k("allow.everyone.if.no.acl.found", _B, "false", _LO, "Allow a resource no ACL names "
       "to everyone."),
    _k("partctl.gc.thaw.interval.ms", _L, "600000", _LO, "What survives a full pass of "
       "Python's garbage collector is frozen, so that the next passes walk only newer "
       "objects; this often, a pass walks everything again (cycles among frozen objects are "
       "freed then). -1: nothing is frozen.", AtLeast(-1)),
)

BROKER_CONFIG = ConfigDef("broker", (*_PROCESS, *CONTROLLER_CONFIG.values(), *_DATA))
"""Every key a broker reads from ``server.properties``, by name."""

CONTROLLER_PROCESS_CONFIG = BROKER_CONFIG.only(
    "controller process", (*(k.name for k in _PROCESS),
                           *(k for k in CONTROLLER_CONFIG if k != "partctl.controller.candidate")))
"""The keys a controller-only process (``partctl controller start``) applies (it stands for
controller, whatever ``partctl.controller.candidate`` says)."""
