"""Tree watches: every create, data change and delete at or below a node, in store order, with
data; nothing outside; cancel; reconnects and session loss without a lost change (or a resync
after which a re-read gives the right state)."""

from __future__ import annotations

import threading
import time

from coordinator import ChildrenEvent, Coordinator, DataEvent, NoNode, TreeChange, TreeEvent
from tests.waiting import Recorder, wait_until


def _changes(events: list[TreeEvent]) -> list[TreeChange]:
    return [c for e in events for c in e.changes]


def _read_tree(client: Coordinator, root: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}

    def walk(path: str) -> None:
        try:
            data, _ = client.get(path)
            kids = client.children(path)
        except NoNode:
            return
        out[path] = data
        for kid in kids:
            walk(f"{path.rstrip('/')}/{kid}")

    walk(root)
    return out


class Mirror:
    """A consumer as the hot standby is one: applies changes, re-reads on resync."""

    def __init__(self, client: Coordinator, root: str) -> None:
        self.client = client
        self.root = root
        self.state: dict[str, bytes] = {}
        self.versions: dict[str, int] = {}
        self.resyncs = 0
        self.lock = threading.Lock()

    def load(self) -> None:
        state = _read_tree(self.client, self.root)
        with self.lock:
            self.state = state

    def __call__(self, event: TreeEvent) -> None:
        if event.resync:
            self.resyncs += 1
            self.load()
            return
        with self.lock:
            for change in event.changes:
                if change.data is None:
                    self.state.pop(change.path, None)
                else:
                    self.state[change.path] = change.data


def test_tree_watch_reports_deep_changes_in_order_with_data(
    client: Coordinator, other: Coordinator
) -> None:
    other.create("/tree")
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/tree", seen)
    other.create("/tree/a/b/c", b"c0", make_parents=True)
    other.set("/tree/a/b/c", b"c1")
    # ZooKeeper reads a node's data after its notification: let the change be read before the
    # node goes, or the read may find it deleted already (a later state, as noted below)
    seen.wait_for(lambda ev: len(_changes(ev)) >= 4, message="the change")
    other.create("/tree/x", b"x0")
    other.delete("/tree/a/b/c")
    changes = seen.wait_for(
        lambda ev: (ch := _changes(ev)) and ch[-1].path == "/tree/a/b/c"
        and ch[-1].data is None and ch, message="the delete")
    paths = [c.path for c in changes]
    # make_parents may skip parents another client made; /tree exists, so a and a/b are new
    assert paths == ["/tree/a", "/tree/a/b", "/tree/a/b/c", "/tree/a/b/c", "/tree/x",
                     "/tree/a/b/c"]
    created, changed = changes[2], changes[3]
    assert created.stat is not None and changed.stat is not None
    # ZooKeeper reads the data after the notification: a change may show a later state
    assert created.data in (b"c0", b"c1") and changed.data == b"c1"
    assert changed.stat.version == 1
    assert changes[4].data == b"x0" and changes[4].stat.version == 0
    assert changes[5].stat is None
    revisions = [c.revision for c in changes if c.revision]
    assert revisions == sorted(revisions), "changes come in store order"
    assert all(e.path == "/tree" and not e.resync for e in seen.items)


def test_tree_watch_reports_nothing_outside_its_subtree(
    client: Coordinator, other: Coordinator
) -> None:
    other.create("/in")
    other.create("/inside")  # shares the prefix, not the subtree
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/in", seen)
    other.create("/inside/k", b"no")
    other.create("/in-other", b"no")
    other.create("/out", b"no")
    other.set("/in", b"root itself counts")
    other.create("/in/k", b"yes")
    changes = seen.wait_for(lambda ev: (ch := _changes(ev)) and ch[-1].path == "/in/k" and ch)
    assert [c.path for c in changes] == ["/in", "/in/k"]
    assert changes[0].data == b"root itself counts"


def test_tree_watch_on_the_root_sees_everything(client: Coordinator, other: Coordinator) -> None:
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/", seen)
    other.create("/r1", b"1")
    other.create("/r1/r2", b"2")
    changes = seen.wait_for(lambda ev: len(_changes(ev)) >= 2 and _changes(ev))
    assert [(c.path, c.data) for c in changes] == [("/r1", b"1"), ("/r1/r2", b"2")]


