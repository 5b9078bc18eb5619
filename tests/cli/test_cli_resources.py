"""A command closes every coordinator session it opens, whichever way it ends: its result, a
user error, a bug (the internal-error line) or Ctrl-C. Run in-process, as an application or a
test calling main() does, where a session left open keeps its threads, its connection and its
ephemeral nodes until the process ends. On memory, ZooKeeper and etcd."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.base import Coordinator
from coordinator.codecs import TopicPartition
from coordinator.metadata import MetadataClient
from coordinator.model import SessionState
from partctl.cli import main
from statemachines.in_process import InProcessNetwork
from statemachines.participant import Participant
from tests.recording_broker import RecordingBroker
from tests.waiting import wait_until


@pytest.fixture(params=["memory", "zookeeper", "etcd"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Three participants on the backend, a controller among them, and a topic ``t``."""
    name = f"res{uuid.uuid4().hex[:10]}"
    if request.param == "memory":
        url = f"memory://{name}"
    else:
        server = request.getfixturevalue(f"{request.param}_server")
        url = f"{request.param}://{server.address}/{name}"
    network = InProcessNetwork()
    participants = [Participant(url, b, handler=RecordingBroker, rack=f"r{b % 2}",
                                network=network).start() for b in (1, 2, 3)]
    client = coordinator.connect(url)
    try:
        md = MetadataClient(client)
        wait_until(lambda: md.controller() is not None, timeout=15)
        Admin(client).create_topic("t", assignment={0: [1, 2], 1: [2, 3]})
        keys = [TopicPartition("t", p) for p in range(2)]
        wait_until(lambda: all(md.partition_states(keys).values()), timeout=15)
        yield url
    finally:
        client.close()
        for p in participants:
            p.close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Coordinator]:
    """Every session ``coordinator.connect`` opens from here on (the commands connect through
    it)."""
    sessions: list[Coordinator] = []
    real = coordinator.connect

    def tracking(*args: object, **kwargs: object) -> Coordinator:
        client = real(*args, **kwargs)
        sessions.append(client)
        return client

    monkeypatch.setattr(coordinator, "connect", tracking)
    return sessions


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def raising(exc: BaseException):  # noqa: ANN201
    def fail(*args: object, **kwargs: object) -> None:
        raise exc

    return fail


def test_no_session_outlives_its_command(url: str, opened: list[Coordinator], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_DEBUG", raising=False)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 9]}]}))
    c = ["--coordinator", url]
    commands: list[tuple[list[str], int]] = [
        (["topics", "create", *c, "--topic", "u", "--partitions", "2",
          "--replication-factor", "2"], 0),
        (["topics", "list", *c], 0),
        (["topics", "describe", *c], 0),
        (["controller", "status", *c], 0),
        (["elect", "preferred", *c, "--topic", "t"], 0),
        (["cluster", "snapshot", *c, "-o", str(tmp_path / "snap.json")], 0),
        (["reassign", "generate", *c, "-o", str(tmp_path / "gen.json")], 0),
        (["reassign", "execute", *c, "--reassignment-json-file", str(plan)], 0),
        (["reassign", "verify", *c, "--reassignment-json-file", str(plan)], 0),
        (["reassign", "cancel", *c, "--wait", "0"], 0),
        (["topics", "delete", *c, "--topic", "u"], 0),
        # user errors: the library's (raised with the session open) and the command's own
        (["topics", "create", *c, "--topic", "t", "--partitions", "1",
          "--replication-factor", "1"], 1),
        (["topics", "describe", *c, "--topic", "nope"], 1),
        (["elect", "preferred", *c, "--topic", "nope"], 1),
        (["reassign", "execute", *c, "--reassignment-json-file", str(bad_plan)], 1),
        (["topics", "create", *c, "--topic", "v", "--partitions", "1"], 1),
    ]
    for argv, status in commands:
        before = len(opened)
        code, _, err = run(*argv)
        assert code == status, (argv, err)
        assert len(opened) > before, argv  # it did connect
        assert all(s.state is SessionState.CLOSED for s in opened), argv

    # a bug and Ctrl-C in the middle of a command, its session open
    import rebalancer.execution as execution
    import rebalancer.verification as verification

    monkeypatch.setattr(verification, "verify_plan", raising(KeyError("replicas")))
    code, _, err = run("reassign", "verify", *c, "--reassignment-json-file", str(plan))
    assert code == 2 and err.startswith("partctl: internal error: KeyError"), err
    monkeypatch.setattr(verification, "cancel_reassignment", raising(KeyboardInterrupt()))
    assert run("reassign", "cancel", *c) == (130, "", "partctl: interrupted\n")
    monkeypatch.setattr(execution, "execute_plan", raising(KeyboardInterrupt()))
    code, out, err = run("reassign", "execute", *c, "--reassignment-json-file", str(plan))
    assert (code, err) == (130, "partctl: interrupted\n") and "Interrupted:" in out
    assert len(opened) == len(commands) + 3
    assert all(s.state is SessionState.CLOSED for s in opened)
