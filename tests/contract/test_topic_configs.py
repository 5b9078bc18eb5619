"""Topic configs in Kafka's layout, on every backend: the config node and the change
notification byte for byte as Kafka writes them, the admin operations (create with configs,
incremental and full alteration, validate-only, errors that write nothing), conditional writes
redone on a conflict, and the change listener (order, last sequence, purge)."""

from __future__ import annotations

import pytest

from coordinator import Coordinator, layout
from coordinator.admin import Admin, InvalidRequest
from coordinator.clock import ManualClock
from coordinator.codecs import BrokerInfo
from coordinator.config_changes import ConfigChangeListener
from coordinator.configdef import InvalidConfig
from coordinator.errors import BadVersion
from coordinator.metadata import MetadataClient, UnknownTopic
from coordinator.topic_config import AlterOp, ConfigSource, IncrementalOp


def admin_with_topic(client: Coordinator, topic: str = "t", **config: str) -> Admin:
    admin = Admin(client)
    admin.metadata.ensure_layout()
    admin.metadata.register_broker(BrokerInfo(id=1, host="h", port=9092))
    admin.create_topic(topic, assignment={0: [1]}, config=config or None)
    return admin


def changes(client: Coordinator) -> list[str]:
    return MetadataClient(client).config_change_notifications()


