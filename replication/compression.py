"""Kafka's four batch codecs, in the framings its clients write on the wire.

A compressed v2 batch holds its records section (everything after the 61-byte header)
compressed as one stream; the codec is attribute bits 0-2:

- 1 gzip: a gzip stream (RFC 1952), possibly several members back to back, as Java's
  ``GZIPInputStream`` reads them.
- 2 snappy: Kafka's Java clients write snappy-java's *xerial* framing: the 8-byte magic
  ``\\x82SNAPPY\\x00``, two big-endian int32 (version 1, oldest compatible version 1), then
  blocks, each a big-endian int32 length and one raw snappy block of at most 32 KiB of input.
  librdkafka writes one raw snappy block with no framing; Kafka reads both (snappy-java falls
  back to raw when the magic is absent), and so does this module.
- 3 lz4: the LZ4 frame format as Kafka restricts it (its ``Lz4BlockInputStream``): magic
  ``0x184D2204``, a frame descriptor of version 1 with independent blocks and a maximum block
  size of 64 KiB to 4 MiB, an optional content size, and the header checksum byte, which since
  KIP-57 (magic 1 and later) is the second byte of the XXH32 of the descriptor alone (FLG to
  the end of the content size), not of the magic too as Kafka 0.8/0.9 wrote it. Blocks are
  little-endian sizes (the top bit: stored uncompressed) and raw LZ4 blocks, ended by a zero
  size. Optional block and content checksums are stepped over, not verified: the batch's
  CRC-32C already covers every compressed byte.
- 4 zstd: Zstandard frames (RFC 8878), one or more.

Decompression is bounded: :func:`decompress` stops and raises :class:`CorruptRecordError` as
soon as the output would pass ``limit``, having held at most ``limit`` plus one step of output
(a gzip step is exactly bounded, an lz4 or snappy step is one block, a zstd step at most 8 MiB),
never what a hostile batch would inflate to. A body that does not decode is the same error.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import zstandard

from replication.errors import CorruptRecordError, UnsupportedCompressionError

__all__ = [
    "GZIP",
    "LZ4",
    "MIN_INFLATE_LIMIT",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "compress",
    "decompress",
    "inflate_limit",
    "is_xerial",
    "xxh32",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

MIN_INFLATE_LIMIT = 64 << 20
"""The least a batch's records section may inflate to (see :func:`inflate_limit`)."""
_INFLATE_FACTOR = 64

Buffer = bytes | bytearray | memoryview


def inflate_limit(max_message_bytes: int) -> int:
    """How far a batch's records section may inflate: 64 times ``max.message.bytes`` (the
    largest batch, compressed, a producer may send), and at least 64 MiB.

    Kafka inflates a batch as a stream and has no such bound; here a batch is inflated whole,
    so one is needed to keep a hostile batch from taking the broker's memory. A producer's
    batch is built to ``batch.size`` (16 KiB in Java, 1 MB in librdkafka) of *uncompressed*
    records in librdkafka and of estimated compressed bytes in Java, so real batches inflate
    far below this; 64 MiB per inflation is what a broker on this kind of machine can hold for
    each of its handler and cleaner threads at once."""
    return max(MIN_INFLATE_LIMIT, _INFLATE_FACTOR * max_message_bytes)


def _name(codec: int) -> str:
    return _NAMES[codec] if 0 <= codec < len(_NAMES) else str(codec)


def decompress(codec: int, data: Buffer, limit: int = MIN_INFLATE_LIMIT) -> bytes:
    """The records section a batch compressed with ``codec`` (1 to 4) holds.

    Raises :class:`CorruptRecordError` if ``data`` does not decode in that codec's framing or
    would inflate past ``limit`` bytes, and :class:`UnsupportedCompressionError` for a codec
    that is none of Kafka's."""
    if codec == GZIP:
        return _gunzip(data, limit)
    if codec == SNAPPY:
        return _unsnappy(data, limit)
    if codec == LZ4:
        return _unlz4(data, limit)
    if codec == ZSTD:
        return _unzstd(data, limit)
    raise UnsupportedCompressionError(f"no compression codec {_name(codec)} to decompress")


def compress(codec: int, data: Buffer, *, xerial: bool = True) -> bytes:
    """``data`` compressed with ``codec`` (1 to 4) as Kafka's Java producer frames it (gzip,
    xerial snappy, a KIP-57 lz4 frame of independent 64 KiB blocks, a zstd frame), or for
    snappy with ``xerial=False`` as one raw block, as librdkafka writes it."""
    if codec == GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        return _snappy(data) if xerial else bytes(cramjam.snappy.compress_raw(bytes(data)))
    if codec == LZ4:
        return _lz4(data)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(bytes(data))
    raise UnsupportedCompressionError(f"no compression codec {_name(codec)} to compress with")


