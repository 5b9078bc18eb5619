"""The transactional workload's watchdog (tests/faults/txn_workload.py): a session whose call
runs past its timeout and the grace is given up, the transaction it was ending recorded once
(by the watchdog, ``aborted`` before a commit was asked, ``unknown`` after), its successor
started, and the stuck thread, when its call returns, records nothing and ends. The sessions
run in a real client network namespace, as the workload's do; the stuck call is a wait the
test ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.faults import txn_workload
from tests.faults.history import History, TxnOutcome, read_history
from tests.faults.net import Network, unavailable_reason
from tests.faults.txn_workload import TxnWorkload, _Abandoned, _Session
from tests.servers import unavailable
from tests.waiting import wait_until

pytestmark = pytest.mark.processes  # ip netns


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    net = Network()
    try:
        net.add_host("client")
        yield net
    finally:
        net.close()


def _stuck_session(workload: TxnWorkload, kind: str, call: str, asked_commit: bool,
                   release: threading.Event, seen: list[BaseException]) -> _Session:
    """A session, in its own thread started as the workload starts its sessions, that ends
    transaction 1 and waits in ``call`` until ``release``; what it raises goes to ``seen``."""
    made: list[_Session] = []

    def body(index: int) -> None:
        session = workload._session(kind, "ctp" if kind == "step" else "w", index)
        made.append(session)
        op = workload.history.txn_attempt(session.name, [("ring", 0, "v")])
        with session.lock:
            session.op, session.asked_commit = op, asked_commit
        try:
            with session.waiting(call, 0.1):
                release.wait(30)
            workload._record(session, txn_workload.COMMITTED, None)
        except _Abandoned as exc:
            seen.append(exc)

    workload._start(kind, "stuck", body, 1)
    wait_until(lambda: made and made[0].call is not None, timeout=10, interval=0.01,
               message="the session's call")
    return made[0]


@pytest.mark.parametrize(("call", "asked_commit", "outcome"), [
    ("send_offsets_to_transaction", False, txn_workload.ABORTED),
    ("commit_transaction", True, txn_workload.UNKNOWN),
])
def test_a_session_stuck_past_its_timeout_is_given_up_and_followed(
        network: Network, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str,
        asked_commit: bool, outcome: str) -> None:
    monkeypatch.setattr(txn_workload, "STALL_GRACE", 0.2)
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        cluster = SimpleNamespace(client=network.hosts["client"], bootstrap="127.0.0.1:9")
        workload = TxnWorkload(cluster, history, say=lambda line: None)  # type: ignore[arg-type]
        workload._stop_steps.set()  # the successor's session loop ends at once
        workload._stop_writing.set()
        release = threading.Event()
        seen: list[BaseException] = []
        session = _stuck_session(workload, "step", call, asked_commit, release, seen)
        stuck = next(t for t in workload._threads["step"])

        workload._give_up_if_stuck(session)  # not yet past its deadline: left alone
        assert not session.abandoned and workload.stats.abandoned == 0

        wait_until(lambda: (workload._give_up_if_stuck(session), session.abandoned)[1],
                   timeout=10, interval=0.05, message="the session given up")
        assert workload.stats.abandoned == 1
        assert getattr(workload.stats, outcome) == 1
        # the stuck thread is no longer the workload's; its successor is, and has ended
        assert stuck not in workload._threads["step"] and stuck.is_alive()
        successor = workload._threads["step"][0]
        assert successor.name == "txn-ctp1+1"
        successor.join(10)
        assert not successor.is_alive()
        workload._join("step", 5.0)  # the stuck thread is not waited for, nor an error
        assert workload.errors == []

        release.set()  # the stuck call returns: its session records nothing more
        stuck.join(10)
        assert [type(e) for e in seen] == [_Abandoned]
        assert session.name not in workload._sessions
    outcomes = [e for e in read_history(path) if isinstance(e, TxnOutcome)]
    assert [(o.op, o.outcome) for o in outcomes] == [(1, outcome)]
    assert outcomes[0].error is not None and call in outcomes[0].error


def test_a_call_that_returns_in_time_is_left_alone(network: Network, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_workload, "STALL_GRACE", 30.0)
    with History(tmp_path / "history.jsonl") as history:
        cluster = SimpleNamespace(client=network.hosts["client"], bootstrap="127.0.0.1:9")
        workload = TxnWorkload(cluster, history, say=lambda line: None)  # type: ignore[arg-type]
        release = threading.Event()
        seen: list[BaseException] = []
        session = _stuck_session(workload, "write", "commit_transaction", True, release, seen)
        workload._give_up_if_stuck(session)
        release.set()
        workload._join("write", 10.0)
    assert not session.abandoned and seen == [] and workload.errors == []
    assert workload.stats.committed == 1 and workload.stats.abandoned == 0
