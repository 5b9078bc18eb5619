"""What the fuzzer mutates, and the fixed cases it always sends.

- kio seeds: a default instance of every request class the broker advertises in ApiVersions,
  every version of it, encoded with its header (:func:`kio_seeds`).
- recorded seeds: requests real clients (librdkafka through confluent-kafka, and kafka-python)
  sent to a broker, kept under ``corpus/`` as the raw byte streams the clients wrote (size
  prefixes included); ``python -m tests.fuzz.record`` makes them again (:func:`recorded_seeds`).
- regression cases: the length lies of issue 28 and their kin, each with what the broker must
  do (:func:`regression_cases`).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kio.serial import entity_writer

from broker.wire import request_class

from .mutate import Seed, frame, uvarint
from .schema import default_instance, walk

__all__ = ["CORPUS", "SASL_PASSWORD", "SASL_USER", "Case", "encode", "kio_seeds",
           "read_stream", "recorded_seeds", "regression_cases", "sasl_seeds"]

CORPUS = Path(__file__).resolve().parent / "corpus"


def encode(api_key: int, version: int, body: object, correlation_id: int = 1,
           client_id: str | None = "fuzz") -> bytes:
    """Header and body of a request (no size prefix)."""
    cls = request_class(api_key, version)
    header = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def _seed(body: bytes, origin: str) -> Seed | None:
    if len(body) < 4:
        return None
    key, version = struct.unpack_from(">hh", body)
    try:
        cls = request_class(key, version)
    except Exception:  # noqa: BLE001 - a version kio does not know: mutate it unmapped
        return Seed(body, key, version, origin, None)
    return Seed(body, key, version, origin, walk(body, cls))


def kio_seeds(advertised: Iterable[tuple[int, int, int]]) -> list[Seed]:
    """A default request of every (api key, version) in ``advertised`` ((key, min, max))."""
    out = []
    for key, low, high in advertised:
        for version in range(low, high + 1):
            cls = request_class(key, version)
            seed = _seed(encode(key, version, default_instance(cls)), "kio")
            assert seed is not None and seed.map is not None, (key, version)
            out.append(seed)
    return out


def read_stream(data: bytes) -> Iterator[bytes]:
    """The request bodies of a recorded client stream (size-prefixed frames)."""
    pos = 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0 or pos + 4 + size > len(data):
            return
        yield data[pos + 4:pos + 4 + size]
        pos += 4 + size


def recorded_seeds(directory: Path = CORPUS) -> list[Seed]:
    out = []
    for path in sorted(directory.glob("*.bin")):
        for body in read_stream(path.read_bytes()):
            seed = _seed(body, path.stem)
            if seed is not None:
                out.append(seed)
    return out


SASL_USER = "fuzz"
SASL_PASSWORD = "fuzz-password"  # noqa: S105 - a test broker's PLAIN user
"""The PLAIN user of the SASL_PLAINTEXT listener the fuzzer targets with ``--sasl``."""


def sasl_seeds() -> list[Seed]:
    """What a client sends before it is authenticated: SaslHandshake for each mechanism;
    SaslAuthenticate with a PLAIN token and a SCRAM client-first message, each after the
    handshake that makes it expected; and the same tokens raw (a v0 handshake's framing)."""
    plain = b"\0" + SASL_USER.encode() + b"\0" + SASL_PASSWORD.encode()
    first = b"n,,n=" + SASL_USER.encode() + b",r=fyko+d2lbbFgONRv9qkxdawL"
    out = []
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for version in (0, 1):
            out.append(_seed(encode(17, version, request_class(17, version)(
                mechanism=mechanism)), "sasl"))
    for mechanism, token in (("PLAIN", plain), ("SCRAM-SHA-256", first),
                             ("SCRAM-SHA-512", first)):
        handshake = frame(encode(17, 1, request_class(17, 1)(mechanism=mechanism)))
        for version in (0, 1, 2):
            seed = _seed(encode(36, version, request_class(36, version)(auth_bytes=token)),
                         "sasl")
            assert seed is not None
            out.append(Seed(seed.body, 36, version, "sasl", seed.map, prime=handshake))
        raw = frame(encode(17, 0, request_class(17, 0)(mechanism=mechanism)))
        out.append(Seed(token, -1, -1, f"sasl raw {mechanism}", None, prime=raw))
    return [s for s in out if s is not None]  # type: ignore[misc]


# --- the fixed cases ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """A request sent as is, on a connection of its own. With a ``baseline`` (the same
    request before the mutation) the broker must answer it whenever it answers the baseline;
    without, answered or closed are both fine, as long as the broker stays well."""

    name: str
    data: bytes
    baseline: bytes | None = None


def _header(api_key: int, version: int) -> bytes:
    """A request header of ``version``'s kind, up to and including the client id (and the
    header's empty tag buffer when flexible)."""
    cls = request_class(api_key, version)
    buf = io.BytesIO()
    header = cls.__header_schema__
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=99, client_id="fuzz"))
    return buf.getvalue()


