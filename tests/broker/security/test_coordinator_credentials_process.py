"""Broker processes on a locked-down ZooKeeper (issue 21, part 4): with the digest identity and
``zookeeper.set.acl`` from server.properties a broker serves and registers under secure ACLs; a
broker whose credentials are wrong exits with one clear error line, no traceback, no secret.
The broker's log directory is owner-only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.cluster import launch_broker
from tests.broker.processes import TEST_SETTINGS, coordinator_settings, start_broker
from tests.servers import Server

pytestmark = pytest.mark.servers

SECRET = "broker-zk-s3cret"
WRONG = "not-the-broker-password"


def _credentials(tmp_path: Path, name: str, password: str) -> str:
    path = tmp_path / f"{name}.password"
    path.write_text(password + "\n")
    return (f"zookeeper.digest.user=kafka\nzookeeper.digest.password.file={path}\n"
            "zookeeper.set.acl=true\n")


def test_a_broker_with_wrong_credentials_exits_with_one_clear_line(
        zookeeper_server: Server, tmp_path: Path) -> None:
    settings = coordinator_settings(zookeeper_server)
    good = start_broker(tmp_path / "b1", zookeeper_server, broker_id=1, settings=settings,
                        extra=_credentials(tmp_path, "good", SECRET))
    try:
        outsider = KazooClient(hosts=settings[1].removeprefix("zookeeper://"), timeout=10)
        outsider.start(timeout=10)
        try:
            acls, _ = outsider.get_acls("/brokers/ids/1")
            assert {(a.id.scheme, a.perms) for a in acls} == {("digest", 31), ("world", 1)}
        finally:
            outsider.stop()
            outsider.close()

        bad = launch_broker(tmp_path / "b2", 2, settings[1],
                            extra=TEST_SETTINGS + _credentials(tmp_path, "bad", WRONG))
        try:
            status = bad.wait(timeout=60)
        finally:
            bad.kill()
        log = bad.log()
        assert status == 1, log
        errors = [line for line in log.splitlines() if line.startswith("partctl: error:")]
        assert len(errors) == 1, log
        # refused at its first read of a creator-only node or its first write, whichever
        assert "not authorized (are the coordinator credentials right?)" in errors[0], errors[0]
        assert "Traceback" not in log and WRONG not in log and SECRET not in log
        assert good.running()
    finally:
        good.stop()
    assert SECRET not in good.log()
    logs = tmp_path / "b1" / "logs"  # created by the broker (stopped now: nothing changes)
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    for path in logs.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == 0o700 if path.is_dir() else mode & 0o077 == 0, (path, oct(mode))
