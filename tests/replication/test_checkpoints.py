from pathlib import Path

import pytest

from coordinator.codecs import TopicPartition
from replication.checkpoints import (
    OffsetCheckpointFile,
    clear_clean_shutdown,
    has_clean_shutdown,
    log_directory_name,
    mark_clean_shutdown,
    parse_log_directory_name,
)
from replication.errors import CorruptCheckpointError


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def test_high_watermark_checkpoint_round_trip_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    hws = {tp("orders", 1): 250, tp("orders", 0): 1_000_000_000_000, tp("a-b.c_d", 7): 0}
    OffsetCheckpointFile(path).write(hws)
    assert path.read_bytes() == b"0\n3\na-b.c_d 7 0\norders 0 1000000000000\norders 1 250\n"
    assert OffsetCheckpointFile(path).read() == hws
    assert not list(tmp_path.glob("*.tmp"))


def test_rewrite_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    OffsetCheckpointFile(path).write({tp("t", 0): 5, tp("t", 1): 6})
    OffsetCheckpointFile(path).write({tp("t", 0): 9})
    assert OffsetCheckpointFile(path).read() == {tp("t", 0): 9}


def test_the_same_offsets_again_are_not_written_unless_the_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({tp("t", 0): 5})
    written = path.stat().st_ino
    checkpoint.write({tp("t", 0): 5})  # unchanged: the file is left as it is
    assert path.stat().st_ino == written
    checkpoint.write({tp("t", 0): 6})  # changed: replaced (a new file, renamed over it)
    assert path.stat().st_ino != written and checkpoint.read() == {tp("t", 0): 6}
    path.unlink()
    checkpoint.write({tp("t", 0): 6})  # unchanged, but gone: written again
    assert checkpoint.read() == {tp("t", 0): 6}


def test_missing_checkpoint_reads_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


@pytest.mark.parametrize(
    "content",
    [b"0\n2\nt 0 5\n", b"0\n1\nt 0\n", b"0\n1\nt x 5\n", b"0\n1\nt 0 +5\n", b"9\n0\n", b"0\n"],
)
def test_malformed_hw_checkpoint_is_a_typed_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_topic_with_a_space_cannot_be_checkpointed(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "cp").write({tp("bad topic", 0): 1})
    assert not (tmp_path / "cp").exists()


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    assert not has_clean_shutdown(tmp_path)
    mark_clean_shutdown(tmp_path)
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert has_clean_shutdown(tmp_path)
    clear_clean_shutdown(tmp_path)
    assert not has_clean_shutdown(tmp_path)


def test_log_directory_names() -> None:
    assert log_directory_name(tp("my-topic", 12)) == "my-topic-12"
    assert parse_log_directory_name("my-topic-12") == tp("my-topic", 12)
    for bad in ["topic", "topic-", "-3", "topic-x"]:
        with pytest.raises(ValueError):
            parse_log_directory_name(bad)
