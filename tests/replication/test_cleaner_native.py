"""The map pass's key scan in C (replication._cleaner_native) against its Python reference
(replication.cleaner._map_sequential): the extension is built here and used by the cleaner;
both map the same random records sections to the same keys and tombstones; on corrupt or
truncated input both raise the same CorruptRecordError after the same map updates, and the C
one never reads past its buffer (checked against a guard page)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.clock import ManualClock
from replication import cleaner
from replication.errors import CorruptRecordError
from replication.log import Log, LogConfig
from replication.records import RECORDS_OFFSET, Record, encode_batch

try:
    from replication import _cleaner_native
except ImportError:  # reported by test_the_native_scanner_is_built_and_used
    _cleaner_native = None

SCANNERS = [
    pytest.param(cleaner._map_sequential, id="python"),
    pytest.param(getattr(_cleaner_native, "map_sequential", None), id="native",
                 marks=pytest.mark.skipif(_cleaner_native is None, reason="not built")),
]
Scan = Callable[[bytes, int, int, int, int, dict[bytes, int], list[int]], None]
_ROOT = Path(__file__).resolve().parents[2]
_INT64_MAX = (1 << 63) - 1


@pytest.mark.processes
def test_the_native_scanner_is_built_and_used() -> None:
    assert _cleaner_native is not None, (
        "replication._cleaner_native was not built: the editable install compiles it "
        "(pyproject.toml's ext-modules) and needs a C compiler and Python's headers")
    assert cleaner.NATIVE_SCAN
    assert cleaner._map_keys is _cleaner_native.map_sequential


# -- records sections written by hand, to reach every varint form -----------------------------


def varint(value: int, pad: int = 0) -> bytes:
    """``value`` as a zigzag varint, with ``pad`` more bytes than it needs (a longer encoding
    of the same number: continuation bits over zero groups)."""
    z = 2 * value if value >= 0 else -2 * value - 1
    groups = []
    while True:
        groups.append(z & 0x7F)
        z >>= 7
        if not z:
            break
    groups += [0] * pad
    return bytes(g | 0x80 for g in groups[:-1]) + bytes(groups[-1:])


def record(rng: random.Random, key: bytes | None, value: bytes | None, delta: int
           ) -> tuple[bytes, bool]:
    """One v2 record, its varints now and then padded (up to Kafka's 10 bytes for the lengths
    the scan decodes; past it for the deltas it skips, which it does not bound), and whether
    the scan counts it a tombstone: a key, and a value length whose first byte is zigzag -1
    (a padded -1 is not one)."""

    def pad(most: int) -> int:
        return rng.randrange(most) if rng.random() < 0.2 else 0

    body = bytearray([0])  # attributes
    body += varint(rng.choice([0, 1, -1, rng.randrange(1 << 20), -rng.randrange(1 << 62)]),
                   pad(14))
    body += varint(delta, pad(4))
    body += varint(-1, pad(3)) if key is None else varint(len(key), pad(3)) + key
    value_length = varint(-1 if value is None else len(value), pad(2))
    body += value_length + (value or b"")
    headers = rng.choice([0, 0, 0, 1, 2])
    body += varint(headers)
    for _ in range(headers):
        name = rng.randbytes(rng.randrange(5))
        body += varint(len(name)) + name + varint(1) + b"h"
    return varint(len(body), pad(2)) + body, key is not None and value_length[0] == 1


def section(rng: random.Random, *, small: bool = False
            ) -> tuple[bytes, int, int, int, int, dict[bytes, int], list[int]]:
    """A random buffer holding a records section between random bytes: ``(data, pos, end,
    count, base, expected keys, expected tombstone offsets)``."""
    pool = [b"", b"k", *(rng.randbytes(rng.choice([3, 17, 64, 200])) for _ in range(6))]
    if not small and rng.random() < 0.2:
        pool.append(rng.randbytes(20_000))  # a 3-byte key length
    base = rng.choice([0, rng.randrange(1 << 40), -rng.randrange(1 << 20),
                       _INT64_MAX - rng.randrange(20)])  # offsets past int64 stay exact
    count = rng.randrange(0, 12 if small else 40)
    out = bytearray(rng.randbytes(rng.randrange(6)))
    pos = len(out)
    keys: dict[bytes, int] = {}
    nulls: list[int] = []
    for i in range(count):
        key = None if rng.random() < 0.1 else rng.choice(pool)
        roll = rng.random()
        if roll < 0.2:
            value = None
        elif roll < 0.3 and not small:
            value = rng.randbytes(rng.randrange(16_000, 70_000))  # record lengths of 3 bytes
        else:
            value = rng.randbytes(rng.randrange(40 if small else 300))
        encoded, tombstone = record(rng, key, value, i)
        out += encoded
        if key is not None:
            keys[key] = base + i
        if tombstone:
            nulls.append(base + i)
    end = len(out)
    out += rng.randbytes(rng.randrange(6))
    return bytes(out), pos, end, count, base, keys, nulls


def run(scan: Scan, data: bytes, pos: int, end: int, count: int, base: int
        ) -> tuple[str | None, list[tuple[bytes, int]], list[int]]:
    """What ``scan`` does to a map already holding a key and a tombstone: the error message
    (None: no error) and the map and tombstone list after, in order."""
    keys = {b"k": -5}
    nulls = [-5]
    try:
        scan(data, pos, end, count, base, keys, nulls)
    except CorruptRecordError as exc:
        return str(exc), list(keys.items()), nulls
    return None, list(keys.items()), nulls


def both(data: bytes, pos: int, end: int, count: int, base: int
         ) -> tuple[str | None, list[tuple[bytes, int]], list[int]]:
    """The outcome of the Python scan, checked to be the native one's too."""
    expected = run(cleaner._map_sequential, data, pos, end, count, base)
    if _cleaner_native is not None:
        assert run(_cleaner_native.map_sequential, data, pos, end, count, base) == expected
    return expected


