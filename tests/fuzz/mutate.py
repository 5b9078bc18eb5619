"""Mutations of one well-formed request: generic ones (bit flips, bytes inserted or deleted,
truncation, a size prefix that lies) and ones aimed by the frame's map (:mod:`.schema`): a
length or count set to a lie (2^32-1 elements, 0x7fff with a few bytes left, -1 where null is
not allowed), an integer set to a boundary value, an unknown tagged field inserted.

A seed is a request *body* (header and message, no size prefix); a mutation returns the bytes
to send, size prefix included, and a short name for the progress line and the failure file.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

from .schema import FrameMap, LengthSite

__all__ = ["Seed", "frame", "mutate", "uvarint"]


@dataclass(frozen=True, slots=True)
class Seed:
    """A request body and what it is: its api key and version, its origin (``kio`` or the
    client that sent it), and its map (None when the schema walk failed). A ``prime`` is a
    frame sent first, unmutated, on a new connection (a SASL handshake before the token)."""

    body: bytes
    api_key: int
    version: int
    origin: str
    map: FrameMap | None
    prime: bytes = b""


def uvarint(value: int) -> bytes:
    out = bytearray()
    value &= 0xFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _splice(body: bytes, offset: int, width: int, new: bytes) -> bytes:
    return body[:offset] + new + body[offset + width:]


LENGTH_LIES = (0xFFFFFFFF, 0x7FFFFFFF, 0x7FFF, 0xFFFF, 0x10000, 1 << 24, 1 << 28)
"""Element or byte counts a length field is made to claim (the encoded form adds one for
compact lengths: 2^32-1 is written as the varint ff ff ff ff 0f, as a hostile client would)."""


def _encode_length(site: LengthSite, claim: int, raw: bool) -> bytes:
    """The bytes of a length field claiming ``claim``; with ``raw`` the value is written as
    is (so -1 / 0 mean null in the legacy and compact forms)."""
    if site.encoding == "uvarint":
        return uvarint(claim if raw else claim + 1)
    if site.encoding == "i16":
        return struct.pack(">H", claim & 0xFFFF)
    return struct.pack(">I", claim & 0xFFFFFFFF)


def _length_lie(rng: random.Random, body: bytes, m: FrameMap) -> tuple[bytes, str]:
    site = rng.choice(m.lengths)
    roll = rng.random()
    if roll < 0.15:  # null where the schema may not allow it
        new = _encode_length(site, 0 if site.encoding == "uvarint" else 0xFFFFFFFF, raw=True)
        name = f"null-{site.what}:{site.field}"
    elif roll < 0.3:  # exactly one more than what is left
        left = len(body) - site.offset - site.width
        new = _encode_length(site, left + 1, raw=False)
        name = f"left-plus-1-{site.what}:{site.field}"
    else:
        claim = rng.choice(LENGTH_LIES)
        if site.encoding == "uvarint" and rng.random() < 0.5:
            new = uvarint(claim)  # the raw varint, 2^32-1 included
        else:
            new = _encode_length(site, claim, raw=False)
        name = f"len={claim:#x}-{site.what}:{site.field}"
    return _splice(body, site.offset, site.width, new), name


BOUNDARY = {1: (0, 0x7F, 0x80, 0xFF), 2: (0, 0x7FFF, 0x8000, 0xFFFF),
            4: (0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF),
            8: (0, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF)}


def _int_boundary(rng: random.Random, body: bytes, m: FrameMap) -> tuple[bytes, str]:
    site = rng.choice(m.ints)
    value = rng.choice(BOUNDARY[site.width])
    return (_splice(body, site.offset, site.width, value.to_bytes(site.width, "big")),
            f"int={value:#x}:{site.field}")


def _tagged_field(rng: random.Random, body: bytes, m: FrameMap) -> tuple[bytes, str]:
    site = rng.choice(m.tags)
    tag = rng.choice((10_000, 0x7FFF, 1 << 20, (1 << 31) - 1, rng.randrange(100, 5000)))
    payload = rng.randbytes(rng.randrange(0, 24))
    field = uvarint(tag) + uvarint(len(payload)) + payload
    # the new tag is the highest, so it goes last: tags must rise through the buffer
    out = body[:site.end] + field + body[site.end:]
    out = _splice(out, site.offset, site.width, uvarint(site.count + 1))
    return out, f"unknown-tag={tag}"


def _bit_flip(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    out = bytearray(body)
    for _ in range(rng.choice((1, 1, 2, 4))):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out), "bit-flip"


def _byte_set(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    out = bytearray(body)
    i = rng.randrange(len(out))
    out[i] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    return bytes(out), "byte-set"


def _window(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    """A 1, 2 or 4-byte window, or a varint at any position, set to a boundary value: the
    length lies without a map."""
    width = rng.choice((1, 2, 4, 5))
    i = rng.randrange(max(1, len(body) - min(width, len(body)) + 1))
    if width == 5:
        new, width = uvarint(rng.choice(LENGTH_LIES)), 1
    else:
        new = rng.choice(BOUNDARY[width]).to_bytes(width, "big")
    return _splice(body, i, width, new), f"window{len(new)}"


def _insert(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    i = rng.randrange(len(body) + 1)
    return body[:i] + rng.randbytes(rng.choice((1, 1, 2, 4, 16))) + body[i:], "insert"


def _delete(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    i = rng.randrange(len(body))
    return body[:i] + body[i + rng.choice((1, 1, 2, 4, 16)):], "delete"


def _truncate(rng: random.Random, body: bytes, m: FrameMap | None) -> tuple[bytes, str]:
    return body[:rng.randrange(len(body))], "truncate"


MAPPED: tuple[tuple[Callable[..., tuple[bytes, str]], str, int], ...] = (
    (_length_lie, "lengths", 6), (_int_boundary, "ints", 3), (_tagged_field, "tags", 2))
GENERIC: tuple[tuple[Callable[..., tuple[bytes, str]], int], ...] = (
    (_bit_flip, 3), (_byte_set, 2), (_window, 3), (_insert, 1), (_delete, 1), (_truncate, 1))


def mutate(rng: random.Random, seed: Seed) -> tuple[bytes, str]:
    """One mutated request (size prefix included) and the mutation's name. Most mutations
    keep the api key and version (the header's first 4 bytes), so that they reach the
    handler's parser rather than the unsupported-version check; a few mutate twice."""
    body = seed.body
    m = seed.map
    names = []
    for _ in range(2 if rng.random() < 0.15 else 1):
        if len(body) < 2:
            break
        choices: list[tuple[Callable[..., tuple[bytes, str]], int]] = list(GENERIC)
        if m is not None:
            choices += [(fn, w) for fn, attr, w in MAPPED if getattr(m, attr)]
        fn = rng.choices([c[0] for c in choices], weights=[c[1] for c in choices])[0]
        mutated, name = fn(rng, body, m)
        if len(mutated) >= 4 and mutated[:4] != seed.body[:4] and rng.random() < 0.8:
            mutated = seed.body[:4] + mutated[4:]
        body = mutated
        names.append(name)
        m = None  # the map no longer holds after one mutation
    name = "+".join(names)
    roll = rng.random()
    if roll < 0.03:  # a size prefix that claims more than is sent: the broker waits
        return struct.pack(">i", len(body) + rng.choice((1, 7, 1000))) + body, name + "+size>"
    if roll < 0.06 and len(body) > 1:  # one that claims less: the rest is the next frame
        return struct.pack(">i", len(body) - rng.randrange(1, len(body))) + body, name + "+size<"
    return frame(body), name
