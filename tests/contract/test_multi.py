"""Atomic multi and the chunked, guarded bulk writes built on it."""

from __future__ import annotations

import math

import pytest

from coordinator import (
    BadVersion,
    Check,
    Coordinator,
    Create,
    Delete,
    GuardFailed,
    MultiFailed,
    NodeExists,
    NoNode,
    RequestTooLarge,
    SetData,
    Stat,
)


def test_multi_applies_all_and_returns_per_op_results(client: Coordinator) -> None:
    client.create("/m")
    client.create("/m/old", b"x")
    client.create("/m/gone")
    results = client.multi([
        Check(path="/m", version=0),
        Create(path="/m/new", data=b"n"),
        SetData(path="/m/old", data=b"y", version=0),
        Delete(path="/m/gone", version=0),
        Create(path="/m/s-", sequential=True),
    ])
    assert results[0] is None
    assert results[1] == "/m/new"
    assert isinstance(results[2], Stat) and results[2].version == 1
    assert results[3] is None
    assert isinstance(results[4], str) and results[4].startswith("/m/s-")
    assert len(results[4]) == len("/m/s-") + 10
    assert client.get("/m/new")[0] == b"n"
    assert client.get("/m/old")[0] == b"y"
    assert client.exists("/m/gone") is None


@pytest.mark.parametrize("failing", ["check", "create", "set", "delete"])
def test_failing_multi_changes_nothing_and_names_the_op(client: Coordinator, failing: str) -> None:
    client.create("/f", b"a")
    client.create("/f/x", b"x")
    bad = {
        "check": Check(path="/f", version=7),
        "create": Create(path="/f/x"),
        "set": SetData(path="/f/x", data=b"z", version=3),
        "delete": Delete(path="/f/missing"),
    }[failing]
    ops = [
        Create(path="/f/new1"),
        SetData(path="/f", data=b"changed"),
        bad,
        Create(path="/f/new2"),
    ]
    with pytest.raises(MultiFailed) as info:
        client.multi(ops)
    assert info.value.index == 2
    expected = {"check": BadVersion, "create": NodeExists, "set": BadVersion, "delete": NoNode}
    assert isinstance(info.value.cause, expected[failing])
    assert client.exists("/f/new1") is None and client.exists("/f/new2") is None
    data, stat = client.get("/f")
    assert data == b"a" and stat.version == 0
    assert client.get("/f/x") == (b"x", client.exists("/f/x"))
    assert client.children("/f") == ["x"]


def test_multi_ops_see_earlier_ops(client: Coordinator) -> None:
    client.multi([
        Create(path="/chain"),
        Create(path="/chain/a", data=b"1"),
        SetData(path="/chain/a", data=b"2", version=0),
        Check(path="/chain/a", version=1),
    ])
    assert client.get("/chain/a")[0] == b"2"


def test_multi_sets_and_checks_a_node_and_its_parent_together(client: Coordinator) -> None:
    """Sets and checks of a node and its child do not interact (etcd sends them as one plain
    transaction); a failing one still fails the whole multi."""
    client.create("/fam", b"p")
    client.create("/fam/kid", b"k")
    results = client.multi([
        SetData(path="/fam", data=b"p2", version=0),
        Check(path="/fam/kid", version=0),
        SetData(path="/fam/kid", data=b"k2"),
    ])
    assert results[0] is not None and results[0].version == 1
    assert results[2] is not None and results[2].version == 1
    assert client.get("/fam")[0] == b"p2" and client.get("/fam/kid")[0] == b"k2"
    with pytest.raises(MultiFailed) as info:
        client.multi([
            SetData(path="/fam/kid", data=b"k3", version=1),
            Check(path="/fam", version=0),
        ])
    assert info.value.index == 1 and isinstance(info.value.cause, BadVersion)
    assert client.get("/fam/kid")[0] == b"k2"


def test_write_many_chunks_past_the_backend_limits(client: Coordinator) -> None:
    client.create("/bulk")
    limit = client.capabilities.max_multi_ops or 1000
    n = 2 * limit + 7
    results = client.write_many([Create(path=f"/bulk/n{i:05d}", data=b"v") for i in range(n)])
    assert results == [f"/bulk/n{i:05d}" for i in range(n)]
    assert len(client.children("/bulk")) == n


