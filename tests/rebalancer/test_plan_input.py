"""Plans, snapshots, topics-to-move and sizes files read strictly: a key given twice is refused
(naming the entry and the key) instead of the last one silently winning; nesting deep enough to
exhaust the parser's recursion, a Parquet snapshot missing a column, and topic names Kafka would
refuse are problems in the file's own error, not tracebacks. Pure: no coordinator."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rebalancer import strict_json
from rebalancer.live_snapshot import parse_sizes, parse_topics_to_move
from rebalancer.plan import PlanError, parse_plan
from rebalancer.snapshot import (
    PartitionReplicas,
    Snapshot,
    SnapshotBroker,
    SnapshotError,
    load_snapshot,
    save_snapshot,
)
from rebalancer.validation import read_plan

DEEP = "[" * 100_000 + "]" * 100_000
SNAP = Snapshot(brokers=(SnapshotBroker(id=1), SnapshotBroker(id=2), SnapshotBroker(id=3)),
                partitions=(PartitionReplicas(topic="t", partition=0, replicas=(1, 2)),
                            PartitionReplicas(topic="t", partition=1, replicas=(2, 3))))


def test_a_repeated_key_in_a_plan_entry_names_the_entry_and_the_key() -> None:
    text = ('{"version": 1, "partitions": ['
            '{"topic": "t", "partition": 0, "replicas": [1, 2]},'
            '{"topic": "t", "partition": 1, "replicas": [2, 3], "replicas": [3, 1]}]}')
    assert json.loads(text)["partitions"][1]["replicas"] == [3, 1]  # what json would do
    for parse in (lambda t: parse_plan(t, SNAP), read_plan):
        with pytest.raises(PlanError) as e:
            parse(text)
        assert e.value.problems == (
            "partitions[1] (t-1): key 'replicas' is given more than once",)
    with pytest.raises(PlanError) as e:
        read_plan('{"version": 1, "version": 1, "partitions": []}')
    assert e.value.problems == ("the top-level object: key 'version' is given more than once",)


def test_repeated_keys_in_topics_to_move_sizes_and_snapshots(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError) as e:
        parse_topics_to_move('{"topics": [{"topic": "a", "topic": "b"}]}')
    assert e.value.problems == ("topics to move: topics[0]: key 'topic' is given more than once",)
    with pytest.raises(SnapshotError) as e:
        parse_sizes('{"partitions": [{"topic": "t", "partition": 0, "size_bytes": 1, '
                    '"size_bytes": 2}]}')
    assert e.value.problems == (
        "sizes: partitions[0]: key 'size_bytes' is given more than once",)
    path = tmp_path / "snap.json"
    path.write_text('{"brokers": [{"id": 1, "rack": "a", "rack": "b"}], "partitions": []}')
    with pytest.raises(SnapshotError) as e:
        load_snapshot(path)
    assert e.value.problems == (f"{path}: brokers[0]: key 'rack' is given more than once",)


def test_every_reader_refuses_runaway_nesting_in_one_line(tmp_path: Path) -> None:
    for parse in (lambda t: parse_plan(t, SNAP), read_plan):
        with pytest.raises(PlanError) as e:
            parse(DEEP)
        assert e.value.problems == ("not valid JSON: nested too deeply",)
    with pytest.raises(SnapshotError) as e:
        parse_topics_to_move(DEEP)
    assert e.value.problems == ("topics to move: not valid JSON: nested too deeply",)
    with pytest.raises(SnapshotError) as e:
        parse_sizes('{"partitions": ' + DEEP + "}")
    assert e.value.problems == ("sizes: not valid JSON: nested too deeply",)
    path = tmp_path / "deep.json"
    path.write_text('{"meta": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_001)
    with pytest.raises(SnapshotError) as e:
        load_snapshot(path)
    assert e.value.problems == (f"{path}: not valid JSON: nested too deeply",)


def test_an_integer_too_long_to_convert_is_a_problem_not_a_value_error() -> None:
    with pytest.raises(PlanError) as e:
        read_plan('{"version": 1, "partitions": [{"topic": "t", "partition": ' + "9" * 5000
                  + ', "replicas": [1]}]}')
    (line,) = e.value.problems
    assert line.startswith("not valid JSON: Exceeds the limit (4300 digits)")


def test_plan_and_snapshot_topic_names_follow_kafkas_rules(tmp_path: Path) -> None:
    entries = [{"topic": name, "partition": 0, "replicas": [1, 2]}
               for name in ("t/partitions", "..", "x" * 250)]
    with pytest.raises(PlanError) as e:
        read_plan(json.dumps({"version": 1, "partitions": entries}))
    assert e.value.problems == (
        "partitions[0]: topic name 't/partitions' has illegal characters '/' (allowed: ASCII "
        "letters, digits, '.', '_', '-')",
        "partitions[1]: topic name cannot be '..'",
        "partitions[2]: topic name is longer than 249 characters",
    )
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"brokers": [{"id": 1}], "partitions": [
        {"topic": "a b", "partition": 0, "replicas": [1]}]}))
    with pytest.raises(SnapshotError) as e:
        load_snapshot(path)
    assert e.value.problems == ("partitions[0]: topic name 'a b' has illegal characters ' ' "
                                "(allowed: ASCII letters, digits, '.', '_', '-')",)


def test_a_parquet_snapshot_without_a_column_says_which(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    save_snapshot(SNAP, good)
    assert load_snapshot(good).partitions == SNAP.partitions
    table = pq.read_table(good)
    for column in ("replicas", "topic"):
        bad = tmp_path / f"no-{column}.parquet"
        pq.write_table(table.drop_columns([column]), bad)
        with pytest.raises(SnapshotError) as e:
            load_snapshot(bad)
        assert e.value.problems == (
            f"{bad}: no {column!r} column (a snapshot has one row per partition with columns "
            "topic, partition, replicas, size_bytes)",)
    unsized = tmp_path / "unsized.parquet"  # size_bytes is optional
    pq.write_table(table.drop_columns(["size_bytes"]), unsized)
    assert load_snapshot(unsized).partitions == SNAP.partitions
    wrong = tmp_path / "wrong.parquet"  # replicas as strings
    pq.write_table(table.set_column(2, "replicas", pa.array([["1"], ["2"]])), wrong)
    with pytest.raises(SnapshotError) as e:
        load_snapshot(wrong)
    assert e.value.problems[0] == "partitions[0].replicas must be an integer, got '1'"
    text = tmp_path / "text.parquet"
    text.write_text("not parquet")
    with pytest.raises(SnapshotError) as e:
        load_snapshot(text)
    assert e.value.problems[0].startswith(f"{text}: not a Parquet file: ")
    dup = tmp_path / "dup.parquet"
    pq.write_table(table.replace_schema_metadata(
        {b"partctl.snapshot": b'{"brokers": [], "brokers": [{"id": 1}]}'}), dup)
    with pytest.raises(SnapshotError) as e:
        load_snapshot(dup)
    assert e.value.problems == (f"{dup}: snapshot metadata: the top-level object: key "
                                f"'brokers' is given more than once",)
    folder = tmp_path / "dir.parquet"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):  # the caller says it cannot read it
        load_snapshot(folder)


def test_strict_json_parses_what_json_parses() -> None:
    doc = {"a": [1, 2.5, None, True, {"b": "c"}], "d": {}}
    assert strict_json.loads(json.dumps(doc)) == doc
    assert strict_json.loads(json.dumps(doc).encode()) == doc
    with pytest.raises(strict_json.InvalidJSON) as e:  # even when both values are equal
        strict_json.loads('{"a": [{"x": 1, "x": 1}]}', what="f: ")
    assert e.value.problems == ("f: a[0]: key 'x' is given more than once",)
