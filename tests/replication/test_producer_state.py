"""The producer state's rules (Kafka 3.9's ProducerAppendInfo), its entries and Kafka's
ProducerSnapshot format, and the manager's snapshots: where a reload starts, corrupt and stray
snapshots."""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c
import pytest

from coordinator.clock import ManualClock
from replication.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from replication.producer_state import (
    MAX_SEQUENCE,
    NO_PRODUCER_EPOCH,
    BatchMetadata,
    Duplicate,
    ProducerBatch,
    ProducerEntry,
    ProducerStateManager,
    check_client_batch,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    snapshot_file_name,
)
from replication.records import Record, encode_batch, validate_batches


def entry(pid: int = 7, epoch: int = 0, last_seq: int = 4, last_offset: int = 104,
          delta: int = 4, ts: int = 1_000) -> ProducerEntry:
    return ProducerEntry(pid, epoch, (BatchMetadata(last_seq, last_offset, delta, ts),), ts)


def check(current: ProducerEntry | None, epoch: int, first_seq: int) -> None:
    check_client_batch(current, producer_id=7, epoch=epoch, first_seq=first_seq, offset=200,
                       where="t-0")


def producer_batch(seq: int, *, n: int = 1, pid: int = 7, epoch: int = 0, ts: int = 1_000
                   ) -> bytes:
    records = [Record(key=None, value=b"v%d" % i, timestamp=ts) for i in range(n)]
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def facts_of(data: bytes) -> list[tuple[int, int, int, int, int, int, int]]:
    return validate_batches(data)


# -- sequences -----------------------------------------------------------------------------------


def test_sequences_wrap_at_int_max_as_kafkas_do() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert decrement_sequence(1, 3) == MAX_SEQUENCE - 1
    assert decrement_sequence(8, 3) == 5
    wrapped = BatchMetadata(last_seq=1, last_offset=10, offset_delta=3, timestamp=0)
    assert (wrapped.first_seq, wrapped.first_offset) == (MAX_SEQUENCE - 1, 7)


# -- the rules ----------------------------------------------------------------------------------


def test_the_next_sequence_of_the_same_epoch_is_taken() -> None:
    check(entry(last_seq=4), epoch=0, first_seq=5)


@pytest.mark.parametrize("first_seq", [4, 6, 0, 100])
def test_a_gap_or_a_repeat_in_the_sequence_is_out_of_order(first_seq: int) -> None:
    with pytest.raises(OutOfOrderSequenceError, match="out of order sequence number"):
        check(entry(last_seq=4), epoch=0, first_seq=first_seq)


def test_after_int_max_the_sequence_continues_at_zero() -> None:
    check(entry(last_seq=MAX_SEQUENCE), epoch=0, first_seq=0)
    with pytest.raises(OutOfOrderSequenceError):
        check(entry(last_seq=MAX_SEQUENCE), epoch=0, first_seq=1)


def test_an_older_epoch_is_fenced() -> None:
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 3"):
        check(entry(epoch=3), epoch=2, first_seq=5)


def test_a_new_epoch_starts_at_sequence_zero() -> None:
    check(entry(epoch=3, last_seq=40), epoch=4, first_seq=0)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        check(entry(epoch=3, last_seq=40), epoch=4, first_seq=41)


def test_an_unknown_producer_is_taken_at_sequence_zero_only() -> None:
    # Kafka 0.11 to 2.4's rule (2.5 took any sequence, KIP-360): a batch at sequence 12345 of a
    # producer the partition knows nothing of may follow batches that were never written, and
    # librdkafka would take its success for theirs.
    check(None, epoch=0, first_seq=0)
    check(None, epoch=5, first_seq=0)
    for unknown in (None, ProducerEntry.empty(7)):  # ... nor one whose entry has no epoch
        with pytest.raises(UnknownProducerIdError, match="no record of producer 7"):
            check(unknown, epoch=5, first_seq=12345)
    # a batch without an epoch is not checked against one
    check(ProducerEntry(7, NO_PRODUCER_EPOCH, (), -1), epoch=NO_PRODUCER_EPOCH, first_seq=9)


def test_an_entry_keeps_the_last_five_batches_of_its_epoch() -> None:
    e = ProducerEntry.empty(7)
    for i in range(7):
        e = e.with_batch(0, BatchMetadata(i * 2 + 1, 100 + i * 2 + 1, 1, 1_000 + i))
    assert [b.first_seq for b in e.batches] == [4, 6, 8, 10, 12]
    assert (e.last_seq, e.last_offset, e.last_timestamp) == (13, 113, 1_006)
    assert e.find_duplicate(0, 8, 9) == e.batches[2]
    assert e.find_duplicate(0, 8, 10) is None  # the same start, another end
    assert e.find_duplicate(1, 8, 9) is None  # another epoch
    assert e.find_duplicate(0, 2, 3) is None  # no longer retained
    bumped = e.with_batch(1, BatchMetadata(0, 120, 0, 2_000))
    assert bumped.epoch == 1 and len(bumped.batches) == 1


