"""Each verdict of the checker on hand-made histories: every kind is detected, and a clean
history is clean."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from coordinator.codecs import TopicPartition
from tests.faults.checker import (
    KINDS,
    BatchDigest,
    FinalPartition,
    ReplicaLog,
    Verdict,
    check,
    final_from_log_dirs,
)
from tests.faults.history import (
    ControllerEpochSeen,
    Event,
    FaultEnd,
    FaultStart,
    ProduceAttempt,
    ProduceOutcome,
    Read,
    StateDeleted,
    StateWrite,
)

TP = TopicPartition(topic="t", partition=0)


class Builder:
    """A history written by hand, one event a tick."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._t = itertools.count()
        self._ops = itertools.count(1)

    def _now(self) -> dict[str, float]:
        t = float(next(self._t))
        return {"t": t, "wall": 1_000 + t}

    def send(self, *values: str, producer: str = "p1") -> int:
        op = next(self._ops)
        self.events.append(ProduceAttempt(**self._now(), op=op, producer=producer, topic="t",
                                          partition=0, values=values))
        return op

    def outcome(self, op: int, outcome: str, offset: int | None = None) -> None:
        attempt = next(e for e in self.events if isinstance(e, ProduceAttempt) and e.op == op)
        self.events.append(ProduceOutcome(
            **self._now(), op=op, producer=attempt.producer, topic="t", partition=0,
            values=attempt.values, outcome=outcome, offset=offset,
            error=None if outcome == "acked" else "TIMED_OUT"))

    def produce(self, offset: int, *values: str, producer: str = "p1") -> None:
        self.outcome(self.send(*values, producer=producer), "acked", offset)

    def read(self, offset: int, records: Iterable[tuple[int, str]], hw: int) -> None:
        self.events.append(Read(**self._now(), reader="c1", topic="t", partition=0,
                                offset=offset, records=tuple(records), high_watermark=hw))

    def epoch(self, epoch: int, revision: int) -> None:
        self.events.append(ControllerEpochSeen(**self._now(), epoch=epoch, version=epoch,
                                               revision=revision))

    def state(self, version: int, leader: int, leader_epoch: int, controller_epoch: int,
              revision: int, isr: tuple[int, ...] = (1, 2)) -> None:
        self.events.append(StateWrite(
            **self._now(), topic="t", partition=0, leader=leader, leader_epoch=leader_epoch,
            isr=isr, controller_epoch=controller_epoch, version=version, create_id=5,
            revision=revision))

    def fault(self, fault: int, kind: str) -> None:
        self.events.append(FaultStart(**self._now(), fault=fault, kind=kind, target="broker-1"))

    def heal(self, fault: int) -> None:
        self.events.append(FaultEnd(**self._now(), fault=fault))


def replica(broker: int, values: list[str], *, epoch: int = 0, crc_salt: int = 0
            ) -> ReplicaLog:
    """A replica holding ``values`` from offset 0, one batch each."""
    return ReplicaLog(
        broker=broker, records=tuple(enumerate(values)),
        batches=tuple(BatchDigest(o, o, epoch, hash((v, crc_salt)) & 0xFFFFFFFF)
                      for o, v in enumerate(values)))


def final(*replicas: ReplicaLog, leader: int = 1, hw: int | None = None) -> FinalPartition:
    hw = len(replicas[0].records) if hw is None else hw
    return FinalPartition(tp=TP, high_watermark=hw, leader=leader,
                          replicas={r.broker: r for r in replicas})


def only(verdict: Verdict, kind: str | None) -> None:
    """``kind`` is the one verdict with violations (None: none has)."""
    counts = verdict.counts()
    assert {k for k, n in counts.items() if n} == ({kind} if kind else set()), \
        verdict.summary()


def clean_history() -> Builder:
    h = Builder()
    h.epoch(1, revision=1)
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=2)
    h.produce(0, "a", "b")
    h.produce(2, "c")
    h.read(0, [(0, "a"), (1, "b")], hw=2)
    h.fault(1, "kill")
    op = h.send("d")
    h.state(1, leader=2, leader_epoch=1, controller_epoch=1, revision=3)
    h.outcome(op, "unknown")
    h.state(2, leader=2, leader_epoch=1, controller_epoch=1, revision=4, isr=(2,))
    h.heal(1)
    h.epoch(2, revision=5)
    h.state(3, leader=1, leader_epoch=2, controller_epoch=2, revision=6)
    h.produce(4, "e")  # after "d", which landed at 3
    return h


