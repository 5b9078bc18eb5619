import struct
from pathlib import Path

import pytest

from replication.errors import CorruptIndexError
from replication.index import OffsetIndex, TimeIndex
from replication.log import Log, LogConfig
from replication.records import read_batch_header

from ._util import batch


def test_offset_index_lookup_is_the_last_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    for offset, position in [(104, 500), (110, 1200), (131, 4000)]:
        index.append(offset, position)
    assert index.lookup(99) == 0
    assert index.lookup(103) == 0
    assert index.lookup(104) == 500
    assert index.lookup(109) == 500
    assert index.lookup(110) == 1200
    assert index.lookup(10_000) == 4000
    index.truncate_to(110)
    assert index.lookup(10_000) == 500
    index.flush()
    # Kafka's layout: relative offset uint32, position uint32, big-endian.
    assert (tmp_path / "00000000000000000100.index").read_bytes() == struct.pack(">II", 4, 500)


def test_time_index_format_and_lookup(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000010.timeindex", 10)
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 14)  # not larger: skipped
    index.maybe_append(1500, 20)
    assert index.lookup(999) == 10
    assert index.lookup(1200) == 12
    assert index.lookup(2000) == 20
    index.flush()
    assert (tmp_path / "00000000000000000010.timeindex").read_bytes() == struct.pack(
        ">qIqI", 1000, 2, 1500, 10
    )


def test_log_index_entries_point_at_batches_ending_at_their_offsets(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig(index_interval_bytes=256))
    for n in [1, 4, 2, 3] * 10:
        log.append_as_leader(batch(n, value_size=30), leader_epoch=0)
    log.flush()
    data = (log.directory / f"{0:020d}.log").read_bytes()
    raw = (log.directory / f"{0:020d}.index").read_bytes()
    entries = list(struct.iter_unpack(">II", raw))
    assert 5 < len(entries) < 40  # sparse: about one per 256 bytes, not one per batch
    for relative, position in entries:
        assert read_batch_header(data, position).last_offset == relative
    gaps = [b[1] - a[1] for a, b in zip(entries, entries[1:], strict=False)]
    assert all(gap > 256 for gap in gaps)


@pytest.mark.parametrize(
    "content",
    [b"\x00" * 7, struct.pack(">IIII", 5, 100, 3, 200), struct.pack(">II", 1, 10**9)],
)
def test_index_that_does_not_fit_its_log_is_corrupt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.open(path, 0, log_size=5000)
