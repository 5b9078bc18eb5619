"""Bulk reads: many paths in one pipelined call, exactly what was written."""

from __future__ import annotations

from coordinator import Coordinator, Create


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
