"""Helpers shared by the storage tests: small batches and an independent CRC-32C."""

from __future__ import annotations

from replication.records import Record, encode_batch


def batch(
    n: int = 1, *, value_size: int = 10, timestamp: int = 1_000, epoch: int = -1, base: int = 0
) -> bytes:
    """A batch of ``n`` records of ``value_size`` bytes, all stamped with ``timestamp``."""
    records = [
        Record(key=f"k{i}".encode(), value=bytes([i % 251]) * value_size, timestamp=timestamp)
        for i in range(n)
    ]
    return encode_batch(records, base_offset=base, partition_leader_epoch=epoch)


def reference_crc32c(data: bytes) -> int:
    """Bit-by-bit CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): slow, but written from
    the definition, so it checks the library and the encoder independently."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def idempotent_batch(
    seq: int, n: int = 1, *, pid: int = 7, epoch: int = 0, timestamp: int = 1_000,
    tag: str = "v",
) -> bytes:
    """A batch of ``n`` records from idempotent producer ``pid`` at ``epoch``, sequences from
    ``seq``."""
    records = [Record(key=None, value=f"{tag}{seq}-{i}".encode(), timestamp=timestamp)
               for i in range(n)]
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
