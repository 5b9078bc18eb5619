"""Session-wide fixtures: the real servers (ZooKeeper, etcd, PostgreSQL), started once per test
run (per worker, under pytest-xdist, each with its own range of ports) and stopped at the end;
the long tier: tests marked ``long`` (the longer variants of tests whose short form runs every
time) are deselected unless ``PARTCTL_LONG_TESTS=1``; and the fast tier (``--fast``, ``make
test-fast``): only the tests that need no server and start no process (and are not
marked ``slow``).

What a test needs is marked from what it uses, not by hand on each test: a test whose fixtures
include a server's is marked ``servers``, ``postgres`` or ``spark``; so is one parametrized with
a server's name (``"zookeeper"``, ``"etcd"``: its fixture asks for the server by name). Modules
that start processes of their own (broker processes, the CLI, a JVM, Chromium) carry
``pytestmark = pytest.mark.processes``. Under ``--fast`` a test that starts a process or asks
for a server anyway fails, naming the mark it lacks: the fast tier stays honest as tests come.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PYCACHE = "PARTCTL_TEST_PYCACHE"


def _bytecode_cache() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE=1`` (no ``__pycache__`` beside the sources) every
    Python process the tests start (hundreds of broker processes, the CLI's) compiled the
    product from source again: half a second of CPU each, about 0.5 of a broker process's
    1.25 s of imports. The run's processes write and read their bytecode in a cache outside
    the work tree instead (``PYTHONPYCACHEPREFIX``: ``$PARTCTL_TEST_PYCACHE``, default
    ``~/.cache/partctl/pycache``); ``PARTCTL_TEST_PYCACHE=0`` leaves the setting alone, and
    so does a ``PYTHONPYCACHEPREFIX`` already set."""
    chosen = os.environ.get(PYCACHE, "")
    if (chosen == "0" or not os.environ.get("PYTHONDONTWRITEBYTECODE")
            or os.environ.get("PYTHONPYCACHEPREFIX")):
        return
    prefix = chosen or str(Path.home() / ".cache" / "partctl" / "pycache")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = prefix  # this process too, for what it imports from here on
    sys.dont_write_bytecode = False


_bytecode_cache()

from coordinator.servers import PORT_RANGE  # noqa: E402 (after the bytecode cache is set)
from interbroker.fencing import LOGGER_NAME  # noqa: E402
from tests import durations  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402
from tests.servers import Server, start_etcd, start_postgres, start_zookeeper  # noqa: E402

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
PORT_BLOCKS, PORT_BLOCK = 22, 1_000


def worker_port_range(worker: str, run_id: str) -> str:
    """The ports of one pytest-xdist worker (``gw0``...): a block of its own below the kernel's
    ephemeral ports (32768 up), so that a port one worker picked is never another's meanwhile.
    The blocks start where the run's id says, so that two runs on one machine (several
    checkouts tested at once) mostly use different blocks too."""
    block = (zlib.crc32(run_id.encode()) + int(worker[2:])) % PORT_BLOCKS
    low = 10_000 + PORT_BLOCK * block
    return f"{low}-{low + PORT_BLOCK - 1}"


if _WORKER.startswith("gw") and PORT_RANGE not in os.environ:
    os.environ[PORT_RANGE] = worker_port_range(
        _WORKER, os.environ.get("PYTEST_XDIST_TESTRUNUID", ""))


FAST = "--fast"

SERVER_FIXTURES = {
    "zookeeper_server": "servers", "etcd_server": "servers", "postgres_server": "postgres",
    "spark": "spark", "spark_cluster": "spark",
}
"""Fixture -> the mark of the tests that use it (directly or through other fixtures)."""

SERVER_PARAMS = {"zookeeper": "servers", "etcd": "servers", "postgres": "postgres",
                 "postgresql": "postgres"}
"""Parameter value -> the mark: a fixture parametrized by backend asks for that server by name."""

