"""Java ``.properties`` files, read as ``java.util.Properties.load`` reads them (pure).

Kafka reads ``server.properties`` with ``Properties.load``, so a file that works for Kafka must
work here, byte for byte: ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!``
comment lines; a line ending in an odd number of backslashes continues on the next one (whose
leading blanks are dropped); escapes ``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, and a
backslash before any other character standing for that character (``\\:``, ``\\=``, ``\\ ``,
``\\\\``). The bytes are ISO-8859-1, as ``Properties.load(InputStream)`` takes them; anything
else is written with ``\\uXXXX``.

Unlike ``Properties`` the result keeps every entry, in file order, with its line number, so that
a caller can name the line of a bad value and warn about each unknown key once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PropertiesError", "Property", "parse_properties"]

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A file that ``Properties.load`` would refuse (a malformed ``\\uXXXX`` escape)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Property:
    """One entry: its key, its value (escapes resolved) and the line its key is on."""

    key: str
    value: str
    line: int


def _natural_lines(text: str) -> list[str]:
    """Split on ``\\n``, ``\\r`` and ``\\r\\n``, as Java's line reader does."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _ends_continued(line: str) -> bool:
    """Whether ``line`` ends in an odd number of backslashes."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) for every line that is neither blank nor a comment."""
    out: list[tuple[int, str]] = []
    lines = _natural_lines(text)
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, whatever it ends with
        while _ends_continued(line):
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(_BLANK)
            i += 1
        out.append((number, line))
    return out


def _split(line: str) -> tuple[str, str]:
    """The raw key and raw value of a logical line: the key ends at the first unescaped
    ``=``, ``:`` or blank; blanks and at most one ``=`` or ``:`` separate it from the value."""
    n = len(line)
    pos = 0
    while pos < n:
        c = line[pos]
        if c == "\\":
            pos += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        pos += 1
    key = line[:min(pos, n)]
    rest = pos
    while rest < n and line[rest] in _BLANK:
        rest += 1
    if rest < n and line[rest] in "=:" :
        rest += 1
        while rest < n and line[rest] in _BLANK:
            rest += 1
    return key, line[rest:]


def _unescape(raw: str, line: int) -> str:
    out = []
    n = len(raw)
    pos = 0
    while pos < n:
        c = raw[pos]
        pos += 1
        if c != "\\":
            out.append(c)
            continue
        if pos >= n:
            break  # a lone backslash at the very end stands for nothing
        c = raw[pos]
        pos += 1
        if c == "u":
            digits = raw[pos:pos + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"line {line}: malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def parse_properties(data: str | bytes) -> list[Property]:
    """Every entry of a properties file, in order (a later duplicate wins for a ``dict``)."""
    text = data.decode("iso-8859-1") if isinstance(data, bytes) else data
    entries = []
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        entries.append(Property(key=_unescape(raw_key, number),
                                value=_unescape(raw_value, number), line=number))
    return entries
