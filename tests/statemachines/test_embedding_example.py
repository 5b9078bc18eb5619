"""docs/embedding.md's worked example is real: docs/examples/embedded_kv.py runs here on the
memory coordinator and on a real ZooKeeper server, tells the story the page shows, and every
piece of code the page shows is in it, as it is."""

from __future__ import annotations

import importlib.util
import re
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from tests.servers import Server

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "embedding.md"
EXAMPLE = DOCS / "examples" / "embedded_kv.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embedded_kv", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```$", PAGE.read_text(), re.S | re.M)


def check_story(story: list[str]) -> None:
    """What the example must show, whatever the page says."""
    assert "kv-0: broker 1 leader, broker 2 follower, broker 3 follower" in story
    assert "broker 1 reads colour = blue from kv-0" in story
    assert "broker 2 refuses to serve kv-0: not the leader of kv-0 (the leader is 1)" in story
    assert "broker 3 lost: ISR of kv-0 [1, 2], of kv-1 [2, 1]" in story
    # the leaders' ISR writes through the controller client reached every broker
    assert "broker 3 back: ISR of kv-0 [1, 2, 3], of kv-1 [2, 1, 3]" in story
    assert "broker 1 asks for a controlled shutdown: still leads []" in story
    assert "broker 2 now reads colour = blue from kv-0" in story
    assert "  kv-0: took broker 3 back into the ISR" in story


def test_the_example_runs_on_memory_and_prints_what_the_page_shows() -> None:
    story = example().run(f"memory://kv-{uuid.uuid4().hex[:12]}", say=lambda _line: None)
    check_story(story)
    [shown] = blocks("text")
    assert story == shown.splitlines()


@pytest.mark.servers
def test_the_example_runs_on_zookeeper(zookeeper_server: Server) -> None:
    url = f"zookeeper://{zookeeper_server.address}/kv{uuid.uuid4().hex[:12]}"
    story = example().run(url, say=lambda _line: None)
    check_story(story)
    [shown] = blocks("text")
    assert story == shown.splitlines()


def test_the_page_shows_the_example_code_as_it_is() -> None:
    code = EXAMPLE.read_text()
    shown = blocks("python")
    assert len(shown) >= 5
    for block in shown:
        assert block in code, block
