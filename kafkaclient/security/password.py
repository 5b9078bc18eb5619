"""A secret value that never shows itself: its ``str`` and ``repr`` are ``***``."""

from __future__ import annotations

__all__ = ["Password"]


class Password:
    """A password or key (Kafka's ConfigDef PASSWORD type): :meth:`reveal` gives the value;
    printing, logging or formatting it gives ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Password(***)"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
