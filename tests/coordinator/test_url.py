"""Coordinator URLs are shown redacted: a secret in one never reaches an error, a repr or a log."""

from __future__ import annotations

import io
import logging
from pathlib import Path

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
    "etcd://127.0.0.1:2379?password=hunter2",
    "memory://admin:hunter2@store",
    "admin:hunter2@127.0.0.1:2181",
    "zk://admin:@127.0.0.1",
    "zk://:hunter2@127.0.0.1",
    "zk://admin:hunter2@127.0.0.1:99999",
])
def test_a_refused_url_never_echoes_its_credentials(url: str) -> None:
    with pytest.raises(InvalidURL) as info:
        coordinator.connect(url, timeout=1)
    message = str(info.value)
    assert "hunter2" not in message and "ter2" not in message
    assert "***" in message


@pytest.mark.parametrize(("url", "user", "password", "hosts"), [
    ("zookeeper://admin:hunter2@zk1:2181/kafka", "admin", "hunter2", (("zk1", 2181),)),
    ("etcd://root:hun%2Fter2%40x@h1,h2:2380/p", "root", "hun/ter2@x", (("h1", 2379),
                                                                        ("h2", 2380))),
    ("zk://us%3Aer:a:b@zk1", "us:er", "a:b", (("zk1", 2181),)),
])
def test_credentials_in_the_url_are_parsed_and_never_shown(url: str, user: str, password: str,
                                                           hosts: tuple) -> None:
    if ":" in user:  # a digest identity is user:hash, so a user name cannot hold ':'
        with pytest.raises(InvalidURL, match="bad credentials") as info:
            coordinator.parse(url)
        assert password not in str(info.value)
        return
    parsed = coordinator.parse(url)
    assert parsed.credentials == coordinator.Credentials(user, password)
    assert parsed.hosts == hosts and "@" not in parsed.root
    for shown in (repr(parsed), parsed.display, repr(parsed.credentials),
                  str(parsed.credentials)):
        assert password not in shown
    assert repr(parsed.credentials) == f"Credentials(user={user!r}, password='***')"


def test_a_stored_url_leaves_the_credentials_out() -> None:
    from coordinator.url import without_credentials

    assert without_credentials("etcd://root:x@h1:2379/p") == "etcd://h1:2379/p"
    assert (without_credentials("zookeeper://zk1:2181/kafka@prod")
            == "zookeeper://zk1:2181/kafka@prod")  # a '@' in the chroot is no user info


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
    """Port 1 of the loopback refuses connections: the commands fail to connect and say so,
    the job is stored, without the URL's password; the secret is printed nowhere."""
    out, err = io.StringIO(), io.StringIO()
    url = "zookeeper://admin:hunter2@127.0.0.1:1/kafka"
    with caplog.at_level(logging.DEBUG):
        code = main([*argv, "--coordinator", url, "--timeout", "0.5"], out=out, err=err)
    if argv[0] == "jobs":
        assert code == 0, err.getvalue()
    else:
        assert code == 1
        assert "127.0.0.1:1" in err.getvalue() and len(err.getvalue().splitlines()) == 1
    assert SECRET not in out.getvalue() + err.getvalue() + caplog.text


def test_help_never_shows_a_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTCTL_COORDINATOR", "zookeeper://admin:hunter2@127.0.0.1:1/kafka")
    monkeypatch.setenv("PARTCTL_COORDINATOR_USER", "admin")
    monkeypatch.setenv("PARTCTL_COORDINATOR_PASSWORD", SECRET)
    for argv in (["--help"], ["topics", "list", "--help"], ["controller", "status", "--help"]):
        out, err = io.StringIO(), io.StringIO()
        try:
            main(argv, out=out, err=err)
        except SystemExit:
            pass
        assert SECRET not in out.getvalue() + err.getvalue()


def test_a_job_record_keeps_no_coordinator_password(tmp_path: Path) -> None:
    """The record is stored (then listed): its URL has no user info; the job authenticates
    with the environment of the process that runs it."""
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    url = "zookeeper://admin:hunter2@127.0.0.1:1/kafka"
    texts = []
    for argv in (["jobs", "add", "preferred-election", "--every", "5m", "--coordinator", url],
                 ["jobs", "list"]):
        out, err = io.StringIO(), io.StringIO()
        assert main([*argv, "--db", db], out=out, err=err) == 0, err.getvalue()
        texts.append(out.getvalue() + err.getvalue())
    assert SECRET not in "".join(texts)
    assert SECRET.encode() not in (tmp_path / "jobs.db").read_bytes()