def test_a_clean_history_is_clean() -> None:
    h = clean_history()
    logs = ["a", "b", "c", "d", "e"]  # "d" (unknown) did land: fine either way
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs))])
    only(verdict, None)
    assert verdict.ok and verdict.acknowledged == 4 and verdict.reads == 2
    assert verdict.controller_epochs == (1, 2) and verdict.state_versions_seen == 4
    assert verdict.state_version_gaps == 0
    assert verdict.error_rates["kill"].attempts == 1 and verdict.error_rates["kill"].rate == 1
    assert verdict.error_rates["none"].errors == 0 and verdict.error_rates["none"].attempts == 3
    assert verdict.availability[TP] == 1.0
    assert "verdict: OK" in verdict.summary()


def test_lost_an_acknowledged_value_missing_from_the_leader_or_an_in_sync_replica() -> None:
    h = clean_history()
    verdict = check(h.events, [final(replica(1, ["a", "b", "c", "d"]),
                                     replica(2, ["a", "b", "c", "d"]))])
    only(verdict, "lost")
    assert verdict.lost.count == 1 and "'e'" in verdict.lost.examples[0]
    # present on the leader but missing from a follower: lost there (and divergent)
    verdict = check(h.events, [final(replica(1, ["a", "b", "c", "d", "e"]),
                                     replica(2, ["a", "b", "c", "d", "x"]))])
    assert verdict.lost.count == 1 and "broker(s) [2]" in verdict.lost.examples[0]
    assert verdict.divergent.count == 1 and not verdict.ok


def test_duplicated_a_value_at_two_offsets() -> None:
    h = Builder()
    h.produce(0, "a")
    h.produce(1, "b")
    logs = ["a", "b", "a"]
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs))])
    only(verdict, "duplicated")
    assert "'a' at t-0 offsets [0, 2]" in verdict.duplicated.examples[0]


def test_a_value_resent_under_a_new_producer_epoch_is_the_clients_not_a_violation() -> None:
    """The seeds that found it (ZooKeeper 14 and 29): librdkafka bumped the producer epoch
    and sent a possibly-persisted value again as epoch 1, sequence 0. Same producer, two
    epochs: reported apart, not against ok. One epoch twice, or a record without a producer,
    is the broker's: duplicated."""
    h = Builder()
    h.produce(0, "a")
    h.produce(1, "b")
    logs = ["a", "b", "a"]

    def written(*writers: tuple[int, int, int]) -> list[ReplicaLog]:
        return [replace(replica(b, logs), writers=dict(enumerate(writers))) for b in (1, 2)]

    verdict = check(h.events, [final(*written((7, 0, 41), (7, 0, 42), (7, 1, 0)))])
    only(verdict, None)
    assert verdict.resent.count == 1
    assert verdict.resent.examples == [
        "'a' at t-0 offsets [0, 2] (producer 7: epoch 0 seq 41, epoch 1 seq 0)"]
    assert "re-sent by the client under a new producer epoch" in verdict.summary()
    for writers in ([(7, 0, 41), (7, 0, 42), (7, 0, 43)],  # one epoch: idempotence failed
                    [(7, 0, 41), (7, 0, 42), (8, 1, 0)]):  # two producers
        only(check(h.events, [final(*written(*writers))]), "duplicated")
    only(check(h.events, [final(replica(1, logs), replica(2, logs))]), "duplicated")


def test_reordered_acknowledged_values_out_of_send_order() -> None:
    h = Builder()
    first = h.send("a")
    second = h.send("b")
    h.outcome(second, "acked", 0)
    h.outcome(first, "acked", 1)
    logs = ["b", "a"]
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs))])
    only(verdict, "reordered")
    # two producers interleaving is no reordering
    h = Builder()
    a, b = h.send("a", producer="p1"), h.send("b", producer="p2")
    h.outcome(b, "acked", 0)
    h.outcome(a, "acked", 1)
    only(check(h.events, [final(replica(1, logs), replica(2, logs))]), None)


