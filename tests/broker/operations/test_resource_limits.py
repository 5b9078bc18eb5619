"""A broker process under a low open-file limit, and idle connections.

The broker raises its soft open-file limit to the hard one at start; a CreateTopics, a
CreatePartitions or an auto-creation that would take it past the partitions' share of that
limit is POLICY_VIOLATION and creates nothing; running out of descriptors on accept is a line
or two, never a traceback per attempt, and the broker answers again once descriptors are free.
``connections.max.idle.ms`` closes idle connections, one holding part of a request included,
and leaves active ones alone."""

from __future__ import annotations

import re
import select
import socket
import struct
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

import coordinator
from broker.cluster import launch_broker
from coordinator.metadata import MetadataClient
from kafkaclient.messages import build
from tests.broker.processes import TEST_SETTINGS, BrokerProcess, coordinator_url, start_broker
from tests.broker.wire_client import RawClient, request, request_module
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

HARD_LIMIT = 512
"""Partitions may hold 80% of it less 64, 345 descriptors: 115 partitions at 3 each."""
SOFT_LIMIT = 256
POLICY_VIOLATION = ErrorCode.policy_violation.value


def limited_broker(directory: Path, server: Server, extra: str = "") -> BrokerProcess:
    """A broker started with an open-file limit of SOFT_LIMIT (soft) and HARD_LIMIT (hard)."""
    wrapper = directory / "limited-python"
    wrapper.write_text(f"#!/bin/sh\nexec prlimit --nofile={SOFT_LIMIT}:{HARD_LIMIT} -- "
                       f"{sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    broker = launch_broker(directory, 1, coordinator_url(server), extra=TEST_SETTINGS + extra,
                           python=str(wrapper))
    try:
        broker.wait_serving(90)
    except Exception:
        raise AssertionError(f"broker did not start:\n{broker.log()[-3000:]}") from None
    return broker


def open_file_limits(pid: int) -> tuple[int, int]:
    text = Path(f"/proc/{pid}/limits").read_text()
    match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", text, re.M)
    assert match is not None, text
    return int(match.group(1)), int(match.group(2))


def api_versions(broker: BrokerProcess) -> int:
    with RawClient(broker.address, timeout=5) as client:
        return client.call(request(18, 3, client_software_name="t",
                                   client_software_version="1")).error_code


def creatable(name: str, partitions: int) -> object:
    m = request_module(19, 5)
    return build(m.CreatableTopic, name=name, num_partitions=partitions, replication_factor=1,
                 assignments=(), configs=())


def create_topics(client: RawClient, name: str, partitions: int) -> tuple[int, str | None]:
    (result,) = client.call(request(19, 5, topics=(creatable(name, partitions),),
                                    timeout=timedelta(seconds=30), validate_only=False)).topics
    return result.error_code, result.error_message


def create_partitions(client: RawClient, name: str, count: int) -> tuple[int, str | None]:
    m = request_module(37, 3)
    (result,) = client.call(request(37, 3, topics=(build(
        m.CreatePartitionsTopic, name=name, count=count, assignments=None),),
        timeout=timedelta(seconds=30), validate_only=False)).results
    return result.error_code, result.error_message


def auto_create(client: RawClient, name: str) -> int:
    m = request_module(3, 12)
    (topic,) = client.call(request(
        3, 12, topics=(build(m.MetadataRequestTopic, topic_id=None, name=name),),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False)).topics
    return topic.error_code


def stored_topics(broker: BrokerProcess) -> dict[str, int]:
    client = coordinator.connect(broker.coordinator_url, timeout=10)
    try:
        md = MetadataClient(client)
        return {t: len(a.value.partitions) for t, a in md.assignments(md.topics()).items()}
    finally:
        client.close()


def log_dirs(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.directory / "logs").glob(f"{topic}-*"))


@pytest.fixture
def limited(tmp_path: Path, zookeeper_server: Server) -> Iterator[BrokerProcess]:
    broker = limited_broker(tmp_path, zookeeper_server, extra="num.partitions=200\n")
    yield broker
    assert broker.stop() == 0, broker.log()[-3000:]


