"""``reassign generate`` with sizes: the disk goal, the bytes bounds beside the plan, and
``--plot`` pictures (real matplotlib PNGs), with bad input refused in one line before any work."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest

from partctl.cli import main
from partctl.plot import plot_loads
from partctl.render import broker_loads
from rebalancer.plan import Plan
from rebalancer.scenarios import Scenario, generate
from rebalancer.snapshot import load_snapshot, save_snapshot

SIZED = Scenario(brokers=12, new_brokers=3, racks=3, topics=40, total_partitions=900, rf=3,
                 placement="random", zipf_s=0.6, seed=31)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def panels(path: Path) -> int:
    """Panels of a picture from its height: 2.6 inches each plus 0.8, at 100 dpi."""
    return round((png_size(path)[1] / 100 - 0.8) / 2.6)


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snap.json"
    save_snapshot(generate(SIZED), path)
    return path


def test_generate_prints_the_bytes_bound_and_draws_before_and_after(snapshot: Path,
                                                                     tmp_path: Path) -> None:
    plan, png = tmp_path / "plan.json", tmp_path / "plan.png"
    code, out, err = run("reassign", "generate", "--snapshot", str(snapshot), "--engine",
                         "local", "-o", str(plan), "--plot", str(png))
    assert code == 0, err
    assert "Lower bounds: replicas moved " in out and ", GiB moved for count balance " in out
    assert out.splitlines()[1].split() == ["Broker", "Rack", "Replicas", "Leaders", "GiB"]
    assert f"Picture of the load before and after written to {png}." in out
    assert panels(png) == 3  # replicas, leaders, GiB
    assert json.loads(plan.read_text())["partitions"]


def test_generate_disk_goal_reports_max_over_mean_and_its_bound(snapshot: Path,
                                                                tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    code, out, err = run("reassign", "generate", "--snapshot", str(snapshot), "--engine",
                         "local", "--goal", "disk", "--count-slack", "0.1", "-o", str(plan))
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("Bytes max/mean per broker:"))
    before, after = line.split(":", 1)[1].split(" (lower bound ")[0].split(" -> ")
    assert float(after) <= 1.05 < float(before)
    assert line.endswith(" (lower bound 1.0)")
    assert "Disk goal: replica counts kept within 10% of their balanced quota." in out


def test_plot_panels_without_sizes_and_of_the_current_state(tmp_path: Path) -> None:
    snap = generate(Scenario(brokers=6, racks=2, topics=5, partitions=4, sizes=False, seed=3))
    loads = broker_loads(snap, Plan(partitions=()))
    assert plot_loads(loads, str(tmp_path / "a.png"), title="t", compare=False) == 2
    assert panels(tmp_path / "a.png") == 2
    assert plot_loads(loads, str(tmp_path / "b.svg"), title="t") == 2
    assert (tmp_path / "b.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(("plot", "message"), [
    ("missing/plan.png", "cannot write --plot {p}: No such file or directory"),
    ("snap.json/plan.png", "cannot write --plot {p}: No such file or directory"),
    (".", "cannot write --plot {p}: Is a directory"),
    ("plan.xyz", "cannot write --plot {p}: unknown picture type .xyz (known: "),
])
def test_a_bad_plot_path_is_one_line_and_writes_nothing(snapshot: Path, tmp_path: Path,
                                                        plot: str, message: str) -> None:
    plan = tmp_path / "plan.json"
    path = str(tmp_path / plot)
    code, out, err = run("reassign", "generate", "--snapshot", str(snapshot), "--engine",
                         "local", "-o", str(plan), "--plot", path)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("partctl: error: " + message.format(p=path))
    assert not plan.exists()


def test_option_mistakes_are_one_line(snapshot: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    plan = str(tmp_path / "plan.json")
    code, out, err = run("reassign", "generate", "--snapshot", str(snapshot), "-o", plan,
                         "--count-slack", "0.1")
    assert (code, err) == (1, "partctl: error: --count-slack goes with --goal disk\n")
    with pytest.raises(SystemExit) as exit_:
        run("reassign", "generate", "--snapshot", str(snapshot), "-o", plan, "--goal", "bytes")
    assert exit_.value.code == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert len(errors) == 1 and "argument --goal: invalid choice: 'bytes'" in errors[0]
    assert "'disk'" in errors[0]
    with pytest.raises(SystemExit):
        run("reassign", "generate", "--snapshot", str(snapshot), "-o", plan, "--goal", "disk",
            "--count-slack", "2")
    errors = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert errors == ["partctl reassign generate: error: argument --count-slack: must be at "
                      "least 0 and below 1, got 2"]
    assert not Path(plan).exists()
    assert load_snapshot(snapshot).has_sizes


def test_plot_without_matplotlib_is_one_line_naming_the_extra(
        snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    plan = tmp_path / "plan.json"
    code, out, err = run("reassign", "generate", "--snapshot", str(snapshot), "--engine",
                         "local", "-o", str(plan), "--plot", str(tmp_path / "p.png"))
    assert (code, out) == (1, "")
    assert err == ("partctl: error: matplotlib is not installed; it is needed for --plot: "
                   "pip install 'partctl[plot]'\n")
    assert not plan.exists()
