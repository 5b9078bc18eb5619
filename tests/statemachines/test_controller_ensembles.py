"""The controller over a three-member coordinator (a real ZooKeeper ensemble or etcd cluster):
losing the coordinator's leader costs the brokers neither their sessions nor the controller its
work, and a controller that dies is replaced while one coordinator member is down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from coordinator.servers import LocalEnsemble
from tests.servers import start_ensemble
from tests.statemachines.test_controller_servers import RealCluster, _start
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@pytest.fixture(params=["zookeeper", "etcd"])
def ensemble(request: pytest.FixtureRequest) -> Iterator[LocalEnsemble]:
    with start_ensemble(request.param) as started:
        yield started


@pytest.fixture
def real(ensemble: LocalEnsemble) -> Iterator[RealCluster]:
    cluster = RealCluster(ensemble.url("/t" + uuid.uuid4().hex[:12]))
    yield cluster
    cluster.close()


def test_the_controller_outlives_the_coordinators_leader_and_is_replaced_without_it(
        ensemble: LocalEnsemble, real: RealCluster) -> None:
    _start(real)
    first = real.active()
    epoch = first.controller.epoch
    sessions = {b: p.coordinator.session_id for b, p in real.participants.items()}

    old = ensemble.leader()
    assert old is not None
    old.kill()
    assert ensemble.wait_serving(15) is not old
    # the sessions (4 s) outlive the coordinator's election: no broker re-registers, the same
    # controller stays active in the same epoch and still elects leaders for a new topic
    real.admin.create_topic("after", assignment={0: [2, 3, 1]})
    wait_until(lambda: real.leader("after", 0) == 2, timeout=20, message="after-0 led by 2")
    assert real.active() is first and first.controller.epoch == epoch
    assert {b: p.coordinator.session_id for b, p in real.participants.items()} == sessions

    # with one member of three still down, the controller's death is noticed and a standby
    # takes over in a new epoch; the partitions the dead broker led move
    real.kill(first.id)
    new = real.active()
    assert new.id != first.id and new.controller.epoch == epoch + 1
    lost = first.id - 1  # _start has broker b lead t-(b-1)
    wait_until(lambda: real.leader("t", lost) not in (None, first.id), timeout=20,
               message=f"t-{lost} re-elected")
    old.start()
    ensemble.wait_serving(30, members=ensemble.members)
