"""Versioned reads, conditional writes and node rules: the same on every backend."""

from __future__ import annotations

import threading

import pytest

from coordinator import (
    BadVersion,
    ClosedError,
    Coordinator,
    InvalidPath,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
)


def test_create_get_set_delete_with_versions(client: Coordinator) -> None:
    assert client.create("/a", b"one") == "/a"
    data, stat = client.get("/a")
    assert data == b"one" and stat.version == 0 and not stat.ephemeral
    stat2 = client.set("/a", b"two", version=0)
    assert stat2.version == 1
    assert stat2.modify_id > stat.modify_id and stat2.create_id == stat.create_id
    assert client.get("/a") == (b"two", stat2)
    assert client.exists("/a") == stat2
    with pytest.raises(BadVersion):
        client.set("/a", b"three", version=0)
    assert client.get("/a")[0] == b"two"
    with pytest.raises(BadVersion):
        client.delete("/a", version=0)
    client.delete("/a", version=1)
    assert client.exists("/a") is None
    with pytest.raises(NoNode):
        client.get("/a")


def test_unconditional_set_and_delete(client: Coordinator) -> None:
    client.create("/u", b"")
    for i in range(3):
        assert client.set("/u", str(i).encode()).version == i + 1
    client.delete("/u")
    assert client.exists("/u") is None


def test_node_errors(client: Coordinator) -> None:
    with pytest.raises(NoNode):
        client.create("/missing/child")
    with pytest.raises(NoNode):
        client.set("/missing", b"x")
    with pytest.raises(NoNode):
        client.delete("/missing")
    with pytest.raises(NoNode):
        client.children("/missing")
    client.create("/p")
    with pytest.raises(NodeExists):
        client.create("/p")
    client.create("/p/c")
    with pytest.raises(NotEmpty):
        client.delete("/p")
    assert client.exists("/p") is not None
    for bad in ("relative", "/trailing/", "/double//slash", "/dot/./x", ""):
        with pytest.raises(InvalidPath):
            client.get(bad)
        with pytest.raises(InvalidPath):  # a bulk read checks its paths all at once
            client.get_many(["/p", bad])


def test_empty_and_binary_data(client: Coordinator) -> None:
    payload = bytes(range(256)) * 4
    client.create("/bin", payload)
    assert client.get("/bin")[0] == payload
    client.create("/empty")
    assert client.get("/empty")[0] == b""


def test_children_are_direct_and_sorted(client: Coordinator) -> None:
    client.create("/r")
    for name in ("b", "a", "c"):
        client.create(f"/r/{name}")
    client.create("/r/a/deep")
    client.create("/r/a/deep/deeper")
    client.create("/rx")  # a sibling sharing the prefix is not a child
    assert client.children("/r") == ["a", "b", "c"]
    assert client.children("/r/a") == ["deep"]
    assert client.children("/r/b") == []


def test_children_hinted_answer_as_children_whatever_the_hint(client: Coordinator) -> None:
    client.create("/r")
    for name in ("b", "a", "a-x", "c"):
        client.create(f"/r/{name}")
    client.create("/r/a/deep")
    client.create("/r/a-x/deep")
    client.create("/rx")
    for likely in ([], ["a"], ["a", "a-x", "b", "c"], ["zz", "a-", "b/c", ""], ["c", "a"]):
        assert client.children_hinted("/r", likely) == ["a", "a-x", "b", "c"], likely
    assert client.children_hinted("/r/a", ["deep", "x"]) == ["deep"]
    with pytest.raises(NoNode):
        client.children_hinted("/none", ["a"])


def test_make_parents_and_ensure_path(client: Coordinator) -> None:
    client.create("/x/y/z", b"leaf", make_parents=True)
    assert client.get("/x/y/z")[0] == b"leaf"
    assert client.children("/x") == ["y"]
    client.ensure_path("/x/y/w/v")
    client.ensure_path("/x/y/w/v")
    assert client.children("/x/y") == ["w", "z"]


def test_recursive_delete(client: Coordinator) -> None:
    client.ensure_path("/tree/a/b")
    client.create("/tree/a/c")
    client.create("/tree/d")
    client.delete("/tree", recursive=True)
    assert client.exists("/tree") is None


def test_ephemeral_nodes(client: Coordinator, other: Coordinator) -> None:
    client.create("/eph", b"me", ephemeral=True)
    stat = other.exists("/eph")
    assert stat is not None and stat.ephemeral_owner == client.session_id
    with pytest.raises(NoChildrenForEphemerals):
        client.create("/eph/child")
    client.close()
    assert other.exists("/eph") is None


def test_create_ids_increase(client: Coordinator, other: Coordinator) -> None:
    ids = []
    for i in range(5):
        who = client if i % 2 else other
        who.create(f"/id{i}")
        stat = who.exists(f"/id{i}")
        assert stat is not None
        ids.append(stat.create_id)
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_sequential_names(client: Coordinator) -> None:
    client.create("/q")
    names = [client.create("/q/item-", b"", sequential=True) for _ in range(3)]
    suffixes = [n.rsplit("-", 1)[1] for n in names]
    assert all(len(s) == 10 and s.isdigit() for s in suffixes)
    assert [int(s) for s in suffixes] == sorted(int(s) for s in suffixes)
    assert len(set(names)) == 3
    assert client.children("/q") == sorted(n.rsplit("/", 1)[1] for n in names)


def test_sequential_unique_and_increasing_under_concurrency(backend) -> None:  # noqa: ANN001
    writers = [backend.connect() for _ in range(4)]
    writers[0].create("/seq")
    results: list[list[str]] = [[] for _ in writers]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(25):
                results[i].append(writers[i].create("/seq/n-", sequential=True))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    every = [n for r in results for n in r]
    assert len(set(every)) == 100
    for mine in results:  # each writer sees its own names increase
        numbers = [int(n.rsplit("-", 1)[1]) for n in mine]
        assert numbers == sorted(numbers)
    assert sorted(writers[0].children("/seq")) == sorted(n.rsplit("/", 1)[1] for n in every)


def test_concurrent_cas_exactly_one_winner_per_version(backend) -> None:  # noqa: ANN001
    writers = [backend.connect() for _ in range(5)]
    writers[0].create("/cas", b"0")
    rounds = 10
    wins = [[0] * rounds for _ in writers]

    def work(i: int) -> None:
        for r in range(rounds):
            barrier.wait()
            try:
                writers[i].set("/cas", f"{i}:{r}".encode(), version=r)
                wins[i][r] = 1
            except BadVersion:
                pass
            barrier.wait()

    barrier = threading.Barrier(len(writers))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(rounds):
        assert sum(w[r] for w in wins) == 1, f"round {r}"
    data, stat = writers[0].get("/cas")
    assert stat.version == rounds
    winner = [i for i in range(len(writers)) if wins[i][rounds - 1]][0]
    assert data == f"{winner}:{rounds - 1}".encode()


def test_closed_client_refuses(backend) -> None:  # noqa: ANN001
    c = backend.connect()
    c.close()
    c.close()  # idempotent
    with pytest.raises(ClosedError):
        c.get("/")
    with pytest.raises(ClosedError):
        c.create("/after-close")
