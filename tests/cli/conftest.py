"""The contract suite's backends (memory, ZooKeeper, etcd), for CLI tests that must hold on each."""

from tests.contract.conftest import backend  # noqa: F401 - a fixture, found by pytest here
