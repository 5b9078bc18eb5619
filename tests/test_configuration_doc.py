"""docs/configuration.md is written from the declared keys (``python -m broker.configdoc``):
the committed page is what the tables give, and every declared key is on it."""

from __future__ import annotations

from pathlib import Path

from broker.config_keys import BROKER_CONFIG, CONTROLLER_PROCESS_CONFIG
from broker.configdoc import DOC_PATH, main, render
from coordinator.broker_config import DYNAMIC_BROKER_KEYS
from coordinator.topic_config import TOPIC_CONFIG_KEYS
from statemachines.config import CONTROLLER_CONFIG


def test_the_committed_reference_is_not_stale() -> None:
    assert DOC_PATH.read_text() == render(), (
        "docs/configuration.md is stale: run python -m broker.configdoc")


def test_every_declared_key_is_on_the_page_with_its_default() -> None:
    page = render()
    for scope in (BROKER_CONFIG, TOPIC_CONFIG_KEYS, DYNAMIC_BROKER_KEYS):
        for key in scope.values():
            assert f"| `{key.name}` | {key.type.name} |" in page, key.name
            if key.default:
                assert f"`{key.default}`" in page, key.name
    assert set(CONTROLLER_CONFIG) <= set(BROKER_CONFIG)
    assert set(CONTROLLER_PROCESS_CONFIG) <= set(BROKER_CONFIG)


def test_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    assert main(["--check", "--output", str(page)]) == 1
    assert main(["--output", str(page)]) == 0
    assert main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text().replace("high", "low", 1))
    assert main(["--check", "--output", str(page)]) == 1
