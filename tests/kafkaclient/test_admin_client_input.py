"""What kafkaclient.admin.AdminClient makes of bad input and hostile servers: a malformed
bootstrap string, a closed port, a listener that accepts and never answers, a broker whose
answer claims more than its frame holds or names a broker twice in a replica list, an
unreadable client properties file. Each is one AdminError line, within the timeout; no secret
is in it."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kafkaclient.admin import AdminClient, AdminError
from kafkaclient.bootstrap import parse_bootstrap

SIZE = struct.Struct(">i")


@pytest.mark.parametrize(("text", "message"), [
    ("", "no bootstrap server given"),
    ("localhost", "not host:port"),
    ("localhost:", "the port must be a number"),
    ("localhost:0", "the port must be a number"),
    ("localhost:70000", "the port must be a number"),
    ("localhost:9092,,other:9092", "an empty entry"),
    ("::1:9092", r"write an IPv6 address as \[host\]:port"),
    ("[::1]9092", r"\[host\]:port"),
    ("a b:9092", "is not a host name"),
    ("user@host:9092", "is not a host name"),
])
def test_a_malformed_bootstrap_string_is_one_line(text: str, message: str) -> None:
    with pytest.raises(AdminError, match=message) as raised:
        AdminClient(text)
    assert "\n" not in str(raised.value)


def test_bootstrap_strings_as_kafka_takes_them() -> None:
    assert parse_bootstrap(" h1:9092, [::1]:9093 ,h1:9092,10.0.0.1:1") == (
        ("h1", 9092), ("::1", 9093), ("10.0.0.1", 1))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_is_one_line_at_once() -> None:
    port = closed_port()
    started = time.monotonic()
    with AdminClient(f"127.0.0.1:{port}", timeout=5) as admin, \
            pytest.raises(AdminError) as raised:
        admin.describe_cluster()
    assert str(raised.value) == (f"cannot reach any bootstrap server (127.0.0.1:{port}: "
                                 "connection refused)")
    assert time.monotonic() - started < 5


def test_a_listener_that_never_answers_costs_the_timeout_not_more() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nobody ever answers
        port = silent.getsockname()[1]
        other = closed_port()
        started = time.monotonic()
        with AdminClient(f"127.0.0.1:{port},127.0.0.1:{other}", timeout=1.5) as admin, \
                pytest.raises(AdminError) as raised:
            admin.topics()
        took = time.monotonic() - started
    assert took < 4, took
    message = str(raised.value)
    assert message.startswith("cannot reach any bootstrap server (")
    assert f"127.0.0.1:{port}: no answer within" in message
    assert "\n" not in message


class FakeBroker:
    """A socket on 127.0.0.1 that answers ApiVersions as a broker serving Metadata 0-12 does,
    then answers every other request with ``answer(correlation_id)`` (the frame's bytes after
    its size)."""

    def __init__(self, answer: Callable[[int], bytes]) -> None:
        self.answer = answer
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    while True:
                        head = conn.recv(4, socket.MSG_WAITALL)
                        if len(head) < 4:
                            break
                        frame = conn.recv(SIZE.unpack(head)[0], socket.MSG_WAITALL)
                        api_key, _version, correlation = struct.unpack(">hhi", frame[:8])
                        body = versions(correlation) if api_key == 18 else self.answer(
                            correlation)
                        conn.sendall(SIZE.pack(len(body)) + body)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def encode(api_key: int, version: int, correlation: int, **values: Any) -> bytes:
    cls = load_response_schema(api_key, version)
    out = io.BytesIO()
    entity_writer(cls.__header_schema__)(out, cls.__header_schema__(correlation_id=correlation))
    entity_writer(cls)(out, cls(**values))
    return out.getvalue()


def versions(correlation: int) -> bytes:
    import sys
    m = sys.modules[load_response_schema(18, 3).__module__]
    return encode(18, 3, correlation, error_code=ErrorCode.none, throttle_time=timedelta(0),
                  api_keys=(m.ApiVersion(api_key=18, min_version=0, max_version=3),
                            m.ApiVersion(api_key=3, min_version=0, max_version=12)))


@pytest.fixture
def fake() -> Iterator[Callable[[Callable[[int], bytes]], FakeBroker]]:
    made: list[FakeBroker] = []

    def make(answer: Callable[[int], bytes]) -> FakeBroker:
        made.append(FakeBroker(answer))
        return made[-1]

    yield make
    for broker in made:
        broker.close()


def test_a_count_larger_than_the_frame_is_one_line(
        fake: Callable[[Callable[[int], bytes]], FakeBroker]) -> None:
    def hostile(correlation: int) -> bytes:
        # Metadata v12: header v1 (correlation, no tags), throttle, then the brokers' compact
        # array claiming 268 million entries in a frame of a few bytes
        return struct.pack(">ib", correlation, 0) + struct.pack(">i", 0) + bytes(
            [0xF0, 0xFF, 0xFF, 0x7F])

    broker = fake(hostile)
    with AdminClient(f"127.0.0.1:{broker.port}", timeout=5) as admin, \
            pytest.raises(AdminError) as raised:
        admin.topics(["t"])
    message = str(raised.value)
    assert message.startswith(f"the broker at 127.0.0.1:{broker.port} sent an answer that "
                              "cannot be used: cannot read MetadataResponse"), message
    assert "\n" not in message


def metadata_answer(replicas: tuple[int, ...], brokers: tuple[int, ...] = (1,)
                    ) -> Callable[[int], bytes]:
    import sys
    m = sys.modules[load_response_schema(3, 12).__module__]

    def answer(correlation: int) -> bytes:
        return encode(3, 12, correlation, throttle_time=timedelta(0), cluster_id="c",
                      controller_id=1, brokers=tuple(
                          m.MetadataResponseBroker(node_id=b, host="127.0.0.1", port=9092,
                                                   rack=None) for b in brokers),
                      topics=(m.MetadataResponseTopic(
                          error_code=ErrorCode.none, name="t", topic_id=None, is_internal=False,
                          topic_authorized_operations=-2147483648,
                          partitions=(m.MetadataResponsePartition(
                              error_code=ErrorCode.none, partition_index=0, leader_id=replicas[0],
                              leader_epoch=0, replica_nodes=replicas, isr_nodes=replicas,
                              offline_replicas=()),)),))

    return answer


def test_a_replica_list_naming_a_broker_twice_is_one_line(
        fake: Callable[[Callable[[int], bytes]], FakeBroker]) -> None:
    broker = fake(metadata_answer((1, 2, 1)))
    with AdminClient(f"127.0.0.1:{broker.port}", timeout=5) as admin, \
            pytest.raises(AdminError) as raised:
        admin.topics()
    assert str(raised.value) == (f"the broker at 127.0.0.1:{broker.port}: Metadata answered "
                                 "partition t-0 with a replica list naming broker 1 twice")


def test_a_broker_listed_twice_is_one_line_and_a_sane_answer_is_read(
        fake: Callable[[Callable[[int], bytes]], FakeBroker]) -> None:
    broker = fake(metadata_answer((1,), brokers=(1, 1)))
    with AdminClient(f"127.0.0.1:{broker.port}", timeout=5) as admin, \
            pytest.raises(AdminError, match="Metadata answered broker 1 twice$"):
        admin.describe_cluster()
    sane = fake(metadata_answer((1,)))
    with AdminClient(f"127.0.0.1:{sane.port}", timeout=5) as admin:
        # no DescribeCluster served: Metadata's answer
        info = admin.describe_cluster()
        assert (info.cluster_id, info.controller_id, [b.id for b in info.brokers]) == (
            "c", 1, [1])
        assert admin.topics()["t"].partitions[0].replicas == (1,)


def test_an_unreadable_or_invalid_client_properties_file_names_the_file_and_key(
        tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    with pytest.raises(AdminError, match=f"^cannot read the client properties {missing}: "):
        AdminClient.from_command_config("127.0.0.1:9092", str(missing))
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   'sasl.jaas.config=ScramLoginModule required username="a" '
                   'password="hunter2-secret"\nssl.keystore.type=JKS\n'
                   "ssl.keystore.location=/x.jks\n")
    with pytest.raises(AdminError) as raised:
        AdminClient.from_command_config("127.0.0.1:9092", str(bad))
    assert str(raised.value).startswith(f"client properties {bad}: ssl.keystore.type")
    assert "hunter2" not in str(raised.value)
    odd = tmp_path / "odd.properties"
    odd.write_text("security.protocol=SOMETHING\n")
    with pytest.raises(AdminError, match="security.protocol"):
        AdminClient.from_command_config("127.0.0.1:9092", str(odd))
    plain = AdminClient.from_command_config("127.0.0.1:9092", None, timeout=3)
    assert repr(plain) == "AdminClient(127.0.0.1:9092, PLAINTEXT)"
