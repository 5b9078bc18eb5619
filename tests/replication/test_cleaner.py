"""Log compaction (replication.cleaner): the latest record per key survives with its offset,
batches keep their boundaries, tombstones go after delete.retention.ms, the cleaner never
passes the HW, the offset map's bound is kept, and a crash at any step of a swap recovers.
Compressed batches are compacted like the others: mapped, rebuilt in their codec when they
lose records, copied byte for byte when they keep them all; a compacted log checks their keys."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest
import zstandard

from coordinator.clock import ManualClock
from replication.cleaner import (
    DELETE_HORIZON_MASK,
    CleanerConfig,
    OffsetMap,
    clean_log,
)
from replication.compression import SNAPPY, ZSTD, compress, is_xerial
from replication.errors import CorruptRecordError, InvalidRecordError
from replication.log import Log, LogConfig
from replication.log_cleaner import LogCleaner
from replication.records import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    Record,
    decode_batch,
    encode_batch,
    iter_batches,
    read_batch_header,
    stamp_batch,
    validate_batches,
)

Latest = dict[bytes, tuple[int, bytes | None]]



def open_log(path: Path, clock: ManualClock, **overrides: object) -> Log:
    cfg = {"segment_bytes": 1500, "compact": True, "cleanup_delete": False,
           "delete_retention_ms": 10_000, **overrides}
    return Log.open(path / "t-0", config=LogConfig(**cfg), clock=clock)  # type: ignore[arg-type]


def write_random(log: Log, rng: random.Random, clock: ManualClock, batches: int, keys: int = 15,
                 codecs: tuple[int, ...] = (0,)
                 ) -> tuple[Latest, dict[int, tuple[bytes, bytes | None]]]:
    """Random keyed writes and tombstones, each batch compressed with one of ``codecs`` (0:
    none); returns the latest (offset, value) per key and every record written by offset."""
    latest: Latest = {}
    written: dict[int, tuple[bytes, bytes | None]] = {}
    for _ in range(batches):
        records = []
        for _r in range(rng.randint(1, 4)):
            key = f"k{rng.randrange(keys)}".encode()
            value = None if rng.random() < 0.15 else os.urandom(rng.randint(0, 40))
            records.append(Record(key=key, value=value, timestamp=clock.now_ms()))
        info = log.append_as_leader(encode_batch(records, compression=rng.choice(codecs)), 0)
        for i, r in enumerate(records):
            assert r.key is not None
            latest[r.key] = (info.first_offset + i, r.value)
            written[info.first_offset + i] = (r.key, r.value)
        clock.advance(1)
    log.roll()
    return latest, written


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, batch base) of every record, in log order."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        if not got.records:
            break
        data = got.records
        pos = 0
        while pos < len(data):
            batch = decode_batch(data, pos)
            for r in batch.records:
                out.append((r.offset, r.key, r.value, batch.base_offset))
            pos += batch.header.size
        offset = got.next_offset
    return out


def check_compacted(log: Log, latest: Latest, written: dict[int, tuple[bytes, bytes | None]],
                    *, tombstones_gone: bool) -> None:
    records = read_all(log)
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    for offset, key, value, _base in records:
        assert written[offset] == (key, value), f"offset {offset} changed"
    seen: dict[bytes | None, int] = {}
    for offset, key, _value, _base in records:
        assert key not in seen, f"{key!r} kept twice ({seen[key]} and {offset})"
        seen[key] = offset
    for key, (offset, value) in latest.items():
        if value is None and tombstones_gone:
            assert key not in seen, f"tombstone of {key!r} still there"
        else:
            assert seen.get(key) == offset, f"latest of {key!r} is {offset}, read {seen.get(key)}"


def clean(log: Log, clock: ManualClock, slots: int = 10_000, first_dirty: int = 0) -> object:
    return clean_log(log, first_dirty=first_dirty, high_watermark=log.log_end_offset,
                     offset_map=OffsetMap(slots), now_ms=clock.now_ms())


@pytest.mark.parametrize("seed", range(12))
def test_any_writes_compact_to_the_latest_value_per_key(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    latest, written = write_random(log, rng, clock, batches=rng.randint(20, 120))
    bases = {r[3] for r in read_all(log)}
    size_before = log.size_bytes
    result = clean(log, clock)
    assert result is not None
    check_compacted(log, latest, written, tombstones_gone=False)
    assert {r[3] for r in read_all(log)} <= bases, "batches keep their base offsets"
    assert log.size_bytes <= size_before
    # Within delete.retention.ms tombstones stay; a pass after the horizon removes them.
    clock.advance(9_999)
    clean(log, clock)
    check_compacted(log, latest, written, tombstones_gone=False)
    clock.advance(2)
    assert log.delete_horizon_due(clock.now_ms()) or not any(v is None for _o, v in latest.values())
    clean(log, clock)
    check_compacted(log, latest, written, tombstones_gone=True)
    # And all of it survives a reopen, clean or not.
    log.close(clean=seed % 2 == 0)
    reopened = open_log(tmp_path, clock)
    check_compacted(reopened, latest, written, tombstones_gone=True)
    reopened.close()


def batches_by_base(log: Log) -> dict[int, bytes]:
    """Every batch of ``log``, whole, by base offset."""
    out = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        if not got.records:
            break
        for pos, size, base, *_rest in validate_batches(got.records):
            out[base] = bytes(got.records[pos : pos + size])
        offset = got.next_offset
    return out


@pytest.mark.parametrize("seed", range(8))
def test_compressed_writes_compact_to_the_latest_value_per_key(tmp_path: Path, seed: int
                                                               ) -> None:
    """As above, with every batch compressed by a codec drawn from all of Kafka's (or none):
    the latest value per key at its offset, every batch still in its codec (unless it lost
    every record), and a batch that kept all its records byte for byte as it was."""
    rng = random.Random(seed)
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    latest, written = write_random(log, rng, clock, batches=rng.randint(20, 120),
                                   codecs=(0, 1, 2, 3, 4))
    before = batches_by_base(log)
    codecs = {base: read_batch_header(b).compression for base, b in before.items()}
    assert len(set(codecs.values())) > 1
    assert clean(log, clock) is not None
    check_compacted(log, latest, written, tombstones_gone=False)
    after = batches_by_base(log)
    assert set(after) <= set(before), "batches keep their base offsets"
    rebuilt = 0
    for base, data in after.items():
        header, old = read_batch_header(data), read_batch_header(before[base])
        assert header.last_offset_delta == old.last_offset_delta
        if header.records_count:
            assert header.compression == codecs[base], f"batch {base} changed codec"
        if header.records_count == old.records_count and not header.attributes & 0x40:
            assert data == before[base], f"batch {base} kept every record: copied unchanged"
        elif header.records_count and header.compression:
            rebuilt += 1
    assert rebuilt > 0, "some compressed batch lost records and was rebuilt"
    clock.advance(10_001)
    clean(log, clock)
    check_compacted(log, latest, written, tombstones_gone=True)
    log.close(clean=seed % 2 == 0)
    reopened = open_log(tmp_path, clock)
    check_compacted(reopened, latest, written, tombstones_gone=True)
    reopened.close()


def test_a_small_offset_map_cleans_only_what_fit_and_later_passes_finish(tmp_path: Path
                                                                          ) -> None:
    rng = random.Random(7)
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    latest, written = write_random(log, rng, clock, batches=80, keys=40)
    first_dirty, passes = 0, 0
    while first_dirty < log.segment_base_offsets[-1]:
        result = clean(log, clock, slots=8, first_dirty=first_dirty)
        assert result is not None
        assert result.end_offset > first_dirty  # every pass makes progress
        first_dirty = result.end_offset
        passes += 1
    assert passes > 1
    # A final pass over a clean log with room for every key dedupes what the windows left.
    clean(log, clock)
    check_compacted(log, latest, written, tombstones_gone=False)


def test_the_cleaner_never_passes_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, segment_bytes=200)
    for i in range(30):
        log.append_as_leader(encode_batch([Record(key=b"k", value=b"%d" % i,
                                                  timestamp=clock.now_ms())]), 0)
    hw = 15
    clean_log(log, first_dirty=0, high_watermark=hw, offset_map=OffsetMap(100),
              now_ms=clock.now_ms())
    offsets = [r[0] for r in read_all(log)]
    assert all(o in offsets for o in range(hw, 30)), "nothing at or past the HW is touched"
    assert len([o for o in offsets if o < hw]) <= 1


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, segment_bytes=200, min_compaction_lag_ms=60_000)
    for i in range(20):
        log.append_as_leader(encode_batch([Record(key=b"k", value=b"%d" % i,
                                                  timestamp=clock.now_ms())]), 0)
    log.roll()
    assert clean(log, clock) is None
    assert len(read_all(log)) == 20
    clock.advance(60_001)
    assert clean(log, clock) is not None
    assert [r[0] for r in read_all(log)] == [19]


def test_a_batch_keeps_its_boundaries_and_producer_fields(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    records = [Record(key=k, value=b"v", timestamp=clock.now_ms() + i)
               for i, k in enumerate([b"a", b"b", b"c"])]
    log.append_as_leader(encode_batch(records, producer_id=5, producer_epoch=1,
                                      base_sequence=0), 0)
    log.append_as_leader(encode_batch([Record(key=b"b", value=b"w", timestamp=clock.now_ms())],
                                      producer_id=5, producer_epoch=1, base_sequence=3), 0)
    log.roll()
    clean(log, clock)
    first = decode_batch(log.read(0, 1 << 20).records)
    assert [r.offset for r in first.records] == [0, 2]
    assert [r.timestamp for r in first.records] == [clock.now_ms(), clock.now_ms() + 2]
    h = first.header
    assert (h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch,
            h.base_sequence, h.records_count) == (0, 2, 5, 1, 0, 2)


@pytest.mark.parametrize("codec", [1, 2, 3, 4, "raw snappy"])
def test_a_compressed_batch_that_loses_records_is_rebuilt_in_its_codec(
        tmp_path: Path, codec: int | str) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    records = [Record(key=k, value=b"v%d" % i * 50, timestamp=clock.now_ms() + i)
               for i, k in enumerate([b"a", b"b", b"c", b"d"])]
    first = encode_batch(records, producer_id=5, producer_epoch=1, base_sequence=0,
                         compression=SNAPPY if codec == "raw snappy" else int(codec))
    if codec == "raw snappy":  # as librdkafka frames snappy: one raw block
        first = with_records(first, compress(SNAPPY, records_of(first), xerial=False))
    log.append_as_leader(first, 4)
    log.append_as_leader(encode_batch([Record(key=b"b", value=b"w", timestamp=clock.now_ms()),
                                       Record(key=b"d", value=b"w", timestamp=clock.now_ms())],
                                      producer_id=5, producer_epoch=1, base_sequence=4), 4)
    log.roll()
    clean(log, clock)
    data = log.read(0, 1 << 20).records
    validate_batches(data)  # the CRC was recomputed
    rebuilt = decode_batch(data)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in rebuilt.records] == [
        (0, b"a", b"v0" * 50, clock.now_ms()), (2, b"c", b"v2" * 50, clock.now_ms() + 2)]
    h, old = rebuilt.header, read_batch_header(first)
    assert (h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch,
            h.base_sequence, h.partition_leader_epoch, h.records_count) == (0, 3, 5, 1, 0, 4, 2)
    assert (h.attributes, h.base_timestamp, h.max_timestamp) == (
        old.attributes, old.base_timestamp, old.max_timestamp)
    section = bytes(data[RECORDS_OFFSET : h.size])
    if codec in (SNAPPY, "raw snappy"):
        assert is_xerial(section) == (codec == SNAPPY), "snappy keeps its producer's framing"


def records_of(batch: bytes) -> bytes:
    return encode_batch([r for r in decode_batch(batch).records])[RECORDS_OFFSET:]


def with_records(batch: bytes, section: bytes) -> bytes:
    """``batch`` with its records section replaced by ``section`` (length and CRC fixed)."""
    out = bytearray(batch[:RECORDS_OFFSET] + section)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_tombstones_carry_a_delete_horizon_in_their_rebuilt_batch(
        tmp_path: Path, codec: int) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=5),
                                       Record(key=b"b", value=None, timestamp=7)],
                                      compression=codec), 0)
    log.roll()
    clean(log, clock)
    batch = decode_batch(log.read(0, 1 << 20).records)
    assert batch.header.attributes & DELETE_HORIZON_MASK
    assert batch.header.compression == codec
    assert batch.header.base_timestamp == clock.now_ms() + 10_000
    assert [(r.key, r.value, r.timestamp) for r in batch.records] == [(b"a", b"1", 5),
                                                                      (b"b", None, 7)]
    clock.advance(10_001)
    clean(log, clock)
    batch = decode_batch(log.read(0, 1 << 20).records)
    assert [(r.key, r.value) for r in batch.records] == [(b"a", b"1")]
    assert batch.header.compression == codec


def test_an_idempotent_producers_last_compressed_batch_stays_as_an_empty_plain_header(
        tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=clock.now_ms())],
                                      producer_id=9, producer_epoch=0, base_sequence=0,
                                      compression=ZSTD), 0)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"2", timestamp=clock.now_ms())]), 0)
    log.roll()
    clean(log, clock)
    data = log.read(0, 1 << 20).records
    header = next(iter_batches(data))
    assert (header.producer_id, header.records_count, header.compression) == (9, 0, 0)
    assert header.size == RECORDS_OFFSET, "no records, and no compressed stream of none"


def test_an_idempotent_producers_last_batch_stays_as_an_empty_header(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=clock.now_ms())],
                                      producer_id=9, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"2", timestamp=clock.now_ms())]), 0)
    log.roll()
    clean(log, clock)
    data = log.read(0, 1 << 20).records
    headers = list(iter_batches(data))
    assert headers[0].producer_id == 9 and headers[0].records_count == 0
    assert headers[0].base_offset == 0 and headers[0].last_offset_delta == 0
    log.close(clean=False)
    reopened = open_log(tmp_path, clock)
    entry = reopened.producer_entry(9)
    assert entry is not None and entry.last_offset == 0 and entry.last_seq == 0
    reopened.close()


def test_tombstones_carry_a_delete_horizon_in_their_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=5),
                                       Record(key=b"b", value=None, timestamp=7)]), 0)
    log.roll()
    clean(log, clock)
    batch = decode_batch(log.read(0, 1 << 20).records)
    assert batch.header.attributes & DELETE_HORIZON_MASK
    assert batch.header.base_timestamp == clock.now_ms() + 10_000
    assert [(r.key, r.value, r.timestamp) for r in batch.records] == [(b"a", b"1", 5),
                                                                      (b"b", None, 7)]


def test_a_compacted_log_refuses_records_without_a_key(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    batch = encode_batch([Record(key=b"a", value=b"1", timestamp=1),
                          Record(key=None, value=b"2", timestamp=1)])
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message "
                                                 "without key in topic partition t-0"):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0
    plain = Log.open(tmp_path / "u-0", config=LogConfig(), clock=clock)
    plain.append_as_leader(batch, 0)
    assert plain.log_end_offset == 2


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_compacted_log_refuses_compressed_records_without_a_key(tmp_path: Path, codec: int
                                                                   ) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    batch = encode_batch([Record(key=b"a", value=b"1", timestamp=1),
                          Record(key=None, value=b"2", timestamp=1)], compression=codec)
    with pytest.raises(InvalidRecordError, match="without key in topic partition t-0"):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0
    keyed = encode_batch([Record(key=b"a", value=b"1", timestamp=1)], compression=codec)
    assert log.append_as_leader(keyed, 0).last_offset == 0


def zstd_bomb(mib: int) -> bytes:
    packer = zstandard.ZstdCompressor().compressobj()
    zeros = bytes(1 << 20)
    return b"".join(packer.compress(zeros) for _ in range(mib)) + packer.flush()


def test_a_compacted_log_refuses_a_compressed_batch_that_does_not_inflate(tmp_path: Path
                                                                          ) -> None:
    """A body that is not what its codec says, or that inflates past the bound (64 MiB with
    the default max.message.bytes): CorruptRecordError, nothing written. A log that is not
    compacted looks inside too (every record a client sends is validated) and refuses both."""
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    good = encode_batch([Record(key=b"a", value=b"1", timestamp=1)], compression=ZSTD)
    garbled = with_records(good, bytes.fromhex("28b52ffd") + b"garbage" * 5)
    bomb = with_records(good, zstd_bomb(65))
    assert len(bomb) < 64 << 10
    with pytest.raises(CorruptRecordError, match="do not decode"):
        log.append_as_leader(garbled, 0)
    with pytest.raises(CorruptRecordError, match="inflate past 67109632 bytes"):
        log.append_as_leader(bomb, 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    plain = Log.open(tmp_path / "u-0", config=LogConfig(), clock=clock)
    for refused in (garbled, bomb):
        with pytest.raises(CorruptRecordError):
            plain.append_as_leader(refused, 0)
    assert plain.log_end_offset == 0


def test_a_compressed_batch_that_does_not_inflate_costs_the_cleaner_its_pass(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A log written before leaders validated records (the bad batch comes in as a follower
    append, which takes the leader's batches as they are) and compacted since: a batch whose
    body does not decode is one warning, and the log stays as it was."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, compact=False)
    for i in range(10):
        log.append_as_leader(encode_batch([Record(key=b"k", value=b"%d" % i,
                                                  timestamp=clock.now_ms())], compression=3), 0)
    good = encode_batch([Record(key=b"k", value=b"x", timestamp=clock.now_ms())], compression=3)
    bad = bytearray(with_records(good, compress(3, b"not records")))
    stamp_batch(bad, 0, log.log_end_offset, 0)
    log.append_as_follower(bytes(bad))
    log.roll()
    log.reconfigure(LogConfig(**{**_fields(log.config), "compact": True}))
    before = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.suffix == ".log"}
    cleaner = LogCleaner(CleanerConfig(), lambda: {"t-0": (log, log.log_end_offset)}, clock)
    with caplog.at_level("WARNING"):
        assert cleaner.clean_once() is None
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "does not parse" in warnings[0].getMessage()
    after = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.suffix == ".log"}
    assert after == before


def test_a_corrupt_segment_is_one_warning_and_leaves_the_log_as_it_was(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    write_random(log, random.Random(3), clock, batches=60)
    first = log.directory / f"{0:020d}.log"
    with open(first, "r+b") as f:  # one flipped byte inside the first batch's records
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.suffix == ".log"}
    cleaner = LogCleaner(CleanerConfig(), lambda: {"t-0": (log, log.log_end_offset)}, clock)
    with caplog.at_level("WARNING"):
        assert cleaner.clean_once() is None
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "does not parse" in warnings[0].getMessage()
    after = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.suffix == ".log"}
    assert after == before
    assert not [p for p in log.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_the_background_cleaner_picks_the_dirtiest_log_above_its_ratio(tmp_path: Path
                                                                       ) -> None:
    clock = ManualClock()
    dirty = open_log(tmp_path / "a", clock)
    for i in range(60):
        dirty.append_as_leader(encode_batch([Record(key=b"k%d" % (i % 3), value=b"x" * 30,
                                                    timestamp=clock.now_ms())]), 0)
    dirty.roll()
    lazy = open_log(tmp_path / "b", clock, min_cleanable_dirty_ratio=1.0)
    for i in range(60):
        lazy.append_as_leader(encode_batch([Record(key=b"k%d" % (i % 3), value=b"x" * 30,
                                                   timestamp=clock.now_ms())]), 0)
    lazy.roll()
    logs = {"a": (dirty, dirty.log_end_offset), "b": (lazy, lazy.log_end_offset)}
    cleaner = LogCleaner(CleanerConfig(), lambda: logs, clock)
    assert cleaner.clean_once() is not None
    assert cleaner.checkpoints() == {"a": dirty.segment_base_offsets[-1]}
    assert len(read_all(dirty)) == 3 and len(read_all(lazy)) == 60
    assert cleaner.clean_once() is None  # a is clean now, b never dirty enough
    # max.compaction.lag.ms forces b whatever its ratio.
    lazy.reconfigure(LogConfig(**{**_fields(lazy.config), "max_compaction_lag_ms": 1}))
    clock.advance(2)
    assert cleaner.clean_once() is not None
    assert len(read_all(lazy)) == 3


def _fields(cfg: LogConfig) -> dict[str, object]:
    return {name: getattr(cfg, name) for name in cfg.__slots__}  # type: ignore[attr-defined]


_CRASHER = """
import os, sys
from coordinator.clock import ManualClock
from replication.cleaner import OffsetMap, clean_log
from replication.log import Log, LogConfig
stage_to_die = sys.argv[2]  # groups of about four 1500-byte segments
log = Log.open(sys.argv[1], config=LogConfig(segment_bytes=6000, compact=True,
               cleanup_delete=False), clock=ManualClock(1_000_000))
