"""Fixtures of the transaction tests: one three-broker cluster with KIP-890's verification off
(:class:`~tests.broker.txn.trios.UnverifiedTrio`), shared by the modules that write raw
transactional batches, each on a topic of its own. tests/conftest.py's ``WORKER_GROUPS`` hands
those modules to one pytest-xdist worker, so a run starts the cluster once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.processes import coordinator_url
from tests.servers import Server

from ..data.test_cluster_clients import serving
from .trios import UnverifiedTrio


@pytest.fixture(scope="session")
def unverified_trio(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[UnverifiedTrio]:
    """Brokers 1-3 on the session's ZooKeeper, verification off, no topic yet; each broker
    must exit 0 at the end. A module using it creates its own topic and stops no broker."""
    with serving(UnverifiedTrio(coordinator_url(zookeeper_server),
                                tmp_path_factory.mktemp("txn-unverified"), {})) as cluster:
        yield cluster