def test_write_many_chunks_by_bytes(client: Coordinator) -> None:
    client.create("/big")
    size = client.capabilities.max_multi_bytes // 4
    ops = [Create(path=f"/big/{i}", data=bytes([i]) * size) for i in range(9)]
    assert client.write_many(ops) == [f"/big/{i}" for i in range(9)]
    for i in range(9):
        assert client.get(f"/big/{i}")[0] == bytes([i]) * size
    with pytest.raises(RequestTooLarge):
        client.write_many([Create(path="/big/huge", data=b"x" * client.capabilities.max_multi_bytes)])
    assert client.exists("/big/huge") is None


def test_write_many_reports_bad_items_and_applies_the_rest(client: Coordinator) -> None:
    client.create("/items")
    for i in range(20):
        client.create(f"/items/{i}", b"0")
    ops = [SetData(path=f"/items/{i}", data=b"1", version=5 if i in (3, 11) else 0)
           for i in range(20)]
    ops.append(SetData(path="/items/missing", data=b"1"))
    results = client.write_many(ops)
    assert isinstance(results[3], BadVersion) and isinstance(results[11], BadVersion)
    assert isinstance(results[20], NoNode)
    for i in range(20):
        expected = b"0" if i in (3, 11) else b"1"
        assert client.get(f"/items/{i}")[0] == expected
        if i not in (3, 11):
            assert isinstance(results[i], Stat) and results[i].version == 1


def test_guarded_write_many_writes_nothing_once_the_guard_moved(
    client: Coordinator, other: Coordinator
) -> None:
    client.create("/epoch", b"0")
    client.create("/data")
    guard = Check(path="/epoch", version=0)
    assert client.write_many([Create(path="/data/a")], guard=guard) == ["/data/a"]
    other.set("/epoch", b"1")  # another writer takes over
    with pytest.raises(GuardFailed):
        client.write_many([Create(path=f"/data/z{i}") for i in range(300)], guard=guard)
    assert client.children("/data") == ["a"]


def test_write_stream_yields_each_batch_in_order_as_write_many_would(client: Coordinator) -> None:
    client.create("/stream")
    for i in range(30):
        client.create(f"/stream/{i}", b"0")
    limit = client.capabilities.max_multi_ops or 1000
    batches = [
        [SetData(path=f"/stream/{i}", data=b"1", version=0) for i in range(0, 10)],
        [],  # a batch with nothing to write still gets its (empty) answer, in its place
        [SetData(path=f"/stream/{i}", data=b"1", version=7 if i == 12 else 0)
         for i in range(10, 20)],
        [Create(path=f"/stream/new{i:05d}") for i in range(limit + 3)],  # several chunks
        [SetData(path=f"/stream/{i}", data=b"1", version=0) for i in range(20, 30)],
    ]
    answers = list(client.write_stream(batches))
    assert [len(a) for a in answers] == [len(b) for b in batches]
    assert all(isinstance(r, Stat) and r.version == 1 for r in answers[0])
    assert answers[1] == []
    assert isinstance(answers[2][2], BadVersion)
    assert all(isinstance(r, Stat) for i, r in enumerate(answers[2]) if i != 2)
    assert answers[3] == [f"/stream/new{i:05d}" for i in range(limit + 3)]
    assert all(isinstance(r, Stat) for r in answers[4])
    assert client.get("/stream/12")[0] == b"0"
    assert client.get("/stream/29")[0] == b"1"


def test_write_stream_takes_batches_lazily(client: Coordinator) -> None:
    """The source is pulled only as the pipeline has room: the work that produces a batch can
    overlap the store's, and a consumer that stops early has not had everything produced."""
    client.create("/lazy")
    pulled = []

    def batches():  # type: ignore[no-untyped-def]
        for i in range(100):
            pulled.append(i)
            yield [Create(path=f"/lazy/{i}")]

    stream = client.write_stream(batches(), max_in_flight=4)
    assert next(stream) == ["/lazy/0"]
    assert len(pulled) <= 4 + 1
    stream.close()
    assert len(client.children("/lazy")) <= 4 + 1


def test_write_stream_stops_at_a_failed_guard(client: Coordinator, other: Coordinator) -> None:
    client.create("/epoch", b"0")
    client.create("/gdata")
    guard = Check(path="/epoch", version=0)
    pulled = []

    def batches():  # type: ignore[no-untyped-def]
        for i in range(50):
            pulled.append(i)
            if i == 2:
                other.set("/epoch", b"1")  # another writer takes over while we produce
            yield [Create(path=f"/gdata/{i}")]

    got = []
    with pytest.raises(GuardFailed):
        for answer in client.write_stream(batches(), guard=guard, max_in_flight=1):
            got.append(answer)
    assert got == [["/gdata/0"], ["/gdata/1"]]
    assert client.children("/gdata") == ["0", "1"]
    assert len(pulled) < 50


