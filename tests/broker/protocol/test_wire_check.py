"""The walk of a request against its schema before kio's reader (kafkaclient.wire_check): what a
well-formed request of every served api and version passes unchanged, what a lying length, a
null where none is allowed or an unknown tagged field becomes. kio's native reader aborts the
process on the length lies these tests send, so the cases that could reach it run in a child
process: a miss there is a failed test, not a lost test run."""

from __future__ import annotations

import dataclasses
import io
import random
import struct
import subprocess
import sys
import textwrap

import pytest

from broker.apis import controller_registry, default_registry
from broker.wire import FrameError, parse_header, parse_request, request_class
from kafkaclient.wire_check import check_frame
from tests.broker.kio_samples import sample, served_requests
from tests.broker.wire_client import encode_request

REGISTRY = default_registry()
CONTROLLER_REGISTRY = controller_registry()
SERVED = sorted({(k, v) for k, v, _ in served_requests(REGISTRY)}
                | {(k, v) for k, v, _ in served_requests(CONTROLLER_REGISTRY)})


def frame_of(body: object, correlation_id: int = 7) -> bytes:
    """The request without its size prefix, as the server hands it to the parser."""
    return encode_request(body, correlation_id)[4:]


@pytest.mark.parametrize(("key", "version"), SERVED, ids=[f"{k}v{v}" for k, v in SERVED])
def test_every_served_request_passes_unchanged_and_parses_as_it_was_written(
        key: int, version: int) -> None:
    cls = request_class(key, version)
    body = sample(cls, random.Random(key * 100 + version))
    frame = frame_of(body)
    assert check_frame(frame, cls, cls.__header_schema__) is frame
    header, parsed = parse_request(frame, key, version)
    assert parsed == body and header.correlation_id == 7


METADATA_V9_HEADER = struct.pack(">hhih", 3, 9, 1, 1) + b"x" + b"\x00"


@pytest.mark.parametrize(("frame", "key", "version", "said"), [
    pytest.param(METADATA_V9_HEADER + b"\xff\xff\xff\xff\x0f", 3, 9, "4294967294 elements",
                 id="metadata-v9-compact-array-2^32-1"),
    pytest.param(struct.pack(">hhih", 44, 1, 1, 1) + b"x\x00" + b"\xff\xff\xff\xff\x0f",
                 44, 1, "elements claimed", id="incremental-alter-configs-v1-2^32-1"),
    pytest.param(struct.pack(">hhih", 44, 0, 1, 1) + b"x" + b"\x7f\xff\xff\xff", 44, 0,
                 "2147483647 elements", id="incremental-alter-configs-v0-2^31-1"),
    pytest.param(struct.pack(">hhih", 3, 0, 1, 1) + b"x" + b"\xff\xff\xff\xff", 3, 0,
                 "null in a non-nullable", id="metadata-v0-null-topics"),
    pytest.param(struct.pack(">hhih", 3, 0, 1, 1) + b"x" + struct.pack(">ih", 1, 0x7FFF)
                 + b"abc", 3, 0, "needs 32767 bytes", id="string-longer-than-what-remains"),
    pytest.param(struct.pack(">hhih", 3, 9, 1, 1) + b"x" + b"\x00" + b"\x02\x80\x80\x80\x80\x80",
                 3, 9, "varint", id="a-six-byte-varint"),
    pytest.param(METADATA_V9_HEADER + b"\x02\x02t\x00\x01\x00\x00\x01\x05\x09ab", 3, 9,
                 "tag 5", id="a-tag-larger-than-what-remains"),
    pytest.param(struct.pack(">hhih", 3, 9, 1, 0x7FFF), 3, 9, "client_id",
                 id="client-id-past-the-end"),
])
@pytest.mark.processes
def test_length_lies_and_nulls_are_refused_before_kio_reads_them(
        frame: bytes, key: int, version: int, said: str) -> None:
    assert said in refusal(frame, key, version)


INCREMENTAL_V1_HEADER = struct.pack(">hhih", 44, 1, 1, 1) + b"x\x00"


@pytest.mark.parametrize(("body", "said"), [
    pytest.param(b"\x00", "null in a non-nullable", id="a-one-byte-null"),
    pytest.param(b"\x7f\x00\x00\x00", "126 elements claimed", id="a-one-byte-count-too-large"),
    pytest.param(b"", "runs past the end", id="no-byte-for-the-length"),
    pytest.param(b"\x02" + b"\x02\x06ab", "needs 5 bytes", id="a-name-cut-short"),
])
@pytest.mark.processes
def test_one_byte_lengths_are_checked_as_longer_ones(body: bytes, said: str) -> None:
    """The walk reads a one-byte compact length or count on a short path (most of them are
    one byte): a null where none is allowed, a count the bytes cannot hold and a frame that
    ends first are refused on it as on the long one."""
    assert said in refusal(INCREMENTAL_V1_HEADER + body, 44, 1)


PARSE_ONE = textwrap.dedent("""
    import sys
    from broker.wire import FrameError, parse_request
    try:
        parse_request(bytes.fromhex(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
    except FrameError as exc:
        print(exc)
    else:
        print("parsed")
""")


