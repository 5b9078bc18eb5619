"""A broker process per coordinator backend (ZooKeeper and etcd), started once for the session
and shared by the tests that only need one broker serving; it must stop cleanly at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .processes import BrokerProcess, start_broker


@pytest.fixture(scope="session", params=["zookeeper", "etcd"])
def broker(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    server = request.getfixturevalue(f"{request.param}_server")
    process = start_broker(tmp_path_factory.mktemp(f"broker-{request.param}"), server,
                           extra="num.partitions=2\n")
    yield process
    status = process.stop()
    assert status == 0, process.log()[-3000:]