def test_offset_conflicts() -> None:
    logs = ["a", "b", "c"]
    finals = [final(replica(1, logs), replica(2, logs))]
    h = Builder()
    h.produce(1, "a")  # acknowledged at 1, in the log at 0
    only(check(h.events, finals), "offset_conflicts")
    h = Builder()
    h.read(0, [(0, "a"), (1, "x")], hw=2)  # read below the HW, replaced since
    only(check(h.events, finals), "offset_conflicts")
    h = Builder()
    h.read(2, [(2, "c")], hw=2)  # read at the HW it was served with
    only(check(h.events, finals), "offset_conflicts")
    h = Builder()
    h.read(0, [(0, "a")], hw=3)
    h.read(0, [(0, "a")], hw=3)  # the same twice: fine
    only(check(h.events, finals), None)
    h = Builder()
    h.read(3, [(3, "d")], hw=4)  # read below the HW, gone at the end
    verdict = check(h.events, finals)
    only(verdict, "offset_conflicts")
    assert "gone" in verdict.offset_conflicts.examples[0]
    h = Builder()
    h.produce(0, "a")
    h.produce(0, "z")  # two acknowledgements of one offset
    verdict = check(h.events, finals)
    assert "acknowledged for 'a' and 'z'" in verdict.offset_conflicts.examples[0]


def test_divergent_in_sync_replicas_byte_for_byte() -> None:
    logs = ["a", "b"]
    h = Builder()
    h.produce(0, "a", "b")
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs, crc_salt=1))])
    only(verdict, "divergent")
    assert "broker 2 differs from broker 1" in verdict.divergent.examples[0]
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs, epoch=3))])
    only(verdict, "divergent")


def test_zombie_a_controller_epoch_older_than_one_already_written() -> None:
    # along one node's versions
    h = Builder()
    h.epoch(1, revision=1)
    h.epoch(2, revision=2)
    h.state(0, leader=1, leader_epoch=0, controller_epoch=2, revision=3)
    h.state(1, leader=2, leader_epoch=1, controller_epoch=1, revision=4)
    verdict = check(h.events, [])
    only(verdict, "zombie")
    assert verdict.zombie.count == 1
    # a leader change by a deposed controller, after the next one was elected
    h = Builder()
    h.epoch(1, revision=1)
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=2)
    h.epoch(2, revision=3)
    h.state(1, leader=2, leader_epoch=1, controller_epoch=1, revision=4)
    verdict = check(h.events, [])
    only(verdict, "zombie")
    assert "after epoch 2 was elected" in verdict.zombie.examples[0]
    # a leader's ISR change keeps its LeaderAndIsr's controller epoch: no zombie
    h = Builder()
    h.epoch(1, revision=1)
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=2)
    h.epoch(2, revision=3)
    h.state(1, leader=1, leader_epoch=0, controller_epoch=1, revision=4, isr=(1,))
    only(check(h.events, []), None)
    # ... even as the first version an auditor sees (started late)
    h = Builder()
    h.epoch(2, revision=3)
    h.state(1, leader=1, leader_epoch=0, controller_epoch=1, revision=4, isr=(1,))
    only(check(h.events, []), None)
    # a node created by a deposed controller
    h = Builder()
    h.epoch(2, revision=3)
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=4)
    only(check(h.events, []), "zombie")


def test_gaps_and_availability() -> None:
    h = Builder()  # ticks: t = 0, 1, 2, ...
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=1)  # t 0
    h.state(1, leader=-1, leader_epoch=1, controller_epoch=1, revision=2)  # t 1
    h.state(4, leader=2, leader_epoch=3, controller_epoch=1, revision=5)  # t 2: 2 unseen
    h.heal(99)  # t 3: the end of the history
    verdict = check(h.events, [])
    assert verdict.state_version_gaps == 2 and verdict.ok
    assert verdict.availability[TP] == pytest.approx(2 / 3)
    assert verdict.availability_by_fault == {"none": pytest.approx(2 / 3)}


def test_availability_by_fault_kind() -> None:
    h = Builder()  # ticks: t = 0, 1, 2, ...
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=1)  # t 0
    h.fault(1, "kill-leader")  # t 1
    h.state(1, leader=-1, leader_epoch=1, controller_epoch=1, revision=2)  # t 2: offline
    h.state(2, leader=2, leader_epoch=2, controller_epoch=1, revision=3)  # t 3: led again
    h.heal(1)  # t 4
    h.fault(2, "slow-links")  # t 5
    h.fault(3, "slow-links")  # t 6: overlapping windows of one kind count once
    h.heal(2)  # t 7
    h.heal(3)  # t 8
    h.epoch(1, revision=9)  # t 9: the end
    verdict = check(h.events, [])
    # kill-leader window [1, 4]: offline from 2 to 3
    assert verdict.availability_by_fault["kill-leader"] == pytest.approx(2 / 3)
    assert verdict.availability_by_fault["slow-links"] == pytest.approx(1.0)
    assert verdict.availability_by_fault["none"] == pytest.approx(1.0)  # [0, 1] and [8, 9]
    assert "availability by fault: kill-leader 66.7%" in verdict.summary()