def refusal(frame: bytes, key: int, version: int) -> str:
    """What parsing ``frame`` says, in a child process (kio aborts a process on a length
    lie that reaches it: that must fail this test, not end the test run)."""
    done = subprocess.run([sys.executable, "-c", PARSE_ONE, frame.hex(), str(key),
                           str(version)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_string_over_kafkas_limit_is_refused_though_the_bytes_are_there() -> None:
    name = b"a" * 0x8000
    frame = METADATA_V9_HEADER + b"\x02" + b"\x81\x80\x02" + name + b"\x00\x01\x00\x00\x00"
    with pytest.raises(FrameError, match="at most 32767"):
        parse_request(frame, 3, 9)


def with_tags(tags: dict[int, bytes]) -> bytes:
    out = io.BytesIO()
    out.write(bytes([len(tags)]))
    for tag, value in sorted(tags.items()):
        out.write(bytes([tag, len(value)]) + value)
    return out.getvalue()


def test_unknown_tagged_fields_are_skipped_at_every_level_as_kafka_skips_them() -> None:
    plain = METADATA_V9_HEADER + b"\x02\x02t\x00" + b"\x01\x00\x00" + b"\x00"
    _, expected = parse_request(plain, 3, 9)
    tagged = (METADATA_V9_HEADER + b"\x02\x02t" + with_tags({9: b"zz"})  # in a topic
              + b"\x01\x00\x00" + with_tags({5: b"ab", 70: b""}))         # in the request
    _, parsed = parse_request(tagged, 3, 9)
    assert parsed == expected
    header = struct.pack(">hhih", 3, 9, 1, 1) + b"x" + with_tags({3: b"q"})
    assert parse_header(header, request_class(3, 9).__header_schema__).client_id == "x"


def test_a_known_tagged_field_keeps_its_value_while_unknown_ones_inside_it_go() -> None:
    """Fetch v12's ``cluster_id`` is tag 0 of the request; a known tag is kept byte for byte
    beside an unknown one."""
    cls = request_class(1, 12)
    body = sample(cls, random.Random(3))
    body = dataclasses.replace(body, cluster_id="the-cluster")
    frame = frame_of(body)
    # the request's tagged fields close the frame: one tag (0, 12 bytes, a compact string)
    known = b"\x01" + b"\x00\x0c\x0cthe-cluster"
    assert frame.endswith(known)
    rewritten = frame[:-len(known)] + b"\x02" + known[1:] + b"\x02\x03abc"
    _, parsed = parse_request(rewritten, 1, 12)
    assert parsed == body


HOSTILE = textwrap.dedent("""
    import random, struct, sys
    from broker.apis import default_registry
    from broker.wire import FrameError, parse_request, request_class
    from tests.broker.kio_samples import sample, served_requests
    from tests.broker.wire_client import encode_request

    LIES = [b"\\xff\\xff\\xff\\xff", b"\\x7f\\xff\\xff\\xff", b"\\xff\\xff\\xff\\xff\\x0f",
            b"\\xfe\\xff\\xff\\xff\\x0f", b"\\x7f\\xff", b"\\xff\\xff"]
    refused = parsed = 0
    for key, version, cls in served_requests(default_registry()):
        frame = encode_request(sample(cls, random.Random(key + version)), 1)[4:]
        for at in range(8, len(frame)):
            for lie in LIES:
                for mutated in (frame[:at] + lie + frame[at + len(lie):],
                                frame[:at] + lie + frame[at:]):
                    try:
                        parse_request(mutated, key, version)
                        parsed += 1
                    except FrameError:
                        refused += 1
    print(refused, parsed)
""")


@pytest.mark.processes
def test_a_lying_length_at_any_position_of_any_served_request_never_reaches_kio() -> None:
    """Every position of a populated request of every served api and version overwritten
    with, or preceded by, a huge or negative length: each parses or is a FrameError, and the
    process lives (kio alone aborts on the first of them)."""
    done = subprocess.run([sys.executable, "-c", HOSTILE], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    refused, parsed = map(int, done.stdout.split())
    assert refused > 10_000 and parsed > 0


PEER_LIES = textwrap.dedent("""
    import socket, struct, threading
    from kafkaclient.connection import BrokerUnreachable, KafkaConnection
    from kafkaclient.groups import GroupAdminError, decode_assignment

    # a member's stored assignment (a client's SyncGroup bytes) claiming 2^31-1 topics
    try:
        decode_assignment(struct.pack(">hi", 3, 0x7FFFFFFF))
    except GroupAdminError as exc:
        print("assignment:", exc)

    # a peer that answers ApiVersions (v3, flexible) with an api array of 2^32-2 entries
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        head = conn.recv(4)
        (size,) = struct.unpack(">i", head)
        request = b""
        while len(request) < size:
            request += conn.recv(size - len(request))
        correlation = request[4:8]
        body = correlation + struct.pack(">h", 0) + b"\\xff\\xff\\xff\\xff\\x0f"
        conn.sendall(struct.pack(">i", len(body)) + body)
        conn.recv(1)
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        KafkaConnection("127.0.0.1", server.getsockname()[1], client_id="t", timeout=10).versions()
    except BrokerUnreachable as exc:
        print("peer:", exc)
""")


@pytest.mark.processes
def test_what_peers_answer_and_clients_stored_is_walked_before_kio_reads_it() -> None:
    """A broker's answer to our client and a member assignment stored from a client's
    SyncGroup are read by kio too: a lying count there is refused, not an abort."""
    done = subprocess.run([sys.executable, "-c", PEER_LIES], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "assignment: cannot read a member assignment" in done.stdout
    assert "elements claimed" in done.stdout.split("peer:")[1]
