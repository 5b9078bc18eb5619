"""Snapshot and plan models: formats and strict validation."""

from __future__ import annotations

import io
import json
import sys

import pytest

from rebalancer.plan import PartitionMove, Plan, PlanError, parse_plan, render_plan, score_plan
from rebalancer.snapshot import (
    SnapshotError,
    load_snapshot,
    save_snapshot,
    snapshot_from_dict,
    snapshot_to_dict,
)
from tests.rebalancer.conftest import make_snapshot

RACKS = {1: "a", 2: "b", 3: "c", 4: "a"}


def small():
    return make_snapshot(RACKS, [("t", 0, [1, 2, 3]), ("t", 1, [2, 3, 4]), ("u", 0, [3, 4, 1])],
                         sizes={("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, decommission={4},
                         new=set())


def test_snapshot_json_round_trip(tmp_path):
    snap = small()
    save_snapshot(snap, tmp_path / "s.json")
    assert load_snapshot(tmp_path / "s.json") == snap


def test_snapshot_parquet_round_trip(tmp_path):
    snap = make_snapshot(RACKS, [("t", 0, [1, 2, 3]), ("t", 1, [2, 3])], sizes={("t", 0): 7},
                         new={4}, decommission={1})
    save_snapshot(snap, tmp_path / "s.parquet")
    back = load_snapshot(tmp_path / "s.parquet")
    assert back == snap
    assert back.partitions[1].size_bytes is None


def test_snapshot_validation_reports_every_problem_one_line_each():
    doc = {
        "brokers": [{"id": 1, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2, "rack": "a"}],
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 9]},
                       {"topic": "t", "partition": 1, "replicas": [2, 2]}],
        "decommission": [7],
    }
    with pytest.raises(SnapshotError) as e:
        snapshot_from_dict(doc)
    assert e.value.problems == (
        "broker 1 is listed 2 times",
        "decommission lists unknown broker 7",
        "partition t-0 has replicas on unknown brokers [9]",
        "partition t-1 lists broker(s) [2] more than once",
    )


def test_snapshot_rejects_bad_shapes():
    with pytest.raises(SnapshotError) as e:
        snapshot_from_dict({"brokers": [{"id": "x"}], "partitions": [{"topic": "t"}]})
    assert len(e.value.problems) == 2


def test_snapshot_to_dict_matches_bench_format():
    doc = snapshot_to_dict(small())
    assert set(doc) == {"brokers", "partitions", "decommission", "meta"}
    assert doc["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [1, 2, 3],
                                    "size_bytes": 10}


def test_plan_render_and_parse_round_trip():
    snap = small()
    plan = Plan(partitions=(PartitionMove(topic="t", partition=1, replicas=(3, 2, 1)),))
    text = render_plan(plan)
    assert json.loads(text) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 2, 1]}]}
    assert parse_plan(text, snap) == plan


def test_plan_parse_rejects_whole_plan_listing_every_problem():
    snap = small()
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 9]},
        {"topic": "t", "partition": 1, "replicas": [2, 2, 3]},
        {"topic": "nope", "partition": 0, "replicas": [1, 2, 3]},
        {"topic": "u", "partition": 0, "replicas": [1, 2]},
        {"topic": "u", "partition": 0, "replicas": [1, 2, 3]},
        {"topic": "t", "partition": 2},
    ]})
    with pytest.raises(PlanError) as e:
        parse_plan(text, snap)
    assert e.value.problems == (
        "partition t-0 names unknown brokers [9]",
        "partition t-1 lists broker(s) [2] more than once",
        "partition nope-0 does not exist",
        "partition u-0 changes replication factor 3 -> 2",
        "partition u-0 is listed twice",
        "partitions[5] needs 'topic', 'partition' and 'replicas'",
    )


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 2, "partitions": []}',
                                  '{"version": 1}', '{"version":1,"partitions":[{"topic":1,'
                                  '"partition":0,"replicas":[1]}]}'])
def test_plan_parse_rejects_malformed(text):
    with pytest.raises(PlanError) as e:
        parse_plan(text, small())
    assert e.value.problems and all("\n" not in p for p in e.value.problems)


def test_plan_parse_rejects_replicas_on_decommissioned_brokers():
    text = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,2,3]}]}'
    with pytest.raises(PlanError, match="decommissioned brokers \\[4\\]"):
        parse_plan(text, small())


def test_scores_count_moves_leaders_and_racks():
    snap = make_snapshot({1: "a", 2: "b", 3: "a", 4: "b"},
                         [("t", 0, [1, 3]), ("t", 1, [2, 4])], sizes={("t", 0): 8, ("t", 1): 4})
    before = score_plan(snap)
    assert before.rack_violations == 2 and before.replicas_moved == 0
    plan = Plan(partitions=(PartitionMove(topic="t", partition=0, replicas=(1, 2)),
                            PartitionMove(topic="t", partition=1, replicas=(4, 2))))
    s = score_plan(snap, plan)
    assert (s.rack_violations, s.replicas_moved, s.partitions_moved, s.bytes_moved) == (1, 1, 1, 8)
    assert (s.leader_changes, s.order_only_changes) == (1, 1)
    assert s.replicas_per_broker.spread == 2 and s.valid


@pytest.mark.parametrize(("argv", "feature"), [
    (["reassign", "generate", "--snapshot", "{dir}/s.parquet", "-o", "{dir}/p.json"],
     "Parquet snapshots"),
    (["reassign", "generate", "--snapshot", "{dir}/s.json", "--engine", "spark", "-o",
      "{dir}/p.json"], "the Spark engine"),
])
def test_a_missing_extra_is_one_line_naming_it(argv, feature, tmp_path, monkeypatch):
    from partctl.cli import main

    save_snapshot(small(), tmp_path / "s.json")
    (tmp_path / "s.parquet").write_bytes(b"")
    for absent in ("pyarrow", "pyarrow.parquet", "pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, absent, None)  # what an install without them sees
    out, err = io.StringIO(), io.StringIO()
    assert main([a.format(dir=tmp_path) for a in argv], out=out, err=err) == 1
    assert not (tmp_path / "p.json").exists()
    assert err.getvalue().splitlines() == [
        f"partctl: error: {'pyarrow' if 'Parquet' in feature else 'pyspark'} is not installed; "
        f"it is needed for {feature}: pip install 'partctl[spark]'"]
