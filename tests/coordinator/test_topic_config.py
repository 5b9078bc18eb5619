"""Kafka's topic config rules, pure: every key's good and bad values with Kafka's messages,
IncrementalAlterConfigs' operations, and what DescribeConfigs reports."""

from __future__ import annotations

import pytest

from coordinator.configdef import ConfigType, Effect, InvalidConfig
from coordinator.topic_config import (
    TOPIC_CONFIG_KEYS,
    AlterOp,
    ConfigSource,
    IncrementalOp,
    apply_incremental,
    describe_config,
    validate_topic_config,
)

KAFKA_39_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}

# (key, value accepted, its parsed form)
GOOD = [
    ("cleanup.policy", "delete", ["delete"]),
    ("cleanup.policy", " compact , delete ", ["compact", "delete"]),
    ("cleanup.policy", "", []),
    ("compression.type", "zstd", "zstd"),
    ("compression.gzip.level", "-1", -1),
    ("compression.gzip.level", "9", 9),
    ("compression.lz4.level", "17", 17),
    ("compression.zstd.level", "-131072", -131072),
    ("delete.retention.ms", "0", 0),
    ("file.delete.delay.ms", "60000", 60000),
    ("flush.messages", "1", 1),
    ("flush.ms", "0", 0),
    ("follower.replication.throttled.replicas", "*", ["*"]),
    ("leader.replication.throttled.replicas", "0:1,1:2", ["0:1", "1:2"]),
    ("index.interval.bytes", "0", 0),
    ("local.retention.bytes", "-2", -2),
    ("local.retention.ms", "-2", -2),
    ("max.compaction.lag.ms", "1", 1),
    ("max.message.bytes", "0", 0),
    ("message.downconversion.enable", "FALSE", False),
    ("message.format.version", "2.8-IV1", "2.8-IV1"),
    ("message.format.version", "0.10.2", "0.10.2"),
    ("message.format.version", "3.9", "3.9"),
    ("message.timestamp.after.max.ms", "0", 0),
    ("message.timestamp.before.max.ms", "9223372036854775807", 9223372036854775807),
    ("message.timestamp.difference.max.ms", "0", 0),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("min.cleanable.dirty.ratio", "0.25", 0.25),
    ("min.cleanable.dirty.ratio", "1", 1.0),
    ("min.compaction.lag.ms", "0", 0),
    ("min.insync.replicas", "+3", 3),
    ("preallocate", " true ", True),
    ("remote.storage.enable", "false", False),
    ("remote.log.copy.disable", "false", False),
    ("remote.log.delete.on.disable", "false", False),
    ("retention.bytes", "-5", -5),
    ("retention.ms", "-1", -1),
    ("segment.bytes", "14", 14),
    ("segment.bytes", "2147483647", 2147483647),
    ("segment.index.bytes", "4", 4),
    ("segment.jitter.ms", "0", 0),
    ("segment.ms", "1", 1),
    ("unclean.leader.election.enable", "True", True),
]

