"""server.properties: Java properties syntax, Kafka's keys and defaults, one clear error per bad
value, one warning per unknown or unused key, and the mapping onto the library's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import (
    BrokerConfig,
    ConfigError,
    Listener,
    load_config,
    parse_config,
    parse_controller_config,
)
from broker.config_keys import BROKER_CONFIG
from coordinator.configdef import AtLeast, Between, ConfigType
from kafkaclient.properties import PropertiesError, parse_properties

BASE = "broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"


# --- Java properties syntax -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("a=b", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a : b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a\t\tb", {"a": "b"}),
    ("   a=b   ", {"a": "b   "}),
    ("a=", {"a": ""}),
    ("a", {"a": ""}),
    ("a==b", {"a": "=b"}),
    ("a=b=c", {"a": "b=c"}),
    ("# comment\n! comment too\na=b", {"a": "b"}),
    ("  # indented comment\na=b", {"a": "b"}),
    ("a=b # not a comment", {"a": "b # not a comment"}),
    ("a=one \\\n    two", {"a": "one two"}),
    ("a=one\\\\\nb=two", {"a": "one\\", "b": "two"}),
    ("a=x\\\n# continued, not a comment", {"a": "x# continued, not a comment"}),
    ("# a comment line never continues \\\na=b", {"a": "b"}),
    ("a\\:b=c", {"a:b": "c"}),
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\ b=c", {"a b": "c"}),
    ("a=\\t\\n\\r\\f", {"a": "\t\n\r\f"}),
    ("a=\\u00e9t\\u00C9", {"a": "\u00e9t\u00c9"}),
    ("a=\\q", {"a": "q"}),
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ("a=1\na=2", {"a": "2"}),
    ("\n\n   \n", {}),
    ("a=b\\", {"a": "b"}),
])
def test_java_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert {p.key: p.value for p in parse_properties(text)} == expected


def test_properties_keep_order_and_line_numbers() -> None:
    entries = parse_properties("# c\nx=1\n\ny=2 \\\n 3\nz=4\n")
    assert [(p.key, p.value, p.line) for p in entries] == [
        ("x", "1", 2), ("y", "2 3", 4), ("z", "4", 6)]


def test_properties_bytes_are_iso_8859_1() -> None:
    assert parse_properties("a=\u00e9".encode("iso-8859-1"))[0].value == "\u00e9"


@pytest.mark.parametrize("text", ["a=\\u12", "a=\\uXYZW", "a=\\u"])
def test_malformed_unicode_escape(text: str) -> None:
    with pytest.raises(PropertiesError, match="malformed"):
        parse_properties(text)


# --- defaults and mapping ---------------------------------------------------------------------

def test_kafka_defaults() -> None:
    loaded = parse_config(BASE)
    c = loaded.config
    assert loaded.warnings == ()
    assert c.broker_id == 1
    assert c.coordinator_url == "zookeeper://127.0.0.1:2181"
    assert c.listeners == (Listener(name="PLAINTEXT", host="", port=9092),)
    assert c.advertised_listeners == ()
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.log_dir == Path("/tmp/kafka-logs")
    assert (c.session_timeout_ms, c.connect_timeout_seconds) == (18_000, 18.0)
    assert (c.num_partitions, c.default_replication_factor, c.min_insync_replicas) == (1, 1, 1)
    assert c.unclean_leader_election_enable is False
    assert c.auto_create_topics_enable is True and c.auto_leader_rebalance_enable is True
    assert (c.leader_imbalance_check_interval_seconds,
            c.leader_imbalance_per_broker_percentage) == (300, 10)
    assert c.replica_lag_time_max_ms == 30_000
    assert c.log_segment_bytes == 1 << 30
    assert (c.log_retention_ms, c.log_retention_bytes) == (168 * 3_600_000, -1)
    assert c.log_flush_interval_ms is None
    assert c.socket_request_max_bytes == 104_857_600
    assert (c.controlled_shutdown_enable, c.controlled_shutdown_max_retries,
            c.controlled_shutdown_retry_backoff_ms) == (True, 3, 5_000)
    assert c.message_max_bytes == 1_048_588
    assert (c.replica_fetch_max_bytes, c.replica_fetch_wait_max_ms) == (1_048_576, 500)
    assert c == BrokerConfig(broker_id=1, coordinator_url="zookeeper://127.0.0.1:2181")


def test_mapped_onto_replica_and_controller_configs() -> None:
    c = parse_config(BASE + """
