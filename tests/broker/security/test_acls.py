"""Kafka's ACL rules (pure) and their storage at Kafka's coordinator paths (memory backend)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

import coordinator
from broker.config import ConfigError, parse_config
from broker.security import acl_store
from broker.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    authorize,
)
from broker.security.authorizer import Authorizer, peer_host

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.servers),
                        pytest.param("etcd", marks=pytest.mark.servers)])
def url(request: pytest.FixtureRequest) -> str:
    """A fresh place on each backend: the same paths under a chroot or key prefix."""
    if request.param == "memory":
        return f"memory://acls-{uuid.uuid4().hex}"
    server = request.getfixturevalue(f"{request.param}_server")
    return server.url(f"/acls-{uuid.uuid4().hex[:10]}")


def acl(name: str, op: Operation, *, principal: str = "User:alice", allow: bool = True,
        pattern: PatternType = PatternType.LITERAL, rtype: ResourceType = T,
        host: str = "*") -> AclBinding:
    return AclBinding(pattern=ResourcePattern(resource_type=rtype, name=name, pattern_type=pattern),
                      entry=AclEntry(principal=principal, host=host, operation=op,
                                     permission=Permission.ALLOW if allow else Permission.DENY))


def may(acls: list[AclBinding], op: Operation, name: str, *, principal: str = "User:alice",
        host: str = "10.0.0.1", rtype: ResourceType = T, **kw: object) -> bool:
    return authorize(acls, principal=principal, host=host, operation=op, resource_type=rtype,
                     name=name, **kw)  # type: ignore[arg-type]


def test_no_acl_refuses_unless_allow_everyone_if_no_acl_found() -> None:
    assert not may([], Operation.READ, "t")
    assert may([], Operation.READ, "t", allow_if_no_acls=True)
    # an ACL on the resource (for someone else) takes the default away
    assert not may([acl("t", Operation.READ, principal="User:bob")], Operation.READ, "t",
                   allow_if_no_acls=True)


def test_super_users_may_do_anything() -> None:
    deny = [acl("t", Operation.ALL, principal="User:*", allow=False)]
    assert may(deny, Operation.WRITE, "t", principal="User:admin",
               super_users=frozenset({"User:admin"}))
    assert not may(deny, Operation.WRITE, "t", principal="User:alice",
                   super_users=frozenset({"User:admin"}))


@pytest.mark.parametrize(("granted", "asked", "allowed"), [
    (Operation.READ, Operation.DESCRIBE, True),
    (Operation.WRITE, Operation.DESCRIBE, True),
    (Operation.DELETE, Operation.DESCRIBE, True),
    (Operation.ALTER, Operation.DESCRIBE, True),
    (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS, True),
    (Operation.ALL, Operation.CREATE, True),
    (Operation.DESCRIBE, Operation.READ, False),
    (Operation.READ, Operation.WRITE, False),
    (Operation.CREATE, Operation.DESCRIBE, False),
    (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, False),
    (Operation.ALTER_CONFIGS, Operation.DESCRIBE, False),
])
def test_implied_operations(granted: Operation, asked: Operation, allowed: bool) -> None:
    assert may([acl("t", granted)], asked, "t") is allowed


def test_deny_beats_allow_and_all_denies_everything() -> None:
    acls = [acl("t", Operation.ALL), acl("t", Operation.WRITE, allow=False)]
    assert not may(acls, Operation.WRITE, "t")
    assert may(acls, Operation.READ, "t")
    acls = [acl("t", Operation.READ), acl("*", Operation.ALL, principal="User:*", allow=False)]
    assert not may(acls, Operation.READ, "t")
    # a DENY of Read does not deny Describe, though Read implies it
    assert may([acl("t", Operation.ALL), acl("t", Operation.READ, allow=False)],
               Operation.DESCRIBE, "t")


def test_prefixed_and_wildcard_patterns_grant_what_they_cover_and_no_more() -> None:
    prefixed = [acl("orders-", Operation.WRITE, pattern=PatternType.PREFIXED)]
    assert may(prefixed, Operation.WRITE, "orders-eu")
    assert may(prefixed, Operation.WRITE, "orders-")
    assert not may(prefixed, Operation.WRITE, "orders")
    assert not may(prefixed, Operation.WRITE, "xorders-eu")
    assert not may(prefixed, Operation.READ, "orders-eu")
    assert not may(prefixed, Operation.WRITE, "orders-eu", rtype=G)
    wildcard = [acl("*", Operation.READ)]
    assert may(wildcard, Operation.READ, "anything")
    literal_star = [acl("a*", Operation.READ)]
    assert not may(literal_star, Operation.READ, "ab")


def test_principal_and_host_match_exactly_or_by_wildcard() -> None:
    acls = [acl("t", Operation.READ, principal="User:*", host="10.0.0.1")]
    assert may(acls, Operation.READ, "t", principal="User:bob", host="10.0.0.1")
    assert not may(acls, Operation.READ, "t", principal="User:bob", host="10.0.0.2")
    assert not may([acl("t", Operation.READ, principal="User:bob")], Operation.READ, "t")
    assert peer_host("127.0.0.1:5555") == "127.0.0.1"
    assert peer_host("[::1]:5555") == "::1"


def test_filters_match_as_kafkas_do() -> None:
    literal = acl("orders", Operation.READ)
    prefixed = acl("ord", Operation.WRITE, pattern=PatternType.PREFIXED)
    other = acl("g", Operation.READ, rtype=G, principal="User:bob")
    everything = AclBindingFilter()
    assert all(everything.matches(b) for b in (literal, prefixed, other))
    match = AclBindingFilter(resource_type=T, name="orders", pattern_type=PatternType.MATCH)
    assert match.matches(literal) and match.matches(prefixed) and not match.matches(other)
    exact = AclBindingFilter(resource_type=T, name="orders", pattern_type=PatternType.LITERAL)
    assert exact.matches(literal) and not exact.matches(prefixed)
    assert AclBindingFilter(principal="User:bob").matches(other)
    assert not AclBindingFilter(operation=Operation.WRITE).matches(literal)


@pytest.mark.parametrize("make", [
    lambda: ResourcePattern(resource_type=ResourceType.ANY, name="t"),
    lambda: ResourcePattern(resource_type=T, name=""),
    lambda: ResourcePattern(resource_type=T, name="*", pattern_type=PatternType.PREFIXED),
    lambda: ResourcePattern(resource_type=C, name="other"),
    lambda: AclEntry(principal="alice", host="*", operation=Operation.READ,
                     permission=Permission.ALLOW),
    lambda: AclEntry(principal="User:a", host="*", operation=Operation.ANY,
                     permission=Permission.ALLOW),
    lambda: Operation.parse("Jump"),
])
def test_malformed_acls_are_refused(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AclError):
        make()


def test_names_parse_as_kafka_writes_them() -> None:
    assert Operation.parse("ClusterAction") is Operation.CLUSTER_ACTION
    assert Operation.parse("CLUSTER_ACTION") is Operation.CLUSTER_ACTION
    assert Operation.CLUSTER_ACTION.label == "ClusterAction"
    assert ResourceType.TRANSACTIONAL_ID.label == "TransactionalId"
    assert Permission.ALLOW.label == "Allow"


def test_the_store_writes_kafkas_paths_json_and_notifications(url: str) -> None:
    client = coordinator.connect(url)
    try:
        acl_store.add_acls(client, [
            acl("orders", Operation.READ), acl("orders", Operation.WRITE, allow=False),
            acl("ord", Operation.IDEMPOTENT_WRITE, pattern=PatternType.PREFIXED),
            acl("kafka-cluster", Operation.CLUSTER_ACTION, rtype=C, principal="User:broker")])
        data, _ = client.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"},
            {"principal": "User:alice", "permissionType": "Deny", "operation": "Write",
             "host": "*"}]}
        data, _ = client.get("/kafka-acl-extended/prefixed/Topic/ord")
        assert json.loads(data)["acls"][0]["operation"] == "IdempotentWrite"
        assert client.exists("/kafka-acl/Cluster/kafka-cluster") is not None
        literal = client.children("/kafka-acl-changes")
        assert literal == ["acl_changes_0000000000", "acl_changes_0000000001"]
        assert client.get(f"/kafka-acl-changes/{literal[0]}")[0] == b"Topic:orders"
        extended = client.children("/kafka-acl-extended-changes")
        assert json.loads(client.get(f"/kafka-acl-extended-changes/{extended[0]}")[0]) == {
            "version": 1, "resourceType": "Topic", "name": "ord", "patternType": "PREFIXED"}
        assert len(acl_store.read_all(client)) == 3
        removed = acl_store.delete_acls(client, AclBindingFilter(resource_type=T, name="orders"))
        assert len(removed) == 2
        assert client.exists("/kafka-acl/Topic/orders") is None  # no ACL left: node gone
        assert len(acl_store.read_all(client)) == 2
    finally:
        client.close()


def test_the_authorizer_follows_changes_from_another_session(url: str) -> None:
    writer, reader = coordinator.connect(url), coordinator.connect(url)
    authorizer = Authorizer(reader, super_users=frozenset(), allow_if_no_acls=False)
    try:
        acl_store.add_acls(writer, [acl("before", Operation.READ)])
        authorizer.start()
        assert authorizer.authorized("User:alice", "1.2.3.4:9", Operation.READ, T, "before")
        assert not authorizer.authorized("User:alice", "1.2.3.4:9", Operation.READ, T, "after-x")
        acl_store.add_acls(writer, [acl("after-", Operation.READ, pattern=PatternType.PREFIXED)])
        deadline = time.monotonic() + 5
        while not authorizer.authorized("User:alice", "1.2.3.4:9", Operation.READ, T,
                                        "after-x"):
            assert time.monotonic() < deadline, "the change never arrived"
            time.sleep(0.02)
        acl_store.delete_acls(writer, AclBindingFilter(name="before"))
        while authorizer.authorized("User:alice", "1.2.3.4:9", Operation.READ, T, "before"):
            assert time.monotonic() < deadline, "the removal never arrived"
            time.sleep(0.02)
    finally:
        authorizer.close()
        writer.close()
        reader.close()


BASE = "broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"


def test_authorizer_settings_are_read() -> None:
    config = parse_config(BASE + "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
                          "super.users=User:admin;User:broker\n"
                          "allow.everyone.if.no.acl.found=true\n").config
    assert config.authorizer and config.allow_everyone_if_no_acl_found
    assert config.super_users == {"User:admin", "User:broker"}
    assert not parse_config(BASE).config.authorizer


@pytest.mark.parametrize(("line", "message"), [
    ("authorizer.class.name=com.example.Nope", "authorizer.class.name: com.example.Nope: unknown"),
    ("super.users=admin", "super.users: 'admin' is not a principal"),
])
def test_bad_authorizer_settings_are_one_line(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(BASE + line + "\n")


def test_write_on_some_topic_as_kafkas_authorize_by_resource_type() -> None:
    def any_write(acls: list[AclBinding], **kw: object) -> bool:
        from broker.security.acls import authorize_any

        return authorize_any(acls, principal="User:alice", host="10.0.0.1",
                             operation=Operation.WRITE, resource_type=T, **kw)  # type: ignore[arg-type]

    assert not any_write([])
    assert any_write([], allow_if_no_acls=True)
    assert any_write([acl("t", Operation.WRITE)])
    assert any_write([acl("p-", Operation.ALL, pattern=PatternType.PREFIXED)])
    assert not any_write([acl("t", Operation.READ)])
    assert not any_write([acl("t", Operation.WRITE, rtype=G)])
    assert not any_write([acl("t", Operation.WRITE), acl("*", Operation.WRITE, allow=False)])
    assert not any_write([acl("p-x", Operation.WRITE),
                          acl("p-", Operation.ALL, allow=False, pattern=PatternType.PREFIXED)])
    assert any_write([acl("t", Operation.WRITE), acl("u", Operation.WRITE, allow=False)])
    assert any_write([acl("t", Operation.WRITE, principal="User:bob")],
                     super_users=frozenset({"User:alice"}))


def test_processed_notifications_expire() -> None:
    client = coordinator.connect(f"memory://acls-{uuid.uuid4().hex}")
    now = [0.0]
    cache = acl_store.AclCache(client, clock=lambda: now[0], expiration_ms=1000)
    try:
        cache.start()
        acl_store.add_acls(client, [acl("a", Operation.READ)])
        deadline = time.monotonic() + 5
        while not cache.bindings():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert client.children("/kafka-acl-changes")
        now[0] = 2.0  # past the expiration: the next report deletes it
        acl_store.add_acls(client, [acl("b", Operation.READ)])
        while client.children("/kafka-acl-changes") != ["acl_changes_0000000001"]:
            assert time.monotonic() < deadline, client.children("/kafka-acl-changes")
            time.sleep(0.01)
        assert len(cache.bindings()) == 2
    finally:
        cache.close()
        client.close()
