"""A connected socket pair whose first end reads ahead, for the kazoo I/O tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from coordinator.zk_io import ReadAheadSocket


@pytest.fixture
def pair() -> Iterator[tuple[ReadAheadSocket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    yield ReadAheadSocket(a), b
    a.close()
    b.close()
