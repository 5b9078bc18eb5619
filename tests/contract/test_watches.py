"""Persistent data and children watches: initial state, every change, reconnects, cancel."""

from __future__ import annotations

from coordinator import ChildrenEvent, Coordinator, Create, DataEvent, Delete, SetData
from tests.waiting import Recorder


def _data(events: list[DataEvent]) -> list[bytes | None]:
    return [e.data for e in events]


def test_data_watch_reports_initial_state_and_every_change(
    client: Coordinator, other: Coordinator
) -> None:
    seen: Recorder[DataEvent] = Recorder()
    client.watch_data("/w", seen)
    first = seen.wait_count(1)[0]
    assert first.path == "/w" and first.data is None and first.stat is None
    other.create("/w", b"0")
    seen.wait_count(2)
    for i in range(1, 6):  # one change at a time: each must be reported
        other.set("/w", str(i).encode())
        seen.wait_count(2 + i)
    other.delete("/w")
    events = seen.wait_count(8)
    assert _data(events) == [None, b"0", b"1", b"2", b"3", b"4", b"5", None]
    versions = [e.stat.version for e in events[1:7]]
    assert versions == list(range(6))


def test_data_watch_under_rapid_changes_ends_at_the_latest_state(
    client: Coordinator, other: Coordinator
) -> None:
    other.create("/rapid", b"0")
    seen: Recorder[DataEvent] = Recorder()
    client.watch_data("/rapid", seen)
    for i in range(1, 51):
        other.set("/rapid", str(i).encode())
    seen.wait_for(lambda ev: ev and ev[-1].data == b"50", message="final value")
    versions = [e.stat.version for e in seen.items]
    assert versions == sorted(set(versions)), "states only move forward, never repeat"


def test_children_watch(client: Coordinator, other: Coordinator) -> None:
    other.create("/kids")
    seen: Recorder[ChildrenEvent] = Recorder()
    client.watch_children("/kids", seen)
    assert seen.wait_count(1)[0].children == []
    other.create("/kids/b")
    seen.wait_count(2)
    other.create("/kids/a")
    seen.wait_count(3)
    other.set("/kids/a", b"data changes are not children changes")
    other.create("/kids/a/grandchild")
    other.delete("/kids/b")
    events = seen.wait_count(4)
    assert [e.children for e in events] == [[], ["b"], ["a", "b"], ["a"]]
    other.delete("/kids", recursive=True)
    seen.wait_for(lambda ev: ev[-1].children is None, message="parent deleted")
    other.create("/kids")
    seen.wait_for(lambda ev: ev[-1].children == [], message="parent recreated")


def test_children_watch_among_writes_deeper_down(client: Coordinator, other: Coordinator) -> None:
    """Writes below the children (on etcd they reach the watch's range) report nothing; a
    multi that also adds or removes children reports them."""
    other.create("/deep")
    other.create("/deep/a")
    other.create("/deep/a/x", b"0")
    seen: Recorder[ChildrenEvent] = Recorder()
    client.watch_children("/deep", seen)
    assert seen.wait_count(1)[0].children == ["a"]
    other.multi([SetData(path="/deep/a/x", data=b"1"), Create(path="/deep/b"),
                 Create(path="/deep/a/y"), Create(path="/deep/c")])
    seen.wait_for(lambda ev: ev[-1].children == ["a", "b", "c"], message="b and c added")
    for i in range(20):
        other.set("/deep/a/x", b"%d" % i)
    other.multi([SetData(path="/deep/a/y", data=b"z"), Delete(path="/deep/b")])
    seen.wait_for(lambda ev: ev[-1].children == ["a", "c"], message="b removed")
    client.sync()
    reported = [e.children for e in seen.items]
    assert all(c in (["a"], ["a", "b"], ["a", "b", "c"], ["a", "c"]) for c in reported), reported
    assert all(x != y for x, y in zip(reported, reported[1:], strict=False)), reported


def test_cancelled_watch_stays_quiet(client: Coordinator, other: Coordinator) -> None:
    other.create("/c", b"0")
    seen: Recorder[DataEvent] = Recorder()
    watch = client.watch_data("/c", seen)
    seen.wait_count(1)
    watch.cancel()
    other.set("/c", b"1")
    marker: Recorder[DataEvent] = Recorder()
    client.watch_data("/c", marker)
    marker.wait_for(lambda ev: ev and ev[-1].data == b"1")
    other.set("/c", b"2")
    marker.wait_for(lambda ev: ev[-1].data == b"2")
    client.sync()
    assert len(seen.items) == 1


def test_watches_report_changes_across_a_forced_reconnect(backend) -> None:  # noqa: ANN001
    watcher = backend.connect(proxied=True)
    writer = backend.connect()
    writer.create("/rc", b"0")
    writer.create("/rcdir")
    data: Recorder[DataEvent] = Recorder()
    kids: Recorder[ChildrenEvent] = Recorder()
    watcher.watch_data("/rc", data)
    watcher.watch_children("/rcdir", kids)
    data.wait_count(1)
    kids.wait_count(1)

    proxy = backend.proxies.get(id(watcher))
    if proxy is not None:
        proxy.hold()
    else:
        watcher.suspend()
    writer.set("/rc", b"during")
    writer.create("/rcdir/during")
    if proxy is not None:
        proxy.release()
    else:
        watcher.resume()

    data.wait_for(lambda ev: ev[-1].data == b"during", timeout=20, message="change made offline")
    kids.wait_for(lambda ev: ev[-1].children == ["during"], timeout=20)
    for i in range(1, 4):  # and the watches keep working afterwards, in order
        writer.set("/rc", f"after{i}".encode())
        data.wait_for(lambda ev, i=i: ev[-1].data == f"after{i}".encode(), timeout=10)
    versions = [e.stat.version for e in data.items]
    assert versions == sorted(set(versions))
    assert data.items[-1].stat.version == 4
