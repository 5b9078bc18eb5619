"""A raw Kafka-protocol client for tests: kio's classes over a blocking socket, so a test can
send exactly the request it means (any version, any bytes) and read exactly what came back."""

from __future__ import annotations

import io
import socket
import struct
import sys
from types import ModuleType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kafkaclient.messages import build

__all__ = ["RawClient", "encode_request", "request", "request_module"]


def request_module(api_key: int, version: int) -> ModuleType:
    """The kio module of a request version (its nested classes, named alike in every one)."""
    return sys.modules[load_request_schema(api_key, version).__module__]


def request(api_key: int, version: int, **values: Any) -> Any:
    """A kio request of ``version`` from the values that version has."""
    return build(load_request_schema(api_key, version), **values)


def encode_request(body: Any, correlation_id: int, client_id: str | None = "test") -> bytes:
    cls = type(body)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=cls.__api_key__,
                                              request_api_version=cls.__version__,
                                              correlation_id=correlation_id,
                                              client_id=client_id))
    entity_writer(cls)(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


class RawClient:
    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self._next = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, body: Any, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            correlation_id = self._next
            self._next += 1
        self.sock.sendall(encode_request(body, correlation_id))
        return correlation_id

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def receive_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, response) of the next frame, read as ``version`` of ``api_key``."""
        frame = self.receive_frame()
        cls = load_response_schema(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, offset)
        return header.correlation_id, body

    def call(self, body: Any) -> Any:
        correlation_id = self.send(body)
        got, response = self.receive(type(body).__api_key__, type(body).__version__)
        assert got == correlation_id
        return response

    def closed_by_peer(self) -> bool:
        """Whether the broker closed the connection (reads end of stream, not a frame)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
