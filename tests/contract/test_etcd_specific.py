"""What only the etcd backend has: its key layout, transactions under races, compaction,
host failover mid-session, and etcd's per-transaction limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

import coordinator
import coordinator.etcd as etcd_module
from coordinator import (
    ChildrenEvent,
    Coordinator,
    CoordinatorError,
    Create,
    DataEvent,
    MultiFailed,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionState,
    SetData,
)
from tests.contract.conftest import EtcdHarness
from tests.proxy import TcpProxy
from tests.servers import Server, start_etcd
from tests.waiting import Recorder, wait_until


@pytest.fixture
def etcd(etcd_server: Server) -> Iterator[EtcdHarness]:
    harness = EtcdHarness(etcd_server)
    yield harness
    harness.close()


@pytest.fixture
def raw(etcd_server: Server) -> Iterator[Any]:
    import etcd3

    client = etcd3.client(host=etcd_server.host, port=etcd_server.port)
    yield client
    client.close()


def _keys(raw: Any, prefix: str) -> list[bytes]:
    return sorted(meta.key for _, meta in raw.get_prefix(prefix))


def test_nodes_are_plain_keys_under_the_prefix_and_bookkeeping_stays_outside(
    etcd: EtcdHarness, raw: Any
) -> None:
    c = etcd.connect()
    c.create("/brokers/ids/1", b"{}", make_parents=True)
    c.create("/isr_change_notification")
    name = c.create("/isr_change_notification/isr_change_", b"x", sequential=True)
    assert name == "/isr_change_notification/isr_change_0000000000"
    ns = etcd.namespace
    assert _keys(raw, ns + "/") == [
        f"{ns}/brokers".encode(), f"{ns}/brokers/ids".encode(),
        f"{ns}/brokers/ids/1".encode(), f"{ns}/isr_change_notification".encode(),
        f"{ns}/isr_change_notification/isr_change_0000000000".encode(),
    ]
    hidden = _keys(raw, ns + "\x00")
    assert hidden and all(k.startswith(f"{ns}\x00meta/".encode()) for k in hidden)
    assert c.children("/") == ["brokers", "isr_change_notification"]
    value, meta = raw.get(f"{ns}/brokers/ids/1")
    assert value == b"{}" and c.exists("/brokers/ids/1").version == meta.version - 1


def _many_topics(c: Coordinator) -> list[str]:
    c.ensure_path("/topics")
    names = [f"t{i}" for i in range(150)] + ["a", "a-b", "a.b", "a0"]
    levels = [  # write_many chunks run concurrently: one level at a time
        [Create(path=f"/topics/{t}") for t in names],
        [Create(path=f"/topics/{t}/partitions") for t in names],
        [Create(path=f"/topics/{t}/partitions/{p}") for t in names for p in range(6)],
    ]
    for ops in levels:
        assert all(isinstance(r, str) for r in c.write_many(ops))
    c.create("/topics/a/partitions/0/state", b"s")
    return names


def _count_rpcs(c: Coordinator) -> list[int]:
    calls = [0]
    original = c._rpc  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    c._rpc = counting  # type: ignore[attr-defined]
    return calls


def test_children_skip_deep_subtrees_and_order_like_bytes(etcd: EtcdHarness) -> None:
    c = etcd.connect()
    names = _many_topics(c)
    calls = _count_rpcs(c)
    assert c.children("/topics") == sorted(names)
    assert calls[0] <= len(names) + 2  # one page per subtree at most, not one per key
    assert c.children("/topics/a") == ["partitions"]
    assert c.children("/topics/a/partitions") == [str(p) for p in range(6)]


def test_children_of_many_big_subtrees_read_the_rest_in_pages(
    etcd: EtcdHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd 3.4 counts the whole rest of a range per limited request, so a listing jumps over
    only a few large subtrees and then pages through the rest (here pages of 64 keys)."""
    from coordinator import etcd as etcd_backend

    c = etcd.connect()
    names = _many_topics(c)
    keys = len(names) * 8 + 1
    monkeypatch.setattr(etcd_backend, "CHILD_PAGE", 64)
    calls = _count_rpcs(c)
    assert c.children("/topics") == sorted(names)
    pages = -(-keys // 64)
    assert calls[0] <= 1 + etcd_backend.CHILD_SKIPS + pages + 1
    assert calls[0] < len(names) // 2  # not one request per topic
    calls[0] = 0
    assert c.children("/") == ["topics"]
    assert calls[0] <= 1 + etcd_backend.CHILD_SKIPS + pages + 1


def test_children_hinted_read_around_the_likely_subtrees(etcd: EtcdHarness) -> None:
    """Told the likely names, a listing reads only the segments between their subtrees: one
    txn for up to max-txn-ops segments, however deep the subtrees (no page of them is read),
    and the same answer for names that are no children, and for children not named."""
    c = etcd.connect()
    names = _many_topics(c)
    calls = _count_rpcs(c)
    assert c.children_hinted("/topics", names) == sorted(names)
    assert calls[0] == 2  # 155 segments, 127 to a txn (the first also checks /topics)
    calls[0] = 0
    assert c.children_hinted("/topics", [n for n in names if n != "a"] + ["zz", "a1"]) == (
        sorted(names))
    assert calls[0] <= 3
    assert c.children_hinted("/topics", ["a-b", "a"]) == sorted(names)
    with pytest.raises(NoNode):
        c.children_hinted("/nothing", names)


def test_multi_failure_names_the_first_failing_op_among_dependent_ops(
    etcd: EtcdHarness, raw: Any
) -> None:
    c = etcd.connect()
    with pytest.raises(MultiFailed) as info:
        c.multi([Create(path="/a"), Create(path="/a/b"), Create(path="/a/b/c"),
                 Create(path="/a/b")])
    assert info.value.index == 3 and isinstance(info.value.cause, NodeExists)
    assert _keys(raw, etcd.namespace) == []
    with pytest.raises(MultiFailed) as info:
        c.multi([Create(path="/a"), Create(path="/a/b"), SetData(path="/a/c", data=b"")])
    assert info.value.index == 2 and isinstance(info.value.cause, NoNode)
    c.create("/p")
    c.create("/p/kid")
    from coordinator import Delete

    c.multi([Delete(path="/p/kid"), Delete(path="/p")])  # the delete sees the child gone
    assert c.exists("/p") is None


def test_creates_never_orphan_under_a_concurrent_parent_delete(
    etcd: EtcdHarness, raw: Any
) -> None:
    a, b = etcd.connect(), etcd.connect()
    stop = time.monotonic() + 3
    created = deleted = 0

    def flip() -> None:
        nonlocal deleted
        while time.monotonic() < stop:
            try:
                a.create("/p")
            except NodeExists:
                pass
            try:
                a.delete("/p")
                deleted += 1
            except (NotEmpty, NoNode):
                pass

    def fill() -> None:
        nonlocal created
        i = 0
        while time.monotonic() < stop:
            try:
                b.create(f"/p/c{i}")
                created += 1
                b.delete(f"/p/c{i}")
            except NoNode:
                pass
            i += 1

    threads = [threading.Thread(target=flip), threading.Thread(target=fill)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ns = etcd.namespace
    keys = _keys(raw, ns + "/")
    if f"{ns}/p".encode() not in keys:
        assert keys == [], "a child outlived its parent"
    assert created and deleted  # both sides made progress, so they raced


def test_set_keeps_an_ephemeral_node_on_its_lease(etcd: EtcdHarness) -> None:
    owner, other = etcd.connect(), etcd.connect()
    owner.create("/e", b"1", ephemeral=True)
    stat = other.set("/e", b"2")
    assert stat.ephemeral_owner == owner.session_id and stat.version == 1
    owner.close()
    assert other.exists("/e") is None


def test_watch_catches_up_after_its_history_was_compacted(
    etcd: EtcdHarness, raw: Any
) -> None:
    watcher, writer = etcd.connect(proxied=True), etcd.connect()
    writer.create("/c", b"0")
    writer.create("/d")
    data: Recorder[DataEvent] = Recorder()
    kids: Recorder[ChildrenEvent] = Recorder()
    watcher.watch_data("/c", data)
    watcher.watch_children("/d", kids)
    data.wait_count(1)
    kids.wait_count(1)
    proxy = etcd.proxies[id(watcher)]
    proxy.hold()
    for i in range(1, 20):
        writer.set("/c", str(i).encode())
    writer.create("/d/x")
    _, meta = raw.get(f"{etcd.namespace}/c")
    raw.compact(meta.mod_revision)
    proxy.release()
    data.wait_for(lambda ev: ev[-1].data == b"19", timeout=20, message="state after compaction")
    kids.wait_for(lambda ev: ev[-1].children == ["x"], timeout=20)
    writer.set("/c", b"after")
    data.wait_for(lambda ev: ev[-1].data == b"after", timeout=10)
    versions = [e.stat.version for e in data.items]
    assert versions == sorted(set(versions))


def test_fails_over_to_the_next_host_mid_session(etcd: EtcdHarness, etcd_server: Server) -> None:
    first = TcpProxy(etcd_server.host, etcd_server.port)
    try:
        url = f"etcd://{first.address},{etcd_server.address}{etcd.namespace}"
        c = coordinator.connect(url, timeout=10, session_timeout=10)
        etcd.clients.append(c)
        c.create("/f", b"0")
        seen: Recorder[DataEvent] = Recorder()
        c.watch_data("/f", seen)
        seen.wait_count(1)
        session = c.session_id
        states: Recorder[SessionState] = Recorder()
        c.add_listener(states)
        first.close()  # the first host goes away for good
        writer = etcd.connect()
        writer.set("/f", b"1")
        seen.wait_for(lambda ev: ev[-1].data == b"1", timeout=20, message="watch on host 2")
        wait_until(lambda: c.state is SessionState.CONNECTED, timeout=20)
        assert c.session_id == session
        wait_until(lambda: _set_works(c), timeout=10)
        assert c.get("/f")[0] == b"2"
    finally:
        first.close()


def _set_works(c: Coordinator) -> bool:
    try:
        c.set("/f", b"2")
        return True
    except coordinator.ConnectionLoss:
        return False


def test_bulk_creates_under_distinct_parents_fit_the_compare_limit(etcd: EtcdHarness) -> None:
    c = etcd.connect()
    c.ensure_path("/t")
    parents = [Create(path=f"/t/{i}") for i in range(300)]
    assert c.write_many(parents) == [f"/t/{i}" for i in range(300)]
    states = [Create(path=f"/t/{i}/state", data=b"s") for i in range(300)]
    assert c.write_many(states) == [f"/t/{i}/state" for i in range(300)]
    got = c.get_many([f"/t/{i}/state" for i in range(300)] + ["/t/none/state", "/"])
    assert all(g is not None and g[0] == b"s" for g in got[:300])
    assert got[300] is None and got[301] is not None


def test_get_many_pages_a_dense_sibling_range(etcd: EtcdHarness) -> None:
    c = etcd.connect()
    c.ensure_path("/s")
    c.write_many([Create(path=f"/s/{i:05d}", data=str(i).encode()) for i in range(3000)])
    wanted = [f"/s/{i:05d}" for i in range(0, 3000, 2)] + ["/s/99999"]
    got = c.get_many(wanted)
    assert [g[0] for g in got[:-1]] == [str(i).encode() for i in range(0, 3000, 2)]
    assert got[-1] is None


def test_get_many_reads_a_sparse_part_key_by_key(
        etcd: EtcdHarness) -> None:
    """Wanted keys among many unwanted ones (five keys in the range per wanted one): each
    scan's part says there is more than its limit, and its keys are read one by one."""
    c = etcd.connect()
    c.ensure_path("/sp")
    c.write_many([Create(path=f"/sp/{i:05d}", data=str(i).encode()) for i in range(6000)])
    wanted = [f"/sp/{i:05d}" for i in range(0, 6000, 5)] + ["/sp/99999"]
    got = c.get_many(wanted)
    assert [g[0] for g in got[:-1] if g is not None] == [str(i).encode()
                                                         for i in range(0, 6000, 5)]
    assert got[-1] is None
    assert {g[1].version for g in got[:-1] if g is not None} == {0}


class _Counted:
    """A stand-in for a connection's range call that counts the ranges asked for."""

    def __init__(self, call: Any) -> None:
        self.call, self.asked = call, 0

    def future(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        return self.call.future(*args, **kwargs)


def test_scattered_keys_are_read_one_by_one_after_one_sparse_part(
        etcd: EtcdHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few keys of every thousand (the partitions a broker's return re-reads, among a
    million): the first part of the scan, read alone, holds more than its limit, so no other
    part is asked for (each request would walk its whole range on the server, to be thrown
    away); the keys are read one by one, all of them."""
    monkeypatch.setattr(etcd_module, "SCAN_MIN", 16)
    monkeypatch.setattr(etcd_module, "SCAN_PART", 16)
    c = etcd.connect()
    c.ensure_path("/sc")
    c.write_many([Create(path=f"/sc/{i:05d}", data=str(i).encode()) for i in range(2000)])
    client = c._conn._client  # type: ignore[attr-defined]
    counted = _Counted(client.range_bytes)
    monkeypatch.setattr(client, "range_bytes", counted)
    wanted = [f"/sc/{i:05d}" for i in range(0, 2000, 20)]  # 100 keys, 7 parts
    got = c.get_many(wanted)
    assert [g[0] for g in got if g is not None] == [str(i).encode() for i in range(0, 2000, 20)]
    assert counted.asked == 2  # one part of the whole range, then one of the siblings' (not 14)
    dense = c.get_many([f"/sc/{i:05d}" for i in range(0, 2000, 2)])  # 63 parts, each whole
    assert [g[0] for g in dense if g is not None] == [str(i).encode() for i in range(0, 2000, 2)]
    assert counted.asked == 2 + 63


def test_a_raised_txn_limit_is_used_only_when_the_client_is_told(etcd: EtcdHarness) -> None:
    """A server run with --max-txn-ops 1024 takes 600 sets in one transaction from a client
    given max_txn_ops=1024; the default server refuses that transaction, whole, so the
    client must not be told more than the server allows."""
    sets = [SetData(path=f"/big/{i:04d}", data=b"new") for i in range(600)]
    c = etcd.connect()
    c.ensure_path("/big")
    c.write_many([Create(path=f"/big/{i:04d}", data=b"old") for i in range(600)])
    told = coordinator.connect(etcd.url(), max_txn_ops=1024)
    try:
        with pytest.raises(CoordinatorError, match="too many operations"):
            told.write_many(sets)
        assert {g[0] for g in c.get_many([s.path for s in sets])
                if g is not None} == {b"old"}
    finally:
        told.close()
    raised = start_etcd(flags=["--max-txn-ops", "1024"])
    try:
        for max_txn_ops in (None, 1024):
            options = {} if max_txn_ops is None else {"max_txn_ops": max_txn_ops}
            client = coordinator.connect(f"etcd://{raised.address}/raised", **options)
            try:
                client.ensure_path("/big")
                client.write_many([Create(path=f"/big/{i:04d}", data=b"old")
                                   for i in range(600)])
                client.write_many(sets)
                got = client.get_many([s.path for s in sets])
                assert {g[0] for g in got if g is not None} == {b"new"}
                client.delete("/big", recursive=True)
            finally:
                client.close()
    finally:
        raised.stop()


@pytest.mark.parametrize("options", [{"max_txn_ops": 2}, {"max_request_bytes": 1000},
                                     {"max_txn_ops": "1024"}])
def test_request_limits_that_cannot_work_are_refused(etcd: EtcdHarness,
                                                     options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be an int of at least"):
        coordinator.connect(etcd.url(), **options)


def test_the_limits_come_from_the_environment_when_not_given(
        etcd: EtcdHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """partctl's tools (and processes a benchmark spawns) take a raised server's limits from
    PARTCTL_ETCD_MAX_TXN_OPS / PARTCTL_ETCD_MAX_REQUEST_BYTES; an option given wins."""
    monkeypatch.setenv("PARTCTL_ETCD_MAX_TXN_OPS", "999")
    monkeypatch.setenv("PARTCTL_ETCD_MAX_REQUEST_BYTES", str(4 << 20))
    c = coordinator.connect(etcd.url())
    given = coordinator.connect(etcd.url(), max_txn_ops=300)
    try:
        assert c.capabilities.max_multi_ops == 333
        assert c.capabilities.max_multi_bytes > 3 << 20
        assert given.capabilities.max_multi_ops == 100
    finally:
        c.close()
        given.close()
    monkeypatch.setenv("PARTCTL_ETCD_MAX_TXN_OPS", "lots")
    with pytest.raises(ValueError, match="PARTCTL_ETCD_MAX_TXN_OPS='lots': not an integer"):
        coordinator.connect(etcd.url())


def test_unknown_option_is_refused(etcd: EtcdHarness) -> None:
    with pytest.raises(TypeError):
        coordinator.connect(etcd.url(), nonsense=1)


def test_bulk_reads_and_writes_cut_off_fail_with_connection_loss_and_the_grpc_cause(
        etcd: EtcdHarness) -> None:
    """Bulk calls go out a batch at a time and their gRPC errors are translated at that
    boundary (Connection.translating): the caller gets ConnectionLoss, worth retrying, with
    the gRPC error chained (an RpcError, or the closed-channel error when a failover replaced
    the channel under the call), and the client keeps working once the server is back."""
    import grpc

    c = etcd.connect(proxied=True)
    c.ensure_path("/cut")
    proxy = etcd.proxies[id(c)]
    proxy.hold()
    try:
        with pytest.raises(coordinator.ConnectionLoss) as read:
            c.get_many([f"/cut/{i}" for i in range(10)])
        with pytest.raises(coordinator.ConnectionLoss) as write:
            c.write_many([Create(path=f"/cut/{i}") for i in range(10)])
    finally:
        proxy.release()
    for failed in (read.value, write.value):
        # gRPC's error, or gRPC's closed-channel ValueError when the session's failover
        # replaced the channel under the call (what a held proxy often sets off)
        cause = failed.__cause__
        closed = isinstance(cause, ValueError) and (
            "Channel closed" in str(cause) or "closed channel" in str(cause))
        assert isinstance(cause, grpc.RpcError) or closed, repr(cause)
    wait_until(lambda: _bulk_works(c), timeout=20)
    assert c.get_many(["/cut/0", "/cut/9"]) == [c.get("/cut/0"), c.get("/cut/9")]


def _bulk_works(c: Coordinator) -> bool:
    try:
        c.write_many([Create(path=f"/cut/{i}") for i in range(10)])
        return True
    except coordinator.ConnectionLoss:
        return False


@pytest.mark.parametrize("message", ["Cannot invoke RPC on closed channel!",
                                     "Cannot invoke RPC: Channel closed!"])
def test_a_channel_closed_under_a_call_is_a_connection_loss(message: str) -> None:
    """gRPC words a closed channel two ways, depending on where the call found it closed
    (the second came from a bulk read whose channel a failover had just replaced)."""
    from coordinator.etcd_conn import translate

    assert isinstance(translate(ValueError(message), "get_many"), coordinator.ConnectionLoss)
    assert not isinstance(translate(ValueError("bad key"), "get_many"), coordinator.ConnectionLoss)


def test_tree_watch_on_the_root_of_a_store_without_a_prefix(etcd_server: Server) -> None:
    # The root's key is the bare prefix, empty here: arming must not read an empty key
    # (etcd refuses it), as a hot-standby controller on an unprefixed etcd does.
    c = coordinator.connect(f"etcd://{etcd_server.host}:{etcd_server.port}")
    path = f"/tree-root-{time.monotonic_ns()}"
    try:
        seen: Recorder[Any] = Recorder()
        c.watch_tree("/", seen)
        c.create(path, b"x")
        seen.wait_for(lambda events: any(ch.path == path for ev in events for ch in ev.changes),
                      message="the root's tree watch reporting the create")
    finally:
        c.delete(path)
        c.close()


class _Answer(grpc.RpcError):
    """A call's gRPC status, as the channel reports it (code and details)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize("details", [
    "etcdserver: request timed out",
    "etcdserver: request timed out, waiting for the applied index took too long"])
def test_a_busy_members_answer_keeps_the_channel(details: str) -> None:
    """etcd answers UNAVAILABLE when it is up but behind (a long apply queue during a bulk load
    of 250,000 partitions): the lease keep-alive took it for a broken connection and replaced
    the channel, which cancelled the bulk write in flight on it ("request cancelled (channel
    closed)"). The caller of the busy call still gets ConnectionLoss; the channel stays."""
    from coordinator.etcd_conn import is_connection_error, member_busy, translate

    busy = _Answer(grpc.StatusCode.UNAVAILABLE, details)
    assert member_busy(busy) and not is_connection_error(busy)
    assert isinstance(translate(busy, "keep-alive"), coordinator.ConnectionLoss)
    for broken in (_Answer(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"),
                   _Answer(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader"),
                   _Answer(grpc.StatusCode.UNAVAILABLE, "etcdserver: request timed out, "
                           "possibly due to connection lost"),
                   _Answer(grpc.StatusCode.CANCELLED, "Channel closed!")):
        assert is_connection_error(broken) and not member_busy(broken)
