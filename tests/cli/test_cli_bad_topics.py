"""``partctl topics list | describe`` beside topic nodes another tool wrote against Kafka's rules,
on every backend: list marks each invalid with why, its name quoted (never a raw control
character on the terminal); describe shows the good topics and no traceback."""

from __future__ import annotations

import io
import json

from coordinator import layout
from coordinator.codecs import TopicAssignment
from coordinator.metadata import MetadataClient
from partctl.cli import main
from tests.contract.conftest import Harness


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_topics_list_marks_bad_topic_nodes_invalid(backend: Harness) -> None:
    client = backend.connect()
    md = MetadataClient(client)
    md.ensure_layout()
    md.create_topic(TopicAssignment(topic="good", partitions={0: (1,)}))
    data = TopicAssignment(topic="x", partitions={0: (1,)}).encode()
    bad_names = ["a b", "x" * 300, "ü"]
    if backend.name == "memory":  # ZooKeeper and etcd paths cannot hold control characters
        bad_names.append("evil\x1b[2J\x07")
    for name in bad_names:
        client.create(layout.topic(name), data)
    client.create(layout.topic("bad-json"), json.dumps(
        {"version": 3, "partitions": {"0": [-5, "x"]}}).encode())

    code, out, err = run("topics", "list", "--coordinator", backend.url())
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "good" in lines
    for name in bad_names:
        (line,) = [x for x in lines if x.startswith(repr(name))]
        assert "(invalid name: " in line, line
    (line,) = [x for x in lines if x.startswith("'bad-json'")]
    assert "(invalid node: " in line and "/brokers/topics/bad-json" in line, line
    assert len(lines) == 2 + len(bad_names)
    assert all(c.isprintable() or c in "\t\n" for c in out), repr(out)

    code, out, err = run("topics", "describe", "--coordinator", backend.url())
    assert (code, err) == (0, "")
    assert [x.split("\t")[0] for x in out.splitlines() if x.startswith("Topic:")] == [
        "Topic: good"]