# -- the leader's check of an append, and a follower's update -----------------------------------


def manager(tmp_path: Path, now: int = 10_000, expiration_ms: int = 86_400_000
            ) -> ProducerStateManager:
    directory = tmp_path / "t-0"
    directory.mkdir(exist_ok=True)
    return ProducerStateManager(directory, expiration_ms=expiration_ms, clock=ManualClock(now))


def test_a_client_append_gives_the_entry_to_store_or_the_duplicate(tmp_path: Path) -> None:
    m = manager(tmp_path)
    data = producer_batch(0, n=3)
    e = m.check_client_append(data, facts_of(data), 50)
    assert isinstance(e, ProducerEntry) and m.entry(7) is None  # nothing stored yet
    assert e.batches == (BatchMetadata(2, 52, 2, 1_000),)
    m.apply(e)
    assert m.check_client_append(data, facts_of(data), 53) == Duplicate(batch=e.batches[0])
    following = producer_batch(3)
    assert isinstance(m.check_client_append(following, facts_of(following), 53), ProducerEntry)
    with pytest.raises(OutOfOrderSequenceError):
        gap = producer_batch(4)
        m.check_client_append(gap, facts_of(gap), 53)
    plain = encode_batch([Record(key=None, value=b"x", timestamp=1)])
    assert m.check_client_append(plain, facts_of(plain), 53) is None


def test_an_idempotent_batch_must_come_alone_and_with_a_sequence(tmp_path: Path) -> None:
    m = manager(tmp_path)
    two = producer_batch(0) + producer_batch(1)
    with pytest.raises(InvalidRecordError, match="one batch"):
        m.check_client_append(two, facts_of(two), 0)
    no_sequence = producer_batch(-1)
    with pytest.raises(InvalidRecordError, match="sequence number -1"):
        m.check_client_append(no_sequence, facts_of(no_sequence), 0)
    plain = encode_batch([Record(key=None, value=b"x", timestamp=1)])
    assert m.check_client_append(plain + plain, facts_of(plain + plain), 0) is None


