"""Topic creation limits, in the library (coordinator.admin.Admin) and through the CLI, on every
backend: names that collide under Kafka's rule, names checked before any path is built from
them, partition counts and replication factors that make sense, and an assignment too big for
one coordinator node refused before it is sent (ZooKeeper would drop the connection)."""

from __future__ import annotations

import io

import pytest

from coordinator.admin import Admin, InvalidRequest, colliding_topics
from coordinator.assignment import MAX_PARTITIONS, assign_replicas
from coordinator.codecs import BrokerInfo, TopicAssignment
from coordinator.metadata import AssignmentTooLarge, MetadataClient, TopicExists
from partctl.cli import main
from tests.contract.conftest import Harness

BROKERS = 16


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def one_error(argv: list[str], message: str) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (1, ""), (argv, err)
    assert err == f"partctl: error: {message}\n", argv


@pytest.fixture
def admin(backend: Harness) -> Admin:
    """An Admin on a fresh namespace with brokers 1..16 registered (no controller: creating a
    topic is a write to the topic node, as in Kafka's tools)."""
    client = backend.connect()
    md = MetadataClient(client)
    for b in range(1, BROKERS + 1):
        md.register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9000 + b))
    return Admin(client)


def test_kafkas_collision_rule() -> None:
    assert colliding_topics("my_topic", ["my.topic", "my-topic", "other"]) == ["my.topic"]
    assert colliding_topics("a.b_c", ["a_b.c", "a_b_c", "a.b_c"]) == ["a_b.c", "a_b_c"]
    assert colliding_topics("plain", ["plain", "pl.ain"]) == []  # no '.' or '_': no collision


def test_topics_that_collide_are_refused(admin: Admin, backend: Harness) -> None:
    admin.create_topic("my.topic", assignment={0: [1, 2]})
    with pytest.raises(InvalidRequest, match=r"topic 'my_topic' collides with existing "
                                             r"topic\(s\) my\.topic"):
        admin.create_topic("my_topic", 1, 1)
    with pytest.raises(InvalidRequest, match="collides"):
        admin.create_topic("my_topic", assignment={0: [1]})
    with pytest.raises(TopicExists):
        admin.create_topic("my.topic", 1, 1)
    url = ["--coordinator", backend.url()]
    one_error(["topics", "create", *url, "--topic", "my_topic", "--partitions", "1",
               "--replication-factor", "1"],
              "topic 'my_topic' collides with existing topic(s) my.topic ('.' and '_' are the "
              "same character in metric names)")
    assert run("topics", "create", *url, "--topic", "my-topic", "--partitions", "1",
               "--replication-factor", "1")[0] == 0
    assert admin.list_topics() == ["my-topic", "my.topic"]


def test_names_are_checked_before_a_path_is_built(admin: Admin, backend: Harness) -> None:
    admin.create_topic("t", assignment={0: [1, 2]})
    md = admin.metadata
    url = ["--coordinator", backend.url()]
    illegal = ("topic name 't/partitions' has illegal characters '/' (allowed: ASCII letters, "
               "digits, '.', '_', '-')")
    # /brokers/topics/t/partitions exists: without the check, deleting "t/partitions" asked
    # the controller (through /admin/delete_topics/t/...) to delete topic t
    md.coordinator.ensure_path("/brokers/topics/t/partitions")
    one_error(["topics", "delete", *url, "--topic", "t/partitions"], illegal)
    with pytest.raises(InvalidRequest, match="illegal characters"):
        admin.delete_topic("t/partitions")
    with pytest.raises(ValueError, match="illegal characters"):
        md.request_topic_deletion("t/partitions")
    assert md.topics_to_delete() == []
    one_error(["topics", "describe", *url, "--topic", "t/partitions"], illegal)
    one_error(["elect", "preferred", *url, "--topic", ".."], "topic name cannot be '..'")
    one_error(["topics", "create", *url, "--topic", "x" * 250, "--partitions", "1",
               "--replication-factor", "1"], "topic name is longer than 249 characters")
    assert admin.list_topics() == ["t"]


