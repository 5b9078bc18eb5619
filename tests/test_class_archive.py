"""The tests' class archives (tests/class_archive.py) on a real JVM: an archive is used once
written, only a complete one that maps is kept, one JVM at a time writes it, and an archive
that is no longer right is ignored without a word on stdout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.class_archive import Archive, archive_for, compiled_jar

pytestmark = pytest.mark.processes

HELLO = """public final class Hello {
    public static void main(String[] args) {
        System.out.println("hello " + java.util.List.of(args));
    }
}
"""
OPTIONS = ("-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hello, compiled once for the module (javac is the slow part)."""
    if shutil.which("javac") is None:
        pytest.skip("no javac")
    root = tmp_path_factory.mktemp("hello")
    source = root / "Hello.java"
    source.write_text(HELLO)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PARTCTL_CDS_CACHE", str(root / "cache"))
        return compiled_jar("hello", [source])


@pytest.fixture
def jar(compiled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Hello's jar in a cache of the test's own, where its archives go."""
    monkeypatch.setenv("PARTCTL_CDS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PARTCTL_CDS", raising=False)
    (tmp_path / "cache").mkdir()
    return Path(shutil.copy(compiled, tmp_path / "cache" / compiled.name))


def hello(jar: Path, archive: Archive) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", *OPTIONS, *archive.options, "-cp", str(jar), "Hello", "x"],
                          capture_output=True, text=True, timeout=60)


def cache_files(jar: Path) -> list[str]:
    return sorted(p.name.split("-")[0] + p.suffix for p in jar.parent.iterdir())


def test_the_first_jvm_writes_the_archive_and_the_next_maps_it(jar: Path) -> None:
    first = archive_for(str(jar), "Hello", OPTIONS)
    assert first.pending is not None and first.final is not None
    assert archive_for(str(jar), "Hello", OPTIONS).options == ()  # claimed: one writer
    done = hello(jar, first)
    assert (done.returncode, done.stdout) == (0, "hello [x]\n")
    first.finish(done.returncode)
    assert first.final.exists() and not first.pending.exists()
    assert cache_files(jar) == ["Hello.jsa", "hello.jar"]  # no claim, no temporary left

    second = archive_for(str(jar), "Hello", OPTIONS)
    assert second.options[0] == f"-XX:SharedArchiveFile={first.final}"
    assert second.pending is None
    done = hello(jar, second)
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello [x]\n", "")


def test_an_archive_of_a_killed_jvm_or_a_truncated_one_is_dropped(jar: Path) -> None:
    first = archive_for(str(jar), "Hello", OPTIONS)
    assert first.pending is not None and first.final is not None
    assert hello(jar, first).returncode == 0
    first.finish(-9)  # as if a signal had ended it: what it wrote may be partial
    assert cache_files(jar) == ["hello.jar"]

    again = archive_for(str(jar), "Hello", OPTIONS)
    assert again.pending is not None and again.final is not None
    assert hello(jar, again).returncode == 0
    data = again.pending.read_bytes()
    again.pending.write_bytes(data[: len(data) // 2])  # a JVM that maps this one crashes
    again.finish(0)
    assert cache_files(jar) == ["hello.jar"]  # nor the crash report of the JVM that tried it


@pytest.mark.parametrize("content", ["garbage", "another classpath's"])
def test_an_archive_that_is_not_right_is_ignored_quietly(jar: Path, tmp_path: Path,
                                                          content: str) -> None:
    final = archive_for(str(jar), "Hello", OPTIONS).final
    assert final is not None
    if content == "garbage":
        final.write_bytes(b"\x7fnot an archive" * 10_000)
    else:  # an archive that maps, of a classpath with one more jar
        other = tmp_path / "other.jar"
        shutil.copy(jar, other)
        wrong = archive_for(f"{jar}:{other}", "Hello", OPTIONS)
        assert wrong.pending is not None
        subprocess.run(["java", *OPTIONS, *wrong.options, "-cp", f"{jar}:{other}", "Hello"],
                       check=True, capture_output=True, timeout=60)
        wrong.finish(0)
        assert wrong.final is not None
        shutil.copy(wrong.final, final)
    used = archive_for(str(jar), "Hello", OPTIONS)
    assert used.options[0] == f"-XX:SharedArchiveFile={final}"
    done = hello(jar, used)
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello [x]\n", "")
