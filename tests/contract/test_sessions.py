"""Session states, listeners, ephemerals on expiry, and connecting."""

from __future__ import annotations

import io
import time

import pytest

import coordinator
from coordinator import (
    ChildrenEvent,
    ConnectionFailed,
    Coordinator,
    CoordinatorError,
    InvalidURL,
    SessionState,
)
from partctl.cli import main
from tests.proxy import SilentServer
from tests.waiting import Recorder, wait_until


def test_connected_after_connect(client: Coordinator) -> None:
    assert client.state is SessionState.CONNECTED
    assert client.session_id != 0


def test_ephemeral_vanishes_on_expiry_and_parent_watcher_sees_it(backend) -> None:  # noqa: ANN001
    owner = backend.connect()
    watcher = backend.connect()
    owner.create("/brokers")
    owner.create("/brokers/1", b"{}", ephemeral=True)
    seen: Recorder[ChildrenEvent] = Recorder()
    watcher.watch_children("/brokers", seen)
    seen.wait_for(lambda ev: ev and ev[-1].children == ["1"])
    states: Recorder[SessionState] = Recorder()
    owner.add_listener(states)
    old_session = owner.session_id

    backend.expire(owner)

    seen.wait_for(lambda ev: ev[-1].children == [], timeout=20, message="ephemeral gone")
    assert watcher.exists("/brokers/1") is None
    states.wait_for(lambda s: SessionState.LOST in s, timeout=20, message="LOST")
    states.wait_for(lambda s: s[-1] is SessionState.CONNECTED, timeout=20,
                    message="reconnected with a new session")
    assert owner.session_id != old_session
    owner.create("/brokers/1", b"{}", ephemeral=True)  # usable again, new session owns it
    stat = watcher.exists("/brokers/1")
    assert stat is not None and stat.ephemeral_owner == owner.session_id


def test_connection_loss_suspends_then_reconnects_same_session(backend) -> None:  # noqa: ANN001
    client = backend.connect(proxied=True, session_timeout=10.0)
    client.create("/keep", ephemeral=True)
    session = client.session_id
    states: Recorder[SessionState] = Recorder()
    client.add_listener(states)
    backend.drop(client, down_for=1.0)
    states.wait_for(lambda s: SessionState.SUSPENDED in s, timeout=10, message="SUSPENDED")
    states.wait_for(lambda s: s[-1] is SessionState.CONNECTED, timeout=20, message="CONNECTED")
    assert SessionState.LOST not in states.items
    assert client.session_id == session
    wait_until(lambda: client.exists("/keep") is not None, timeout=10)


def test_close_reports_closed_and_removes_ephemerals(backend) -> None:  # noqa: ANN001
    a, b = backend.connect(), backend.connect()
    a.create("/mine", ephemeral=True)
    states: Recorder[SessionState] = Recorder()
    a.add_listener(states)
    a.close()
    assert states.items[-1:] == [SessionState.CLOSED] or states.wait_count(1)
    assert a.state is SessionState.CLOSED
    assert b.exists("/mine") is None


@pytest.mark.parametrize("url", [
    "nosuch://h:1",
    "zookeeper//missing-colon",
    "etcd://host:notaport",
    "memory://",
    "zookeeper://h:1,,h2:2",
    "",
])
def test_bad_urls_raise_invalid_url(url: str) -> None:
    with pytest.raises(InvalidURL):
        coordinator.connect(url)


def test_unreachable_server_fails_fast_with_one_error(network_backend) -> None:  # noqa: ANN001
    url = network_backend.unreachable_url()
    start = time.monotonic()
    with pytest.raises(ConnectionFailed) as info:
        coordinator.connect(url, timeout=1.5)
    assert time.monotonic() - start < 8
    assert isinstance(info.value, CoordinatorError)
    assert "127.0.0.1" in str(info.value)


@pytest.mark.parametrize("timeout", [1.0, 3.0])
def test_a_server_that_never_answers_fails_within_the_timeout(network_backend, timeout: float
                                                              ) -> None:  # noqa: ANN001
    """A listener that accepts and never answers: the error comes at the connect timeout (a
    generous bound, as a behaviour check) and names it."""
    silent = SilentServer()
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionFailed) as info:
            coordinator.connect(f"{network_backend.name}://{silent.address}/x", timeout=timeout)
        assert time.monotonic() - start < timeout + 3
        assert f"within {timeout:g}s" in str(info.value) and silent.address in str(info.value)
    finally:
        silent.close()


def test_the_cli_honours_its_connect_timeout(network_backend) -> None:  # noqa: ANN001
    silent = SilentServer()
    try:
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        code = main(["controller", "status", "--timeout", "2", "--coordinator",
                     f"{network_backend.name}://{silent.address}"], out=out, err=err)
        assert time.monotonic() - start < 2 + 3
        assert code == 1 and err.getvalue().startswith("partctl: error: could not ")
        assert "within 2s" in err.getvalue() and err.getvalue().count("\n") == 1
    finally:
        silent.close()


def test_failover_to_the_next_host(network_backend) -> None:  # noqa: ANN001
    url = network_backend.failover_url()
    c = coordinator.connect(url, timeout=10)
    try:
        c.create("/via-failover", b"ok")
        assert c.get("/via-failover")[0] == b"ok"
    finally:
        c.close()