NEEDS_SERVER_OR_PROCESS = ("servers", "spark", "postgres", "processes")
FAST_LEAVES_OUT = (*NEEDS_SERVER_OR_PROCESS, "slow")
"""The marks ``--fast`` leaves out: a server or a process needed, or many seconds of work (the
few scale and randomized tests marked ``slow``)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(FAST, action="store_true", default=False,
                     help="only the tests that need no server and start no process "
                          "(make test-fast); such a test that starts one anyway fails")


def _fast(config: pytest.Config) -> bool:
    return bool(config.getoption(FAST, default=False))


def _not_in_fast(what: str) -> None:
    pytest.fail(f"this test {what} but is in the --fast tier: mark its module "
                "`pytestmark = pytest.mark.processes` (or servers, postgres, spark)",
                pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _fast_tier_starts_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under ``--fast``: a process started is a failure of the test that started it."""
    if not _fast(request.config):
        yield
        return
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        _not_in_fast(f"starts a process ({args!r})")

    subprocess.Popen._execute_child = refuse  # type: ignore[attr-defined]
    try:
        yield
    finally:
        subprocess.Popen._execute_child = original  # type: ignore[attr-defined]


def _needs_marks(item: pytest.Item) -> set[str]:
    marks = {SERVER_FIXTURES[name] for name in getattr(item, "fixturenames", ())
             if name in SERVER_FIXTURES}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        marks |= {SERVER_PARAMS[value] for value in callspec.params.values()
                  if isinstance(value, str) and value in SERVER_PARAMS}
    return marks


@pytest.fixture(scope="session")
def zookeeper_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if _fast(request.config):
        _not_in_fast("needs ZooKeeper")
    server = start_zookeeper()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def etcd_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if _fast(request.config):
        _not_in_fast("needs etcd")
    server = start_etcd()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest) -> Iterator[PostgresServer]:
    """A PostgreSQL of the tests' own (initdb in a temporary directory, a free loopback port),
    never a server the machine runs."""
    if _fast(request.config):
        _not_in_fast("needs PostgreSQL")
    server = start_postgres()
    yield server
    server.stop()


LONG_TESTS = "PARTCTL_LONG_TESTS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what each test needs (above); leave out the ``long`` tier unless
    ``PARTCTL_LONG_TESTS=1`` asks for it, and under ``--fast`` every test that needs a server
    or a process (shown as deselected in the summary, never as passed)."""
    for item in items:
        for mark in sorted(_needs_marks(item)):
            if item.get_closest_marker(mark) is None:
                item.add_marker(mark)
    left_out: set[str] = set()
    if os.environ.get(LONG_TESTS) != "1":
        left_out.add("long")
    if _fast(config):
        left_out.update(FAST_LEAVES_OUT)
    deselected = [item for item in items
                  if any(item.get_closest_marker(mark) is not None for mark in left_out)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        chosen = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in chosen]
    if _WORKER.startswith("gw"):
        # longest work unit first (tests/durations.py): what the scheduler hands out last is
        # short; a group of modules sharing a worker (WORKER_GROUPS) counts as one unit
        key = durations.order_key(durations.load(), WORKER_GROUPS)
        items.sort(key=lambda item: key(item.nodeid))


def pytest_configure(config: pytest.Config) -> None:
    # xdist orders the modules by their number of tests unless told not to; ours are ordered
    # by their recorded time instead (pytest_collection_modifyitems)
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope"):
        config.option.loadscopereorder = False


WORKER_GROUPS: dict[str, tuple[str, ...]] = {
    # the rebalancer's one Spark session (tests/rebalancer/conftest.py, session-scoped): a
    # JVM whose start is most of these modules' time
    "spark": ("tests/rebalancer/test_planner_engines.py",
              "tests/rebalancer/test_execution_generate_spark.py"),
    # the UnverifiedTrio of tests/broker/txn/conftest.py (session-scoped)
    "txn-unverified": ("tests/broker/txn/test_txn_data_markers.py",
                       "tests/broker/txn/test_txn_data_read_committed.py",
                       "tests/broker/txn/test_txn_sequence_after_abort.py"),
}
"""Modules that share a session-scoped fixture, handed to one worker as one unit under
``--dist loadfile`` (each worker has a session of its own: spread over two workers they would
start it twice). Any other module is a unit of its own, as loadfile has it."""


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with :data:`WORKER_GROUPS`: a grouped module's unit is its group."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    group_of = {module: f"group:{name}" for name, modules in WORKER_GROUPS.items()
                for module in modules}

    class GroupedLoadFile(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return group_of.get(module, module)

    return GroupedLoadFile(config, log)


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """setup_logging replaces the root logger's handlers: put pytest's back afterwards."""
    root, changes = logging.getLogger(), logging.getLogger(LOGGER_NAME)
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in list(changes.handlers):
        changes.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    changes.propagate = True
