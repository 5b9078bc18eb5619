"""benchmarks/versus/rows.py's wait_led, the end of the controller and start steps, on three
real partctl brokers: each broker asked on its own, the step's figure the answer of the last
to show every partition led by a live broker other than the one gone, and a step that never
ends failing in one line naming the brokers that did not show it."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.versus import rows
from benchmarks.versus.metadata import ask
from benchmarks.versus.systems import System, SystemError_, partctl_system
from tests.servers import start_zookeeper

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    server = start_zookeeper()
    cluster = partctl_system(Path(tmp_path_factory.mktemp("wait-led")), server.address)
    try:
        cluster.start()
        rows.create_topic(cluster, "led", 6)
        yield cluster
    finally:
        cluster.kill_all()
        server.stop()


def test_every_partition_led_ends_the_wait(system: System) -> None:
    took = rows.wait_led(system, {"led": 6}, 60)
    assert 0 <= took < 60


def test_a_broker_gone_ends_the_wait_once_every_broker_left_names_other_leaders(
        system: System) -> None:
    controller = system.controller()
    victim = next(i for i in sorted(system.nodes) if i != controller)
    start = time.perf_counter()
    system.nodes[victim].signal(signal.SIGTERM)
    took = rows.wait_led(system, {"led": 6}, 60, gone=victim, start=start)
    assert 0 < took <= time.perf_counter() - start
    up = {i for i in system.nodes if i != victim}
    for i in sorted(up):  # what each broker left answers now, as the wait saw it
        view = ask(system.nodes[i].address, ["led"])
        assert view is not None
        assert {view.leaders[("led", p)] for p in range(6)} <= up


def test_a_wait_that_never_ends_names_the_brokers_in_one_line(system: System) -> None:
    with pytest.raises(SystemError_, match=r"brokers \[.*\] did not show a live leader for "
                                           r"every partition of absent in 1s"):
        rows.wait_led(system, {"absent": 3}, 1)