min.insync.replicas=2
replica.lag.time.max.ms=10000
replica.fetch.max.bytes=2048
log.segment.bytes=1048576
log.retention.minutes=5
log.retention.bytes=123456
log.flush.interval.ms=250
leader.imbalance.check.interval.seconds=7
leader.imbalance.per.broker.percentage=20
auto.leader.rebalance.enable=false
unclean.leader.election.enable=TRUE
delete.topic.enable=false
""").config
    rc = c.replica_config()
    assert (rc.min_insync_replicas, rc.replica_lag_time_max_ms, rc.replica_fetch_max_bytes,
            rc.flush_interval_ms) == (2, 10_000, 2048, 250)
    assert (rc.log.segment_bytes, rc.log.retention_ms, rc.log.retention_bytes) == (
        1 << 20, 300_000, 123_456)
    cc = c.controller_config()
    assert (cc.leader_imbalance_check_interval_seconds, cc.leader_imbalance_per_broker_percentage,
            cc.auto_leader_rebalance_enable, cc.unclean_leader_election_enable,
            cc.delete_topic_enable) == (7.0, 20.0, False, True, False)
    assert (cc.candidate, cc.hot_standby) == (True, True)


def test_a_broker_may_keep_out_of_the_controller_election() -> None:
    cc = parse_config(BASE + "partctl.controller.candidate=false\n").config.controller_config()
    assert (cc.candidate, cc.hot_standby) == (False, False)


def test_a_controller_only_configuration() -> None:
    loaded = parse_controller_config(
        "node.id=100\nzookeeper.connect=127.0.0.1:2181/k\nlog.dirs=/data\n"
        "auto.leader.rebalance.enable=false\nno.such.key=1\n", source="c.properties")
    c = loaded.config
    assert (c.broker_id, c.coordinator_url) == (100, "zookeeper://127.0.0.1:2181/k")
    assert c.listeners == (Listener(name="PLAINTEXT", host="", port=9093),)
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.controller_config().auto_leader_rebalance_enable is False
    assert loaded.warnings == (
        "c.properties line 3: log.dirs is ignored: it does not apply to a controller-only "
        "process",
        "c.properties line 5: unknown key 'no.such.key' (ignored)")
    assert parse_controller_config("broker.id=7\npartctl.coordinator=memory://x\n"
                                   ).config.broker_id == 7


@pytest.mark.parametrize(("text", "message"), [
    ("zookeeper.connect=127.0.0.1:2181\n", "node.id is not set"),
    ("node.id=1\nbroker.id=1\nzookeeper.connect=127.0.0.1:2181\n", "not both"),
    ("node.id=-1\nzookeeper.connect=127.0.0.1:2181\n", "must be at least 0"),
    ("node.id=1\n", "no coordinator"),
])
def test_a_bad_controller_configuration(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_controller_config(text)


@pytest.mark.parametrize(("lines", "ms"), [
    ("log.retention.hours=1", 3_600_000),
    ("log.retention.hours=1\nlog.retention.minutes=2", 120_000),
    ("log.retention.hours=1\nlog.retention.minutes=2\nlog.retention.ms=3", 3),
    ("log.retention.ms=-1", -1),
    ("log.retention.hours=-1", -1),
])
def test_retention_precedence(lines: str, ms: int) -> None:
    assert parse_config(BASE + lines).config.log_retention_ms == ms


@pytest.mark.parametrize(("connect", "url"), [
    ("127.0.0.1:2181", "zookeeper://127.0.0.1:2181"),
    ("a:1,b:2,c:3/kafka/prod", "zookeeper://a:1,b:2,c:3/kafka/prod"),
    ("[::1]:2181/x", "zookeeper://[::1]:2181/x"),
])
def test_zookeeper_connect_becomes_a_url(connect: str, url: str) -> None:
    text = f"broker.id=0\nzookeeper.connect={connect}\n"
    assert parse_config(text).config.coordinator_url == url


def test_partctl_coordinator_takes_any_url() -> None:
    text = "broker.id=0\npartctl.coordinator=etcd://127.0.0.1:2379/prefix\n"
    assert parse_config(text).config.coordinator_url == "etcd://127.0.0.1:2379/prefix"


def test_listeners_advertised_and_inter_broker() -> None:
    c = parse_config(BASE + """
