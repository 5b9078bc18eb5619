"""Three-node coordinators (coordinator.servers.start_zookeeper_ensemble / start_etcd_cluster):
partctl's coordinator client on the URL naming every member keeps working when one member dies,
leader or not, fails with a clear error while a majority is down, and finds its data again when
the majority comes back on its directories.

One ensemble of each kind serves the whole module (starting one takes 2-3 s); a test that kills
members brings them back before it ends, and each test starts from every member serving.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

import coordinator
from coordinator import servers
from coordinator.base import Coordinator
from coordinator.errors import ConnectionLoss, CoordinatorError
from coordinator.servers import LocalEnsemble, ServerStartError
from coordinator.url import parse
from tests.servers import start_ensemble

pytestmark = pytest.mark.servers

KINDS = ["zookeeper", "etcd"]
T = TypeVar("T")


@pytest.fixture(scope="module", params=KINDS)
def ensemble(request: pytest.FixtureRequest) -> Iterator[LocalEnsemble]:
    with start_ensemble(request.param) as started:
        yield started


@pytest.fixture
def members(ensemble: LocalEnsemble) -> Iterator[LocalEnsemble]:
    """The module's ensemble with every member serving, before and after the test."""
    for m in ensemble.members:
        m.resume()
        m.start()
    ensemble.wait_serving(30)
    yield ensemble
    for m in ensemble.members:
        m.resume()
        m.start()
    ensemble.wait_serving(30)


def connect(ensemble: LocalEnsemble, root: str, timeout: float = 3.0) -> Coordinator:
    return coordinator.connect(ensemble.url(root), timeout=timeout, session_timeout=20)


