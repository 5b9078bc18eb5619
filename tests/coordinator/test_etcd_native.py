"""The etcd backend's Range reader in C (coordinator/_etcd_native.c) against its reference,
coordinator.etcd._range_into, which parses with protobuf: the same key-values put at the same
positions, the same ``more``, over responses protobuf writes (every int64 edge, unknown fields,
repeated fields) and over hostile bytes (truncated, corrupted), where the C reader either gives
the reference's answer or raises ValueError, and never reads outside the buffer."""

from __future__ import annotations

import random

import pytest
from etcd3 import etcdrpc
from etcd3.etcdrpc.kv_pb2 import KeyValue

from coordinator.etcd import _range_into
from coordinator.model import Stat

native = pytest.importorskip("coordinator._etcd_native")

INT64 = (0, 1, 2, 127, 128, 2**31, 2**63 - 1, -1, -2**31, -2**63)


def _response(rng: random.Random, keys: list[bytes], n: int) -> bytes:
    resp = etcdrpc.RangeResponse()
    resp.header.revision = rng.randrange(1, 10**9)
    resp.header.cluster_id = rng.getrandbits(64)
    for _ in range(n):
        kv = resp.kvs.add()
        kv.key = rng.choice(keys) if rng.random() < 0.7 else b"/x/%d" % rng.randrange(10**6)
        kv.value = rng.randbytes(rng.choice((0, 1, 30, 300)))
        for name in ("create_revision", "mod_revision", "version", "lease"):
            setattr(kv, name, rng.choice(INT64) if rng.random() < 0.3
                    else rng.randrange(0, 10**7))
    resp.more = rng.random() < 0.3
    resp.count = n
    raw = resp.SerializeToString()
    if rng.random() < 0.3:  # an unknown field of each wire type, as a newer etcd might send
        raw += bytes([0x50, 0x05, 0x59]) + bytes(8) + bytes([0x62, 0x02, 0x01, 0x02,
                                                              0x6D]) + bytes(4)
    return raw


def _both(raw: bytes, index: dict[bytes, int]) -> tuple[object, object]:
    results = []
    for read in (_range_into, native.range_into):
        out: list[object] = [None] * len(index)
        try:
            more = read(raw, index, out, Stat)
        except ValueError:
            results.append(ValueError)
            continue
        assert all(type(x) is tuple and type(x[1]) is Stat for x in out if x is not None)
        results.append((more, out))
    return results[0], results[1]


def test_well_formed_responses_read_as_protobuf_reads_them() -> None:
    rng = random.Random(5)
    keys = [b"/partctl/brokers/topics/t/partitions/%d/state" % p for p in range(50)]
    index = {k: i for i, k in enumerate(keys)}
    for _ in range(500):
        raw = _response(rng, keys, rng.randrange(0, 80))
        reference, got = _both(raw, index)
        assert reference is not ValueError
        assert got == reference


def test_repeated_scalars_take_the_last_and_an_empty_response_has_nothing() -> None:
    kv = KeyValue(key=b"/k", value=b"v", version=3).SerializeToString()
    # a second version field after the message's own: protobuf keeps the last
    raw = bytes([0x12, len(kv) + 2]) + kv + bytes([0x20, 0x07])
    reference, got = _both(raw, {b"/k": 0})
    assert got == reference == (False, [(b"v", Stat(6, 0, 0, 0))])
    assert _both(b"", {b"/k": 0}) == ((False, [None]), (False, [None]))


def test_hostile_bytes_give_the_reference_s_answer_or_value_error() -> None:
    rng = random.Random(11)
    keys = [b"/p/%d/state" % p for p in range(20)]
    index = {k: i for i, k in enumerate(keys)}
    agreed = refused = 0
    for _ in range(4_000):
        raw = bytearray(_response(rng, keys, rng.randrange(1, 12)))
        for _flip in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        raw = raw[:rng.randint(max(0, len(raw) - 20), len(raw))]
        reference, got = _both(bytes(raw), index)
        if got is ValueError:
            refused += 1
        else:
            assert got == reference, bytes(raw).hex()
            agreed += 1
    assert agreed > 100 and refused > 100
    for bad in (b"\x12\xff\xff\xff\xff\x0f", b"\x12\x05\x0a\x09", b"\x80" * 11, b"\x0b",
                b"\x12\x02\x0f\x00"):
        with pytest.raises(ValueError):
            native.range_into(bad, index, [None] * len(index), Stat)


def test_its_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        native.range_into(b"", {}, [], int)
    kv = KeyValue(key=b"/k").SerializeToString()
    raw = bytes([0x12, len(kv)]) + kv
    with pytest.raises(IndexError):
        native.range_into(raw, {b"/k": 5}, [None], Stat)


def test_groups_are_skipped_to_protobuf_s_depth() -> None:
    """A group (an unknown field's, wire type 3) is skipped to its end, nested up to 100 deep
    as protobuf allows; deeper is refused, by both."""
    for depth, ok in ((1, True), (100, True), (101, False), (5_000, False)):
        raw = b"\x5b" * depth + b"\x5c" * depth
        reference, got = _both(raw, {})
        assert got == reference == ((False, []) if ok else ValueError)