# -- the two scans agree ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_both_scans_map_random_sections_alike(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        data, pos, end, count, base, keys, tombstones = section(rng)
        error, mapped, nulls = both(data, pos, end, count, base)
        assert error is None
        assert dict(mapped) == {b"k": -5, **keys}
        assert nulls == [-5, *tombstones]


@pytest.mark.parametrize("scan", SCANNERS)
def test_tombstones_are_the_keys_with_a_null_value(scan: Scan) -> None:
    records = [Record(key=b"a", value=b"1", timestamp=1), Record(key=b"b", value=None, timestamp=1),
               Record(key=None, value=b"x", timestamp=1), Record(key=b"a", value=None, timestamp=1),
               Record(key=b"", value=b"", timestamp=1)]
    batch = encode_batch(records, base_offset=0)
    keys: dict[bytes, int] = {}
    nulls: list[int] = []
    scan(batch, RECORDS_OFFSET, len(batch), len(records), 100, keys, nulls)
    assert keys == {b"a": 103, b"b": 101, b"": 104}
    assert nulls == [101, 103]


@pytest.mark.parametrize("seed", range(4))
def test_both_scans_fail_alike_on_corrupt_sections(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for _ in range(250):
        data, pos, end, count, base, _keys, _nulls = section(rng, small=True)
        if count == 0:
            continue
        how = rng.randrange(6)
        if how == 0:  # the section cut short, the buffer too or not
            end = rng.randrange(pos, end)
            data = data[: end + rng.choice([0, 0, 3])]
        elif how == 1:  # a record more or fewer than the section holds
            count += rng.choice([1, -1])
        else:
            mutable = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(pos, end)
                if how == 2:
                    mutable[at] ^= 1 << rng.randrange(8)
                elif how == 3:
                    mutable[at] = rng.randrange(256)
                else:  # runs of continuation bytes: long and overlong varints
                    run_of = rng.randint(1, 12)
                    mutable[at : at + run_of] = bytes([rng.choice([0x80, 0xFF])]) * run_of
            data = bytes(mutable)
        error, _mapped, _nulls = both(data, pos, end, count, base)
        if how < 2:
            assert error is not None, "a cut or miscounted section must not parse"


# The Python code's exact messages, for inputs written to reach each one: (data, end, count,
# message or None for no error).
_CASES = [
    (b"\x00", 1, 1, "record of length 0 runs past its batch"),
    (b"\x01", 1, 1, "record of length -1 runs past its batch"),  # one byte: zigzag too
    (b"\x03\x00\x00\x00\x01", 2, 1, "record of length -2 runs past its batch"),
    (b"\x81\x00", 2, 1, "record of length -1 runs past its batch"),  # two bytes: zigzag
    (b"\x80" * 10 + b"\x00", 11, 1, "varint at 0 runs past 10 bytes"),
    (b"\x80" * 5, 5, 1, "record runs past the end of its batch"),
    (bytes([0xFF] * 9 + [0x7F]), 10, 1, f"record of length {-(1 << 69)} runs past its batch"),
    (bytes([0xFE] + [0xFF] * 8 + [0x7F]), 10, 1,
     f"record of length {(1 << 69) - 1} runs past its batch"),
    (b"\x0a\x00\x00\x00\x06ab\x01\x00", 9, 1, "record key runs past the end of its record"),
    (b"\x0a\x00\x00\x00" + bytes([0xFE] + [0xFF] * 8 + [0x7F]), 14, 1,  # a 69-bit key length
     "record key runs past the end of its record"),
    (b"\x0a\x00\x00\x00" + bytes([0xFE] + [0xFF] * 8 + [0x01]), 14, 1,  # 2**63 - 1
     "record key runs past the end of its record"),
    (b"\x0a\x00\x00\x00" + bytes([0xFF] * 9 + [0x01]), 14, 1,  # -(2**63): a null key
     "batch declares 1 records but 8 bytes are left over"),
    (b"\x0c\x00" + b"\x80" * 12 + b"\x00\x00\x02k", 19, 1,  # a 13-byte timestamp delta
     "record key runs past the end of its record"),
    (b"\x06\x00\x00\x00\x01\x00\x00\x00\x00", 9, 1,
     "batch declares 1 records but 5 bytes are left over"),
    (b"\x06\x00\x00\x00\x01\x00\x00", 7, 0, "batch declares 0 records but 7 bytes are left over"),
    (b"\x0e\x00\x00\x00\x02k\x01\x00", 8, 1, None),  # a tombstone
    (b"\x0e\x00\x00\x00\x02k", 8, 1, "record runs past the end of its batch"),  # end past data
]


@pytest.mark.parametrize(("data", "end", "count", "message"), _CASES)
@pytest.mark.parametrize("scan", SCANNERS)
def test_corrupt_input_raises_the_python_codes_message(scan: Scan, data: bytes, end: int,
                                                       count: int, message: str | None) -> None:
    if message is None:
        scan(data, 0, end, count, 0, {}, [])
    else:
        with pytest.raises(CorruptRecordError) as caught:
            scan(data, 0, end, count, 0, {}, [])
        assert str(caught.value) == message


def test_the_native_scan_takes_any_contiguous_buffer_and_refuses_negative_positions() -> None:
    if _cleaner_native is None:
        pytest.skip("not built")
    batch = encode_batch([Record(key=b"a", value=b"1", timestamp=1)], base_offset=0)
    keys: dict[bytes, int] = {}
    _cleaner_native.map_sequential(memoryview(batch), RECORDS_OFFSET, len(batch), 1, 7, keys, [])
    assert keys == {b"a": 7} and type(next(iter(keys))) is bytes
    with pytest.raises(ValueError):
        _cleaner_native.map_sequential(batch, -1, len(batch), 1, 7, keys, [])
    with pytest.raises(TypeError):
        _cleaner_native.map_sequential(batch, RECORDS_OFFSET, len(batch), 1, 7, [], [])


# The native scan over corrupt sections that end flush against an unreadable page: a read past
# the buffer is a segmentation fault of the child process. Sections end at the buffer's end or
# claim more (``end`` past it), as no caller does but a bad one could.
_GUARDED = """
import ctypes, mmap, random, sys
from replication._cleaner_native import map_sequential
from replication.errors import CorruptRecordError
from tests.replication.test_cleaner_native import section

rng = random.Random(int(sys.argv[1]))
page = mmap.PAGESIZE
size = 64 * page
area = mmap.mmap(-1, size + page)
libc = ctypes.CDLL(None, use_errno=True)
start = ctypes.addressof(ctypes.c_char.from_buffer(area))
if libc.mprotect(ctypes.c_void_p(start + size), ctypes.c_size_t(page), 0):  # PROT_NONE
    sys.exit("mprotect failed")
done = 0
while done < 400:
    data, pos, end, count, base, _keys, _nulls = section(rng, small=True)
    cut = rng.randrange(pos, len(data) + 1)
    mutable = bytearray(data[:cut])
    for _ in range(rng.randrange(3)):
        if mutable:
            mutable[rng.randrange(len(mutable))] = rng.choice([0x80, 0xFF, rng.randrange(256)])
    n = len(mutable)
    area[size - n : size] = mutable
    end = min(end, n) if rng.random() < 0.7 else n + rng.randrange(100)
    try:
        map_sequential(memoryview(area)[size - n : size], min(pos, n), end,
                       count + rng.choice([0, 0, 1]), base, {}, [])
    except CorruptRecordError:
        pass
    done += 1
print("ok", done)
"""


@pytest.mark.processes  # a child process, which a read past the buffer kills
def test_the_native_scan_never_reads_past_its_buffer() -> None:
    if _cleaner_native is None:
        pytest.skip("not built")
    done = subprocess.run([sys.executable, "-c", _GUARDED, "7"], cwd=_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"the native scan crashed or failed: {done.returncode} " \
                                 f"{done.stderr[-2000:]}"
    assert done.stdout.split() == ["ok", "400"]


# -- the cleaner, with either scan -------------------------------------------------------------


def test_a_clean_with_either_scan_writes_the_same_log(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if _cleaner_native is None:
        pytest.skip("not built")
    logs = {}
    for name, scan in (("python", cleaner._map_sequential),
                       ("native", _cleaner_native.map_sequential)):
        monkeypatch.setattr(cleaner, "_map_keys", scan)
        rng = random.Random(5)
        log = Log.open(tmp_path / name / "t-0", clock=ManualClock(1_000),
                       config=LogConfig(compact=True, cleanup_delete=False, segment_bytes=4000))
        for _ in range(120):
            records = [Record(key=b"k%d" % rng.randrange(20),
                              value=None if rng.random() < 0.1 else rng.randbytes(rng.randrange(50)),
                              timestamp=1_000) for _ in range(rng.randint(1, 5))]
            log.append_as_leader(encode_batch(records), 0)
        log.roll()
        result = cleaner.clean_log(log, first_dirty=0, high_watermark=log.log_end_offset,
                                   offset_map=cleaner.OffsetMap(10_000), now_ms=1_000)
        log.close()
        assert result is not None and result.records_dropped > 0
        segments = sorted((tmp_path / name / "t-0").glob("*.log"))
        logs[name] = (result, [path.read_bytes() for path in segments])
    assert logs["native"] == logs["python"]
