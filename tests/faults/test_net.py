"""Hosts in network namespaces and the link faults between them (tests/faults/net.py), on real
namespaces, veth pairs, a bridge and tc filters: what each fault stops, that heal restores it,
and that nothing is left behind."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.faults.net import Host, Network, NetworkError, namespaces, unavailable_reason
from tests.servers import unavailable

pytestmark = pytest.mark.processes  # ip netns and the processes in the namespaces

ECHO_PORT = 7000
ECHO = f"""
import socket, threading
def echo(c):
    try:
        while data := c.recv(4096):
            c.sendall(data)
    except OSError:
        pass
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {ECHO_PORT}))
s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"""


@pytest.fixture
def net() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    with Network() as network:
        yield network


def echo_server(host: Host) -> None:
    process = host.popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"listening"


def round_trip(source: Host, target: Host, timeout: float = 1.0) -> float:
    """Connect from ``source`` to ``target``'s echo server and echo one message: seconds."""
    def inside() -> float:
        start = time.monotonic()
        with socket.create_connection((target.address, ECHO_PORT), timeout=timeout) as conn:
            conn.sendall(b"ping")
            assert conn.recv(16) == b"ping"
        return time.monotonic() - start
    return source.call(inside)


def reaches(source: Host, target: Host, timeout: float = 0.4) -> bool:
    try:
        round_trip(source, target, timeout)
    except OSError:
        return False
    return True


def test_hosts_talk_and_a_cut_stops_both_ways_until_healed(net: Network) -> None:
    a, b, c = net.add_host("a"), net.add_host("b"), net.add_host("c")
    for host in (a, b, c):
        echo_server(host)
    assert a.address != b.address
    links = a.run(["ip", "-o", "addr", "show", "dev", "eth0"], capture_output=True, text=True)
    assert f"inet {a.address}/24" in links.stdout and "inet6" not in links.stdout
    assert reaches(a, b) and reaches(b, a)
    cut = net.cut(a, b)
    assert not reaches(a, b) and not reaches(b, a)
    assert reaches(a, c) and reaches(b, c) and reaches(c, a)
    cut.heal()
    cut.heal()
    assert reaches(a, b) and reaches(b, a)
    assert net.faults == []


def test_a_cut_silently_loses_packets_rather_than_refusing_them(net: Network) -> None:
    a, b = net.add_host("a"), net.add_host("b")
    echo_server(b)
    with net.cut(a, b):
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            round_trip(a, b, timeout=0.5)
        assert time.monotonic() - start >= 0.45


def test_one_way_drop_blocks_tcp_both_ways_but_not_datagrams_the_other_way(
        net: Network) -> None:
    a, b = net.add_host("a"), net.add_host("b")
    echo_server(a)
    echo_server(b)
    drop = net.drop(a, b)
    assert not reaches(a, b)
    assert not reaches(b, a)       # b's SYN reaches a; a's SYN-ACK is lost

    def listen() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((a.address, 7001))
        s.settimeout(2)
        return s

    def send() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"hello", (a.address, 7001))

    receiver = a.call(listen)
    with receiver:
        b.call(send)
        assert receiver.recv(16) == b"hello"
    drop.heal()
    assert reaches(a, b) and reaches(b, a)


def test_delay_adds_latency_one_way(net: Network) -> None:
    a, b = net.add_host("a"), net.add_host("b")
    echo_server(a)
    echo_server(b)
    # Without the delay a round trip takes far less than with it (the best of three, so that a
    # busy machine's one slow moment does not count).
    assert min(round_trip(a, b) for _ in range(3)) < 0.25
    with net.delay(a, b, 150, jitter_ms=10) as slow:
        # The SYN and the message each wait ~150 ms on the way from a to b.
        assert round_trip(a, b, timeout=3) >= 0.25
        assert round_trip(b, a, timeout=3) >= 0.25   # b's packets wait for a's answers
        assert "dly" in a.run(["ip", "link"], capture_output=True, text=True).stdout
    assert min(round_trip(a, b) for _ in range(3)) < 0.25
    assert all(relay.poll() is not None for relay in slow.relays)
    assert "dly" not in a.run(["ip", "link"], capture_output=True, text=True).stdout
    with pytest.raises(NetworkError):
        net.delay(a, b, -1)
    with net.delay(a, "b", 100, both_ways=True) as slow:
        assert len(slow.relays) == 2
        assert round_trip(b, a, timeout=3) >= 0.35   # SYN, SYN-ACK, message, echo: 4 x 100 ms
    with pytest.raises(NetworkError, match="no host"):
        net.delay(a, "nobody", 1)


def test_isolate_and_partition(net: Network) -> None:
    a, b, c, d = (net.add_host(name) for name in "abcd")
    for host in (a, b, c, d):
        echo_server(host)
    with net.isolate(a):
        late = net.add_host("e")
        echo_server(late)
        for other in (b, c, d, late):
            assert not reaches(a, other) and not reaches(other, a)
        assert reaches(b, c) and reaches(late, d)
    assert reaches(a, b) and reaches(b, a)
    split = net.partition([a, b], [c])
    assert reaches(a, b)
    assert not reaches(a, c) and not reaches(c, b)
    assert reaches(d, a) and reaches(d, c)
    net.heal_all()
    assert split.healed and reaches(a, c) and reaches(c, b)
    with pytest.raises(NetworkError):
        net.partition([a], [a, b])


def test_reset_aborts_established_connections(net: Network) -> None:
    a, b = net.add_host("a"), net.add_host("b")
    echo_server(b)
    conn = a.call(socket.create_connection, (b.address, ECHO_PORT), 1.0)
    with conn:
        conn.sendall(b"x")
        assert conn.recv(4) == b"x"
        assert net.reset(a, b) >= 1   # b's end may be gone with a's RST
        with pytest.raises(OSError):
            conn.sendall(b"y")
            if not conn.recv(4):
                raise ConnectionResetError("closed")
    assert reaches(a, b)


def test_close_removes_every_namespace_and_two_networks_do_not_interfere() -> None:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    before = set(namespaces())
    with Network() as one, Network() as two:
        assert one.subnet != two.subnet
        a1, b1 = one.add_host("a"), one.add_host("b")
        a2, b2 = two.add_host("a"), two.add_host("b")
        for host in (b1, b2):
            echo_server(host)
        created = set(one.namespaces()) | set(two.namespaces())
        assert created <= set(namespaces())
        with one.cut(a1, b1):
            assert not reaches(a1, b1)
            assert reaches(a2, b2)
        assert not reaches(a1, b2)   # separate switches
        one.delay(a1, b1, 10)        # left in place: close heals it
        two.isolate(a2)
    assert set(namespaces()) == before
    assert not created & set(namespaces())


def test_a_failure_inside_the_network_still_removes_it() -> None:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    before = set(namespaces())
    with pytest.raises(NetworkError, match="exists"), Network() as net:
        net.add_host("a")
        net.add_host("a")
    assert set(namespaces()) == before


def test_a_network_left_by_a_killed_process_is_removed_by_the_next_one() -> None:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    owner = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from tests.faults.net import Network\n"
         "net = Network()\n"
         "net.add_host('a')\n"
         "print(' '.join(net.namespaces()), flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    left = owner.stdout.readline().split()
    owner.kill()
    owner.wait(10)
    assert len(left) == 2 and set(left) <= set(namespaces())
    with Network() as net:
        # The new network may take the freed number, and so the switch's name.
        assert not (set(left) - {net.switch}) & set(namespaces())
        assert any(name.endswith("-a") for name in left)
