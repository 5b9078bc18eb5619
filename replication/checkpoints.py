"""Checkpoint files in Kafka's text format, and the clean-shutdown marker.

Kafka's checkpoints are all one shape: a version line (``0``), a line with the entry count, then
one space-separated entry per line. ``replication-offset-checkpoint`` holds ``topic partition
offset`` (the high watermarks of a log directory); ``leader-epoch-checkpoint`` holds
``epoch startOffset``. Keeping the format means Kafka's tools and our tests read the same bytes.

A checkpoint must never be half-written, since a torn high watermark or epoch history is worse
than a stale one: :func:`atomic_write` writes a temporary file, fsyncs it, renames it over the
old one and fsyncs the directory so the rename itself survives a crash.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from coordinator.codecs import TopicPartition
from replication.errors import CorruptCheckpointError

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "OffsetCheckpointFile",
    "PRIVATE_DIRECTORY_MODE",
    "PRIVATE_FILE_MODE",
    "log_directory_name",
    "parse_log_directory_name",
    "atomic_write",
    "clear_clean_shutdown",
    "fsync_directory",
    "has_clean_shutdown",
    "make_private_directory",
    "mark_clean_shutdown",
    "move_aside",
    "parse_checkpoint",
    "parse_checkpoint_bytes",
    "parse_int",
    "format_checkpoint",
]

CHECKPOINT_VERSION = 0
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

PRIVATE_DIRECTORY_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
"""Modes of everything the data plane creates: records and offsets are the users' data, so no
other account on the machine reads them, whatever the process umask allows."""


def log_directory_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>``: the name of a partition's log directory."""
    _check_topic(tp.topic)
    if tp.partition < 0:
        raise ValueError(f"invalid partition {tp.partition}")
    return f"{tp.topic}-{tp.partition}"


def parse_log_directory_name(name: str) -> TopicPartition:
    """Parse ``<topic>-<partition>``; the topic may itself contain dashes."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return TopicPartition(topic=topic, partition=int(partition))


def _check_topic(topic: str) -> None:
    # Checkpoint lines are space-separated, so a topic with whitespace could not be read back.
    if not topic or any(c.isspace() for c in topic) or "/" in topic:
        raise ValueError(f"invalid topic name {topic!r}")


def make_private_directory(directory: Path) -> None:
    """Create ``directory``, and whichever of its parents are missing, owner-only (0700).

    ``Path.mkdir(parents=True)`` would give the parents the umask's default mode. A directory
    that already exists is left as it is: it was someone's choice.
    """
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=PRIVATE_DIRECTORY_MODE, exist_ok=True)


def fsync_directory(directory: Path) -> None:
    """fsync a directory so that creations, renames and deletions in it are durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_files(paths: Iterable[Path]) -> None:
    """fsync each of ``paths`` that still exists (one deleted meanwhile needs none)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def move_aside(path: Path, now_ms: int) -> Path:
    """Rename a corrupt ``path`` to ``<name>.corrupt-<now_ms>`` (the first free such name) and
    return the new path: the bytes are kept for whoever investigates, out of the way of the
    rebuilt file that takes the name."""
    stamp = now_ms
    while (target := path.with_name(f"{path.name}.corrupt-{stamp}")).exists():
        stamp += 1
    os.replace(path, target)
    fsync_directory(path.parent)
    return target


def format_checkpoint(lines: Iterable[str]) -> bytes:
    """Kafka's checkpoint text: version, count, then the entry lines, each ending in a newline."""
    body = list(lines)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(body)), *body]).encode(
        "utf-8"
    )


def parse_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """Entry lines of a checkpoint, each split into exactly ``fields`` fields.

    A missing file reads as empty (nothing checkpointed yet). Anything malformed raises
    :class:`CorruptCheckpointError` naming the file and line.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return parse_checkpoint_bytes(data, fields, str(path))


def parse_checkpoint_bytes(data: bytes, fields: int, path: str = "checkpoint") -> list[list[str]]:
    """:func:`parse_checkpoint` of a checkpoint's bytes (``path`` names it in errors)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not UTF-8 text") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: bad count line {lines[1]!r}") from exc
    entries = lines[2:]
    if count != len(entries):
        raise CorruptCheckpointError(f"{path}: count says {count}, found {len(entries)} entries")
    out = []
    for number, line in enumerate(entries, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpointError(f"{path}:{number}: malformed line {line!r}")
        out.append(parts)
    return out


def parse_int(path: Path | str, text: str) -> int:
    # int() alone would also take "+1", "1_000" and non-ASCII digits.
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        raise CorruptCheckpointError(f"{path}: {text!r} is not an integer")
    return int(text)


class OffsetCheckpointFile:
    """A per-log-directory ``topic partition offset`` checkpoint, such as the high watermarks in
    ``replication-offset-checkpoint`` or the recovery points."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: dict[TopicPartition, int] | None = None
        """What this object last wrote, for the write that would change nothing."""

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Atomically replace the checkpoint with ``offsets`` (sorted, for stable bytes). The
        same offsets this object wrote last, with the file still there, are not written again:
        a broker of idle partitions checkpoints its HWs every few seconds (Kafka rewrites the
        file each time)."""
        if offsets == self._written and self.path.exists():
            return
        for tp in offsets:
            _check_topic(tp.topic)
        lines = [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
        self._written = None
        atomic_write(self.path, format_checkpoint(lines))
        self._written = dict(offsets)

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; empty if the file does not exist."""
        out: dict[TopicPartition, int] = {}
        for topic, partition, offset in parse_checkpoint(self.path, 3):
            tp = TopicPartition(topic=topic, partition=parse_int(self.path, partition))
            out[tp] = parse_int(self.path, offset)
        return out


def mark_clean_shutdown(directory: Path) -> None:
    """Leave the marker that says everything in ``directory`` was flushed and closed."""
    (directory / CLEAN_SHUTDOWN_FILE).touch(mode=PRIVATE_FILE_MODE)
    fsync_directory(directory)


def has_clean_shutdown(directory: Path) -> bool:
    return (directory / CLEAN_SHUTDOWN_FILE).exists()


def clear_clean_shutdown(directory: Path) -> None:
    """Remove the marker once the directory is open again, so a later crash is noticed."""
    marker = directory / CLEAN_SHUTDOWN_FILE
    if marker.exists():
        marker.unlink()
        fsync_directory(directory)
