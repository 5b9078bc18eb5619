"""DescribeTransactions read by hand, for the coordinator's tests: kio refuses the start time
-1 that Kafka gives a transaction not started (and an unknown id)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tests.broker.wire_client import RawClient, request

__all__ = ["Described", "describe_at"]


@dataclass(frozen=True)
class Described:
    """DescribeTransactions' answer for one id, read by hand: kio refuses the start time -1
    that Kafka gives a transaction not started (and an unknown id)."""

    error_code: int
    transactional_id: str
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[int, ...]], ...]


class _Frame:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def text(self) -> str:
        n = self.uvarint() - 1
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()

    def tags(self) -> None:
        assert self.uvarint() == 0


def describe_at(address: tuple[str, int], tid: str) -> Described:
    """DescribeTransactions version 0 for ``tid`` at the broker at ``address``."""
    with RawClient(address, timeout=30) as client:
        client.send(request(65, 0, transactional_ids=(tid,)))
        frame = _Frame(client.receive_frame())
    frame.take(">i")  # correlation id
    frame.tags()
    frame.take(">i")  # throttle time
    assert frame.uvarint() == 2  # one state
    error, found_id, state = frame.take(">h"), frame.text(), frame.text()
    timeout, start, pid, epoch = (frame.take(">i"), frame.take(">q"), frame.take(">q"),
                                  frame.take(">h"))
    topics = []
    for _ in range(frame.uvarint() - 1):
        topic = frame.text()
        topics.append((topic, tuple(frame.take(">i") for _ in range(frame.uvarint() - 1))))
        frame.tags()
    return Described(error, found_id, state, timeout, start, pid, epoch, tuple(topics))