def eventually(action: Callable[[], T], within: float = 15.0) -> T:
    """``action()`` once it stops raising CoordinatorError (a client fails over to another member
    after the one it used died: the requests in between fail with ConnectionLoss)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return action()
        except CoordinatorError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_one_leader_and_a_url_naming_every_member(members: LocalEnsemble) -> None:
    roles = [m.role() for m in members.members]
    assert sorted(roles) == ["follower", "follower", "leader"]  # type: ignore[type-var]
    leader = members.leader()
    assert leader is not None and roles[leader.number - 1] == "leader"
    parsed = parse(members.url("/r"))
    assert parsed.scheme == members.kind and parsed.root == "/r"
    assert parsed.hosts == tuple((m.host, m.port) for m in members.members)
    assert len({m.port for m in members.members}) == 3
    assert all(m.pid is not None and m.running() for m in members.members)


def test_a_client_outlives_a_killed_member(members: LocalEnsemble) -> None:
    c = connect(members, "/one")
    try:
        c.create("/before", b"1", make_parents=True)
        for victim in members.members:  # whichever the client uses, one of them is it
            victim.kill()
            assert not victim.running() and victim.pid is None
            members.wait_serving(15)
            eventually(lambda v=victim: c.set("/before", str(v.number).encode()))
            assert eventually(lambda: c.get("/before"))[0] == str(victim.number).encode()
            victim.start()
            members.wait_serving(30, members=members.members)
    finally:
        c.close()


def test_a_killed_leader_is_replaced(members: LocalEnsemble) -> None:
    c = connect(members, "/leader")
    try:
        c.create("/x", b"0", make_parents=True)
        old = members.leader()
        assert old is not None
        old.kill()
        new = members.wait_serving(15)
        assert new is not old and new.role() == "leader"
        eventually(lambda: c.set("/x", b"1"))
        old.start()
        members.wait_serving(30, members=members.members)
        assert old.role() == "follower" and members.leader() is new
        assert eventually(lambda: c.get("/x"))[0] == b"1"
    finally:
        c.close()


@pytest.mark.parametrize("survivor", ["leader", "follower"])
def test_no_writes_without_a_majority_and_the_data_is_back_with_it(
        members: LocalEnsemble, survivor: str) -> None:
    """The member left alone is the old leader (a write to a lone etcd leader waits out its
    deadline: OperationTimeout) or a follower (refused at once); ZooKeeper's lone server drops
    its clients either way."""
    timeout = 2.0
    c = connect(members, f"/majority-{survivor}", timeout=timeout)
    try:
        c.create("/before", b"kept", make_parents=True)
        leader = members.leader()
        assert leader is not None
        left = leader if survivor == "leader" else members.followers()[0]
        down = [m for m in members.members if m is not left]
        for m in down:
            m.kill()
        started = time.monotonic()
        with pytest.raises(ConnectionLoss) as failed:
            c.create("/during", b"lost")
        elapsed = time.monotonic() - started
        # one request timeout per member the client may try in turn, and a little slack
        assert elapsed < 3 * timeout + 2, elapsed
        # ConnectionLoss says the coordinator is out of reach (and the outcome unknown: a
        # write that reached a lone leader may yet be committed when the majority returns);
        # its text names the member tried or the path
        message = str(failed.value)
        assert "/during" in message or any(m.address in message for m in members.members), \
            message
        # a lone etcd leader steps down once it has not heard from a quorum for an election
        # timeout (raft's check-quorum); a lone ZooKeeper server stops serving at once
        deadline = time.monotonic() + 5
        while members.leader() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert members.leader() is None
        for m in down:
            m.start()
        members.wait_serving(30, members=members.members)
        assert eventually(lambda: c.get("/before"))[0] == b"kept"
        eventually(lambda: c.create("/after", b"2"))
        fresh = connect(members, f"/majority-{survivor}")
        try:
            assert fresh.get("/before")[0] == b"kept" and fresh.get("/after")[0] == b"2"
        finally:
            fresh.close()
    finally:
        c.close()


def test_a_paused_member_is_not_serving_and_resumes(members: LocalEnsemble) -> None:
    member = next(m for m in members.members if m.role() == "follower")
    member.pause()
    try:
        assert member.running() and member.role() is None
        assert members.leader() is not None  # two of three still make a quorum
    finally:
        member.resume()
    members.wait_serving(15, members=members.members)
    assert member.role() == "follower"


@pytest.mark.parametrize("kind", KINDS)
def test_members_on_addresses_of_their_own_and_behind_a_prefix(kind: str) -> None:
    """``hosts``: each member binds to its own loopback address (where a harness would give it
    a network namespace's); ``prefixes``: its command runs behind the prefix, which execs it."""
    hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    prefixes = [["env", f"PARTCTL_ENSEMBLE_MEMBER={i}"] for i in (1, 2, 3)]
    with start_ensemble(kind, hosts=hosts, prefixes=prefixes) as e:
        assert [m.host for m in e.members] == hosts
        for m in e.members:
            assert m.pid is not None
            environ = Path(f"/proc/{m.pid}/environ").read_bytes().split(b"\0")
            assert f"PARTCTL_ENSEMBLE_MEMBER={m.number}".encode() in environ
            # bound to its own address, not to every one (read from the kernel's socket table:
            # a connection attempt to 127.0.0.1 can meet an unrelated listener or itself)
            assert _listening(m.pid, m.port) == {m.host}
        c = coordinator.connect(e.url("/hosts"), timeout=5)
        try:
            c.create("/a", b"1", make_parents=True)
            assert c.get("/a")[0] == b"1"
        finally:
            c.close()


def test_an_ensemble_that_does_not_serve_in_time_is_stopped(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match="did not serve with a leader within") as failed:
        servers.start_zookeeper_ensemble(directory=tmp_path, fsync=False, timeout=0.05)
    assert "--- member 3" in str(failed.value)  # every member's log tail
    assert (tmp_path / "zk1" / "data" / "myid").read_text() == "1\n"  # a named one is kept
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _runs_in(pid, tmp_path)]
    assert left == []


def _listening(pid: int, port: int) -> set[str]:
    """The IPv4 addresses on which process ``pid`` listens on ``port`` (v4-mapped IPv6 too, as
    a JVM binds), from /proc/net/tcp{,6} and the socket inodes among its descriptors."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] != "0A" or int(hex_port, 16) != port or fields[9] not in inodes:
                continue  # 0A: LISTEN
            found.add(socket.inet_ntoa(bytes.fromhex(address[-8:])[::-1]))
    return found


def _runs_in(pid: str, directory: Path) -> bool:
    try:
        return str(directory).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="2 hosts given for 3 members"):
        servers.start_zookeeper_ensemble(3, hosts=["127.0.0.1", "127.0.0.1"])
    with pytest.raises(ValueError, match="at least one member"):
        servers.start_etcd_cluster(0)
    with pytest.raises(ValueError, match="prefixes must be 3 argument lists"):
        servers.start_etcd_cluster(3, prefixes=["env", "env", "env"])
    with pytest.raises(ValueError, match="unknown server kind"):
        servers.start_ensemble("consul")  # type: ignore[arg-type]