# (key, value refused, Kafka's message)
BAD = [
    ("cleanup.policy", "delete,", "Invalid value  for configuration cleanup.policy: String "
     "must be one of: compact, delete"),
    ("cleanup.policy", "remove", "Invalid value remove for configuration cleanup.policy: "
     "String must be one of: compact, delete"),
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Invalid value 0 for configuration "
     "compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: "
     "Value must be no more than 17"),
    ("compression.zstd.level", "23", "Invalid value 23 for configuration "
     "compression.zstd.level: Value must be no more than 22"),
    ("delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: "
     "Value must be at least 0"),
    ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be "
     "at least 1"),
    ("follower.replication.throttled.replicas", "0-1", "Invalid value [0-1] for configuration "
     "follower.replication.throttled.replicas: follower.replication.throttled.replicas must be "
     "the literal '*' or a list of replicas in the following format: "
     "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: "
     "Value must be at least -2"),
    ("max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: "
     "Value must be at least 1"),
    ("max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value "
     "must be at least 0"),
    ("max.message.bytes", "2147483648", "Invalid value 2147483648 for configuration "
     "max.message.bytes: Not a number of type INT"),
    ("message.downconversion.enable", "yes", "Invalid value yes for configuration "
     "message.downconversion.enable: Expected value to be either true or false"),
    ("message.format.version", "9.9", "Invalid value 9.9 for configuration "
     "message.format.version: Version 9.9 is not a valid version"),
    ("message.timestamp.type", "createtime", "Invalid value createtime for configuration "
     "message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ("min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration "
     "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "half", "Invalid value half for configuration "
     "min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: "
     "Value must be at least 1"),
    ("min.insync.replicas", "1_0", "Invalid value 1_0 for configuration min.insync.replicas: "
     "Not a number of type INT"),
    ("preallocate", "1", "Invalid value 1 for configuration preallocate: Expected value to be "
     "either true or false"),
    ("retention.bytes", "1e9", "Invalid value 1e9 for configuration retention.bytes: Not a "
     "number of type LONG"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at "
     "least -1"),
    ("retention.ms", "9223372036854775808", "Invalid value 9223372036854775808 for "
     "configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be "
     "at least 14"),
    ("segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value "
     "must be at least 4"),
    ("segment.jitter.ms", "-1", "Invalid value -1 for configuration segment.jitter.ms: Value "
     "must be at least 0"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at "
     "least 1"),
    ("unclean.leader.election.enable", "on", "Invalid value on for configuration "
     "unclean.leader.election.enable: Expected value to be either true or false"),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the "
     "broker. Topic cannot be configured with remote log storage."),
    ("remote.log.copy.disable", "true", "It is invalid to set `remote.log.delete.on.disable` "
     "or `remote.log.copy.disable` under Zookeeper's mode."),
    ("remote.log.delete.on.disable", "true", "It is invalid to set "
     "`remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."),
    ("flush.ms", "-1", "Invalid value -1 for configuration flush.ms: Value must be at least 0"),
    ("file.delete.delay.ms", "-1", "Invalid value -1 for configuration file.delete.delay.ms: "
     "Value must be at least 0"),
    ("index.interval.bytes", "-1", "Invalid value -1 for configuration index.interval.bytes: "
     "Value must be at least 0"),
    ("local.retention.bytes", "-3", "Invalid value -3 for configuration "
     "local.retention.bytes: Value must be at least -2"),
    ("min.compaction.lag.ms", "-1", "Invalid value -1 for configuration "
     "min.compaction.lag.ms: Value must be at least 0"),
    ("message.timestamp.after.max.ms", "-1", "Invalid value -1 for configuration "
     "message.timestamp.after.max.ms: Value must be at least 0"),
    ("message.timestamp.before.max.ms", "-1", "Invalid value -1 for configuration "
     "message.timestamp.before.max.ms: Value must be at least 0"),
    ("message.timestamp.difference.max.ms", "-1", "Invalid value -1 for configuration "
     "message.timestamp.difference.max.ms: Value must be at least 0"),
    ("leader.replication.throttled.replicas", "*,0:1", "Invalid value [*, 0:1] for "
     "configuration leader.replication.throttled.replicas: "
     "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in "
     "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
]


def test_the_table_has_every_topic_key_of_kafka_39() -> None:
    assert set(TOPIC_CONFIG_KEYS) == KAFKA_39_TOPIC_KEYS
    for key in TOPIC_CONFIG_KEYS.values():
        validate_topic_config({key.name: key.default})  # every default is a valid value
        assert key.effect is Effect.APPLIED or key.note, key.name


def test_the_keys_partctl_applies() -> None:
    applied = {k for k, v in TOPIC_CONFIG_KEYS.items() if v.effect is Effect.APPLIED}
    assert applied == {"cleanup.policy", "delete.retention.ms", "index.interval.bytes",
                       "max.compaction.lag.ms", "max.message.bytes", "min.cleanable.dirty.ratio",
                       "min.compaction.lag.ms", "min.insync.replicas", "retention.bytes",
                       "retention.ms", "segment.bytes", "segment.ms",
                       "unclean.leader.election.enable", "remote.storage.enable",
                       "local.retention.ms", "local.retention.bytes"}
    partial = {k for k, v in TOPIC_CONFIG_KEYS.items() if v.effect is Effect.PARTIAL}
    assert partial == {"compression.type"}


