"""Kafka's framing and headers over kio's codecs, and responses whose records stay in files.

A request on the wire is a 4-byte size, then the request header (v1, or v2 for a flexible
version: api key, api version, correlation id, client id) and the body, both encoded by kio's
generated classes (``kio==0.6.2``: its native reader wants a read-only buffer, which the frames
read here are). A response is a 4-byte size, the response header (v0, or v1 for a flexible
version; ApiVersions always v0) and the body.

Fetch responses carry log bytes. Rather than reading them into Python, the ``records`` field of
a partition holds a :class:`~replication.log.LogSlice` (a file descriptor, position and size),
and :class:`SGBuffer`, the ``Writable`` kio's writer writes into, keeps each slice as a part of
its own: kio writes the length prefix from ``len(slice)`` and hands the slice itself to
``write``, as it does with bytes. The parts are then sent in order, bytes with the transport and
slices with ``sendfile`` (:mod:`broker.server`). This relies on how kio's writer treats a
``records`` value (``len`` and ``write``, nothing else); tests/broker/protocol/test_wire.py pins it by
comparing the bytes with kio's own encoding of the same response.
"""

from __future__ import annotations

import io
import struct
import sys
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import Any, cast

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import RequestPayload

from broker.wire_schemas import EXTRA_REQUESTS, RESPONSE_AS
from kafkaclient.frames import SIZE
from kafkaclient.messages import request_schema, response_schema
from kafkaclient.wire_check import FrameError, check_frame, check_header
from replication.log import LogSlice

__all__ = [
    "HEADER_PREFIX",
    "Encoded",
    "EncodedBody",
    "FrameError",
    "SGBuffer",
    "encode_response",
    "error_code",
    "parse_request",
    "peek",
    "request_class",
    "response_module",
]

HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


def peek(frame: bytes) -> tuple[int, int, int]:
    """The api key, api version and correlation id at the start of a request."""
    if len(frame) < HEADER_PREFIX.size:
        raise FrameError(f"a request of {len(frame)} bytes has no header")
    return HEADER_PREFIX.unpack_from(frame)


@cache
def request_class(api_key: int, version: int) -> type[RequestPayload]:
    extra = EXTRA_REQUESTS.get((api_key, version))
    return extra if extra is not None else request_schema(api_key, version)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module of a response version: its classes are named alike in every version."""
    api_key, version = RESPONSE_AS.get((api_key, version), (api_key, version))
    return sys.modules[response_schema(api_key, version).__module__]


def parse_request(frame: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    """(header, body) of a frame whose api key and version are supported. The frame is
    walked against its schema first (:mod:`kafkaclient.wire_check`: lengths against the bytes that
    remain, nulls where the field allows none, unknown tagged fields skipped), since kio's
    reader trusts lengths; anything refused there or that kio cannot read is a
    :class:`FrameError`. Bytes after the body are ignored, as Kafka ignores them."""
    cls = request_class(api_key, version)
    frame = check_frame(frame, cls, cls.__header_schema__)
    try:
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        body: Any
        body, _size = entity_reader(cls)(frame, offset)
    except Exception as exc:  # kio's reader raises several types; all mean a bad frame
        raise FrameError(f"cannot parse {cls.__name__} v{version}: "
                         f"{type(exc).__name__}: {exc}") from exc
    return header, body


def parse_header(frame: bytes, header_class: type) -> Any:
    frame = check_header(frame, header_class)
    try:
        return entity_reader(header_class)(frame, 0)[0]
    except Exception as exc:
        raise FrameError(f"cannot parse the request header: {type(exc).__name__}: {exc}") from exc


def error_code(code: int) -> ErrorCode:
    return ErrorCode(int(code))


class SGBuffer:
    """A kio ``Writable`` gathering a message as parts: bytes, and :class:`LogSlice` values
    kept as they are (scatter-gather)."""

    __slots__ = ("_current", "parts", "slices")

    def __init__(self) -> None:
        self.parts: list[bytes | LogSlice] = []
        self.slices = 0
        self._current = io.BytesIO()

    def write(self, value: bytes | LogSlice) -> int:
        if isinstance(value, LogSlice):
            if self._current.tell():
                self.parts.append(self._current.getvalue())
                self._current = io.BytesIO()
            self.parts.append(value)
            self.slices += 1
            return value.size
        return self._current.write(value)

    def finish(self) -> list[bytes | LogSlice]:
        if self._current.tell():
            self.parts.append(self._current.getvalue())
            self._current = io.BytesIO()
        return self.parts


class Encoded:
    """A response ready for the wire: its parts in order and their total size (the frame's
    size prefix is not among them)."""

    __slots__ = ("parts", "size", "slices")

    def __init__(self, parts: list[bytes | LogSlice], slices: int) -> None:
        self.parts = parts
        self.size = sum(len(p) for p in parts)
        self.slices = slices

    def plain_parts(self) -> list[bytes]:
        """The parts of a response that carries no slice: all of them bytes."""
        assert not self.slices
        return cast("list[bytes]", self.parts)

    def chunks(self) -> Iterator[bytes | LogSlice]:
        """The size prefix and the parts, adjacent bytes joined: what to send, in order."""
        pending = [SIZE.pack(self.size)]
        for part in self.parts:
            if isinstance(part, LogSlice):
                yield b"".join(pending)
                pending = []
                yield part
            else:
                pending.append(part)
        if pending:
            yield b"".join(pending)

    def materialize(self) -> bytes:
        """The whole frame as bytes (tests, and transports without sendfile)."""
        return b"".join(p.read() if isinstance(p, LogSlice) else p for p in self.chunks())


class EncodedBody:
    """A response body its API encoded itself (bytes identical to kio's for the same
    response: see :mod:`broker.apis.metadata_encoding`), with the class of its header."""

    __slots__ = ("body", "header_class")

    def __init__(self, header_class: Any, body: bytes) -> None:
        self.header_class = header_class
        self.body = body


def encode_response(correlation_id: int, response: Any, *, scatter: bool = False) -> Encoded:
    """``response`` and its header, encoded by kio; with ``scatter`` (the response carries
    :class:`LogSlice` records) into an :class:`SGBuffer`, else into one plain buffer. An
    :class:`EncodedBody` gets its header only."""
    if isinstance(response, EncodedBody):
        header = io.BytesIO()
        entity_writer(response.header_class)(
            header, response.header_class(correlation_id=correlation_id))
        return Encoded([header.getvalue() + response.body], 0)
    cls = type(response)
    header_class = cls.__header_schema__
    if not scatter:
        plain = io.BytesIO()
        entity_writer(header_class)(plain, header_class(correlation_id=correlation_id))
        entity_writer(cls)(plain, response)
        return Encoded([plain.getvalue()], 0)
    buffer = SGBuffer()
    # kio types a writer's buffer as StreamWriter | IO[bytes], though its writers only call
    # ``write``, which SGBuffer has (tests/broker/protocol/test_wire.py compares the bytes)
    header = header_class(correlation_id=correlation_id)
    entity_writer(header_class)(buffer, header)  # type: ignore[arg-type]
    entity_writer(cls)(buffer, response)  # type: ignore[arg-type]
    return Encoded(buffer.finish(), buffer.slices)
