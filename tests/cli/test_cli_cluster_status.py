"""``partctl cluster status`` on a cluster in this process (three participants and their
controller on a memory coordinator): the counts, the brokers and a reassignment in progress as
the controller leaves them after a broker is gone; ``--watch`` redraws and Ctrl-C ends it with
status 0; an unreachable coordinator is one error line."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator

import pytest

from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from partctl.cli import main
from partctl.cluster_view import read_cluster
from partctl.commands import cluster as cluster_command
from tests.cli.memory_cluster import Cluster
from tests.waiting import wait_until


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    Admin(c.client).alter_topic_config("t", set={"min.insync.replicas": "2"})
    yield c
    c.close()


def lose_broker_3(c: Cluster) -> None:
    """Broker 3 goes away: the controller moves t-2's leadership to 1 and shrinks the ISRs of
    t-1 and t-2 to one replica, under their min ISR of 2."""
    c.participants[2].close()
    wait_until(lambda: read_cluster(c.md).under_replicated == 2, timeout=15,
               message="the ISRs without broker 3")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_view_after_a_broker_is_gone_with_a_reassignment_running(cluster: Cluster) -> None:
    # the recording brokers never replicate: broker 1, added to t-1, stays out of its ISR
    Admin(cluster.client).reassign({TopicPartition("t", 1): (1, 2)})
    wait_until(lambda: read_cluster(cluster.md).reassignments[0].started, timeout=15)
    lose_broker_3(cluster)
    view = read_cluster(cluster.md)
    assert (view.offline, view.under_replicated, view.under_min_isr) == (0, 2, 2)
    assert view.controller in (1, 2) and view.controller_epoch is not None
    assert [(b.id, b.rack, b.live) for b in view.brokers] == [
        (1, "r1", True), (2, "r0", True), (3, None, False)]
    t2 = view.partitions[2]
    assert (t2.leader, t2.isr, t2.preferred_not_leader) == (1, (1,), True)
    # t-2 led by 1, and t-1 still by 2 while its replicas, target first, start with 1
    assert view.leader_imbalance == 2
    (move,) = view.reassignments
    assert (move.partition, move.target, move.in_isr, move.started) == (1, (1, 2), 1, True)

    code, out, err = run("cluster", "status", "--coordinator", cluster.url)
    assert (code, err) == (0, "")
    assert "Controller broker" in out and "brokers 2 live of 3" in out
    assert "Offline partitions 0" in out and "Under-replicated 2" in out
    assert "Under min ISR 2" in out and "Leader imbalance 2" in out
    assert "Reassignments in progress (1)" in out and "t-1" in out and "1/2" in out
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]
    assert ["3", "-", "NO", "0", "2", "1/1 !", "-"] in rows  # its one partition is misled


def test_watch_redraws_until_ctrl_c(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 1:
            lose_broker_3(cluster)  # seen at the next redraw
            return
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster_command, "_pause", pause)
    code, out, err = run("cluster", "status", "--coordinator", cluster.url, "--watch", "0.5")
    assert (code, err, pauses) == (0, "", [0.5, 0.5])
    assert "Under-replicated 2" in out


def test_an_unreachable_coordinator_is_one_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        code, out, err = run("cluster", "status", "--coordinator",
                             f"zookeeper://127.0.0.1:{port}", "--timeout", "0.5", "--watch")
    assert (code, out) == (1, "")
    assert err == f"partctl: error: could not connect to ZooKeeper at 127.0.0.1:{port} within " \
                  f"0.5s\n"
