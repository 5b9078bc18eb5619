"""The configuration reference, ``docs/configuration.md``, written from the declared keys.

``python -m broker.configdoc`` writes it (``--check``: exit 1 when the committed page differs
from what the tables give); :func:`render` gives its text. Each scope is one table, its keys
ordered as Kafka's reference orders them: by importance, then by name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from broker.config_keys import BROKER_CONFIG, CONTROLLER_PROCESS_CONFIG
from coordinator.broker_config import DYNAMIC_BROKER_KEYS
from coordinator.configdef import ConfigDef, ConfigKey, Effect, Importance
from coordinator.topic_config import TOPIC_CONFIG_KEYS

__all__ = ["DOC_PATH", "main", "render"]

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_ORDER = {Importance.HIGH: 0, Importance.MEDIUM: 1, Importance.LOW: 2}

_INTRO = """\
# Configuration reference

<!-- Written by `python -m broker.configdoc` from the declared keys (broker/config_keys.py,
statemachines/config.py, coordinator/topic_config.py, coordinator/broker_config.py); do not edit
by hand: tests/test_configuration_doc.py fails when this page is stale. -->

Every key partctl reads, with its type, default, valid values and importance, Kafka's names and
defaults throughout. A *partctl:* note marks a key that partctl applies in part or not at all:
it is accepted, checked and kept, as Kafka has it, and the note says what happens. A broker's
DescribeConfigs lists the same keys and documentation (`kafka-configs --describe --all`).
"""

_SECTIONS: tuple[tuple[str, ConfigDef, str], ...] = (
    ("Broker (`server.properties`)", BROKER_CONFIG,
     "Read when the broker starts (a restart applies a change). The TLS and SASL keys "
     "(`ssl.*`, `sasl.*`, per listener under `listener.name.<l>.`) are read by "
     "`broker/security/` and are not listed here."),
    ("Controller process (`controller.properties`)", CONTROLLER_PROCESS_CONFIG,
     "`partctl controller start` applies these broker keys (its id in `node.id` or "
     "`broker.id`; `listeners` defaults to `PLAINTEXT://:9093`); any other key warns and is "
     "ignored."),
    ("Topic (`/config/topics/<topic>`)", TOPIC_CONFIG_KEYS,
     "Per-topic overrides (`kafka-configs --entity-type topics`, `partctl topics "
     "alter-config`); a topic without one takes its broker synonym's value."),
    ("Dynamic broker (`/config/brokers/<id>` and `<default>`)", DYNAMIC_BROKER_KEYS,
     "Changed at run time (`kafka-configs --entity-type brokers --alter`); a broker's own "
     "value wins over the cluster default."),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(key: ConfigKey) -> str:
    default = "*none*" if key.default is None else f"`{key.default}`" if key.default else '""'
    valid = _cell(str(key.validator)) if key.validator is not None else ""
    doc = key.doc
    if key.effect is not Effect.APPLIED and key.note:
        doc += f" *partctl: {key.note}*"
    return (f"| `{key.name}` | {key.type.name} | {_cell(default)} | {valid} | "
            f"{key.importance.value} | {_cell(doc)} |")


def render() -> str:
    """The page's text."""
    out = [_INTRO]
    for title, keys, about in _SECTIONS:
        out += [f"## {title}", "", about, "",
                f"{len(keys)} keys.", "",
                "| Key | Type | Default | Valid values | Importance | Description |",
                "|---|---|---|---|---|---|"]
        ordered = sorted(keys.values(), key=lambda k: (_ORDER[k.importance], k.name))
        out += [_row(k) for k in ordered]
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.configdoc", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the page is stale")
    parser.add_argument("--output", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python -m broker.configdoc", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