listeners=INTERNAL://127.0.0.1:9093,external://[::1]:0
listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT
advertised.listeners=INTERNAL://broker1:9093,EXTERNAL://localhost:0
inter.broker.listener.name=internal
""").config
    assert c.listeners == (Listener(name="INTERNAL", host="127.0.0.1", port=9093),
                           Listener(name="EXTERNAL", host="::1", port=0))
    assert c.inter_broker_listener_name == "INTERNAL"
    assert [x.connection_string for x in c.advertised({"EXTERNAL": 40000})] == [
        "INTERNAL://broker1:9093", "EXTERNAL://localhost:40000"]
    assert Listener(name="X", host="::1", port=1).connection_string == "X://[::1]:1"


def test_advertised_defaults_to_listeners_with_bound_port_and_host_name() -> None:
    c = parse_config(BASE + "listeners=PLAINTEXT://:0\n").config
    (advertised,) = c.advertised({"PLAINTEXT": 12345})
    assert advertised.port == 12345 and advertised.host


# --- warnings ---------------------------------------------------------------------------------

def test_unknown_and_unused_keys_warn_once_each() -> None:
    loaded = parse_config(BASE + "foo.bar=1\nnum.network.threads=3\nnum.io.threads=8\n"
                          "log.flush.interval.messages=10000\nfoo.bar=2\n",
                          source="s.properties")
    assert loaded.warnings == (
        "s.properties line 3: unknown key 'foo.bar' (ignored)",
        "s.properties line 7: unknown key 'foo.bar' (ignored)",
        "s.properties line 4: num.network.threads is ignored: one event loop serves every "
        "connection",
        "s.properties line 5: num.io.threads is ignored: requests are handled on the event loop",
        "s.properties line 6: log.flush.interval.messages is ignored: logs are flushed by time "
        "(log.flush.interval.ms) only",
    )


# --- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("zookeeper.connect=h:1\n", "broker.id is not set"),
    ("broker.id=1\n", "no coordinator"),
    ("broker.id=one\nzookeeper.connect=h:1\n",
     "line 1: invalid value 'one' for broker.id: not a number of type INT"),
    ("broker.id=-1\nzookeeper.connect=h:1\n", "broker.id: must be at least 0"),
    ("broker.id=99999999999\nzookeeper.connect=h:1\n", "broker.id: not a number of type INT"),
    (BASE + "zookeeper.session.timeout.ms=\n", "invalid value '' for zookeeper.session.timeout.ms"),
    (BASE + "num.partitions=0\n", "num.partitions: must be at least 1"),
    (BASE + "default.replication.factor=0\n", "default.replication.factor: must be at least 1"),
    (BASE + "min.insync.replicas=0\n", "min.insync.replicas: must be at least 1"),
    (BASE + "auto.create.topics.enable=yes\n",
     "invalid value 'yes' for auto.create.topics.enable: expected value to be either true or "
     "false"),
    (BASE + "log.segment.bytes=60\n", "log.segment.bytes: must be at least 61"),
    (BASE + "log.retention.ms=-2\n", "log.retention.ms: must be at least -1"),
    (BASE + "socket.request.max.bytes=0\n", "socket.request.max.bytes: must be at least 1"),
    (BASE + "message.max.bytes=1.5\n", "message.max.bytes: not a number"),
    (BASE + "replica.lag.time.max.ms=400\n",
     "replica.fetch.wait.max.ms (500) must be less than replica.lag.time.max.ms (400)"),
    (BASE + "partctl.coordinator=etcd://h:1\n", "not both"),
    ("broker.id=1\nzookeeper.connect=zookeeper://h:1\n", "zookeeper.connect: want host:port"),
    ("broker.id=1\nzookeeper.connect=h:99999\n", "zookeeper.connect: bad port"),
    ("broker.id=1\npartctl.coordinator=nope://x\n", "partctl.coordinator: unknown coordinator"),
    (BASE + "listeners=localhost:9092\n", "listeners: cannot parse 'localhost:9092'"),
    (BASE + "listeners=PLAINTEXT://h:x\n", "listeners: cannot parse"),
    (BASE + "listeners=PLAINTEXT://h:70000\n", "listeners: port 70000"),
    (BASE + "listeners=PLAINTEXT://h h:1\n", "listeners: cannot parse"),
    (BASE + "listeners=FOO://h:1\n", "no security protocol is defined for listener FOO"),
    (BASE + "listeners=SSL://h:1\nsecurity.inter.broker.protocol=SSL\n",
     "listener.name.ssl.ssl.keystore.location: listener SSL uses SSL: give its key store"),
    (BASE + "listeners=A://h:1\nlistener.security.protocol.map=A:SASL_SSL\n"
     "inter.broker.listener.name=A\n",
     "listener.name.a.ssl.keystore.location: listener A uses SASL_SSL"),
    (BASE + "listener.security.protocol.map=A:TLS\n", "unknown security protocol 'TLS'"),
    (BASE + "listener.security.protocol.map=A\n", "cannot parse 'A'"),
    (BASE + "listeners=PLAINTEXT://h:1,PLAINTEXT://h:2\n", "different name"),
    (BASE + "listeners=A://h:1,B://h:1\nlistener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n",
     "different port"),
    (BASE + "listeners=\n", "listeners: no listener given"),
    (BASE + "advertised.listeners=PLAINTEXT://0.0.0.0:9092\n", "non-routable meta-address"),
    (BASE + "inter.broker.listener.name=OTHER\n", "OTHER is not one of the advertised"),
    (BASE + "security.inter.broker.protocol=SSL\n",
     "inter.broker.listener.name: SSL is not one of the advertised listeners"),
    (BASE + "log.dirs=/a,/b\n", "exactly one log directory"),
    (BASE + "log.dir=\n", "log.dir: empty"),
    (BASE + "a=\\u00zz\n", "malformed"),
    (BASE + "log.cleanup.policy=compact,shred\n", "log.cleanup.policy: string must be one of: compact, delete"),
    (BASE + "log.cleaner.min.cleanable.ratio=1.5\n",
     "log.cleaner.min.cleanable.ratio: must be no more than 1"),
    (BASE + "log.cleaner.min.cleanable.ratio=half\n", "not a number of type DOUBLE"),
    (BASE + "remote.log.storage.system.enable=true\n",
     "remote.log.storage.system.enable: set remote.log.storage.url"),
    (BASE + "remote.log.storage.system.enable=true\nremote.log.storage.url=gs://b/p\n",
     "remote.log.storage.url: 'gs://b/p': unsupported scheme 'gs'"),
    (BASE + "remote.log.storage.system.enable=true\nremote.log.storage.url=s3:///p\n",
     "remote.log.storage.url: 's3:///p': name the bucket"),
    (BASE + "remote.log.storage.system.enable=true\nremote.log.storage.url=file:rel\n",
     "remote.log.storage.url: 'file:rel': give an absolute path"),
    (BASE + "remote.log.manager.task.interval.ms=0\n",
     "remote.log.manager.task.interval.ms: must be at least 1"),
    (BASE + "log.local.retention.ms=-3\n", "log.local.retention.ms: must be at least -2"),
    (BASE + "remote.log.manager.task.retry.jitter=2\n",
     "remote.log.manager.task.retry.jitter: must be no more than 1"),
    (BASE + "remote.log.manager.task.retry.backoff.ms=900\n"
     "remote.log.manager.task.retry.backoff.max.ms=800\n",
     "remote.log.manager.task.retry.backoff.ms must be at least 0 and at most"),
    (BASE + "partctl.remote.log.metadata.compaction.min.stale.records=0\n",
     "partctl.remote.log.metadata.compaction.min.stale.records: must be at least 1"),
    (BASE + "partctl.remote.log.metadata.compaction.min.stale.records=many\n",
     "invalid value 'many' for partctl.remote.log.metadata.compaction.min.stale.records"),
    (BASE + "partctl.remote.log.metadata.compaction.delete.retention.ms=-1\n",
     "partctl.remote.log.metadata.compaction.delete.retention.ms: must be at least 0"),
])
def test_bad_input_is_one_error_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        parse_config(text)
    assert message in str(failure.value)
    assert "\n" not in str(failure.value)


def test_remote_copy_retry_backoff_settings() -> None:
    default = parse_config(BASE).config.remote_log.retry_backoff
    assert (default.initial_ms, default.max_ms, default.jitter) == (500, 30_000, 0.2)
    custom = parse_config(BASE + "remote.log.manager.task.retry.backoff.ms=100\n"
                          "remote.log.manager.task.retry.backoff.max.ms=900\n"
                          "remote.log.manager.task.retry.jitter=0\n").config.remote_log.retry_backoff
    assert (custom.initial_ms, custom.max_ms, custom.jitter) == (100, 900, 0.0)


def test_remote_log_metadata_compaction_settings() -> None:
    default = parse_config(BASE).config.remote_log.metadata_compaction
    assert (default.min_stale_records, default.delete_retention_ms) == (16, 86_400_000)
    custom = parse_config(BASE + "partctl.remote.log.metadata.compaction.min.stale.records=4\n"
                          "partctl.remote.log.metadata.compaction.delete.retention.ms=0\n"
                          ).config.remote_log.metadata_compaction
    assert (custom.min_stale_records, custom.delete_retention_ms) == (4, 0)


def test_an_s3_storage_url_keeps_the_metadata_in_the_bucket() -> None:
    config = parse_config(BASE + "remote.log.storage.system.enable=true\n"
                          "remote.log.storage.url=s3://bucket/tiered\n"
                          "remote.log.storage.s3.endpoint=http://127.0.0.1:9000\n").config
    remote = config.remote_log
    assert remote.storage_url == "s3://bucket/tiered"
    assert remote.s3_endpoint == "http://127.0.0.1:9000"
    assert remote.metadata_in_s3() and remote.resolved_metadata_dir() is None


def test_load_config_reads_a_file_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(BASE + "log.dirs=" + str(tmp_path / "logs") + "\nnum.partitions=x\n")
    with pytest.raises(ConfigError, match=rf"{path} line 4: invalid value 'x' for num.partitions"):
        load_config(path)
    path.write_text(BASE + "log.dirs=" + str(tmp_path / "logs") + "\n")
    assert load_config(path).config.log_dir == tmp_path / "logs"
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_the_static_config_as_written_for_describe_configs() -> None:
    loaded = parse_config("broker.id=3\nzookeeper.connect=zk:2181\nlog.retention.hours= 24 \n"
                          "num.io.threads=8\nno.such.key=1\n")
    config = loaded.config
    assert dict(config.properties) == {"broker.id": "3", "zookeeper.connect": "zk:2181",
                                       "log.retention.hours": "24", "num.io.threads": "8"}
    assert "num.io.threads" not in config.applied_properties()  # accepted, not applied
    assert [BROKER_CONFIG[k].type.name for k in ("broker.id", "log.retention.ms",
                                                 "delete.topic.enable", "zookeeper.connect",
                                                 "listeners")] == [
        "INT", "LONG", "BOOLEAN", "STRING", "LIST"]
    assert "no.such.key" not in BROKER_CONFIG


def test_the_documented_example_is_read_without_warnings() -> None:
    """The server.properties shown in docs/brokers.md starts a broker as shown (a comment after
    a value would be part of the value in Java's syntax, so the example has none)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "brokers.md").read_text()
    text = page.split("```\n# server.properties\n", 1)[1].split("```", 1)[0]
    loaded = parse_config(text)
    assert loaded.warnings == ()
    config = loaded.config
    assert (config.broker_id, config.coordinator_url) == (1, "zookeeper://zk1:2181,zk2:2181/kafka")
    assert config.listeners == (Listener(name="PLAINTEXT", host="127.0.0.1", port=9092),)
    assert (config.rack, config.num_partitions) == ("r1", 3)


def test_broker_defaults_of_the_compaction_topic_configs() -> None:
    """``log.cleanup.policy`` and ``log.cleaner.min.cleanable.ratio`` are what topics without
    ``cleanup.policy`` / ``min.cleanable.dirty.ratio`` of their own get."""
    default = parse_config(BASE).config.replica_config().log
    assert (default.cleanup_delete, default.compact, default.min_cleanable_dirty_ratio) == (
        True, False, 0.5)
    c = parse_config(BASE + "log.cleanup.policy=compact\n"
                            "log.cleaner.min.cleanable.ratio=0.1\n").config
    log = c.replica_config().log
    assert (log.cleanup_delete, log.compact, log.min_cleanable_dirty_ratio) == (False, True, 0.1)
    both = parse_config(BASE + "log.cleanup.policy=compact, delete\n").config.log_config()
    assert (both.cleanup_delete, both.compact) == (True, True)
    assert c.properties["log.cleanup.policy"] == "compact"


def test_remote_log_storage_settings() -> None:
    off = parse_config(BASE).config
    assert not off.remote_log.system_enable and not off.replica_config().remote.system_enable
    c = parse_config(BASE + "remote.log.storage.system.enable=true\n"
                            "remote.log.storage.url=file:///mnt/tier\n"
                            "remote.log.manager.task.interval.ms=500\n"
                            "log.retention.check.interval.ms=1000\n"
                            "log.local.retention.ms=60000\n").config
    remote = c.replica_config().remote
    assert (remote.system_enable, remote.storage_url, remote.task_interval_ms) == (
        True, "file:///mnt/tier", 500)
    assert str(remote.resolved_metadata_dir()) == "/mnt/tier/__remote_log_metadata"
    assert c.replica_config().log_retention_check_interval_ms == 1000
    assert c.log_config().local_retention_ms == 60000
    assert c.log_config().effective_local_retention_bytes == -1  # -2: retention.bytes
    # A third-party manager needs no URL here; the metadata directory must then be named.
    custom = parse_config(BASE + "remote.log.storage.system.enable=true\n"
                                 "remote.log.storage.manager.class.name=m:C\n"
                                 "partctl.remote.log.metadata.dir=/var/meta\n").config
    assert custom.remote_log.manager_class_name == "m:C"


_BOUNDED = sorted(name for name, key in BROKER_CONFIG.items()
                  if isinstance(key.validator, AtLeast | Between))


@pytest.mark.parametrize("name", _BOUNDED)
def test_every_declared_bound_is_enforced_at_parse_time(name: str) -> None:
    """Each key's declared validator refuses a value below its bound: one line naming the
    file's line, the key and the bound, before anything starts."""
    bound = BROKER_CONFIG[name].validator
    assert isinstance(bound, AtLeast | Between)
    below = bound.low - 1 if BROKER_CONFIG[name].type is not ConfigType.DOUBLE else -0.5
    with pytest.raises(ConfigError) as failure:
        parse_config(f"{BASE}{name}={below}\n")
    message = str(failure.value)
    assert message.startswith(f"server.properties line 3: invalid value '{below}' for {name}: "
                              f"must be at least "), message
    assert "\n" not in message


def test_a_declared_validator_of_its_own_refuses_at_parse_time() -> None:
    with pytest.raises(ConfigError, match=r"line 3: invalid value '4\.0' for "
                                          r"inter.broker.protocol.version: partctl follows 2\.8"):
        parse_config(BASE + "inter.broker.protocol.version=4.0\n")