def test_a_follower_takes_what_the_leader_wrote_unchecked(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    m = manager(tmp_path)
    m.apply(entry(epoch=3, last_seq=4))
    # an older epoch and a gap: the leader decided, the follower only records
    data = bytearray(producer_batch(9, n=2, epoch=2) + producer_batch(0, pid=8))
    facts = facts_of(data)
    struct.pack_into(">q", data, facts[1][0], 300)  # as the leader stamped the offsets
    facts = [(pos, size, base if i == 0 else 300, *rest)
             for i, (pos, size, base, *rest) in enumerate(facts)]
    with caplog.at_level(logging.WARNING, logger="replication.producer_state"):
        updated = m.replicated_entries(data, facts)
    assert "smaller than the last seen epoch 3" in caplog.text
    assert updated is not None
    m.apply(updated)
    assert m.entry(7) == ProducerEntry(7, 2, (BatchMetadata(10, 1, 1, 1_000),), 1_000)
    assert m.entry(8) == ProducerEntry(8, 0, (BatchMetadata(0, 300, 0, 1_000),), 1_000)


def test_idle_producers_expire_by_their_last_timestamp(tmp_path: Path) -> None:
    m = manager(tmp_path, expiration_ms=1_000)
    m.apply([entry(pid=1, ts=5_000), entry(pid=2, ts=5_500)])
    assert m.remove_expired(5_999) == 0
    assert m.remove_expired(6_000) == 1 and sorted(m.entries()) == [2]
    assert m.remove_expired(9_000) == 1 and m.entries() == {}


# -- the snapshot format -------------------------------------------------------------------------


def test_the_snapshot_is_kafkas_producer_snapshot_version_1() -> None:
    entries = [entry(pid=9, epoch=2, last_seq=41, last_offset=1_000, delta=3, ts=77),
               ProducerEntry(5, 0, (), -1)]
    data = encode_snapshot(entries)
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 5, 0, -1, -1, 0, -1, -1, -1)  # no batch retained
    body += struct.pack(">qhiqiqiq", 9, 2, 41, 1_000, 3, 77, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(data) == 10 + 2 * 46
    assert decode_snapshot(data) == sorted(entries)


@pytest.mark.parametrize("damage", ["crc", "version", "short", "count", "tail"])
def test_a_damaged_snapshot_is_corrupt(damage: str) -> None:
    data = bytearray(encode_snapshot([entry()]))
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "version":
        data[1] = 2
    elif damage == "short":
        data = data[:8]
    elif damage == "count":
        data[6:10] = struct.pack(">i", 2)
        data[2:6] = struct.pack(">I", crc32c.crc32c(bytes(data[6:])))
    else:
        data += b"\0"
        data[2:6] = struct.pack(">I", crc32c.crc32c(bytes(data[6:])))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


# -- the manager's snapshots ---------------------------------------------------------------------


class Replays:
    """A fake log: the batches it holds, and the ranges it was asked to replay."""

    def __init__(self, batches: Iterable[ProducerBatch] = ()) -> None:
        self.batches = list(batches)
        self.asked: list[tuple[int, int]] = []

    def __call__(self, start: int, end: int) -> list[ProducerBatch]:
        self.asked.append((start, end))
        return [b for b in self.batches if start <= b.base_offset < end]


def batch_at(offset: int, seq: int, pid: int = 7) -> ProducerBatch:
    return ProducerBatch(offset, 0, 1_000, pid, 0, seq, 0)


def test_a_reload_starts_at_the_latest_snapshot_at_or_below_the_end(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply(entry(last_seq=1, last_offset=9, delta=0))
    assert m.take_snapshot(10, sync=True)
    assert not m.take_snapshot(10, sync=True)  # one per offset
    m.apply(entry(last_seq=2, last_offset=19, delta=0))
    m.take_snapshot(20, sync=False)
    m.sync_snapshots()
    log = Replays([batch_at(9, 1), batch_at(19, 2), batch_at(25, 3)])
    again = manager(tmp_path)
    again.load(segment_bases=[0, 10, 20], log_start=0, log_end=30, replay=log)
    assert log.asked == [(20, 30)] and again.entry(7).last_seq == 3  # type: ignore[union-attr]
    # A truncation to 15: the snapshot at 20 goes, the one at 10 is the start.
    log.asked.clear()
    again.reload(log_start=0, log_end=15, replay=log)
    assert again.snapshot_offsets == (10,) and log.asked == [(10, 15)]
    assert not (tmp_path / "t-0" / snapshot_file_name(20)).exists()
    assert again.entry(7).last_seq == 1  # type: ignore[union-attr]


def test_a_corrupt_snapshot_is_moved_aside_and_an_older_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = manager(tmp_path)
    m.apply(entry(last_seq=1, last_offset=9, delta=0))
    m.take_snapshot(10, sync=True)
    m.apply(entry(last_seq=2, last_offset=19, delta=0))
    m.take_snapshot(20, sync=True)
    latest = tmp_path / "t-0" / snapshot_file_name(20)
    latest.write_bytes(latest.read_bytes()[:-3])
    log = Replays([batch_at(9, 1), batch_at(19, 2)])
    again = manager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="replication.producer_state"):
        again.load(segment_bases=[0, 10, 20], log_start=0, log_end=20, replay=log)
    assert "is corrupt" in caplog.text
    assert log.asked == [(10, 20)] and again.entry(7).last_seq == 2  # type: ignore[union-attr]
    assert again.snapshot_offsets == (10,)
    assert [p.name for p in (tmp_path / "t-0").glob("*.corrupt-*")] == [
        f"{snapshot_file_name(20)}.corrupt-10000"]


def test_without_snapshots_the_whole_log_is_replayed(tmp_path: Path) -> None:
    log = Replays([batch_at(3, 0), batch_at(4, 1)])
    m = manager(tmp_path)
    m.load(segment_bases=[0], log_start=0, log_end=5, replay=log)
    assert log.asked == [(0, 5)] and m.entry(7).last_seq == 1  # type: ignore[union-attr]


def test_stray_snapshots_go_but_the_latest_past_the_last_segment(tmp_path: Path) -> None:
    m = manager(tmp_path)
    for offset in (5, 10, 12, 20, 31, 40):
        m.take_snapshot(offset, sync=True)
    again = manager(tmp_path)
    again.load(segment_bases=[10, 20, 30], log_start=10, log_end=45, replay=Replays())
    # 5 is below the log start; 12 and 31 name no segment and are not the latest stray
    assert again.snapshot_offsets == (10, 20, 40)
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot")) == [
        snapshot_file_name(o) for o in (10, 20, 40)]


def test_expired_producers_are_not_loaded(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply([entry(pid=1, ts=1_000), entry(pid=2, ts=9_000)])
    m.take_snapshot(200, sync=True)
    later = manager(tmp_path, now=10_000, expiration_ms=5_000)
    later.load(segment_bases=[0], log_start=0, log_end=200, replay=Replays())
    assert sorted(later.entries()) == [2]