def test_a_deleted_partition_is_absent_and_unwritten_partitions_do_not_count() -> None:
    h = Builder()
    h.state(0, leader=1, leader_epoch=0, controller_epoch=1, revision=1)  # t 0
    h.events.append(StateDeleted(t=1.0, wall=1001.0, topic="t", partition=0, revision=2))
    h.events.append(StateWrite(t=2.0, wall=1002.0, topic="scratch", partition=0, leader=-1,
                               leader_epoch=0, isr=(1,), controller_epoch=1, version=0,
                               create_id=9, revision=3))
    h.epoch(1, revision=4)  # the end, t 3: nothing after the deletion counts against t-0
    verdict = check(h.events, [])
    assert verdict.availability[TP] == 1.0
    assert verdict.availability[TopicPartition("scratch", 0)] == 0.0  # no writes anywhere
    h.send("v")  # now the workload wrote to t-0 only: the scratch topic does not count
    verdict = check(h.events, [])
    assert set(verdict.availability) == {TP}


def test_kinds_and_summary() -> None:
    verdict = Verdict()
    assert set(verdict.counts()) == set(KINDS)
    with pytest.raises(KeyError, match="unknown verdict kind"):
        verdict.tally("nope")
    h = Builder()
    for i in range(8):
        h.produce(i, f"v{i}")
    verdict = check(h.events, [final(replica(1, []), hw=0)], examples=3)
    assert verdict.lost.count == 8 and len(verdict.lost.examples) == 3
    text = verdict.summary()
    assert "VIOLATIONS" in text and "lost 8" in text and len(text.splitlines()) < 25


def test_final_logs_read_from_log_directories(tmp_path: Path) -> None:
    """Two replicas' logs on disk: read back below the HW, equal ones are clean, and a
    replica whose batch differs is divergent."""
    from replication.log import Log
    from replication.records import Record, encode_batch

    def write(broker: int, values: list[list[str]]) -> Path:
        log_dir = tmp_path / f"broker-{broker}"
        log = Log.open(log_dir / "t-0")
        for batch in values:
            log.append_as_leader(encode_batch(
                [Record(key=None, value=v.encode(), timestamp=1) for v in batch]), 0)
        log.close()
        return log_dir

    dirs = {1: write(1, [["a", "b"], ["c"], ["d"]]), 2: write(2, [["a", "b"], ["c"], ["e"]])}
    tp = TopicPartition(topic="t", partition=0)
    h = Builder()
    h.produce(0, "a", "b")
    h.produce(2, "c")
    below = final_from_log_dirs(tp, 1, 3, dirs)  # "d" / "e" above the HW
    assert below.replicas[1].records == ((0, "a"), (1, "b"), (2, "c"))
    assert [b.base_offset for b in below.replicas[2].batches] == [0, 2]
    only(check(h.events, [below]), None)
    verdict = check(h.events, [final_from_log_dirs(tp, 1, 4, dirs)])
    only(verdict, "divergent")
    assert "from offset 3" in verdict.divergent.examples[0]
    with pytest.raises(FileNotFoundError, match="broker 3 has no log of t-0"):
        final_from_log_dirs(tp, 1, 3, {3: tmp_path / "none"})
    assert below.replicas[1].writers == {}  # no producer id: no writer known

    # an idempotent producer's batches: each record's (producer, epoch, sequence)
    log = Log.open(tmp_path / "broker-4" / "t-0")
    log.append_as_leader(encode_batch([Record(key=None, value=v.encode(), timestamp=1)
                                       for v in ("x", "y")], producer_id=9, producer_epoch=0,
                                      base_sequence=0), 0)
    log.append_as_leader(encode_batch([Record(key=None, value=b"x", timestamp=1)],
                                      producer_id=9, producer_epoch=1, base_sequence=0), 0)
    log.close()
    written = final_from_log_dirs(tp, 4, 3, {4: tmp_path / "broker-4"})
    assert written.replicas[4].writers == {0: (9, 0, 0), 1: (9, 0, 1), 2: (9, 1, 0)}
    verdict = check([], [written])
    only(verdict, None)
    assert verdict.resent.count == 1


