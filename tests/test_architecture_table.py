"""The Kafka concept -> module table at the top of docs/architecture.md names modules that exist.

Issue 30 restructures the repository on several branches at once, and the table names the homes
they make (``interbroker/``, ``node/``, ``replication/log_manager.py``,
``replication/log_loader.py``, ``replication/local_log.py``, ``replication/log_cleaner.py``,
``replication/delayed_produce.py``, ``kafkaclient/frames.py``, ``broker/security/authenticator.py``,
``broker/groups/metadata_manager.py``, ``coordinator/configdef.py``, ``broker/config_keys.py``):
on the branch that wrote the table those paths are not there yet. This test is right once every
branch is merged; from then on a module that moves without its row failing here is impossible.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
HEADING = "## Where each Kafka concept lives"


def table_rows() -> list[tuple[str, str]]:
    """(Kafka cell, partctl cell) of every row of the table under HEADING."""
    text = PAGE.read_text()
    assert HEADING in text, f"{PAGE.name} has no '{HEADING}' section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header, rule, *body = rows
    assert header == "| Kafka | partctl |" and set(rule) <= set("|- ")
    cells = [tuple(c.strip() for c in row.strip("|").split(" | ")) for row in body]
    assert all(len(c) == 2 for c in cells), [c for c in cells if len(c) != 2]
    return [(kafka, ours) for kafka, ours in cells]


def named_paths() -> list[str]:
    """Every code span of the partctl column: each one is a repository path (a directory ends
    with a slash)."""
    return [path for _kafka, ours in table_rows() for path in re.findall(r"`([^`]+)`", ours)]


def test_the_table_is_at_the_top_and_every_row_names_a_module() -> None:
    text = PAGE.read_text()
    assert text.index("\n## ") == text.index("\n" + HEADING), "the table is the first section"
    rows = table_rows()
    assert len(rows) >= 40
    assert [kafka for kafka, ours in rows if not re.search(r"`[^`]+`", ours)] == []
    kafka_names = [kafka for kafka, _ours in rows]
    assert len(kafka_names) == len(set(kafka_names))
    for path in named_paths():
        assert re.fullmatch(r"[a-z_]+(/[a-z_0-9]+)*(/|\.py)", path), f"not a module path: {path}"


@pytest.mark.parametrize("path", named_paths())
def test_the_named_module_exists(path: str) -> None:
    target = ROOT / path
    assert (target.is_dir() and (target / "__init__.py").is_file()) if path.endswith("/") \
        else target.is_file(), f"docs/architecture.md names {path}, which is not in the repository"
