"""Path rules (coordinator/paths.py): the bulk check a million-path read runs gives every
path the single check's verdict, naming the first bad one."""

from __future__ import annotations

import random

import pytest

from coordinator import InvalidPath, paths

GOOD = ["/", "/a", "/brokers/topics/t/partitions/0/state", "/a/.b", "/a/b.", "/a..b/c",
        "/ünï/cødé", "/a b/c"]
BAD = ["", "a", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/.", "/a\x00b", "/a\n/b",
       "/a\n", "\n/a", "/a/\n/b"]


def _verdict(check: object, items: list) -> str | None:
    try:
        check(items)  # type: ignore[operator]
    except InvalidPath as exc:
        return str(exc)
    return None


def _one_by_one(items: list) -> None:
    for path in items:
        paths.validate(path)


def test_the_bulk_check_agrees_with_the_single_one() -> None:
    rng = random.Random(3)
    for _ in range(3_000):
        items = [rng.choice(GOOD) for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.5:
            items.insert(rng.randint(0, len(items)), rng.choice(BAD))
        if rng.random() < 0.2:
            items.insert(rng.randint(0, len(items)), rng.choice(BAD))
        assert _verdict(paths.validate_all, items) == _verdict(_one_by_one, items), items


def test_paths_that_are_not_text_are_refused_one_by_one() -> None:
    with pytest.raises(InvalidPath, match="absolute"):
        paths.validate_all(["/a", b"/b"])  # type: ignore[list-item]
    with pytest.raises(InvalidPath):
        paths.validate_all(["/a", None])  # type: ignore[list-item]
    paths.validate_all([])
    paths.validate_all(tuple(f"/t/{i}/state" for i in range(10_000)))
