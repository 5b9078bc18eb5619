"""server.properties' coordinator security keys: ZooKeeper's digest identity and Kafka's
zookeeper.set.acl, etcd's user and TLS files; one clear error each when they do not fit, and
no password anywhere the config is shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, parse_config, parse_controller_config
from coordinator.credentials import Credentials

SECRET = "hunter2"
ZK = "broker.id=1\nzookeeper.connect=127.0.0.1:2181/kafka\n"
ETCD = "broker.id=1\npartctl.coordinator=etcd://127.0.0.1:2379/kafka\n"


@pytest.fixture
def password_file(tmp_path: Path) -> str:
    path = tmp_path / "zk-password"
    path.write_text(SECRET + "\n")
    return str(path)


def test_zookeeper_digest_credentials_and_set_acl(password_file: str) -> None:
    config = parse_config(ZK + f"zookeeper.digest.user=kafka\nzookeeper.digest.password.file="
                               f"{password_file}\nzookeeper.set.acl=true\n").config
    options = config.connect_options()
    assert options["credentials"] == Credentials("kafka", SECRET)
    assert options["set_acl"] is True and options["timeout"] == 18.0
    assert SECRET not in repr(config) and SECRET not in repr(config.properties)


def test_set_acl_defaults_to_false_as_in_kafka() -> None:
    assert parse_config(ZK).config.connect_options()["set_acl"] is False


def test_a_controller_process_reads_the_same_keys(password_file: str) -> None:
    config = parse_controller_config(
        "node.id=9\nzookeeper.connect=127.0.0.1:2181\nzookeeper.digest.user=kafka\n"
        f"zookeeper.digest.password.file={password_file}\n").config
    assert config.connect_options()["credentials"].user == "kafka"


def test_etcd_user_and_tls_files(password_file: str) -> None:
    config = parse_config(ETCD + f"etcd.user=partctl\netcd.password.file={password_file}\n"
                                 "etcd.ssl.cafile=/ca.pem\netcd.ssl.certfile=/c.pem\n"
                                 "etcd.ssl.keyfile=/k.pem\n").config
    options = config.connect_options()
    assert options["credentials"] == Credentials("partctl", SECRET)
    assert (options["ca_file"], options["cert_file"], options["key_file"]) == (
        "/ca.pem", "/c.pem", "/k.pem")


def test_etcd_request_limits_go_to_the_client_only_when_set() -> None:
    """A server run with other limits than etcd's defaults tells its clients by these keys;
    unset, the client keeps etcd's defaults (128 ops, 1.5 MiB)."""
    options = parse_config(ETCD + "etcd.max.txn.ops=1024\n"
                                  "etcd.max.request.bytes=4194304\n").config.connect_options()
    assert (options["max_txn_ops"], options["max_request_bytes"]) == (1024, 4 << 20)
    plain = parse_config(ETCD).config.connect_options()
    assert "max_txn_ops" not in plain and "max_request_bytes" not in plain


def test_a_password_in_the_coordinator_url_is_not_shown_as_a_property() -> None:
    config = parse_config(
        f"broker.id=1\npartctl.coordinator=etcd://root:{SECRET}@127.0.0.1:2379/k\n").config
    assert "partctl.coordinator" not in config.properties
    assert "partctl.coordinator" in config.sensitive_keys


@pytest.mark.parametrize(("key", "value", "hidden"), [
    ("zookeeper.connect", f"kafka:{SECRET}@127.0.0.1:2181/c", True),
    ("zookeeper.connect", "127.0.0.1:2181,127.0.0.1:2182/c", False),
    ("remote.log.storage.url", f"s3://bucket/p?secret_key={SECRET}", True),
    ("remote.log.storage.url", f"s3://key:{SECRET}@bucket/p", True),
    ("remote.log.storage.url", "file:///var/tier", False),
    ("listener.name.x.plain.sasl.jaas.config", "anything", True),
    ("listener.name.x.ssl.keystore.password", "", True),
    ("ssl.truststore.password", SECRET, True),
    ("num.partitions", f"x:{SECRET}@y", False),
])
def test_which_values_are_never_shown(key: str, value: str, hidden: bool) -> None:
    from broker.security import hides_value

    assert hides_value(key, value) is hidden


def test_a_zookeeper_connect_with_credentials_is_a_sensitive_key() -> None:
    config = parse_config(f"broker.id=1\nzookeeper.connect=kafka:{SECRET}@127.0.0.1:2181/c\n"
                          "listeners=SASL_PLAINTEXT://:9092\n"
                          "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n"
                          "inter.broker.listener.name=SASL_PLAINTEXT\n"
                          "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
                          "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
                          "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
                          "org.apache.kafka.common.security.scram.ScramLoginModule required "
                          f'username="b" password="{SECRET}";\n').config
    assert config.sensitive_keys == {
        "zookeeper.connect", "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"}
    assert SECRET not in repr(dict(config.properties)) and SECRET not in repr(config)
    plain = parse_config("broker.id=1\nzookeeper.connect=127.0.0.1:2181/c\n").config
    assert plain.properties["zookeeper.connect"] == "127.0.0.1:2181/c"
    assert not plain.sensitive_keys


@pytest.mark.parametrize(("text", "message"), [
    (ZK + "etcd.user=x\n", "etcd.user: the coordinator is not etcd"),
    (ETCD + "zookeeper.set.acl=true\n", "zookeeper.set.acl: the coordinator is not ZooKeeper"),
    (ZK + "zookeeper.digest.user=kafka\n", "zookeeper.digest.user is set but "
                                           "zookeeper.digest.password.file is not"),
    (ZK + "zookeeper.digest.user=kafka\nzookeeper.digest.password.file=/nonexistent/pw\n",
     "zookeeper.digest.password.file: cannot read /nonexistent/pw"),
    (ETCD + "etcd.ssl.certfile=/c.pem\n", "go together"),
    (ETCD + "etcd.ssl.certfile=/c.pem\netcd.ssl.keyfile=/k.pem\n", "needs etcd.ssl.cafile"),
    (ZK + "zookeeper.set.acl=maybe\n", "zookeeper.set.acl"),
    (ZK + "etcd.max.txn.ops=1024\n", "etcd.max.txn.ops: the coordinator is not etcd"),
    (ETCD + "etcd.max.txn.ops=2\n", "etcd.max.txn.ops"),
    (ETCD + "etcd.max.request.bytes=1000\n", "etcd.max.request.bytes"),
])
def test_settings_that_do_not_fit_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(text)