def test_write_stream_refuses_a_batch_too_large_to_send_before_it_writes(
    client: Coordinator,
) -> None:
    client.create("/tl")
    huge = client.capabilities.max_multi_bytes
    batches = [[Create(path="/tl/a")],
               [Create(path="/tl/b"), Create(path="/tl/huge", data=b"x" * huge)]]
    got = []
    with pytest.raises(RequestTooLarge):
        for answer in client.write_stream(batches):
            got.append(answer)
    assert got == [["/tl/a"]]
    assert client.children("/tl") == ["a"]


class _Sent:
    """Counts the multis a client sends and the ops in them (the real backend still runs
    each one: the counter sits in front of ``multi_async``); ``before`` runs ahead of each."""

    def __init__(self, client: Coordinator, before=None) -> None:  # type: ignore[no-untyped-def]
        self.multis = 0
        self.ops = 0
        send = client.multi_async

        def counted(ops):  # type: ignore[no-untyped-def]
            self.multis += 1
            self.ops += len(ops)
            if before is not None:
                before(self.multis)
            return send(ops)

        client.multi_async = counted  # type: ignore[method-assign]


def _one_chunk(client: Coordinator, ops: list) -> None:  # type: ignore[type-arg]
    assert [len(c) for c in client._chunks(ops, None)] == [len(ops)]


def test_write_many_where_every_op_of_a_chunk_fails_sends_n_log_n_ops(
    client: Coordinator,
) -> None:
    """A multi names only its first failing op. Sending the rest of the chunk whole again each
    time sent a chunk of n failing ops n times (n * (n + 1) / 2 ops: 5,050 here, 4.5 million
    in a failover after a partial write); splitting keeps it near n * log(n)."""
    n = 100
    client.create("/af")
    ops = [Create(path=f"/af/{i:03d}", data=b"v") for i in range(n)]
    assert client.write_many(ops) == [op.path for op in ops]
    _one_chunk(client, ops)
    sent = _Sent(client)
    results = client.write_many([Create(path=op.path, data=b"w") for op in ops])
    for op, result in zip(ops, results, strict=True):
        assert isinstance(result, NodeExists) and result.path == op.path
    assert sent.ops <= 3 * (n + n * math.log2(n)), sent.ops
    assert all(client.get(op.path)[0] == b"v" for op in ops)


def test_write_many_with_a_few_scattered_failures_sends_each_op_a_few_times(
    client: Coordinator,
) -> None:
    n, bad = 100, {3, 21, 50, 64, 97}
    client.create("/sc")
    assert client.write_many([Create(path=f"/sc/{i:03d}", data=b"0") for i in range(n)])
    ops = [SetData(path=f"/sc/{i:03d}", data=b"1", version=4 if i in bad else 0)
           for i in range(n)]
    _one_chunk(client, ops)
    sent = _Sent(client)
    results = client.write_many(ops)
    for i, result in enumerate(results):
        if i in bad:
            assert isinstance(result, BadVersion) and result.path == f"/sc/{i:03d}"
            assert client.get(f"/sc/{i:03d}")[0] == b"0"
        else:
            assert isinstance(result, Stat) and result.version == 1
            assert client.get(f"/sc/{i:03d}")[0] == b"1"
    # (sending the rest again whole: 100 + 99 + ... + 95 = 585 ops)
    assert sent.ops <= 3 * (n + len(bad) * math.log2(n)), sent.ops


def test_a_guard_that_fails_while_a_failed_chunk_is_split_raises_at_once(
    client: Coordinator, other: Coordinator
) -> None:
    client.create("/epoch", b"0")
    client.create("/gs")
    client.create("/gs/000")
    guard = Check(path="/epoch", version=0)
    ops = [Create(path=f"/gs/{i:03d}") for i in range(50)]  # the first fails, the rest would not

    def move_guard(multis: int) -> None:
        if multis == 2:  # after the first answer, before its rest goes again
            other.set("/epoch", b"1")

    sent = _Sent(client, move_guard)
    with pytest.raises(GuardFailed):
        client.write_many(ops, guard=guard, max_in_flight=1)
    assert sent.multis == 2
    assert client.children("/gs") == ["000"]