def test_tree_watch_and_node_watches_on_the_same_nodes_both_report(
    client: Coordinator, other: Coordinator
) -> None:
    """A session may follow a tree and, inside it, single nodes (a controller's standby view
    and its watches on brokers and topics): every watch keeps reporting."""
    other.create("/both")
    other.create("/both/n", b"0")
    tree: Recorder[TreeEvent] = Recorder()
    data: Recorder[DataEvent] = Recorder()
    kids: Recorder[ChildrenEvent] = Recorder()
    client.watch_tree("/both", tree)
    client.watch_data("/both/n", data)
    client.watch_children("/both", kids)
    data.wait_count(1)
    kids.wait_count(1)
    for i in range(1, 4):
        other.set("/both/n", str(i).encode())
        data.wait_for(lambda ev, i=i: ev[-1].data == str(i).encode())
    other.create("/both/m", b"m")
    kids.wait_for(lambda ev: "m" in ev[-1].children)
    other.delete("/both/n")
    data.wait_for(lambda ev: ev[-1].stat is None)
    changes = tree.wait_for(lambda ev: (ch := _changes(ev)) and ch[-1].path == "/both/n"
                            and ch[-1].data is None and ch)
    # (A ZooKeeper tree reads data after the notification: a change may carry a later state.)
    assert [c.path for c in changes] == ["/both/n"] * 3 + ["/both/m", "/both/n"]
    assert changes[3].data == b"m" and changes[-1].data is None


def test_tree_watch_batches_a_multi(client: Coordinator, other: Coordinator) -> None:
    other.create("/bulk")
    seen: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/bulk", seen)
    from coordinator import Create

    other.write_many([Create(path=f"/bulk/n{i:04d}", data=str(i).encode()) for i in range(500)])
    changes = seen.wait_for(lambda ev: len(_changes(ev)) >= 500 and _changes(ev))
    assert sorted(c.path for c in changes) == [f"/bulk/n{i:04d}" for i in range(500)]
    assert all(c.data == c.path[-4:].lstrip("0").encode() or c.path.endswith("0000")
               for c in changes)
    assert len(seen.items) < 500, "delivered in batches"


def test_cancelled_tree_watch_stays_quiet(client: Coordinator, other: Coordinator) -> None:
    other.create("/quiet")
    seen: Recorder[TreeEvent] = Recorder()
    watch = client.watch_tree("/quiet", seen)
    other.create("/quiet/a", b"1")
    seen.wait_count(1)
    watch.cancel()
    marker: Recorder[TreeEvent] = Recorder()
    client.watch_tree("/quiet", marker)
    other.create("/quiet/b", b"2")
    marker.wait_for(lambda ev: any(c.path == "/quiet/b" for c in _changes(ev)))
    client.sync()
    assert [c.path for c in _changes(seen.items)] == ["/quiet/a"]


def _converges(mirror: Mirror, writer: Coordinator, root: str) -> None:
    def same() -> bool:
        with mirror.lock:
            return mirror.state == _read_tree(writer, root)

    wait_until(same, timeout=20, message="the tree watch's view to match the store")


def test_tree_watch_survives_a_forced_reconnect(backend) -> None:  # noqa: ANN001
    watcher = backend.connect(proxied=True)
    writer = backend.connect()
    writer.create("/rt")
    writer.create("/rt/keep", b"0")
    mirror = Mirror(watcher, "/rt")
    watcher.watch_tree("/rt", mirror)
    mirror.load()

    proxy = backend.proxies.get(id(watcher))
    if proxy is not None:
        proxy.hold()
    else:
        watcher.suspend()
    writer.set("/rt/keep", b"during")
    writer.create("/rt/during", b"d")
    writer.create("/rt/during/deep", b"dd")
    time.sleep(0.2)
    if proxy is not None:
        proxy.release()
    else:
        watcher.resume()
    _converges(mirror, writer, "/rt")
    for i in range(3):  # and it keeps working afterwards
        writer.set("/rt/keep", f"after{i}".encode())
        writer.create(f"/rt/after{i}", b"a")
    writer.delete("/rt/during", recursive=True)
    _converges(mirror, writer, "/rt")
    assert mirror.state["/rt/keep"] == b"after2" and "/rt/during" not in mirror.state


def test_tree_watch_after_session_expiry_resyncs_or_loses_nothing(
    backend, other: Coordinator  # noqa: ANN001
) -> None:
    watcher = backend.connect()
    other.create("/ex")
    mirror = Mirror(watcher, "/ex")
    watcher.watch_tree("/ex", mirror)
    mirror.load()
    watcher.create("/ex/mine", b"ephemeral", ephemeral=True)
    other.create("/ex/theirs", b"1")
    _converges(mirror, other, "/ex")
    backend.expire(watcher)
    wait_until(lambda: other.exists("/ex/mine") is None, timeout=20, message="ephemeral gone")
    other.set("/ex/theirs", b"2")
    other.create("/ex/new", b"n")
    _converges(mirror, other, "/ex")
    if backend.name in ("memory", "zookeeper"):
        assert mirror.resyncs >= 1
    other.set("/ex/theirs", b"3")
    _converges(mirror, other, "/ex")
