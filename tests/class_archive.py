"""Class-data sharing for the tests' JVMs (Java's dynamic AppCDS): the classes a JVM of one
classpath and main class loaded are written once into an archive, which later JVMs of the same
kind map instead of loading and verifying those classes from the jars again. A Kafka broker then
starts on about 40% less CPU (6-7 s of CPU to serving on Kafka 3.9 in ZooKeeper mode, 3.5-4
with its archive), a tool on less too; what the JVM runs is the same code of the same jars.

The archives live in a cache outside the work tree (``$PARTCTL_CDS_CACHE``, default ``cds/`` in
the Kafka jars' cache, which CI keeps between runs: ``~/.cache/partctl/kafka/cds``), one per
(Java, classpath with each jar's size and time, main class, JVM options). The first JVM of a
kind dumps its archive at its exit (``-XX:ArchiveClassesAtExit``) to a name of its own; once it
has ended of itself (not killed) the archive is checked by a JVM that must map it
(``-Xshare:on``, with its checksums verified) and only then renamed into place: readers never
see a partial file, and of two pytest-xdist workers only the one holding the claim dumps (the
other runs without, meanwhile). An archive that no longer matches (a jar changed, another Java)
is left unused by the JVM itself (``-Xshare:auto``, the default), quietly: the JVM's CDS log
lines are off, so that a tool's stdout stays the tool's. ``PARTCTL_CDS=0`` turns it all off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Archive", "archive_for", "cache_directory", "compiled_jar"]

QUIET = "-Xlog:cds*=off"
"""CDS's own log lines (a mismatched archive's warning; the classes a dump skips) would go to
stdout, which is a tool's answer (or the tool shell's protocol)."""
CLAIM_STALE = 900.0
"""Seconds after which a claim whose dumper never finished (a run killed) is taken over."""


def cache_directory() -> Path:
    configured = os.environ.get("PARTCTL_CDS_CACHE")
    if configured:
        return Path(configured)
    from tests.kafka.harness import kafka_cache
    return kafka_cache() / "cds"


@dataclass(frozen=True, slots=True)
class Archive:
    """The JVM options of one start (``options``); where that JVM dumps a new archive
    (``pending``) when none was there, to be :meth:`finish`-ed once the JVM has ended."""

    options: tuple[str, ...] = ()
    pending: Path | None = None
    final: Path | None = None
    check: tuple[str, ...] = ()
    """The ``java`` command line (options and classpath) that must map the new archive."""

    def finish(self, returncode: int | None) -> None:
        """After the JVM has ended (``returncode``, negative when a signal killed it): keep
        the archive it dumped if it ended of itself and the archive maps; else drop it.
        Never raises: without an archive the next JVM dumps again."""
        if self.pending is None or self.final is None:
            return
        try:
            if (returncode is not None and returncode >= 0 and self.pending.exists()
                    and _maps(self.pending, self.check)):
                os.replace(self.pending, self.final)
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            with contextlib.suppress(OSError):
                self.pending.unlink()
            with contextlib.suppress(OSError):
                _claim_of(self.final).unlink()


NONE = Archive()


def _maps(archive: Path, check: Sequence[str]) -> bool:
    """Whether a JVM maps ``archive``. One that cannot crashes (SIGBUS on a truncated file, its
    checksums notwithstanding): its crash report goes next to the archive, and away."""
    report = archive.with_name(archive.name + ".hs_err")
    try:
        done = subprocess.run(["java", f"-XX:SharedArchiveFile={archive}", "-Xshare:on",
                               "-XX:+VerifySharedSpaces", f"-XX:ErrorFile={report}", QUIET,
                               *check, "-version"],
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        with contextlib.suppress(OSError):
            report.unlink()
    return done.returncode == 0


def _claim_of(final: Path) -> Path:
    return final.with_name(final.name + ".claim")


def _java_identity() -> str:
    java = shutil.which("java")
    if java is None:
        return ""
    home = Path(java).resolve().parent.parent
    parts = [str(home)]
    for name in ("release", "lib/server/libjvm.so"):
        with contextlib.suppress(OSError):
            stat = (home / name).stat()
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def _classpath_identity(classpath: str) -> list[str]:
    entries: list[str] = []
    for entry in filter(None, classpath.split(os.pathsep)):
        paths = (sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*")
                 else [Path(entry)])
        for path in paths:
            stat = path.stat()
            entries.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return entries


def archive_for(classpath: str, main: str, jvm_options: Sequence[str], *, dump: bool = True
                ) -> Archive:
    """What a JVM of ``classpath``, ``main`` and ``jvm_options`` adds to its options: the
    archive of its kind when there is one; else, when ``dump`` and no other JVM is dumping it,
    a dump at its exit (then :meth:`Archive.finish` it); else nothing. A directory on the
    classpath (which CDS refuses) or a cache that cannot be written: nothing."""
    if os.environ.get("PARTCTL_CDS") == "0":
        return NONE
    try:
        if any(Path(e).is_dir() for e in classpath.split(os.pathsep) if not e.endswith("*")):
            return NONE
        key = hashlib.sha256("\n".join(
            [_java_identity(), main, *jvm_options, *_classpath_identity(classpath)]).encode()
        ).hexdigest()[:20]
        cache = cache_directory()
        final = cache / f"{main.rsplit('/', 1)[-1]}-{key}.jsa"
        if final.exists():
            return Archive(options=(f"-XX:SharedArchiveFile={final}", QUIET))
        if not dump:
            return NONE
        cache.mkdir(parents=True, exist_ok=True)
        claim = _claim_of(final)
        with contextlib.suppress(FileNotFoundError):
            if time.time() - claim.stat().st_mtime > CLAIM_STALE:
                claim.unlink()
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:  # FileExistsError included: another JVM is dumping it
        return NONE
    pending = final.with_name(f"{final.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    return Archive(options=(f"-XX:ArchiveClassesAtExit={pending}", QUIET), pending=pending,
                   final=final, check=(*jvm_options, "-cp", classpath))


def compiled_jar(name: str, sources: Sequence[Path], classpath: Sequence[Path] = ()) -> Path:
    """``sources`` compiled (against the jars of ``classpath``) into a jar in the cache, once
    per content of the sources and the jars and per Java; a jar, not a directory of classes,
    so that the JVMs that run it can have a class archive. Written under a name of its own,
    then renamed into place; :class:`subprocess.CalledProcessError` when javac fails."""
    import zipfile
    key = hashlib.sha256("\n".join(
        [_java_identity(), *_classpath_identity(os.pathsep.join(map(str, classpath)))]
        + [hashlib.sha256(s.read_bytes()).hexdigest() for s in sources]).encode()
    ).hexdigest()[:20]
    cache = cache_directory()
    jar = cache / f"{name}-{key}.jar"
    if jar.exists():
        return jar
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"{name}-{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    try:
        classes = work / "classes"
        command = ["javac", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-nowarn",
                   "-d", str(classes), *map(str, sources)]
        if classpath:
            command[4:4] = ["-cp", os.pathsep.join(map(str, classpath))]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=180)
        built = work / "built.jar"
        with zipfile.ZipFile(built, "w") as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        os.replace(built, jar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return jar
