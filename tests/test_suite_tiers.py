"""How the suite arranges itself: what marks a test gets from what it uses (the ``--fast``
tier leaves those out), the long tier (``long``: on demand, ``make test-long``), and the order
the workers' modules come in (tests/durations.py)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace

from tests import conftest, durations


def _item(*fixtures: str, **params: object) -> SimpleNamespace:
    callspec = SimpleNamespace(params=params) if params else None
    return SimpleNamespace(fixturenames=list(fixtures), callspec=callspec)


def test_a_test_is_marked_by_the_servers_its_fixtures_start() -> None:
    assert conftest._needs_marks(_item("tmp_path", "zookeeper_server")) == {"servers"}
    assert conftest._needs_marks(_item("postgres_server", "spark")) == {"postgres", "spark"}
    assert conftest._needs_marks(_item("tmp_path")) == set()


def test_a_backend_parameter_naming_a_server_marks_the_test() -> None:
    # a fixture parametrized by backend asks for the server by name (getfixturevalue): only
    # the parameter tells
    assert conftest._needs_marks(_item("backend", backend="etcd")) == {"servers"}
    assert conftest._needs_marks(_item("store", store="postgresql")) == {"postgres"}
    assert conftest._needs_marks(_item("backend", backend="memory")) == set()
    assert conftest._needs_marks(_item("n", n=3)) == set()


def test_the_fast_tier_leaves_out_every_mark_of_a_server_or_a_process() -> None:
    assert set(conftest.NEEDS_SERVER_OR_PROCESS) >= set(conftest.SERVER_FIXTURES.values())
    assert set(conftest.NEEDS_SERVER_OR_PROCESS) >= set(conftest.SERVER_PARAMS.values())
    assert "processes" in conftest.NEEDS_SERVER_OR_PROCESS
    assert set(conftest.FAST_LEAVES_OUT) == {*conftest.NEEDS_SERVER_OR_PROCESS, "slow"}


ROOT = Path(__file__).resolve().parents[1]


def test_the_long_tier_has_a_make_target_and_a_page() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\ntest-long:"):]
    target = target[:target.index("\n\n")]
    assert f"{conftest.LONG_TESTS}=1 " in target and " -m long" in target
    assert "make test-long" in (ROOT / "docs" / "testing.md").read_text()


def _marks(function: object) -> set[str]:
    return {mark.name for mark in getattr(function, "pytestmark", [])}


def test_the_fault_harness_on_a_real_cluster_is_the_smoke_alone_by_default() -> None:
    # every test of these modules that needs a server (a real cluster) is in the long tier;
    # tests/faults/test_smoke.py's seeds are what every run does with the harness
    for name in ("test_cluster", "test_nemesis", "test_workload"):
        module = importlib.import_module(f"tests.faults.{name}")
        tests = [f for n, f in inspect.getmembers(module, inspect.isfunction)
                 if n.startswith("test_") and f.__module__ == module.__name__]
        real = [f for f in tests if "servers" in _marks(f)]
        assert real and all("long" in _marks(f) for f in real), name
    smoke = importlib.import_module("tests.faults.test_smoke")
    every_run = [p for p in smoke.SMOKE if "long" not in {m.name for m in p.marks}]
    assert {p.values[0] for p in every_run} == {"zookeeper", "etcd"}


def test_the_longest_module_comes_first_and_an_unknown_one_in_the_middle() -> None:
    key = durations.order_key({"tests/a/test_long.py": 300.0, "tests/a/test_short.py": 1.0})
    ids = ["tests/a/test_short.py::t", "tests/a/test_new.py::t", "tests/a/test_long.py::t[x]",
           "tests/a/test_long.py::u"]
    assert sorted(ids, key=key) == ["tests/a/test_long.py::t[x]", "tests/a/test_long.py::u",
                                    "tests/a/test_new.py::t", "tests/a/test_short.py::t"]


def test_a_module_moved_to_another_folder_is_found_by_its_name() -> None:
    key = durations.order_key({"tests/broker/test_x.py": 300.0, "tests/a/test_dup.py": 5.0,
                               "tests/b/test_dup.py": 400.0})
    assert key("tests/broker/groups/test_x.py::t") == -300.0
    assert key("tests/c/test_dup.py::t") == -durations.UNKNOWN  # two of that name: unknown


def test_seconds_per_module_from_a_junit_report(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "a" / "test_m.py").write_text("")
    report = tmp_path / "run.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.a.test_m" name="t1" time="1.5"/>'
        '<testcase classname="tests.a.test_m.TestGroup" name="t2" time="2.0"/>'
        '</testsuite></testsuites>')
    assert durations.from_junit(report) == {"tests/a/test_m.py": 3.5}


def test_the_recorded_table_is_there() -> None:
    table = durations.load()
    assert table, "tests/durations.json is missing or empty"
    assert all(module.startswith("tests/") and module.endswith(".py") for module in table)


def test_each_worker_of_a_run_has_ports_of_its_own_below_the_ephemeral_ones() -> None:
    for run in ("", "a1b2", "9f00d"):
        ranges = [conftest.worker_port_range(f"gw{n}", run) for n in range(2)]
        assert len(set(ranges)) == 2
        for span in ranges:
            low, high = map(int, span.split("-"))
            assert 10_000 <= low < high < 32_768
    runs = {conftest.worker_port_range("gw0", f"run{n}") for n in range(50)}
    assert len(runs) > 10  # two runs at once mostly pick different blocks


def _scheduler(dist: str) -> object:
    values = {"dist": dist, "tx": ["2*popen"]}
    config = SimpleNamespace(getvalue=values.__getitem__, option=SimpleNamespace())
    return conftest.pytest_xdist_make_scheduler(config, None)  # type: ignore[arg-type]


def test_modules_sharing_a_session_fixture_are_one_unit_of_work() -> None:
    # loadfile hands a worker whole modules; a group of WORKER_GROUPS is one unit, so that
    # its session-scoped fixture (a Spark session, a broker trio) starts once in a run
    scheduler = _scheduler("loadfile")
    for name, modules in conftest.WORKER_GROUPS.items():
        assert all(Path(m).is_file() for m in modules), name
        assert {scheduler._split_scope(f"{m}::t[x]") for m in modules} == {f"group:{name}"}
    assert scheduler._split_scope("tests/a/test_x.py::T::t") == "tests/a/test_x.py"
    grouped = [m for modules in conftest.WORKER_GROUPS.values() for m in modules]
    assert len(grouped) == len(set(grouped))  # a module in one group at most
    assert _scheduler("load") is None  # other --dist modes are xdist's own


def test_a_group_counts_as_its_modules_together() -> None:
    key = durations.order_key({"tests/a/test_x.py": 30.0, "tests/a/test_y.py": 20.0,
                               "tests/a/test_z.py": 40.0},
                              {"xy": ("tests/a/test_x.py", "tests/a/test_y.py")})
    ids = ["tests/a/test_z.py::t", "tests/a/test_x.py::t", "tests/a/test_y.py::t"]
    assert sorted(ids, key=key) == ["tests/a/test_x.py::t", "tests/a/test_y.py::t",
                                    "tests/a/test_z.py::t"]
    assert key("tests/a/test_y.py::t") == -50.0
