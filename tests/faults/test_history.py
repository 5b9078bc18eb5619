"""The history file: events round-trip, malformed lines are one clear error, recording is
thread-safe, and the state auditor records every version it observes."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

import coordinator
from coordinator.codecs import PartitionStateNode, TopicAssignment, TopicPartition
from coordinator.memory import MemoryStore
from coordinator.metadata import MetadataClient
from tests.faults.history import (
    ControllerEpochSeen,
    FaultEnd,
    FaultStart,
    History,
    HistoryError,
    ProduceAttempt,
    ProduceOutcome,
    Read,
    StateAuditor,
    StateDeleted,
    StateWrite,
    fault_windows,
    read_history,
)
from tests.waiting import wait_until

TP = TopicPartition(topic="t", partition=0)


def test_every_event_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        op = h.produce_attempt("p1", TP, [b"a", "b"])
        h.acked(op, 7)
        op2 = h.produce_attempt("p1", TP, [b"\xff"])
        h.unknown(op2, "timeout")
        op3 = h.produce_attempt("p1", TP, [b"c"])
        h.failed(op3, "NOT_LEADER_OR_FOLLOWER")
        h.read("c1", TP, 7, [(7, b"a"), (8, None)], 9)
        with h.fault("kill", "broker-1"):
            h.controller_epoch(3, 2, 40)
        h.state(TP, PartitionStateNode(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=3),
                coordinator.model.Stat(version=4, create_id=10, modify_id=41))
        h.state_deleted(TP, 50)
    events = read_history(path)
    assert [type(e) for e in events] == [
        ProduceAttempt, ProduceOutcome, ProduceAttempt, ProduceOutcome, ProduceAttempt,
        ProduceOutcome, Read, FaultStart, ControllerEpochSeen, FaultEnd, StateWrite,
        StateDeleted]
    attempt, acked = events[0], events[1]
    assert isinstance(attempt, ProduceAttempt) and attempt.values == ("a", "b")
    assert isinstance(acked, ProduceOutcome) and (acked.outcome, acked.offset) == ("acked", 7)
    assert acked.values == ("a", "b") and acked.producer == "p1"
    unknown = events[3]
    assert isinstance(unknown, ProduceOutcome) and unknown.values == ("\\xff",)
    assert unknown.outcome == "unknown" and unknown.error == "timeout"
    read = events[6]
    assert isinstance(read, Read) and read.records == ((7, "a"), (8, None))
    state = events[10]
    assert isinstance(state, StateWrite) and state.isr == (1, 2)
    assert (state.version, state.create_id, state.revision) == (4, 10, 41)
    assert [e.t for e in events] == sorted(e.t for e in events)
    (window,) = fault_windows(events)
    assert (window.kind, window.target) == ("kill", "broker-1")
    assert window.start == events[7].t and window.end == events[9].t


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not JSON"),
    ("[1]", "not a JSON object"),
    ('{"type":"nope","t":1,"wall":1}', "unknown event type 'nope'"),
    ('{"type":"fault_end","t":1,"wall":1}', "missing field 'fault'"),
    ('{"type":"fault_end","t":1,"wall":1,"fault":"x"}', "field 'fault': expected int"),
    ('{"type":"fault_end","t":1,"wall":1,"fault":1,"extra":2}', "unknown fields ['extra']"),
    ('{"type":"produce_result","t":1,"wall":1,"op":1,"producer":"p","topic":"t",'
     '"partition":0,"values":["a"],"outcome":"maybe"}', "outcome 'maybe'"),
    ('{"type":"read","t":1,"wall":1,"reader":"c","topic":"t","partition":0,"offset":0,'
     '"records":[[0]],"high_watermark":1}', "field 'records'"),
])
def test_a_malformed_line_is_one_error_naming_its_line(tmp_path: Path, line: str,
                                                       message: str) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        h.fault_end(1)
    with path.open("a") as f:
        f.write(line + "\n")
    with pytest.raises(HistoryError, match=r"h\.jsonl, line 2: ") as info:
        read_history(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot read"):
        read_history(tmp_path / "none.jsonl")


def test_a_history_is_never_appended_to_by_a_second_run(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    History(path).close()
    with pytest.raises(FileExistsError, match="exists already"):
        History(path)


def test_recording_from_many_threads_keeps_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        def work(n: int) -> None:
            for i in range(200):
                op = h.produce_attempt(f"p{n}", TP, [f"{n}-{i}"])
                h.acked(op, i)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 1600 and all(json.loads(line) for line in lines)
    events = read_history(path)
    assert len({e.op for e in events if isinstance(e, ProduceOutcome)}) == 800


def test_the_auditor_records_every_version_and_epoch(tmp_path: Path) -> None:
    url = f"memory://audit-{uuid.uuid4().hex}"
    session = coordinator.connect(url)
    try:
        metadata = MetadataClient(session)
        metadata.ensure_layout()
        epoch = metadata.register_controller(1)
        metadata.create_topic(TopicAssignment(topic="t", partitions={0: (1, 2)}))
        state = PartitionStateNode(leader=1, leader_epoch=0, isr=(1, 2),
                                   controller_epoch=epoch.epoch)
        metadata.create_partition_states(epoch, {TP: state})  # before the auditor: read
        path = tmp_path / "h.jsonl"
        with History(path) as h, StateAuditor(h, url=url) as auditor:
            for version in range(10):
                new = PartitionStateNode(leader=2 - version % 2, leader_epoch=version + 1,
                                         isr=(1, 2), controller_epoch=epoch.epoch)
                metadata.update_partition_states(epoch, {TP: (new, version)})
            metadata.resign_controller(epoch)
            metadata.register_controller(2)
            wait_until(lambda: auditor.versions_seen().get(TP) == 10, timeout=5)
            time.sleep(0.05)  # any epoch event still on its way
        events = read_history(path)
    finally:
        session.close()
        MemoryStore.drop(url.removeprefix("memory://"))
    states = [e for e in events if isinstance(e, StateWrite)]
    assert [s.version for s in states] == list(range(11))
    assert states[0].source == "read" and {s.source for s in states[1:]} == {"watch"}
    assert [s.leader_epoch for s in states] == list(range(11))
    assert [s.revision for s in states] == sorted(s.revision for s in states)
    epochs = [e.epoch for e in events if isinstance(e, ControllerEpochSeen)]
    assert epochs[-1] == epochs[0] + 1


def test_after_a_resync_the_auditor_reads_what_it_missed(tmp_path: Path) -> None:
    """The auditor's session expires while it is cut off: its tree watch reports a resync and
    the auditor reads every state again, recording the versions and deletions it missed."""
    url = f"memory://audit-{uuid.uuid4().hex}"
    writer = coordinator.connect(url)
    watcher = coordinator.connect(url, session_timeout=0.05)
    other = TopicPartition(topic="u", partition=0)
    try:
        metadata = MetadataClient(writer)
        metadata.ensure_layout()
        epoch = metadata.register_controller(1)
        for tp in (TP, other):
            metadata.create_topic(TopicAssignment(topic=tp.topic, partitions={0: (1, 2)}))
            metadata.create_partition_states(epoch, {tp: PartitionStateNode(
                leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=epoch.epoch)})
        path = tmp_path / "h.jsonl"
        with History(path) as h, StateAuditor(h, session=watcher) as auditor:
            wait_until(lambda: auditor.versions_seen() == {TP: 0, other: 0}, timeout=5)
            watcher.suspend()  # type: ignore[attr-defined]
            for version in range(3):
                metadata.update_partition_states(epoch, {TP: (PartitionStateNode(
                    leader=2, leader_epoch=version + 1, isr=(2,),
                    controller_epoch=epoch.epoch), version)})
            writer.delete("/brokers/topics/u", recursive=True)
            time.sleep(0.2)  # past the session timeout
            watcher.resume()  # type: ignore[attr-defined]
            wait_until(lambda: auditor.versions_seen() == {TP: 3}, timeout=5)
            assert auditor.resyncs == 1
        events = read_history(path)
    finally:
        watcher.close()
        writer.close()
        MemoryStore.drop(url.removeprefix("memory://"))
    states = [(e.topic, e.version, e.source) for e in events if isinstance(e, StateWrite)]
    assert sorted(states) == [("t", 0, "read"), ("t", 3, "read"), ("u", 0, "read")]
    deleted = [e for e in events if isinstance(e, StateDeleted)]
    assert [(e.topic, e.revision) for e in deleted] == [("u", 0)]


@pytest.mark.parametrize("backend", ["zookeeper", "etcd"])
def test_the_auditor_on_real_servers(request: pytest.FixtureRequest, tmp_path: Path,
                                     backend: str) -> None:
    """Rapid writes on ZooKeeper and etcd: every version recorded is newer than the last, the
    newest is reached, and the checker's gap count accounts for any a watch coalesced."""
    from tests.faults.checker import check

    server = request.getfixturevalue(f"{backend}_server")
    url = f"{backend}://{server.address}/audit{uuid.uuid4().hex[:12]}"
    writer = coordinator.connect(url)
    try:
        metadata = MetadataClient(writer)
        metadata.ensure_layout()
        epoch = metadata.register_controller(1)
        metadata.create_topic(TopicAssignment(topic="t", partitions={0: (1, 2)}))
        path = tmp_path / "h.jsonl"
        with History(path) as h, StateAuditor(h, url=url) as auditor:
            metadata.create_partition_states(epoch, {TP: PartitionStateNode(
                leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=epoch.epoch)})
            for version in range(30):
                metadata.update_partition_states(epoch, {TP: (PartitionStateNode(
                    leader=1 + version % 2, leader_epoch=version + 1, isr=(1, 2),
                    controller_epoch=epoch.epoch), version)})
            wait_until(lambda: auditor.versions_seen().get(TP) == 30, timeout=10)
        events = read_history(path)
    finally:
        writer.close()
    versions = [e.version for e in events if isinstance(e, StateWrite)]
    assert versions == sorted(set(versions)) and versions[-1] == 30
    verdict = check(events, [])
    assert verdict.state_versions_seen + verdict.state_version_gaps == 31 - versions[0]
    assert verdict.ok and verdict.controller_epochs
