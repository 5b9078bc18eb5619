"""A participant whose broker id is still registered by another session (its own previous run,
killed a moment ago) waits for that registration to expire, saying so once, then registers; one
still there after the session timeout and a margin fails as before (``BrokerIdInUse``). On the
memory coordinator; tests/broker/operations/test_process.py runs broker processes on ZooKeeper and etcd."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest

from coordinator.metadata import BrokerIdInUse
from statemachines.participant import Participant, registration_wait
from tests.recording_broker import RecordingBroker
from tests.waiting import wait_until

SESSION = 0.5
WAIT_LINE = "is still registered by session"


def participant(url: str) -> Participant:
    return Participant(url, 1, handler=RecordingBroker, threaded=False,
                       connect_options={"session_timeout": SESSION})


def wait_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if WAIT_LINE in r.getMessage()]


@pytest.fixture
def url() -> str:
    return f"memory://registration-{uuid.uuid4().hex[:12]}"


def test_a_broker_started_again_waits_for_its_killed_runs_registration(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    old = participant(url).start()
    old_epoch = old.broker_epoch
    assert old_epoch is not None
    old.coordinator.suspend()  # type: ignore[attr-defined]  # killed: the session outlives it
    new = participant(url)
    try:
        with caplog.at_level(logging.INFO, logger="statemachines.participant"):
            new.start()
        stat = new.coordinator.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == new.coordinator.session_id
        assert new.broker_epoch is not None and new.broker_epoch > old_epoch
        (line,) = wait_lines(caplog)
        assert f"waiting up to {registration_wait(SESSION):.0f} s" in line
    finally:
        new.close()
        old.close()


def test_a_registration_that_stays_fails_after_the_wait(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    live = participant(url).start()  # another broker with the same id, alive
    new = participant(url)
    try:
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="statemachines.participant"), \
                pytest.raises(BrokerIdInUse, match="already registered by another session"):
            new.start()
        assert time.monotonic() - began >= registration_wait(SESSION)
        assert len(wait_lines(caplog)) == 1
        stat = live.coordinator.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == live.coordinator.session_id
    finally:
        new.close()
        live.close()


def test_closing_ends_the_wait(url: str, caplog: pytest.LogCaptureFixture) -> None:
    live = participant(url).start()
    new = participant(url)
    failed: list[BaseException] = []

    def start() -> None:
        try:
            new.start()
        except BrokerIdInUse as exc:
            failed.append(exc)

    with caplog.at_level(logging.INFO, logger="statemachines.participant"):
        starting = threading.Thread(target=start)
        began = time.monotonic()
        starting.start()
        wait_until(lambda: wait_lines(caplog), timeout=10, message="the wait line")
        new.close()
        starting.join(10)
    try:
        assert not starting.is_alive() and len(failed) == 1
        assert time.monotonic() - began < registration_wait(SESSION)
    finally:
        live.close()