def test_the_broker_raises_its_open_file_limit_and_refuses_topics_past_its_share(
        limited: BrokerProcess) -> None:
    assert open_file_limits(limited.pid) == (HARD_LIMIT, HARD_LIMIT)
    assert f"open-file limit: {HARD_LIMIT}" in limited.log()
    too_many = 200  # at 3 descriptors each, past 80% of 512 less a reserve
    big, small, auto = (f"{kind}-{uuid.uuid4().hex[:6]}" for kind in ("big", "small", "auto"))
    with RawClient(limited.address, timeout=30) as client:
        error, message = create_topics(client, big, too_many)
        assert error == POLICY_VIOLATION, message
        assert message is not None and "open-file limit" in message and "fit" in message
        assert create_topics(client, small, 4) == (0, None)
        error, message = create_partitions(client, small, too_many)
        assert error == POLICY_VIOLATION, message
        assert message is not None and "open-file limit" in message
        # auto-creation (num.partitions=200 here) is refused the same way
        assert auto_create(client, auto) == POLICY_VIOLATION
    stored = stored_topics(limited)
    assert big not in stored and auto not in stored
    assert stored[small] == 4
    assert log_dirs(limited, big) == [] and log_dirs(limited, auto) == []
    assert len(log_dirs(limited, small)) == 4
    assert api_versions(limited) == 0  # still answering
    assert "Traceback" not in limited.log()


def _connect_all(address: tuple[str, int], most: int) -> list[socket.socket]:
    """Up to ``most`` connections to ``address``, one after the other; stops at the first that
    does not complete in a few seconds (the broker no longer accepts and its backlog is
    full)."""
    sockets: list[socket.socket] = []
    for _ in range(most):
        sock = socket.socket()
        sock.settimeout(5.0)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            break
        sockets.append(sock)
    return sockets


def test_running_out_of_descriptors_on_accept_logs_a_line_and_recovers(
        limited: BrokerProcess) -> None:
    before = len(limited.log())
    sockets = _connect_all(limited.address, HARD_LIMIT + 200)
    try:
        wait_until(lambda: "open-file limit" in limited.log()[before:]
                   or "out of system resource" in limited.log()[before:], timeout=30,
                   message="the broker to run out of descriptors")
        # asyncio retries the accept every second: watch a few seconds of retries
        watched = time.monotonic() + 4.0
        wait_until(lambda: time.monotonic() > watched, timeout=10, interval=0.2,
                   message="a few accept retries")
        storm = limited.log()[before:]
    finally:
        for sock in sockets:
            sock.close()
    assert "Traceback" not in storm, storm[-3000:]
    lines = [line for line in storm.splitlines()
             if "open-file limit" in line or "out of system resource" in line
             or "Too many open files" in line]
    assert 1 <= len(lines) <= 3, "\n".join(lines[:20])

    def answers() -> bool:
        try:
            return api_versions(limited) == 0
        except OSError:
            return False

    wait_until(answers, timeout=30, interval=0.2, message="an answer to a fresh client")


# --- connections.max.idle.ms ------------------------------------------------------------------


def _closed(sock: socket.socket) -> bool:
    # poll, not select: the test process may hold descriptors past select()'s 1024
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_connections_and_partial_requests_are_closed_active_ones_stay(
        tmp_path: Path, zookeeper_server: Server) -> None:
    broker = start_broker(tmp_path, zookeeper_server, extra="connections.max.idle.ms=1500\n")
    try:
        idle = RawClient(broker.address)
        partial = RawClient(broker.address)
        partial.send_bytes(struct.pack(">i", 100) + b"\x00" * 10)  # 10 of 100 bytes
        active = RawClient(broker.address)
        body = request(18, 3, client_software_name="t", client_software_version="1")
        started = time.monotonic()
        closed: dict[str, float] = {}
        while len(closed) < 2 or time.monotonic() - started < 5.0:
            assert active.call(body).error_code == 0  # polled every 300 ms: kept open
            for name, client in (("idle", idle), ("partial", partial)):
                if name not in closed and _closed(client.sock):
                    closed[name] = time.monotonic() - started
            assert time.monotonic() - started < 20, f"still open after 20 s: {closed}"
            time.sleep(0.3)
        assert set(closed) == {"idle", "partial"}
        assert all(1.4 < t < 10 for t in closed.values()), closed
        assert not _closed(active.sock)
        for client in (idle, partial, active):
            client.close()
        assert "connections.max.idle.ms" in broker.log()
    finally:
        assert broker.stop() == 0, broker.log()[-3000:]