def test_config_node_and_notification_are_kafkas_bytes(client: Coordinator) -> None:
    admin = admin_with_topic(client)
    assert client.get("/config/topics/t")[0] == b'{"version":1,"config":{}}'
    assert changes(client) == []  # creation announces nothing: brokers read it at creation
    change = admin.alter_topic_config("t", {"retention.ms": "1000"})
    assert client.get("/config/topics/t")[0] == (
        b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert change.notification is not None
    assert change.notification.startswith("config_change_")
    assert len(change.notification) == len("config_change_") + 10
    assert changes(client) == [change.notification]
    data, _ = client.get(f"/config/changes/{change.notification}")
    assert data == b'{"version":2,"entity_path":"topics/t"}'


def test_create_topic_validates_and_stores_initial_overrides(client: Coordinator) -> None:
    admin = admin_with_topic(client, "a", **{"min.insync.replicas": "2",
                                            "cleanup.policy": "compact"})
    assert admin.topic_config("a") == {"min.insync.replicas": "2", "cleanup.policy": "compact"}
    with pytest.raises(InvalidConfig, match="Unknown topic config name: retention.hours"):
        admin.create_topic("b", assignment={0: [1]}, config={"retention.hours": "1"})
    with pytest.raises(InvalidConfig, match="Value must be at least 1"):
        admin.create_topic("b", assignment={0: [1]}, config={"min.insync.replicas": "0"})
    assert admin.list_topics() == ["a"]
    assert client.exists("/config/topics/b") is None


def test_incremental_alteration_set_delete_append_subtract(client: Coordinator) -> None:
    admin = admin_with_topic(client, **{"retention.ms": "1000", "segment.bytes": "1048576"})
    change = admin.alter_topic_config("t", {"min.insync.replicas": "2"}, ["segment.bytes"],
                                      append={"cleanup.policy": "compact"})
    assert change.overrides == {"retention.ms": "1000", "min.insync.replicas": "2",
                                "cleanup.policy": "delete,compact"}
    assert admin.topic_config("t") == change.overrides
    admin.alter_topic_config("t", ops=[IncrementalOp(name="cleanup.policy",
                                                     op=AlterOp.SUBTRACT, value="delete")])
    assert admin.topic_config("t")["cleanup.policy"] == "compact"
    assert len(changes(client)) == 2


def test_full_replacement_returns_left_out_keys_to_defaults(client: Coordinator) -> None:
    admin = admin_with_topic(client, **{"retention.ms": "1000"})
    admin.replace_topic_config("t", {"segment.ms": "60000"})
    assert admin.topic_config("t") == {"segment.ms": "60000"}
    described = {e.name: e for e in admin.describe_topic_config("t")}
    assert described["retention.ms"].source is ConfigSource.DEFAULT_CONFIG
    assert (described["segment.ms"].value, described["segment.ms"].source) == (
        "60000", ConfigSource.TOPIC_CONFIG)


def test_bad_requests_write_nothing(client: Coordinator) -> None:
    admin = admin_with_topic(client, **{"retention.ms": "1000"})
    before = client.get("/config/topics/t")
    with pytest.raises(InvalidConfig, match="^Unknown topic config name: nope$"):
        admin.alter_topic_config("t", {"nope": "1"})
    with pytest.raises(InvalidConfig, match="min.insync.replicas: Value must be at least 1"):
        admin.alter_topic_config("t", {"min.insync.replicas": "0"})
    with pytest.raises(InvalidConfig, match="append is not allowed"):
        admin.alter_topic_config("t", append={"retention.ms": "5"})
    with pytest.raises(InvalidRequest, match="^Error due to duplicate config keys$"):
        admin.alter_topic_config("t", {"retention.ms": "5"}, ["retention.ms"])
    with pytest.raises(InvalidRequest, match="^Null value not supported for : retention.ms$"):
        admin.alter_topic_config("t", ops=[IncrementalOp(name="retention.ms", op=AlterOp.SET)])
    with pytest.raises(InvalidConfig):
        admin.replace_topic_config("t", {"segment.bytes": "1"})
    with pytest.raises(UnknownTopic):
        admin.alter_topic_config("missing", {"retention.ms": "5"})
    with pytest.raises(UnknownTopic):
        admin.describe_topic_config("missing")
    with pytest.raises(InvalidRequest):
        admin.alter_topic_config("bad/name", {"retention.ms": "5"})
    change = admin.alter_topic_config("t", {"retention.ms": "5"}, validate_only=True)
    assert change.notification is None and change.overrides == {"retention.ms": "5"}
    assert client.get("/config/topics/t") == before
    assert changes(client) == []
    assert client.exists("/config/topics/missing") is None


def test_remote_storage_once_on_cannot_be_turned_off(client: Coordinator) -> None:
    """As Kafka in ZooKeeper mode: set false, deleted, or left out of a full replacement,
    remote.storage.enable of a tiered topic is refused (INVALID_CONFIG), nothing written;
    turning it on and other changes of a tiered topic are taken."""
    tiered = {"remote.log.storage.system.enable": "true"}
    admin = Admin(client)
    admin.metadata.ensure_layout()
    admin.metadata.register_broker(BrokerInfo(id=1, host="h", port=9092))
    admin.create_topic("t", assignment={0: [1]}, config={"remote.storage.enable": "true"},
                       broker_config=tiered)
    before = client.get("/config/topics/t")
    message = "^Disabling remote storage feature on the topic level is not supported.$"
    with pytest.raises(InvalidConfig, match=message):
        admin.alter_topic_config("t", {"remote.storage.enable": "false"}, broker_config=tiered)
    with pytest.raises(InvalidConfig, match=message):
        admin.alter_topic_config("t", delete=["remote.storage.enable"], broker_config=tiered)
    with pytest.raises(InvalidConfig, match=message):
        admin.replace_topic_config("t", {"retention.ms": "-1"}, broker_config=tiered)
    assert client.get("/config/topics/t") == before
    assert changes(client) == []
    admin.alter_topic_config("t", {"local.retention.ms": "1000"}, broker_config=tiered)
    admin.create_topic("u", assignment={0: [1]})
    admin.alter_topic_config("u", {"remote.storage.enable": "true"}, broker_config=tiered)


def test_a_topic_without_a_config_node_gets_one(client: Coordinator) -> None:
    admin = admin_with_topic(client)
    client.delete("/config/topics/t")  # a topic written by an older tool
    assert admin.topic_config("t") == {}
    admin.alter_topic_config("t", {"retention.ms": "7"})
    assert admin.topic_config("t") == {"retention.ms": "7"}


def test_conditional_write_refuses_a_stale_version_and_admin_redoes_it(
        client: Coordinator, other: Coordinator) -> None:
    admin = admin_with_topic(client, **{"retention.ms": "1"})
    md = MetadataClient(other)
    stale = md.topic_configs(["t"])["t"]
    md.set_topic_config("t", {"segment.ms": "5"}, stale.version)
    with pytest.raises(BadVersion):
        md.set_topic_config("t", {"retention.ms": "9"}, stale.version)
    with pytest.raises(UnknownTopic):
        md.set_topic_config("gone", {}, None)

    # An alteration racing another: the first conditional write fails, the second one
    # applies the operation to what the other wrote.
    real = admin.metadata.set_topic_config
    raced = []

    def racing(topic: str, config, version):  # noqa: ANN001
        if not raced:
            raced.append(True)
            md.set_topic_config(topic, {"segment.ms": "5", "flush.ms": "7"},
                                md.topic_configs([topic])[topic].version)
        return real(topic, config, version)

    admin.metadata.set_topic_config = racing  # type: ignore[method-assign]
    admin.alter_topic_config("t", {"retention.ms": "3"})
    assert admin.topic_config("t") == {"segment.ms": "5", "flush.ms": "7", "retention.ms": "3"}


def test_listener_processes_in_order_once_and_purges_expired(
        client: Coordinator, other: Coordinator) -> None:
    admin = admin_with_topic(client)
    admin.create_topic("u", assignment={0: [1]})
    admin.alter_topic_config("t", {"retention.ms": "1"})
    admin.alter_topic_config("u", {"retention.ms": "2"})
    clock = ManualClock(start_ms=0)
    seen: list[tuple[str, str]] = []
    listener = ConfigChangeListener(other, lambda kind, name: seen.append((kind, name)),
                                    clock=clock, expiration_ms=1000)
    assert listener.process() == 2  # all are new to a listener that just started
    assert seen == [("topics", "t"), ("topics", "u")]
    names = changes(client)
    assert listener.last_processed == int(names[-1].removeprefix("config_change_"))
    assert listener.process() == 0 and len(seen) == 2  # processed once
    admin.alter_topic_config("t", {"retention.ms": "3"})
    clock.set(500)
    assert listener.process() == 1 and seen[-1] == ("topics", "t")
    clock.set(1001)  # the first two were first seen at 0, the third at 500
    listener.process()
    assert changes(client) == [n for n in changes(client) if n not in names]
    assert len(changes(client)) == 1
    # Version 1 notifications and other entity types are read too; junk is skipped.
    client.create(layout.CONFIG_CHANGE_SEQUENTIAL,
                  b'{"version":1,"entity_type":"topics","entity_name":"u"}', sequential=True)
    client.create(layout.CONFIG_CHANGE_SEQUENTIAL, b'not json', sequential=True)
    client.create(layout.CONFIG_CHANGE_SEQUENTIAL, b'{"version":2,"entity_path":"brokers/1"}',
                  sequential=True)
    assert listener.process() == 3
    assert seen[-2:] == [("topics", "u"), ("brokers", "1")]


def test_listener_follows_the_watch(client: Coordinator, other: Coordinator) -> None:
    from tests.waiting import Recorder

    admin = admin_with_topic(client)
    seen: Recorder[str] = Recorder()
    listener = ConfigChangeListener(other, lambda kind, name: seen(name)).start()
    try:
        admin.alter_topic_config("t", {"retention.ms": "1"})
        seen.wait_count(1)
        admin.alter_topic_config("t", {"retention.ms": "2"})
        admin.alter_topic_config("t", {"retention.ms": "3"})
        seen.wait_count(3)
        assert seen.items == ["t", "t", "t"]
    finally:
        listener.close()
