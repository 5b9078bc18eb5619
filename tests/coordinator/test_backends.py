"""Backends are found by their URL scheme among the ``partctl.coordinators`` entry points
(coordinator.url): the built-in ones and any another distribution registers, each imported only
when its scheme is used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator import url
from coordinator.memory import MemoryCoordinator


@pytest.fixture
def registry() -> Iterator[None]:
    """The entry points are read once per process: read them again around the test."""
    url._registered.cache_clear()
    yield
    url._registered.cache_clear()


@pytest.mark.parametrize(("scheme", "module", "name", "port"), [
    ("memory", "coordinator.memory", "MemoryCoordinator", None),
    ("zookeeper", "coordinator.zookeeper", "ZooKeeperCoordinator", 2181),
    ("zk", "coordinator.zookeeper", "ZooKeeperCoordinator", 2181),
    ("etcd", "coordinator.etcd", "EtcdCoordinator", 2379),
])
def test_each_built_in_scheme_resolves_to_its_backend(scheme: str, module: str, name: str,
                                                       port: int | None) -> None:
    cls = url.backend(scheme)
    assert (cls.__module__, cls.__name__, cls.default_port) == (module, name, port)
    if port is not None:
        assert coordinator.parse(f"{scheme}://h1,h2:7/r").hosts == (("h1", port), ("h2", 7))


def test_an_unknown_scheme_is_one_error_naming_the_known_ones() -> None:
    with pytest.raises(coordinator.InvalidURL) as info:
        coordinator.connect("nosuch://h:1")
    assert str(info.value) == ("unknown coordinator scheme 'nosuch' in 'nosuch://h:1' "
                               "(known: etcd, memory, zk, zookeeper)")


FAKE_MODULE = '''
from coordinator.memory import MemoryCoordinator, MemoryStore


class FakeCoordinator(MemoryCoordinator):
    """A third party's backend: hosts with a default port, kept in a memory store."""

    default_port = 4242

    @classmethod
    def from_url(cls, parsed, **options):
        name = "fake:" + ",".join(f"{h}:{p}" for h, p in parsed.hosts) + parsed.root
        return cls(parsed.raw, MemoryStore.named(name))
'''


def _install_fake_distribution(where: Path) -> None:
    """A distribution as pip leaves it: a module and a dist-info naming its entry point."""
    (where / "partctl_fake_backend.py").write_text(textwrap.dedent(FAKE_MODULE))
    info = where / "partctl_fake_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: partctl-fake-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[partctl.coordinators]\nfake = partctl_fake_backend:FakeCoordinator\n")


def test_a_third_party_backend_is_found_by_its_scheme_and_imported_only_when_used(
        registry: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert url.schemes() == ["etcd", "fake", "memory", "zk", "zookeeper"]
    with pytest.raises(coordinator.InvalidURL, match=r"\(known: etcd, fake, memory, zk, "):
        coordinator.parse("nosuch://h")
    assert "partctl_fake_backend" not in sys.modules  # listed, not imported
    client = coordinator.connect("fake://h1,h2:99/r")
    try:
        assert "partctl_fake_backend" in sys.modules
        assert type(client).__name__ == "FakeCoordinator"
        assert isinstance(client, MemoryCoordinator)
        assert client.store.name == "fake:h1:4242,h2:99/r"  # type: ignore[attr-defined]
        client.create("/x", b"1")
        assert client.get("/x")[0] == b"1"
    finally:
        client.close()
        sys.modules.pop("partctl_fake_backend", None)


@pytest.mark.processes
def test_a_backend_and_its_client_library_are_imported_only_when_its_scheme_is_used() -> None:
    probe = textwrap.dedent("""
        import sys
        import coordinator

        def loaded():
            return sorted(m for m in ("coordinator.zookeeper", "kazoo", "coordinator.etcd",
                                      "grpc", "etcd3") if m in sys.modules)

        coordinator.connect("memory://lazy").close()
        print(loaded())
        coordinator.parse("zk://127.0.0.1:1")
        print(loaded())
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.splitlines() == ["[]", "['coordinator.zookeeper', 'kazoo']"]