def test_final_logs_of_a_tiered_run_read_the_remote_part_too(tmp_path: Path) -> None:
    """A tiered replica whose old segments are only in the filesystem remote store: read with
    the store, the whole log is there and clean; without it, what is only remote is lost."""
    import uuid

    from replication.log import Log, LogConfig
    from replication.records import Record, encode_batch
    from replication.tiered import (
        FileRemoteLogMetadataManager,
        FileSystemRemoteStorageManager,
        RemoteLogManager,
        TieredPartition,
        TopicIdPartition,
    )

    def batch(i: int) -> bytes:
        return encode_batch([Record(key=None, value=f"v{i}".encode(), timestamp=1)])

    remote = tmp_path / "remote"
    log = Log.open(tmp_path / "broker-1" / "t-0", clock=ManualClock(10_000), config=LogConfig(
        segment_bytes=2 * len(batch(0)), remote_storage_enable=True, retention_ms=-1,
        local_retention_bytes=0))
    for i in range(9):
        log.append_as_leader(batch(i), 0)
    rlm = RemoteLogManager(1, FileSystemRemoteStorageManager(remote),
                           FileRemoteLogMetadataManager(remote / "__remote_log_metadata"),
                           ManualClock(10_000))
    tid = TopicIdPartition(topic_id=uuid.uuid4(), topic="t", partition=0)
    assert rlm.copy_log_segments(TieredPartition(
        id=tid, log=log, is_leader=True, leader_epoch=0, high_watermark=9,
        still_leads=lambda e: True)) == 4
    log.delete_old_segments()
    assert log.local_log_start_offset == 8
    log.close()
    rlm.close()
    tp = TopicPartition(topic="t", partition=0)
    h = Builder()
    for i in range(9):
        h.produce(i, f"v{i}")
    dirs = {1: tmp_path / "broker-1"}
    whole = final_from_log_dirs(tp, 1, 9, dirs, remote)
    assert whole.replicas[1].records == tuple((i, f"v{i}") for i in range(9))
    assert [b.base_offset for b in whole.replicas[1].batches] == list(range(9))
    only(check(h.events, [whole]), None)
    verdict = check(h.events, [final_from_log_dirs(tp, 1, 9, dirs)])
    assert verdict.lost.count == 8


def test_unexpected_values_are_reported_apart_from_the_verdicts() -> None:
    h = Builder()
    h.produce(0, "a")
    h.outcome(h.send("b"), "failed")
    h.outcome(h.send("c"), "unknown")
    logs = ["a", "b", "c", "zz"]
    verdict = check(h.events, [final(replica(1, logs), replica(2, logs))])
    only(verdict, None)
    assert verdict.unexpected.examples == ["'b' at t-0@1: reported failed",
                                           "'zz' at t-0@3: never sent"]
    assert "unexpected values in the logs" in verdict.summary()


def test_write_availability_counts_seconds_with_an_acknowledged_write() -> None:
    h = Builder()  # one event a tick: t = 0, 1, 2, ...
    h.produce(0, "a")  # t 0-1: acknowledged in second 1
    h.fault(1, "kill-leader")  # t 2
    op = h.send("b")  # t 3
    h.outcome(op, "unknown")  # t 4: nothing acknowledged in seconds 2..4
    h.heal(1)  # t 5
    h.produce(1, "c")  # t 6-7
    verdict = check(h.events, [])
    # seconds 0..6 (the last outcome at 7): kill-leader covers seconds 1..5, of which only
    # second 1 had an ack; outside it (seconds 0 and 6), second 6 had none, second 0 none
    assert verdict.write_availability_by_fault["kill-leader"] == pytest.approx(1 / 5)
    assert verdict.write_availability_by_fault["none"] == pytest.approx(0 / 2)


def test_an_acknowledgement_without_an_offset_is_looked_for_anywhere() -> None:
    """librdkafka may report a retried batch delivered without saying where it is."""
    h = Builder()
    h.produce(0, "a")
    h.outcome(h.send("b"), "acked", None)
    assert check(h.events, [final(replica(1, ["a", "b"]), replica(2, ["a", "b"]))]).ok
    verdict = check(h.events, [final(replica(1, ["a"]), replica(2, ["a"]))])
    assert verdict.lost.count == 1 and "'b'" in verdict.lost.examples[0]