@pytest.mark.parametrize(("name", "value", "parsed"), GOOD)
def test_good_values_are_taken_parsed(name: str, value: str, parsed: object) -> None:
    assert validate_topic_config({name: value}) == {name: parsed}


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_bad_values_are_refused_with_kafkas_message(name: str, value: str, message: str
                                                    ) -> None:
    with pytest.raises(InvalidConfig) as failure:
        validate_topic_config({name: value})
    assert str(failure.value) == message


def test_every_key_has_a_bad_value_and_a_good_one_in_the_tables() -> None:
    assert {g[0] for g in GOOD} == KAFKA_39_TOPIC_KEYS
    assert {b[0] for b in BAD} == KAFKA_39_TOPIC_KEYS


def test_unknown_keys_are_refused_by_name_first() -> None:
    with pytest.raises(InvalidConfig, match="^Unknown topic config name: retention.hours$"):
        validate_topic_config({"min.insync.replicas": "0", "retention.hours": "1"})


def test_compaction_lags_are_checked_against_each_other_with_defaults() -> None:
    validate_topic_config({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "100"})
    with pytest.raises(InvalidConfig, match=r"^conflict topic config setting "
                       r"min.compaction.lag.ms \(101\) > max.compaction.lag.ms \(100\)$"):
        validate_topic_config({"min.compaction.lag.ms": "101", "max.compaction.lag.ms": "100"})
    with pytest.raises(InvalidConfig, match="conflict"):
        validate_topic_config({"min.compaction.lag.ms": "5"},
                              {"log.cleaner.max.compaction.lag.ms": "4"})


def op(name: str, kind: AlterOp, value: str | None = None) -> IncrementalOp:
    return IncrementalOp(name=name, op=kind, value=value)


def test_incremental_set_and_delete() -> None:
    current = {"retention.ms": "1000", "segment.bytes": "2048"}
    after = apply_incremental(current, [op("retention.ms", AlterOp.SET, "5"),
                                        op("segment.bytes", AlterOp.DELETE),
                                        op("cleanup.policy", AlterOp.DELETE)])
    assert after == {"retention.ms": "5"}
    assert current == {"retention.ms": "1000", "segment.bytes": "2048"}  # not modified


def test_incremental_append_starts_from_the_default_and_skips_present_items() -> None:
    after = apply_incremental({}, [op("cleanup.policy", AlterOp.APPEND, "compact,delete")])
    assert after == {"cleanup.policy": "delete,compact"}
    assert apply_incremental(after, [op("cleanup.policy", AlterOp.APPEND, "delete")]) == after
    throttled = apply_incremental({}, [op("leader.replication.throttled.replicas",
                                          AlterOp.APPEND, "0:1")])
    assert throttled == {"leader.replication.throttled.replicas": "0:1"}


def test_incremental_subtract_is_a_multiset_difference() -> None:
    current = {"cleanup.policy": "compact,delete"}
    assert apply_incremental(current, [op("cleanup.policy", AlterOp.SUBTRACT, "delete")]) == {
        "cleanup.policy": "compact"}
    assert apply_incremental({}, [op("cleanup.policy", AlterOp.SUBTRACT, "delete")]) == {
        "cleanup.policy": ""}
    assert apply_incremental({"leader.replication.throttled.replicas": "0:1,0:1,1:1"}, [
        op("leader.replication.throttled.replicas", AlterOp.SUBTRACT, "0:1")]) == {
        "leader.replication.throttled.replicas": "0:1,1:1"}


def test_append_and_subtract_only_for_list_keys() -> None:
    with pytest.raises(InvalidConfig, match="^Config value append is not allowed for config "
                                            "key: retention.ms$"):
        apply_incremental({}, [op("retention.ms", AlterOp.APPEND, "1")])
    with pytest.raises(InvalidConfig, match="^Config value subtract is not allowed"):
        apply_incremental({}, [op("min.insync.replicas", AlterOp.SUBTRACT, "1")])
    with pytest.raises(InvalidConfig, match="^Unknown topic config name: nope$"):
        apply_incremental({}, [op("nope", AlterOp.APPEND, "1")])


