"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> <flag> key="value" ... ;``.

Only what a partctl broker reads is interpreted: PlainLoginModule's ``username``, ``password``
and ``user_<name>`` options, ScramLoginModule's ``username`` and ``password``. The parse is
Java's JAAS grammar for one entry (quoted or bare values, a closing semicolon).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkaclient.security.password import Password

__all__ = ["JaasConfig", "JaasError", "parse_jaas"]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<eq>=)|(?P<semi>;)|(?P<word>[^\s=;"]+))')


class JaasError(ValueError):
    """A ``sasl.jaas.config`` that cannot be read; the message never holds a value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JaasConfig:
    module: str
    flag: str
    options: dict[str, Password] = field(default_factory=dict, repr=False)

    def option(self, name: str) -> str | None:
        value = self.options.get(name)
        return value.reveal() if value is not None else None

    def plain_users(self) -> dict[str, Password]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: the users a broker's PLAIN
        mechanism accepts."""
        return {k.removeprefix("user_"): v for k, v in self.options.items()
                if k.startswith("user_") and len(k) > 5}


def parse_jaas(text: str) -> JaasConfig:
    """One JAAS entry; JaasError (naming no value) when it is not one."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError("sasl.jaas.config: cannot parse (want "
                            "'<LoginModule> required key=\"value\" ... ;')")
        kind = m.lastgroup
        assert kind is not None
        value = m.group(kind)
        if kind == "q":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" \
            or tokens[-1][0] != "semi":
        raise JaasError("sasl.jaas.config: want '<LoginModule> required key=\"value\" ... ;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise JaasError(f"sasl.jaas.config: the control flag of {module} must be one of "
                        f"{', '.join(_FLAGS)}")
    options: dict[str, Password] = {}
    body = tokens[2:-1]
    i = 0
    while i < len(body):
        if i + 2 >= len(body):
            raise JaasError(f"sasl.jaas.config: an option of {module} has no value")
        key, eq, value = body[i], body[i + 1], body[i + 2]
        if key[0] != "word" or eq[0] != "eq" or value[0] not in ("q", "word"):
            raise JaasError(f"sasl.jaas.config: options of {module} are key=\"value\"")
        options[key[1]] = Password(value[1])
        i += 3
    return JaasConfig(module=module, flag=flag, options=options)