def _too_big(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{codec} records inflate past {limit} bytes")


# -- gzip ----------------------------------------------------------------------------------------


def _gunzip(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    if not rest:
        raise CorruptRecordError("gzip records are empty")
    while rest:
        inflater = zlib.decompressobj(31)
        try:
            out += inflater.decompress(rest, limit - len(out) + 1)
        except zlib.error as exc:
            raise CorruptRecordError(f"gzip records do not decode: {exc}") from exc
        if len(out) > limit:
            raise _too_big("gzip", limit)
        if not inflater.eof:
            raise CorruptRecordError("gzip records end inside their stream")
        rest = inflater.unused_data  # another member follows, as Java's GZIPInputStream reads
    return bytes(out)


# -- snappy --------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block, Kafka's producer's
_INT32 = struct.Struct(">i")


def is_xerial(data: Buffer) -> bool:
    """Whether snappy records are in the xerial framing (else one raw snappy block)."""
    return bytes(data[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC


def _raw_block(block: bytes, room: int, limit: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:  # cramjam raises its own error types
        raise CorruptRecordError(f"snappy records do not decode: {exc}") from exc
    if size > room:
        raise _too_big("snappy", limit)
    try:
        out = bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise CorruptRecordError(f"snappy records do not decode: {exc}") from exc
    if len(out) != size:
        raise CorruptRecordError("snappy block inflates to another size than it declares")
    return out


def _unsnappy(data: Buffer, limit: int) -> bytes:
    raw = bytes(data)
    if not is_xerial(raw):
        return _raw_block(raw, limit, limit)
    if len(raw) < _XERIAL_HEADER.size:
        raise CorruptRecordError("xerial snappy header is truncated")
    out = bytearray()
    pos, end = _XERIAL_HEADER.size, len(raw)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (size,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"xerial snappy block of {size} bytes runs past the records")
        out += _raw_block(raw[pos : pos + size], limit - len(out), limit)
        pos += size
    return bytes(out)


def _snappy(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


# -- lz4 -----------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_FLG = 0x60  # version 1, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB blocks, as Kafka's producer writes
_LZ4_BLOCK = 64 * 1024
_STORED = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _unlz4(data: Buffer, limit: int) -> bytes:
    raw = bytes(data)
    end = len(raw)
    if end < 7:
        raise CorruptRecordError("lz4 frame header is truncated")
    if _UINT32_LE.unpack_from(raw, 0)[0] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 records are not an lz4 frame (bad magic)")
    flg, bd = raw[4], raw[5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4 frame version {flg >> 6} is not 1")
    if flg & 0x03:
        raise CorruptRecordError("lz4 frame sets reserved flag bits (or a dictionary id)")
    if not flg & 0x20:
        raise CorruptRecordError("lz4 frame has dependent blocks, which Kafka does not read")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise CorruptRecordError(f"lz4 frame block descriptor {bd:#04x} is invalid")
    max_block = 1 << (2 * ((bd >> 4) & 7) + 8)
    block_checksum, content_checksum = bool(flg & 0x10), bool(flg & 0x04)
    pos = 6 + (8 if flg & 0x08 else 0)
    if pos >= end:
        raise CorruptRecordError("lz4 frame header is truncated")
    if raw[pos] != (xxh32(raw[4:pos]) >> 8) & 0xFF:
        raise CorruptRecordError("lz4 frame header checksum does not match (KIP-57)")
    pos += 1
    out = bytearray()
    scratch = bytearray(max_block)
    while True:
        if end - pos < 4:
            raise CorruptRecordError("lz4 frame ends without its end mark")
        (word,) = _UINT32_LE.unpack_from(raw, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_STORED
        if size > max_block or pos + size > end:
            raise CorruptRecordError(f"lz4 block of {size} bytes is too large or truncated")
        if word & _STORED:
            block: bytes | bytearray | memoryview = raw[pos : pos + size]
        else:
            try:
                n = cramjam.lz4.decompress_block_into(raw[pos : pos + size], scratch)
            except Exception as exc:  # cramjam raises its own error types
                raise CorruptRecordError(f"lz4 block does not decode: {exc}") from exc
            block = memoryview(scratch)[:n]
        if len(out) + len(block) > limit:
            raise _too_big("lz4", limit)
        out += block
        pos += size + (4 if block_checksum else 0)
    pos += 4 if content_checksum else 0
    if pos != end:
        raise CorruptRecordError(f"lz4 frame is followed by {end - pos} stray bytes"
                                 if pos < end else "lz4 content checksum is truncated")
    return bytes(out)


def _lz4(data: Buffer) -> bytes:
    view = memoryview(data)
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    out = bytearray(_UINT32_LE.pack(_LZ4_MAGIC) + descriptor)
    out.append((xxh32(descriptor) >> 8) & 0xFF)
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = bytes(view[start : start + _LZ4_BLOCK])
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out += _UINT32_LE.pack(len(chunk) | _STORED)
            out += chunk
        else:
            out += _UINT32_LE.pack(len(block))
            out += block
    out += _UINT32_LE.pack(0)
    return bytes(out)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32 of ``data`` (the lz4 frame's header checksum). Plain Python: it only ever hashes
    the few bytes of a frame descriptor."""
    raw = bytes(data)
    n, i = len(raw), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                word = int.from_bytes(raw[i : i + 4], "little")
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        word = int.from_bytes(raw[i : i + 4], "little")
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + raw[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


# -- zstd ----------------------------------------------------------------------------------------

_ZSTD_STEP = 256
"""Compressed bytes fed per step: a zstd block of 3 header bytes and one byte may stand for
128 KiB, so one step inflates to at most 8 MiB before the bound is checked."""


def _unzstd(data: Buffer, limit: int) -> bytes:
    raw = memoryview(bytes(data))
    if not raw:
        raise CorruptRecordError("zstd records are empty")
    parts: list[bytes] = []
    size = 0
    context = zstandard.ZstdDecompressor()
    try:
        while raw:
            frame = context.decompressobj()
            pos = 0
            while not frame.eof:
                if pos >= len(raw):
                    raise CorruptRecordError("zstd records end inside a frame")
                part = frame.decompress(raw[pos : pos + _ZSTD_STEP])
                pos += _ZSTD_STEP
                size += len(part)
                if size > limit:
                    raise _too_big("zstd", limit)
                parts.append(part)
            # another frame may follow: what the last step did not use, then the rest
            raw = memoryview(frame.unused_data + bytes(raw[pos:]))
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"zstd records do not decode: {exc}") from exc
    return b"".join(parts)
