"""``partctl topics alter-config | describe-config`` and ``topics create --config``, in the
manner of kafka-configs --entity-type topics, on every backend: changes written with their
notification, Kafka's describe lines, and every user error one line with nothing written."""

from __future__ import annotations

import io

import pytest

from coordinator import Coordinator
from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from partctl.cli import main
from tests.contract.conftest import Harness


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def client(backend: Harness) -> Coordinator:
    client = backend.connect()
    MetadataClient(client).register_broker(BrokerInfo(id=1, host="127.0.0.1", port=9092))
    return client


def test_create_alter_and_describe(client: Coordinator, backend: Harness) -> None:
    url = ["--coordinator", backend.url()]
    code, out, err = run("topics", "create", *url, "--topic", "t", "--partitions", "1",
                         "--replication-factor", "1", "--config", "retention.ms=1000")
    assert (code, err) == (0, ""), err
    assert Admin(client).topic_config("t") == {"retention.ms": "1000"}
    code, out, err = run("topics", "alter-config", *url, "--topic", "t", "--set",
                         "min.insync.replicas=2", "--delete", "retention.ms", "--append",
                         "cleanup.policy=compact")
    assert (code, err) == (0, ""), err
    assert out == ("Config overrides of topic t are now: cleanup.policy=delete,compact, "
                   "min.insync.replicas=2.\n")
    assert len(MetadataClient(client).config_change_notifications()) == 1
    code, out, err = run("topics", "describe-config", *url, "--topic", "t")
    assert (code, err) == (0, ""), err
    assert out == (
        "Dynamic configs for topic t are:\n"
        "  cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n")
    code, out, err = run("topics", "describe-config", *url, "--topic", "t", "--all")
    assert code == 0 and out.startswith("All configs for topic t are:\n")
    assert "  retention.ms=604800000 sensitive=false synonyms={}\n" in out  # as Kafka 3.9
    assert len(out.splitlines()) == 37
    code, out, err = run("topics", "alter-config", *url, "--topic", "t", "--set",
                         "segment.ms=5", "--validate-only")
    assert code == 0 and out == ("Config overrides of topic t would be: cleanup.policy="
                                 "delete,compact, min.insync.replicas=2, segment.ms=5.\n")
    assert "segment.ms" not in Admin(client).topic_config("t")


@pytest.mark.parametrize(("argv", "message"), [
    (["--set", "retention.hours=1"], "Unknown topic config name: retention.hours"),
    (["--set", "min.insync.replicas=0"], "Invalid value 0 for configuration "
     "min.insync.replicas: Value must be at least 1"),
    (["--set", "retention.ms"], "bad --set 'retention.ms': want KEY=VALUE"),
    (["--set", "retention.ms=1", "--set", "retention.ms=2"], "--set names retention.ms twice"),
    (["--set", "retention.ms=1", "--delete", "retention.ms"],
     "Error due to duplicate config keys"),
    (["--append", "retention.ms=1"], "Config value append is not allowed for config key: "
     "retention.ms"),
    ([], "give at least one of --set, --delete, --append, --subtract"),
    (["--topic", "missing", "--set", "retention.ms=1"], "topic 'missing' does not exist"),
])
def test_user_errors_are_one_line_and_write_nothing(client: Coordinator, backend: Harness,
                                                     argv: list[str], message: str) -> None:
    Admin(client).create_topic("t", assignment={0: [1]})
    before = client.get("/config/topics/t")
    topic = [] if "--topic" in argv else ["--topic", "t"]
    code, out, err = run("topics", "alter-config", "--coordinator", backend.url(), *topic,
                         *argv)
    assert (code, out, err) == (1, "", f"partctl: error: {message}\n")
    assert client.get("/config/topics/t") == before
    assert MetadataClient(client).config_change_notifications() == []


def test_create_with_a_bad_config_creates_nothing(client: Coordinator, backend: Harness
                                                  ) -> None:
    code, out, err = run("topics", "create", "--coordinator", backend.url(), "--topic", "t",
                         "--partitions", "1", "--replication-factor", "1", "--config",
                         "segment.bytes=1")
    assert (code, out) == (1, "")
    assert err == ("partctl: error: Invalid value 1 for configuration segment.bytes: Value "
                   "must be at least 14\n")
    assert Admin(client).list_topics() == []
    code, out, err = run("topics", "describe-config", "--coordinator", backend.url(),
                         "--topic", "t")
    assert (code, out, err) == (1, "", "partctl: error: topic 't' does not exist\n")


def test_a_tiered_topic_is_refused_when_the_brokers_cannot_say_they_tier(
        backend: Harness) -> None:
    """``topics create --config remote.storage.enable=true`` asks the live brokers whether they
    set remote.log.storage.system.enable; a broker that cannot be asked (here: nothing listens
    where it registered) is one error line, and nothing is created."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = backend.connect()
    MetadataClient(client).register_broker(BrokerInfo(id=7, host="127.0.0.1", port=port))
    code, out, err = run("topics", "create", "--coordinator", backend.url(), "--topic", "t",
                         "--partitions", "1", "--replication-factor", "1", "--config",
                         "remote.storage.enable=true", "--timeout", "2")
    assert (code, out) == (1, "")
    assert err.startswith("partctl: error: remote.storage.enable: cannot learn whether the "
                          "brokers tier: cannot reach any broker") and err.count("\n") == 1, err
    assert Admin(client).list_topics() == []
