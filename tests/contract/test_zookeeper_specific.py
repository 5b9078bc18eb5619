"""What only the ZooKeeper backend has: the read-only multi, the chroot, kazoo at the boundary."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import coordinator
from coordinator import (
    Coordinator,
    Create,
    DataEvent,
    NoNode,
    SessionState,
    SetData,
)
from tests.contract.conftest import ZooKeeperHarness
from tests.servers import Server
from tests.waiting import Recorder, wait_until


@pytest.fixture
def zk(zookeeper_server: Server) -> Iterator[ZooKeeperHarness]:
    harness = ZooKeeperHarness(zookeeper_server)
    yield harness
    harness.close()


@pytest.fixture
def client(zk: ZooKeeperHarness) -> Coordinator:
    return zk.connect()


def test_get_many_matches_plain_reads(client: Coordinator) -> None:
    client.create("/mr")
    sizes = [0, 1, 100, 5_000, 200_000]
    paths = []
    for i in range(300):
        path = f"/mr/n{i}"
        client.create(path, bytes([i % 256]) * sizes[i % len(sizes)])
        paths.append(path)
        if i % 3 == 0:
            client.set(path, b"changed")
    client.delete("/mr/n7")
    asked = paths + ["/absent", "/mr/n7", "/mr/n1/below"]
    got = client.get_many(asked)
    for path, item in zip(asked, got, strict=True):
        try:
            expected = client.get(path)
        except NoNode:
            expected = None
        assert item == expected, path


def test_get_many_of_large_values_adapts_its_batches(client: Coordinator) -> None:
    # 12 x 900 KB: far more than jute.maxbuffer if read in one multi.
    client.create("/large")
    ops = [Create(path=f"/large/{i}", data=bytes([i]) * 900_000) for i in range(12)]
    client.write_many(ops)
    got = client.get_many([op.path for op in ops])
    assert [item[0] if item else None for item in got] == [op.data for op in ops]


def test_many_tiny_ops_under_a_long_chroot_fit_in_requests(zk: ZooKeeperHarness) -> None:
    # The chroot is on every path ZooKeeper sees but not in model.op_size's estimate.
    long_root = zk.namespace + "/" + "r" * 200
    url = f"zookeeper://{zk.server.address}{long_root}"
    c = coordinator.connect(url, timeout=10)
    zk.clients.append(c)
    states: Recorder[SessionState] = Recorder()
    c.add_listener(states)
    n = 20_000
    results = c.write_many([Create(path=f"/{i}") for i in range(n)])
    assert results == [f"/{i}" for i in range(n)]
    assert c.write_many([SetData(path=f"/{i}", data=b"") for i in range(n)])[-1].version == 1
    c.sync()
    assert SessionState.SUSPENDED not in states.items


def test_connect_creates_a_missing_chroot(zk: ZooKeeperHarness) -> None:
    root = f"{zk.namespace}/deeper/{uuid.uuid4().hex[:6]}"
    c = coordinator.connect(f"zookeeper://{zk.server.address}{root}", timeout=10)
    zk.clients.append(c)
    assert c.exists("/") is not None
    assert c.create("/x") == "/x"
    outside = zk.connect()  # chrooted at the namespace
    assert outside.exists(root[len(zk.namespace):] + "/x") is not None


def test_sequential_names_in_a_multi_lose_the_chroot(client: Coordinator) -> None:
    client.create("/sq")
    results = client.multi([Create(path="/sq/a-", sequential=True),
                            Create(path="/sq/b-", sequential=True)])
    assert results[0] == "/sq/a-0000000000" and results[1] == "/sq/b-0000000001"


def test_session_id_is_kazoos_and_errors_chain_kazoos(client: Coordinator) -> None:
    from kazoo.exceptions import NoNodeError

    assert client.session_id == client.kazoo.client_id[0]
    with pytest.raises(NoNode) as info:
        client.get("/nowhere")
    assert isinstance(info.value.__cause__, NoNodeError)


def test_data_watch_of_an_expired_session_reports_what_changed_meanwhile(
    zk: ZooKeeperHarness,
) -> None:
    watcher, writer = zk.connect(), zk.connect()
    writer.create("/exp", b"0")
    seen: Recorder[DataEvent] = Recorder()
    watcher.watch_data("/exp", seen)
    seen.wait_for(lambda ev: ev and ev[-1].data == b"0")
    states: Recorder[SessionState] = Recorder()
    watcher.add_listener(states)
    zk.expire(watcher)
    writer.set("/exp", b"1")
    states.wait_for(lambda s: SessionState.LOST in s and s[-1] is SessionState.CONNECTED,
                    timeout=20, message="a new session")
    seen.wait_for(lambda ev: ev[-1].data == b"1", timeout=20, message="change while expired")
    writer.set("/exp", b"2")  # and it keeps watching on the new session
    seen.wait_for(lambda ev: ev[-1].data == b"2", timeout=10)
    versions = [e.stat.version for e in seen.items]
    assert versions == sorted(set(versions))


def test_requests_while_disconnected_fail_fast(zk: ZooKeeperHarness) -> None:
    c = zk.connect(proxied=True, session_timeout=10.0)
    proxy = zk.proxies[id(c)]
    states: Recorder[SessionState] = Recorder()
    c.add_listener(states)
    proxy.hold()
    try:
        states.wait_for(lambda s: SessionState.SUSPENDED in s, timeout=10)
        with pytest.raises(coordinator.ConnectionLoss):
            c.get("/")
        with pytest.raises(coordinator.ConnectionLoss):
            c.multi([Create(path="/during")])
    finally:
        proxy.release()
    states.wait_for(lambda s: s[-1] is SessionState.CONNECTED, timeout=20)
    assert c.exists("/during") is None


def test_recursive_delete_of_a_wide_tree(client: Coordinator) -> None:
    client.create("/topic")
    client.write_many([Create(path=f"/topic/{i}") for i in range(500)])
    client.write_many([Create(path=f"/topic/{i}/state", data=b"{}") for i in range(500)])
    client.delete("/topic", recursive=True)
    assert client.exists("/topic") is None


def test_an_oversized_multi_is_refused_before_it_reaches_the_server(client: Coordinator) -> None:
    from coordinator import RequestTooLarge

    ops = [Create(path=f"/o{i}", data=b"x" * 300_000) for i in range(4)]
    with pytest.raises(RequestTooLarge):
        client.multi(ops)
    assert client.state is SessionState.CONNECTED
    assert client.exists("/o0") is None


def test_a_bad_path_in_a_multi_fails_that_op_as_on_memory(client: Coordinator) -> None:
    from coordinator import InvalidPath, MultiFailed

    with pytest.raises(MultiFailed) as info:
        client.multi([Create(path="/fine"), Create(path="/bad/")])
    assert info.value.index == 1 and isinstance(info.value.cause, InvalidPath)
    results = client.write_many([Create(path="/w1"), SetData(path="/x/./y", data=b"")])
    assert results[0] == "/w1" and isinstance(results[1], InvalidPath)


def test_sync_delivers_every_change_committed_before_it(zk: ZooKeeperHarness) -> None:
    """A persistent watch learns a new state by a read its notification starts; sync waits
    for those reads (and a second look at a node that vanished), not only for the events
    already queued."""
    writer, watcher = zk.connect(), zk.connect()
    writer.create("/synced", b"0")
    states: list[DataEvent] = []
    watcher.watch_data("/synced", states.append)
    assert watcher.sync()
    for i in range(1, 150):
        if i % 25 == 0:
            writer.delete("/synced")
            assert watcher.sync()
            assert states[-1].stat is None, i
            writer.create("/synced", str(i).encode())
        else:
            writer.set("/synced", str(i).encode())
        assert watcher.sync()
        assert states[-1].data == str(i).encode(), i


def test_session_reads_through_the_read_ahead_socket(client: Coordinator) -> None:
    from coordinator.zk_io import ReadAheadHandler, ReadAheadSocket

    kazoo = client.kazoo  # type: ignore[attr-defined]
    assert isinstance(kazoo.handler, ReadAheadHandler)
    assert isinstance(kazoo._connection._socket, ReadAheadSocket)
    client.write_many([Create(path=f"/ra{i}", data=b"x") for i in range(200)])
    got = Recorder()
    watches = [client.watch_data(f"/ra{i}", got) for i in range(200)]
    got.wait_for(lambda events: len(events) >= 200)
    client.write_many([SetData(path=f"/ra{i}", data=b"y") for i in range(200)])
    got.wait_for(lambda events: sum(e.data == b"y" for e in events) == 200)
    for w in watches:
        w.cancel()


def test_cancelling_a_tree_watch_removes_it_from_the_server(zk: ZooKeeperHarness) -> None:
    """A session that stops following a tree (a standby that became the controller) must not
    go on being told of every write under it."""
    from tests.servers import zookeeper_watches

    client = zk.connect()
    other = zk.connect()
    client.create("/tw")
    full = zk.namespace + "/tw"
    got: Recorder[Any] = Recorder()
    first = client.watch_tree("/tw", got)
    second = client.watch_tree("/tw", got)
    assert full in zookeeper_watches(zk.server).get(client.session_id, set())
    first.cancel()  # another tree of the session still watches the path: the watch stays
    client.sync()
    assert full in zookeeper_watches(zk.server).get(client.session_id, set())
    second.cancel()
    wait_until(lambda: full not in zookeeper_watches(zk.server).get(client.session_id, set()),
               message="the server to drop the persistent watch")
    # Another session's watch on the same path is its own.
    kept: Recorder[Any] = Recorder()
    other.watch_tree("/tw", kept)
    client.create("/tw/a", b"1")
    kept.wait_for(lambda events: any(c.path == "/tw/a" for e in events for c in e.changes))


def test_a_tree_watch_behind_thousands_of_changes_reports_them_all_in_order(
        zk: ZooKeeperHarness, client: Coordinator) -> None:
    """A ZooKeeper tree watch reads the data of the nodes it is told of a thousand at a time,
    one read in flight: thousands of changes at once queue behind it, and come out whole, in
    the store's order, each with its data (a standby behind a mass election)."""
    from coordinator.model import TreeEvent

    other = zk.connect()
    other.create("/many")
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/many", seen)
    count = 3500
    other.write_many([Create(path=f"/many/n{i:05d}", data=str(i).encode())
                      for i in range(count)])

    def changes(events: list[TreeEvent]) -> list[Any]:
        return [c for e in events for c in e.changes]

    got = seen.wait_for(lambda ev: len(changes(ev)) >= count and changes(ev), timeout=60)
    assert [c.path for c in got] == [f"/many/n{i:05d}" for i in range(count)]
    assert [c.data for c in got] == [str(i).encode() for i in range(count)]
    assert [c.revision for c in got] == sorted(c.revision for c in got)