def regression_cases(advertised: Iterable[tuple[int, int, int]]) -> list[Case]:
    advertised = list(advertised)
    ff = uvarint(0xFFFFFFFF)  # ff ff ff ff 0f
    cases = [
        # issue 28: a compact array claiming 2^32-1 elements (the native reader allocated
        # tens of GiB and the process aborted)
        Case("metadata-v9-topics-2^32-1", frame(_header(3, 9) + ff + b"\x00" * 8)),
        Case("metadata-v12-topics-2^32-1", frame(_header(3, 12) + ff + b"\x01\x00\x00\x00")),
        Case("incremental-alter-configs-v1-resources-2^32-1",
             frame(_header(44, 1) + ff + b"\x00\x00")),
        Case("incremental-alter-configs-v0-resources-int32-max",
             frame(_header(44, 0) + b"\x7f\xff\xff\xff" + b"\x00")),
        Case("create-topics-v5-topics-2^32-1", frame(_header(19, 5) + ff + b"\x00" * 6)),
        # a legacy string claiming 0x7fff bytes with 3 left
        Case("describe-groups-v0-group-0x7fff-3-left",
             frame(_header(15, 0) + struct.pack(">i", 1) + b"\x7f\xff" + b"abc")),
        Case("header-client-id-0x7fff-3-left",
             frame(struct.pack(">hhi", 3, 1, 7) + b"\x7f\xff" + b"abc")),
    ]
    for key, low, high in advertised:
        for version in range(low, high + 1):
            cls = request_class(key, version)
            body = encode(key, version, default_instance(cls))
            m = walk(body, cls)
            assert m is not None
            header_end = len(_header(key, version))
            # null (-1, or compact 0) in the first non-nullable array or string of the body
            site = next((s for s in m.lengths if not s.nullable and s.offset >= header_end),
                        None)
            if site is not None:
                null = b"\x00" if site.encoding == "uvarint" else (
                    b"\xff\xff" if site.encoding == "i16" else b"\xff\xff\xff\xff")
                cases.append(Case(f"null-{site.what}-{site.field}-api{key}-v{version}",
                                  frame(body[:site.offset] + null
                                        + body[site.offset + site.width:])))
            # an unknown tagged field, in the body's tag buffer and in the header's: Kafka
            # skips it, so the request is answered. ApiVersions is left out: a server reads
            # its header as v1 whatever the version (KIP-511), so its tags are not looked at
            if cls.__flexible__ and key != 18:
                for where, tags in (("body", m.tags[-1]), ("header", m.tags[0])):
                    extra = uvarint(12_345) + uvarint(3) + b"xyz"
                    mutated = (body[:tags.end] + extra + body[tags.end:])
                    mutated = (mutated[:tags.offset] + uvarint(tags.count + 1)
                               + mutated[tags.offset + tags.width:])
                    cases.append(Case(f"unknown-tag-{where}-api{key}-v{version}",
                                      frame(mutated), baseline=frame(body)))
    return cases