def stage(name):
    if name == stage_to_die:
        os._exit(17)
clean_log(log, first_dirty=0, high_watermark=log.log_end_offset, offset_map=OffsetMap(10_000),
          now_ms=1_000_000, stage=stage)
os._exit(0)
"""


@pytest.mark.processes
@pytest.mark.parametrize("stage", ["cleaned", "swap", "deleted-0", "deleted-1", "deleted-2",
                                   "renamed", "never"])
def test_a_crash_at_any_step_of_a_clean_recovers_a_consistent_log(tmp_path: Path,
                                                                   stage: str) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    # Keys written once, in the first and second segments: a lost segment would lose them.
    for i in range(12):
        log.append_as_leader(encode_batch([Record(key=b"once-%d" % i, value=b"x" * 60,
                                                  timestamp=clock.now_ms())]), 0)
    latest, written = write_random(log, random.Random(11), clock, batches=150)
    for i in range(12):
        latest[b"once-%d" % i] = (i, b"x" * 60)
        written[i] = (b"once-%d" % i, b"x" * 60)
    assert len(log.segment_base_offsets) > 6
    log.close(clean=False)
    done = subprocess.run([sys.executable, "-c", _CRASHER, str(tmp_path / "t-0"), stage],
                          check=False)
    assert done.returncode == (0 if stage == "never" else 17)
    names = os.listdir(tmp_path / "t-0")
    if stage in ("swap", "deleted-0", "deleted-1", "deleted-2"):
        assert any(n.endswith(".log.swap") for n in names)
    reopened = open_log(tmp_path, clock)
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith((".cleaned", ".swap"))]
    records = read_all(reopened)
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value, _base in records:
        assert written[offset] == (key, value)
    last: dict[bytes | None, int] = {}
    for offset, key, _v, _b in records:
        last[key] = offset
    assert {k: o for k, o in last.items()} == {k: o for k, (o, _v) in latest.items()}
    assert reopened.log_end_offset == max(written) + 1
    assert reopened.log_start_offset == 0
    # A clean pass after the crash finishes the job.
    clean(reopened, clock)
    check_compacted(reopened, latest, written, tombstones_gone=False)
    reopened.close()


def test_a_truncation_below_the_checkpoint_brings_the_checkpoint_down(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, segment_bytes=300)
    for i in range(40):
        log.append_as_leader(encode_batch([Record(key=b"k%d" % (i % 4), value=b"x" * 20,
                                                  timestamp=clock.now_ms())]), 0)
    log.roll()
    cleaner = LogCleaner(CleanerConfig(), lambda: {"t-0": (log, log.log_end_offset)}, clock)
    assert cleaner.clean_once() is not None
    assert cleaner.checkpoints()["t-0"] == 40
    log.truncate_to(37)  # a follower's truncation: what it fetches again there is dirty
    assert cleaner.clean_once() is None
    assert cleaner.checkpoints()["t-0"] == 37


def test_a_segment_truncated_under_the_pass_stops_it_cleanly(tmp_path: Path) -> None:
    """Below the HW a truncation never happens in practice (committed records are on every
    ISR member); if one does, the pass stops, nothing hangs, and the log stays whole."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, segment_bytes=300)
    for i in range(40):
        log.append_as_leader(encode_batch([Record(key=b"k%d" % (i % 4), value=b"x" * 20,
                                                  timestamp=clock.now_ms())]), 0)
    log.roll()
    before = read_all(log)

    def truncate_first(stage: str) -> None:
        if stage == "cleaned" and log.log_end_offset == 40:
            log.truncate_to(30)

    clean_log(log, first_dirty=0, high_watermark=40, offset_map=OffsetMap(100),
              now_ms=clock.now_ms(), stage=truncate_first)
    after = read_all(log)
    assert log.log_end_offset <= 30
    assert set(after) <= set(before), "only records of the log, at their offsets"
    assert [r[0] for r in after] == sorted({r[0] for r in after})
    assert not [p for p in log.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log.close(clean=False)
    assert read_all(open_log(tmp_path, clock)) == after


def test_an_empty_header_goes_once_its_producer_wrote_again(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"1", timestamp=clock.now_ms())],
                                      producer_id=9, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(encode_batch([Record(key=b"a", value=b"2", timestamp=clock.now_ms())]), 0)
    log.roll()
    clean(log, clock)
    assert [h.records_count for h in iter_batches(log.read(0, 1 << 20).records)] == [0, 1]
    log.append_as_leader(encode_batch([Record(key=b"b", value=b"3", timestamp=clock.now_ms())],
                                      producer_id=9, producer_epoch=0, base_sequence=1), 0)
    log.roll()
    clean(log, clock, first_dirty=2)
    first = next(iter_batches(log.read(0, 1 << 20).records))
    assert (first.base_offset, first.records_count) == (1, 1), "the empty header is gone"
    assert read_all(log)[-1][:3] == (2, b"b", b"3")