def test_a_tree_watch_reading_ahead_delivers_its_batches_in_the_order_taken(
        zk: ZooKeeperHarness, client: Coordinator) -> None:
    """A tree watch behind by a whole batch has several reads in flight. Here one write makes
    2,000 nodes, deletes 1,500 and makes 500 more: a batch of deletions alone has nothing to
    read and is ready while the reads taken before it are still out, yet comes out after
    them, every change in the store's order."""
    from coordinator.model import Create, Delete, TreeEvent

    other = zk.connect()
    other.create("/mix")
    other.write_many([Create(path=f"/mix/d{i:05d}", data=b"d") for i in range(1500)])
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/mix", seen)
    ops = ([Create(path=f"/mix/c{i:05d}", data=str(i).encode()) for i in range(2000)]
           + [Delete(path=f"/mix/d{i:05d}") for i in range(1500)]
           + [Create(path=f"/mix/e{i:05d}", data=b"e") for i in range(500)])
    other.write_many(ops)

    def changes(events: list[TreeEvent]) -> list[Any]:
        return [c for e in events for c in e.changes]

    got = seen.wait_for(lambda ev: len(changes(ev)) >= len(ops) and changes(ev), timeout=60)
    assert [c.path for c in got] == [op.path for op in ops]
    assert [c.data for c in got] == ([str(i).encode() for i in range(2000)] + [None] * 1500
                                     + [b"e"] * 500)
    made = [c.revision for c in got if c.data is not None]  # (a deletion's: 0 before 3.9)
    assert made == sorted(made)
