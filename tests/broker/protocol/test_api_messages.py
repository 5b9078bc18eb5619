"""broker/apis/messages.py, the kio types the handlers are typed against, is generated from the
API registry: one request and one response union per API, of exactly the versions served. It
fails when the registry's versions change and the module was not regenerated
(``python -m tests.broker.protocol.test_api_messages`` writes it)."""

from __future__ import annotations

import sys
from pathlib import Path

from broker.apis import default_registry
from broker.wire import request_class, response_module

MODULE = Path(__file__).resolve().parents[3] / "broker" / "apis" / "messages.py"

HEADER = '''"""kio's message types for the versions this broker serves: per API, a union of its request
classes and one of its response classes (what the handlers in :mod:`broker.apis` are typed
against). Generated from the registry by ``python -m tests.broker.protocol.test_api_messages``; do not
edit. Only for the type checker: nothing is imported at run time, where the server loads each
version's classes when a request of it first comes (:func:`broker.wire.request_class`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

'''


def _name(cls: type) -> str:
    """How the generated module spells ``cls``."""
    if cls.__module__.startswith("kio.schema."):
        return f"{cls.__module__.rsplit('.', 1)[0]}.{cls.__name__}"
    return cls.__name__


def _union(alias: str, classes: list[type]) -> list[str]:
    names = list(dict.fromkeys(_name(c) for c in classes))
    lines, line = [f"    {alias}: TypeAlias = ("], "        " + names[0]
    for name in names[1:]:
        if len(line) + len(name) + 3 > 99:
            lines.append(line)
            line = f"        | {name}"
        else:
            line += f" | {name}"
    lines.append(line + ")")
    return lines


def _version_order(module: str) -> tuple[str, int]:
    package, version = module.rsplit(".v", 1)
    return package, int(version)


def render() -> str:
    registry = default_registry()
    imports: set[str] = set()
    extras: set[tuple[str, str]] = set()
    body: list[str] = []
    for key, api in registry.items():
        requests, responses = [], []
        for version in range(api.min_version, api.max_version + 1):
            for cls in (request_class(key, version),
                        getattr(response_module(key, version), f"{api.name}Response")):
                if cls.__module__.startswith("kio.schema."):
                    imports.add(cls.__module__.rsplit(".", 1)[0])
                else:
                    extras.add((cls.__module__, cls.__name__))
                (requests if cls.__name__.startswith(f"{api.name}Request")
                 else responses).append(cls)
        body += _union(f"{api.name}Request", requests)
        body += _union(f"{api.name}Response", responses)
    lines = [f"    import {m}" for m in sorted(imports, key=_version_order)]
    lines += ["", *(f"    from {m} import {n}" for m, n in sorted(extras))]
    return HEADER + "\n".join([*lines, "", *body]) + "\n"


def test_the_generated_message_types_are_current() -> None:
    assert MODULE.read_text() == render(), (
        "broker/apis/messages.py is stale: run python -m tests.broker.protocol.test_api_messages")


if __name__ == "__main__":
    MODULE.write_text(render())
    sys.exit(0)