def test_partition_counts_and_replication_factors(admin: Admin, backend: Harness) -> None:
    url = ["--coordinator", backend.url()]
    cases = [
        ("0", "3", "number of partitions must be between 1 and 100,000, got 0"),
        ("-2", "3", "number of partitions must be between 1 and 100,000, got -2"),
        ("100000000", "3", "number of partitions must be between 1 and 100,000, got "
                           "100,000,000"),
        ("200000", "3", "number of partitions must be between 1 and 100,000, got 200,000"),
        ("3", "0", "replication factor must be at least 1, got 0"),
        ("3", "17", "replication factor 17 larger than available brokers 16"),
    ]
    for partitions, rf, message in cases:
        one_error(["topics", "create", *url, "--topic", "t", "--partitions", partitions,
                   "--replication-factor", rf], message)
    with pytest.raises(InvalidRequest, match="got 100,000,000"):
        admin.create_topic("t", 100_000_000, 3)
    with pytest.raises(InvalidRequest, match="must be an integer, got 2.5"):
        admin.create_topic("t", 2.5, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="at most 100,000 partitions, the assignment has "
                                             "100,001"):
        admin.create_topic("t", assignment=dict.fromkeys(range(MAX_PARTITIONS + 1), [1]))
    one_error(["topics", "create", *url, "--topic", "t", "--replica-assignment",
               ",".join(["1"] * (MAX_PARTITIONS + 1))],
              "a topic has at most 100,000 partitions, the assignment has 100,001")
    assert admin.list_topics() == []


def _too_big(limit: int) -> tuple[int, int]:
    """Partitions and a replication factor whose assignment passes ``limit`` bytes."""
    rf = 3 if limit < 1_600_000 else BROKERS
    size = len(TopicAssignment(topic="big", topic_id="x" * 22, partitions={
        p: tuple(r) for p, r in assign_replicas(range(1, BROKERS + 1), MAX_PARTITIONS, rf,
                                                start_index=0).items()}).encode())
    assert size > limit  # the premise
    return MAX_PARTITIONS, rf


def test_an_assignment_bigger_than_a_node_is_refused_before_it_is_sent(
        admin: Admin, backend: Harness) -> None:
    caps = admin.coordinator.capabilities
    partitions, rf = _too_big(caps.max_multi_bytes)
    with pytest.raises(AssignmentTooLarge) as e:
        admin.create_topic("big", partitions, rf)
    assert str(e.value).startswith("topic big: the assignment of 100,000 partitions is ")
    assert str(e.value).endswith(f"bytes encoded, more than one {caps.name} node holds "
                                 f"({caps.max_multi_bytes:,} bytes): use fewer partitions or "
                                 f"replicas")
    code, _, err = run("topics", "create", "--coordinator", backend.url(), "--topic", "big",
                       "--partitions", str(partitions), "--replication-factor", str(rf))
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("partctl: error: topic big: the assignment of 100,000 partitions is ")
    assert f"more than one {caps.name} node holds" in err
    # the session is fine (ZooKeeper would have dropped the connection) and nothing was written
    assert admin.list_topics() == []


def test_adding_partitions_has_the_same_limits(admin: Admin) -> None:
    caps = admin.coordinator.capabilities
    _, rf = _too_big(caps.max_multi_bytes)
    admin.create_topic("t", assignment={0: list(range(1, rf + 1))})
    with pytest.raises(InvalidRequest, match="at most 100,000 partitions, asked for 100,001"):
        admin.add_partitions("t", MAX_PARTITIONS + 1)
    with pytest.raises(AssignmentTooLarge, match=f"more than one {caps.name} node holds"):
        admin.add_partitions("t", MAX_PARTITIONS)
    with pytest.raises(InvalidRequest, match="illegal characters"):
        admin.add_partitions("t/partitions", 2)
    assert admin.add_partitions("t", 3).partitions.keys() == {0, 1, 2}
    assert len(admin.metadata.assignments(["t"])["t"].value.partitions) == 3
