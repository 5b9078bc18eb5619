"""What the CLI reads from files, on every backend: JSON nested deep enough to exhaust the
parser, a Parquet snapshot without a column, keys given twice and plans with thousands of
problems each end in ``partctl: error:`` lines that say what is wrong, never a traceback."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from partctl.cli import main
from rebalancer.snapshot import PartitionReplicas, Snapshot, SnapshotBroker, save_snapshot
from tests.contract.conftest import Harness

DEEP = "[" * 100_000 + "]" * 100_000


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def url(backend: Harness) -> str:
    """A namespace with brokers 1-3 and topic t (partitions 0-2); no controller is needed to
    refuse input."""
    client = backend.connect()
    md = MetadataClient(client)
    for b in (1, 2, 3):
        md.register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9000 + b, rack=f"r{b % 2}"))
    Admin(client).create_topic("t", assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    return backend.url()


def errors(argv: list[str]) -> list[str]:
    code, out, err = run(*argv)
    assert (code, out) == (1, ""), (argv, err)
    assert "Traceback" not in err
    return err.splitlines()


def test_json_nested_too_deep_is_one_line_in_every_reader(url: str, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    plan = ["--reassignment-json-file", str(deep)]
    out = ["-o", str(tmp_path / "plan.json")]
    cases = [
        (["reassign", "execute", "--coordinator", url, *plan],
         "not valid JSON: nested too deeply"),
        (["reassign", "verify", "--coordinator", url, *plan],
         "not valid JSON: nested too deeply"),
        (["reassign", "generate", "--snapshot", str(deep), *out],
         f"{deep}: not valid JSON: nested too deeply"),
        (["reassign", "generate", "--coordinator", url, "--topics-to-move-json-file", str(deep),
          *out], "topics to move: not valid JSON: nested too deeply"),
        (["reassign", "generate", "--coordinator", url, "--sizes", str(deep), *out],
         "sizes: not valid JSON: nested too deeply"),
        (["cluster", "snapshot", "--coordinator", url, "--sizes", str(deep), *out],
         "sizes: not valid JSON: nested too deeply"),
    ]
    for argv, message in cases:
        assert errors(argv) == [f"partctl: error: {message}"], argv
    assert not (tmp_path / "plan.json").exists()


def test_a_parquet_snapshot_without_replicas_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "snap.parquet"
    save_snapshot(Snapshot(brokers=(SnapshotBroker(id=1), SnapshotBroker(id=2)), partitions=(
        PartitionReplicas(topic="t", partition=0, replicas=(1, 2)),)), path)
    pq.write_table(pq.read_table(path).drop_columns(["replicas"]), path)
    assert errors(["reassign", "generate", "--snapshot", str(path), "-o",
                   str(tmp_path / "plan.json")]) == [
        f"partctl: error: {path}: no 'replicas' column (a snapshot has one row per partition "
        f"with columns topic, partition, replicas, size_bytes)"]


def test_keys_given_twice_are_refused_everywhere(url: str, tmp_path: Path,
                                                  backend: Harness) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                    '"replicas": [1, 2]}, {"topic": "t", "partition": 1, "replicas": [2, 3], '
                    '"replicas": [3, 1]}]}')
    message = "partctl: error: partitions[1] (t-1): key 'replicas' is given more than once"
    assert errors(["reassign", "execute", "--coordinator", url, "--reassignment-json-file",
                   str(plan)]) == [message]
    assert errors(["reassign", "verify", "--coordinator", url, "--reassignment-json-file",
                   str(plan)]) == [message]
    assert MetadataClient(backend.connect()).reassignment() is None
    topics = tmp_path / "topics.json"
    topics.write_text('{"version": 1, "topics": [{"topic": "t", "topic": "u"}]}')
    out = ["-o", str(tmp_path / "new.json")]
    assert errors(["reassign", "generate", "--coordinator", url, "--topics-to-move-json-file",
                   str(topics), *out]) == [
        "partctl: error: topics to move: topics[0]: key 'topic' is given more than once"]
    snap = tmp_path / "snap.json"
    snap.write_text('{"brokers": [{"id": 1}, {"id": 2}], "partitions": [{"topic": "t", '
                    '"partition": 0, "partition": 1, "replicas": [1, 2]}]}')
    assert errors(["reassign", "generate", "--snapshot", str(snap), *out]) == [
        f"partctl: error: {snap}: partitions[0]: key 'partition' is given more than once"]
    sizes = tmp_path / "sizes.json"
    sizes.write_text('{"partitions": [{"topic": "t", "partition": 0, "size_bytes": 5, '
                     '"size_bytes": 7}]}')
    assert errors(["cluster", "snapshot", "--coordinator", url, "--sizes", str(sizes),
                   *out]) == [
        "partctl: error: sizes: partitions[0]: key 'size_bytes' is given more than once"]
    assert not (tmp_path / "new.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", *(pytest.param(name, marks=pytest.mark.long)
                                                for name in ("zookeeper", "etcd"))],
                         indirect=True)  # CPU-bound, 20-30 s each: on a server in the long tier
def test_a_plan_with_150000_problems_shows_50_and_counts_the_rest(url: str, tmp_path: Path,
                                                                 backend: Harness) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]}] + [
        {"topic": "gone", "partition": p, "replicas": [1, 1]} for p in range(150_000)]}))
    assert plan.stat().st_size > 8_000_000
    lines = errors(["reassign", "execute", "--coordinator", url, "--reassignment-json-file",
                    str(plan)])
    assert len(lines) == 51
    assert lines[:2] == ["partctl: error: partition gone-0 does not exist",
                         "partctl: error: partition gone-1 does not exist"]
    assert lines[-1] == "partctl: error: ... and 149,950 more problems (150,000 in all)"
    lines = errors(["reassign", "verify", "--coordinator", url, "--reassignment-json-file",
                    str(plan)])
    assert len(lines) == 51
    assert lines[0] == "partctl: error: partition gone-0 lists broker(s) [1] more than once"
    assert lines[-1] == "partctl: error: ... and 149,950 more problems (150,000 in all)"
    assert MetadataClient(backend.connect()).reassignment() is None


def test_render_problems_keeps_short_lists_whole() -> None:
    from partctl.render import render_problems

    assert render_problems(["a", "b"], 2) == ["a", "b"]
    assert render_problems(["a", "b", "c"], 2) == ["a", "b", "... and 1 more problem (3 in all)"]
