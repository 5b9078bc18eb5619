"""Coordinator URLs are shown redacted: a secret in one never reaches an error, a repr or a log."""

from __future__ import annotations

import io
import logging

import pytest

import coordinator
from coordinator import InvalidURL
from coordinator.url import redact
from partctl.cli import main

SECRET = "hunter2"


@pytest.mark.parametrize(("url", "shown"), [
    ("zookeeper://admin:hunter2@zk1:2181/kafka", "zookeeper://***@zk1:2181/kafka"),
    ("etcd://root:hunter2@h1:2379,h2:2379/p", "etcd://***@h1:2379,h2:2379/p"),
    ("zk://admin:hun/ter2@zk1/kafka", "zk://***@zk1/kafka"),  # a '/' in the password
    ("etcd://h:2379/p?user=root&password=hunter2", "etcd://h:2379/p?user=***&password=***"),
    ("etcd://h:2379/p#hunter2", "etcd://h:2379/p#***"),
    ("admin:hunter2@zk1:2181", "***@zk1:2181"),
    ("memory://demo", "memory://demo"),
    ("zookeeper://zk1:2181,zk2:2181/kafka", "zookeeper://zk1:2181,zk2:2181/kafka"),
])
def test_redact_masks_credentials_and_query_values(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize("url", [
    "zookeeper://admin:hunter2@127.0.0.1:2181/kafka",
    "zk://admin:hunter2@127.0.0.1",
    "zk://admin:hun/ter2@127.0.0.1",
    "etcd://root:hunter2@127.0.0.1:2379",
    "etcd://127.0.0.1:2379?password=hunter2",
    "memory://admin:hunter2@store",
    "admin:hunter2@127.0.0.1:2181",
])
def test_a_refused_url_never_echoes_its_credentials(url: str) -> None:
    with pytest.raises(InvalidURL) as info:
        coordinator.connect(url, timeout=1)
    message = str(info.value)
    assert "hunter2" not in message and "hun/ter2" not in message and "ter2" not in message
    assert "***" in message


def test_credentials_are_refused_by_name() -> None:
    with pytest.raises(InvalidURL, match="credentials in a coordinator URL are not supported: "
                                         "'zookeeper://\\*\\*\\*@zk1:2181/kafka'"):
        coordinator.parse("zookeeper://admin:hunter2@zk1:2181/kafka")


def test_reprs_show_the_url_redacted() -> None:
    parsed = coordinator.parse("zookeeper://zk1:2181/kafka@prod")  # a legal chroot
    assert parsed.root == "/kafka@prod" and parsed.raw == "zookeeper://zk1:2181/kafka@prod"
    assert "raw=" not in repr(parsed) and "zookeeper://" not in repr(parsed)
    assert parsed.display == "zookeeper://***@prod"  # masks too much rather than too little
    client = coordinator.connect("memory://repr-test")
    try:
        assert repr(client) == "<MemoryCoordinator memory://repr-test>"
    finally:
        client.close()


@pytest.mark.parametrize("argv", [
    ["controller", "status"],
    ["topics", "list"],
    ["reassign", "cancel"],
    ["jobs", "add", "preferred-election", "--every", "5m", "--db", "sqlite://"],
])
def test_the_cli_never_prints_a_coordinator_secret(argv: list[str],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    out, err = io.StringIO(), io.StringIO()
    url = "zookeeper://admin:hunter2@127.0.0.1:1/kafka"
    with caplog.at_level(logging.DEBUG):
        code = main([*argv, "--coordinator", url], out=out, err=err)
    assert code == 1
    assert err.getvalue() == ("partctl: error: credentials in a coordinator URL are not "
                              "supported: 'zookeeper://***@127.0.0.1:1/kafka'\n")
    assert SECRET not in out.getvalue() + err.getvalue() + caplog.text
