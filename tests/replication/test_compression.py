"""The batch codecs (replication.compression): each round-trips; each reads and writes the
framing the clients use, checked against independent implementations (Python's gzip, the
lz4 and zstandard bindings, python-snappy, kafka-python's xerial codec); lz4 frames obey Kafka's
rules (KIP-57's header checksum, independent blocks); a zip bomb stops at the limit without
taking the memory it would inflate to; a corrupt body is one CorruptRecordError."""

from __future__ import annotations

import gzip
import os
import random
import struct
import subprocess
import sys
import textwrap

import kafka.codec
import lz4.frame
import pytest
import snappy
import zstandard

from replication.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
    inflate_limit,
    is_xerial,
    xxh32,
)
from replication.errors import CorruptRecordError, UnsupportedCompressionError

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
BIG = 1 << 30


def sample(size: int, seed: int = 0) -> bytes:
    """Half random, half repetitive: compressible but not trivially."""
    rng = random.Random(seed)
    half = rng.randbytes(size // 2)
    return (half + b"record value %d " % seed * ((size - len(half)) // 14 + 1))[:size]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 1000, 70_000, 300_000])
def test_each_codec_round_trips(codec: int, size: int) -> None:
    data = sample(size, size)
    assert decompress(codec, compress(codec, data), BIG) == data
    if codec == SNAPPY:
        raw = compress(codec, data, xerial=False)
        assert not is_xerial(raw) and is_xerial(compress(codec, data))
        assert decompress(codec, raw, BIG) == data


def test_xxh32_matches_the_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert xxh32(b"", seed=1) != xxh32(b"")


@pytest.mark.parametrize("size", [0, 5000, 300_000])
def test_framings_agree_with_independent_implementations(size: int) -> None:
    data = sample(size, 7)
    # gzip: Python's gzip module both ways, and concatenated members as Java reads them
    assert gzip.decompress(compress(GZIP, data)) == data
    assert decompress(GZIP, gzip.compress(data) + gzip.compress(b"more"), BIG) == data + b"more"
    # snappy: python-snappy's raw blocks (librdkafka's form), kafka-python's xerial framing
    # (Kafka's Java producer's form)
    assert snappy.decompress(compress(SNAPPY, data, xerial=False)) == data
    assert decompress(SNAPPY, snappy.compress(data), BIG) == data
    xerial = kafka.codec.snappy_encode(data, xerial_compatible=True)
    assert is_xerial(xerial) or not data
    assert decompress(SNAPPY, xerial, BIG) == data
    if data:  # kafka-python takes a header with no block after it for a raw block
        assert kafka.codec.snappy_decode(compress(SNAPPY, data)) == data
    # lz4: the lz4 bindings' frames, with every optional field Kafka reads
    assert lz4.frame.decompress(compress(LZ4, data)) == data
    for options in ({}, {"content_checksum": True, "block_checksum": True},
                    {"store_size": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB}):
        framed = lz4.frame.compress(data, block_linked=False, **options)
        assert decompress(LZ4, framed, BIG) == data
    # zstd: the zstandard bindings, one frame or several
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data
    streamed = zstandard.ZstdCompressor().compressobj()
    two = streamed.compress(data) + streamed.flush() + zstandard.ZstdCompressor().compress(b"x")
    assert decompress(ZSTD, two, BIG) == data + b"x"


def test_kafkas_lz4_frame_header() -> None:
    frame = compress(LZ4, b"kafka")
    assert frame[:4] == bytes.fromhex("04224d18")  # magic, little-endian
    assert frame[4:6] == bytes((0x60, 0x40))  # version 1, independent blocks; 64 KiB blocks
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF  # KIP-57: the descriptor alone


def test_an_lz4_frame_with_the_pre_kip57_header_checksum_is_refused() -> None:
    frame = bytearray(compress(LZ4, b"kafka 0.8 hashed the magic too" * 10))
    frame[6] = (xxh32(frame[:6]) >> 8) & 0xFF
    with pytest.raises(CorruptRecordError, match="header checksum"):
        decompress(LZ4, bytes(frame), BIG)


def test_an_lz4_frame_of_dependent_blocks_is_refused_as_kafka_refuses_it() -> None:
    linked = lz4.frame.compress(sample(200_000), block_linked=True)
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(LZ4, linked, BIG)


def test_the_limit_follows_max_message_bytes_above_a_floor() -> None:
    assert inflate_limit(1000) == 64 << 20
    assert inflate_limit(1024 * 1024 + 12) == 64 * (1024 * 1024 + 12)
    assert inflate_limit(10 << 20) == 640 << 20


@pytest.mark.parametrize("codec", CODECS)
def test_inflating_past_the_limit_is_corrupt(codec: int) -> None:
    data = sample(100_000)
    assert decompress(codec, compress(codec, data), len(data)) == data
    with pytest.raises(CorruptRecordError, match=f"inflate past {len(data) - 1} bytes"):
        decompress(codec, compress(codec, data), len(data) - 1)


def test_raw_snappy_declaring_a_huge_length_is_refused_before_inflating() -> None:
    bomb = bytes.fromhex("80808080 04") + b"\x00" * 16  # a preamble of 1 GiB, then nothing
    with pytest.raises(CorruptRecordError, match="inflate past"):
        decompress(SNAPPY, bomb, 1 << 20)


_BOMB = textwrap.dedent("""
    import resource, sys, zlib
    import cramjam, zstandard
    from replication.compression import decompress, compress, xxh32
    from replication.errors import CorruptRecordError
    codec, size = int(sys.argv[1]), int(sys.argv[2]) << 20
    zeros = bytes(1 << 20)
    if codec == 1:
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)
        bomb = b"".join(packer.compress(zeros) for _ in range(size >> 20)) + packer.flush()
    elif codec == 2:  # xerial blocks of 32 KiB of zeros, repeated
        block = bytes(cramjam.snappy.compress_raw(zeros[:32768]))
        bomb = compress(2, b"")[:16] + (len(block).to_bytes(4, "big") + block) * (size >> 15)
    elif codec == 3:  # independent 64 KiB blocks of zeros, repeated
        block = bytes(cramjam.lz4.compress_block(zeros[:65536], store_size=False))
        head = compress(3, b"")[:7]
        bomb = head + (len(block).to_bytes(4, "little") + block) * (size >> 16) + bytes(4)
    else:
        packer = zstandard.ZstdCompressor().compressobj()
        bomb = b"".join(packer.compress(zeros) for _ in range(size >> 20)) + packer.flush()
    del zeros
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        decompress(codec, bomb, 1 << 20)
    except CorruptRecordError as exc:
        print(exc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(len(bomb), before, after)
""")


@pytest.mark.processes
@pytest.mark.parametrize("codec", CODECS)
def test_a_zip_bomb_stops_at_the_limit_without_inflating(codec: int) -> None:
    """A records section that inflates to 256 MiB, under a 1 MiB limit: refused, and the
    process's peak memory grows by far less than what the bomb holds."""
    done = subprocess.run([sys.executable, "-c", _BOMB, str(codec), "256"], check=True,
                          capture_output=True, text=True, timeout=120)
    message, figures = done.stdout.strip().splitlines()
    assert "inflate past 1048576 bytes" in message
    bomb_size, before_kib, after_kib = map(int, figures.split())
    assert bomb_size < 16 << 20
    assert after_kib - before_kib < 32 << 10, f"peak memory grew {after_kib - before_kib} KiB"


@pytest.mark.parametrize("codec", CODECS)
def test_a_truncated_or_garbled_body_is_one_corrupt_record_error(codec: int) -> None:
    data = sample(50_000, 3)
    body = compress(codec, data)
    for bad in (body[: len(body) // 2], body[:-1], b"", b"not compressed at all" * 4,
                body + b"stray"):
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad, BIG)


@pytest.mark.parametrize("codec", CODECS)
def test_random_corruption_decodes_or_is_a_corrupt_record_error(codec: int) -> None:
    """Whatever bytes are flipped, the answer is some bytes or CorruptRecordError: never another
    exception from a codec library, never a crash."""
    rng = random.Random(codec)
    body = compress(codec, sample(20_000, 5))
    for _ in range(300):
        bad = bytearray(body)
        for _flip in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        try:
            out = decompress(codec, bytes(bad), 1 << 20)
        except CorruptRecordError:
            continue
        assert isinstance(out, bytes)


def test_a_codec_kafka_does_not_have_is_refused() -> None:
    for codec in (0, 5, 7):
        with pytest.raises(UnsupportedCompressionError):
            decompress(codec, b"x", BIG)
        with pytest.raises(UnsupportedCompressionError):
            compress(codec, b"x")


def test_snappy_xerial_blocks_are_32_kib_of_input() -> None:
    framed = compress(SNAPPY, os.urandom(100_000))
    magic, version, compatible = struct.unpack_from(">8sii", framed)
    assert (magic, version, compatible) == (b"\x82SNAPPY\x00", 1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        blocks.append(len(snappy.decompress(framed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert blocks == [32768, 32768, 32768, 100_000 - 3 * 32768]