def test_describe_sources_synonyms_and_values_in_kafkas_form() -> None:
    entries = {e.name: e for e in describe_config(
        {"retention.ms": "1000", "cleanup.policy": " compact , delete"},
        {"log.retention.hours": "24", "log.roll.hours": "1"})}
    assert set(entries) == KAFKA_39_TOPIC_KEYS
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.type) == (
        "1000", ConfigSource.TOPIC_CONFIG, ConfigType.LONG)
    # Kafka lists a key's broker synonyms from its primary one on (log.retention.ms): the
    # hours setting and default before it are dropped (ConfigHelper's dropWhile)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", ConfigSource.TOPIC_CONFIG)]
    assert entries["cleanup.policy"].value == "compact,delete"
    segment_ms = entries["segment.ms"]
    # the value is the broker's log.roll.hours; no synonym is listed, so Kafka says DEFAULT
    assert (segment_ms.value, segment_ms.source, segment_ms.synonyms) == (
        "3600000", ConfigSource.DEFAULT_CONFIG, ())
    segment_bytes = entries["segment.bytes"]
    assert (segment_bytes.value, segment_bytes.source) == (str(1 << 30),
                                                          ConfigSource.DEFAULT_CONFIG)
    remote = entries["remote.storage.enable"]
    assert (remote.value, remote.source, remote.synonyms) == (
        "false", ConfigSource.DEFAULT_CONFIG, ())
    assert not any(e.read_only or e.sensitive for e in entries.values())
    assert entries["preallocate"].documentation == (
        "Whether a new segment's file is allocated whole. "
        "(partctl: stored: segments are not preallocated)")
    assert entries["min.insync.replicas"].documentation == TOPIC_CONFIG_KEYS[
        "min.insync.replicas"].doc


def test_describe_lists_synonyms_from_the_primary_one_on_as_kafka() -> None:
    """What Kafka 3.9's DescribeConfigs lists for a topic key's broker synonyms: nothing before
    the primary synonym (log.retention.ms, log.roll.ms, log.flush.interval.ms,
    log.roll.jitter.ms), so a key whose primary synonym has no value lists none."""
    bare = {e.name: e for e in describe_config({})}
    for name in ("retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"):
        assert (bare[name].source, bare[name].synonyms) == (ConfigSource.DEFAULT_CONFIG, ()), \
            name
    assert [(s.name, s.value) for s in bare["segment.bytes"].synonyms] == [
        ("log.segment.bytes", str(1 << 30))]
    broker = {"log.retention.ms": "5000", "log.retention.hours": "24"}
    retention = {e.name: e for e in describe_config({}, broker)}["retention.ms"]
    assert (retention.value, retention.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]


def test_describe_only_the_names_asked_unknown_ones_left_out() -> None:
    entries = describe_config({}, names=["segment.ms", "nope", "min.insync.replicas"])
    assert [e.name for e in entries] == ["segment.ms", "min.insync.replicas"]


TIERED_BROKER = {"remote.log.storage.system.enable": "true"}


def test_remote_storage_needs_the_broker_switch() -> None:
    assert validate_topic_config({"remote.storage.enable": "true"}, TIERED_BROKER) == {
        "remote.storage.enable": True}
    with pytest.raises(InvalidConfig, match="Tiered Storage functionality is disabled"):
        validate_topic_config({"remote.storage.enable": "true"},
                              {"remote.log.storage.system.enable": "false"})


@pytest.mark.parametrize(("overrides", "message"), [
    ({"cleanup.policy": "compact"}, "Remote log storage is unsupported for the compacted topics"),
    ({"retention.ms": "1000", "local.retention.ms": "2000"},
     "Invalid value 2000 for configuration local.retention.ms: Value must not be more than "
     "retention.ms property value: 1000"),
    ({"retention.bytes": "100", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as "
     "retention.bytes value is set as 100"),
])
def test_remote_storage_rules(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfig) as failure:
        validate_topic_config({"remote.storage.enable": "true", **overrides}, TIERED_BROKER)
    assert str(failure.value) == message
    # The same values on a topic that is not tiered are fine.
    validate_topic_config(overrides)


def test_local_retention_within_retention_is_accepted() -> None:
    validate_topic_config({"remote.storage.enable": "true", "retention.ms": "-1",
                           "local.retention.ms": "-1", "retention.bytes": "100",
                           "local.retention.bytes": "-2"}, TIERED_BROKER)
