"""Bulk reads: many paths in one pipelined call, exactly what was written."""

from __future__ import annotations

import pytest

from coordinator import Coordinator, Create, NoNode


def test_bulk_read_of_10000_nodes(client: Coordinator) -> None:
    client.ensure_path("/many")
    n = 10_000
    ops = [Create(path=f"/many/p{i}", data=f"value-{i}".encode()) for i in range(n)]
    results = client.write_many(ops)
    assert all(isinstance(r, str) for r in results)
    paths = [f"/many/p{i}" for i in range(n)]
    got = client.get_many(paths)
    assert len(got) == n
    for i, item in enumerate(got):
        assert item is not None, paths[i]
        data, stat = item
        assert data == f"value-{i}".encode() and stat.version == 0
    assert len(client.children("/many")) == n


def test_bulk_read_marks_missing_paths(client: Coordinator) -> None:
    client.create("/present", b"x")
    got = client.get_many(["/absent", "/present", "/absent/deeper"])
    assert got[0] is None and got[2] is None
    assert got[1] is not None and got[1][0] == b"x"
    assert client.get_many([]) == []


def test_bulk_read_of_partition_states_with_repeats_and_gaps(client: Coordinator) -> None:
    """Kafka's layout: every state under a parent of its own, next to partition nodes."""
    client.ensure_path("/brokers/topics")
    topics = [f"/brokers/topics/t{k}" for k in range(12)]
    parts = [f"{t}/partitions/{p}" for t in topics for p in range(100)]
    for level in (topics, [t + "/partitions" for t in topics], parts):
        client.write_many([Create(path=p) for p in level])
    states = [p + "/state" for p in parts if not p.endswith("/7")]  # some partitions lack one
    client.write_many([Create(path=p, data=p.encode()) for p in states])
    wanted = [p + "/state" for p in parts] + states[:50] + ["/brokers/topics/none/state"]
    got = client.get_many(wanted)
    assert len(got) == len(wanted)
    present = set(states)
    for path, item in zip(wanted, got, strict=True):
        if path in present:
            assert item is not None and item[0] == path.encode() and item[1].version == 0
        else:
            assert item is None, path


def test_read_tree_gives_every_node_below_with_data_and_stat_in_path_order(
    client: Coordinator,
) -> None:
    client.create("/rt")
    for path, data in [("/rt/b", b"b"), ("/rt/a", b"a"), ("/rt/a/x", b""), ("/rt/a/x/deep", b"d"),
                       ("/rt/a-1", b"dash"), ("/rt-sibling", b"no"), ("/rt-sibling/k", b"no")]:
        client.create(path, data)
    client.set("/rt/a", b"a2")
    got = client.read_tree("/rt")
    expected = sorted(["/rt/a", "/rt/a/x", "/rt/a/x/deep", "/rt/a-1", "/rt/b"])
    assert [p for p, _, _ in got] == expected
    for path, data, stat in got:
        assert (data, stat) == client.get(path), path
    assert client.read_tree("/rt/a/x/deep") == []
    everything = client.read_tree("/")
    assert [p for p, _, _ in everything] == sorted(p for p, _, _ in everything)
    assert {"/rt", "/rt-sibling", "/rt-sibling/k", *expected} <= {p for p, _, _ in everything}
    with pytest.raises(NoNode):
        client.read_tree("/absent")


def test_read_tree_of_a_wide_tree_reads_it_all(client: Coordinator) -> None:
    """More nodes than one page of a ranged read (etcd pages by 10,000 keys)."""
    client.ensure_path("/wide")
    groups = [f"/wide/g{k}" for k in range(6)]
    client.write_many([Create(path=g, data=g.encode()) for g in groups])
    leaves = [f"{g}/n{i:05d}" for g in groups for i in range(2_500)]
    client.write_many([Create(path=p, data=p[-5:].encode()) for p in leaves])
    got = client.read_tree("/wide")
    assert [p for p, _, _ in got] == sorted(groups + leaves)
    assert all(data == (p.encode() if p in groups else p[-5:].encode()) for p, data, _ in got)


def test_ranged_tree_read_is_declared_where_the_store_has_one(client: Coordinator) -> None:
    assert client.capabilities.ranged_tree_read is (client.capabilities.name != "zookeeper")
