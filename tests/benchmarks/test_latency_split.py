"""The latency rows' split from librdkafka's statistics (benchmarks/versus/rdkafka.py): each
second's window per broker, averaged weighted by what each window counted; the bootstrap
connections and empty windows left out."""

from __future__ import annotations

import json

import pytest

from benchmarks.versus.rdkafka import _Windows


def _stats(*brokers: tuple[int, int, float, float, int, float, float]) -> str:
    """librdkafka's statistics JSON, its fields in microseconds: per broker (node id, rtt
    count, p50, p99, int_latency count, p50, p99)."""
    out = {}
    for node, rtt_n, rtt_50, rtt_99, q_n, q_50, q_99 in brokers:
        out[f"127.0.0.1:{9000 + node}/{node}"] = {
            "nodeid": node,
            "rtt": {"cnt": rtt_n, "p50": rtt_50, "p99": rtt_99, "avg": rtt_50},
            "int_latency": {"cnt": q_n, "p50": q_50, "p99": q_99, "avg": q_50}}
    out["127.0.0.1:9000/bootstrap"] = {"nodeid": -1, "rtt": {"cnt": 5, "p50": 9e9, "p99": 9e9}}
    return json.dumps({"name": "rdkafka#producer-1", "brokers": out})


def test_windows_average_weighted_by_their_counts() -> None:
    windows = _Windows()
    windows(_stats((1, 100, 8_000, 40_000, 3_000, 100, 20_000),
                   (2, 300, 12_000, 80_000, 1_000, 300, 60_000)))
    windows(_stats((1, 0, 0, 0, 0, 0, 0)))  # an idle second: nothing to weigh
    got = windows.figures()
    assert got["rtt_p50"] == pytest.approx((100 * 8 + 300 * 12) / 400)
    assert got["rtt_p99"] == pytest.approx((100 * 40 + 300 * 80) / 400)
    assert got["queue_p50"] == pytest.approx((3_000 * 0.1 + 1_000 * 0.3) / 4_000)
    assert got["queue_p99"] == pytest.approx((3_000 * 20 + 1_000 * 60) / 4_000)


def test_cleared_windows_give_no_figures() -> None:
    windows = _Windows()
    windows(_stats((1, 10, 1_000, 2_000, 10, 1_000, 2_000)))
    windows.clear()
    assert windows.figures() == {}
