"""The documentation site builds with ``mkdocs build --strict`` (``make docs``, which CI runs),
and ``--strict`` is what makes a broken page fail it: a link to a page that is not there, a link
out of docs/ (into the repository beside it), an anchor no heading makes, and a page left out of
the nav are each an error, proven here on a copy of the site with such faults in it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "-f", str(root / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=300, check=False)


def copy_site(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    return root


@pytest.mark.processes  # runs mkdocs
def test_the_site_builds_strict(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "architecture" / "index.html").is_file()
    # the example the embedding page links to is published beside it
    assert (tmp_path / "site" / "examples" / "embedded_kv.py").is_file()


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if f" {p}\n" not in nav] == []


# (page, link as it is, the link broken, what the build's warning names)
BREAKS = [
    ("brokers.md", "](metrics.md)", "](metric.md)", "metric.md"),  # a page not there
    ("index.md", "](benchmarks.md)", "](../benchmarks/coordinator.py)",  # out of docs/
     "../benchmarks/coordinator.py"),
    ("testing.md", "](faults.md)", "](faults.md#no-such-heading)", "no-such-heading"),
]


@pytest.mark.processes  # runs mkdocs
def test_each_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """One build with every fault in it (a build takes seconds): each is named in its output,
    and a page left out of the nav is one too."""
    root = copy_site(tmp_path)
    for page, old, new, _said in BREAKS:
        path = root / "docs" / page
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))
    (root / "docs" / "orphan.md").write_text("# An orphan\n")
    done = build(root, tmp_path)
    said_all = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Aborted with 4 warnings in strict mode" in said_all, said_all
    for said in [b[3] for b in BREAKS] + ["orphan.md"]:
        assert said in done.stderr, said


def test_the_readmes_links_reach_files() -> None:
    """The README is no page of the site, so --strict does not see its links: they are checked
    here (every relative one names a file of the repository)."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    relative = [link for link in links if "://" not in link]
    assert len(relative) >= 10
    assert [link for link in relative if not (ROOT / link).is_file()] == []
