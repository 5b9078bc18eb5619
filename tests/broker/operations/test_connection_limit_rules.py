"""The pure rules behind the open-file guard, the throttled log and idle expiry, and the
``connections.max.idle.ms`` key (the processes are in test_resource_limits.py)."""

from __future__ import annotations

import errno
import logging

import pytest

from broker.config import ConfigError, parse_config
from broker.connection_limits import idle_among, sweep_interval
from broker.open_files import Budget, partition_budget, refusal
from coordinator.clock import ManualClock
from replication.log_throttle import ThrottledLog, out_of_descriptors

BASE = "broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"


def test_connections_max_idle_ms_is_kafkas_ten_minutes_by_default() -> None:
    assert parse_config(BASE).config.connections_max_idle_ms == 600_000
    assert parse_config(BASE + "connections.max.idle.ms=1500\n").config \
        .connections_max_idle_ms == 1500
    loaded = parse_config(BASE + "connections.max.idle.ms=-1\n")
    assert loaded.config.connections_max_idle_ms == -1 and not loaded.warnings
    with pytest.raises(ConfigError, match="connections.max.idle.ms"):
        parse_config(BASE + "connections.max.idle.ms=soon\n")


def test_the_partitions_share_is_80_percent_less_a_reserve() -> None:
    assert partition_budget(512) == 409 - 64
    assert partition_budget(20_000) == 16_000 - 64
    assert partition_budget(10) == 0


def test_a_broker_past_its_share_is_refused_naming_the_limit_and_what_fits() -> None:
    # 20,000 descriptors: 15,936 for partitions, 5,312 partitions at 3 each
    assert refusal(20_000, {}, {1: 5_312}) is None
    message = refusal(20_000, {1: 300}, {1: 8_000, 2: 10})
    assert message is not None
    assert "Broker 1" in message and "open-file limit" in message and "20,000" in message
    assert "5,212 more partition replica(s) fit" in message
    # every broker of the assignment is checked, those given nothing are not
    assert refusal(20_000, {1: 15_936}, {2: 100, 1: 0}) is None
    assert "Broker 2" in (refusal(20_000, {2: 15_936}, {1: 1, 2: 1}) or "")
    assert refusal(None, {}, {1: 10**9}) is None  # no limit


def test_a_budget_counts_what_one_request_admitted_already() -> None:
    budget = Budget(20_000, {1: 300})
    first = {p: (1, 2) for p in range(5_000)}
    assert budget.admit(first) is None
    assert budget.held[1] == 300 + 15_000 and budget.held[2] == 15_000
    refused = budget.admit({p: (1,) for p in range(300)})
    assert refused is not None and "212 more partition replica(s) fit" in refused
    assert budget.held[1] == 15_300  # a refused assignment is not counted


def test_a_throttled_log_writes_one_line_per_interval_with_the_count_left_out(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(start_ms=0)
    throttled = ThrottledLog(logging.getLogger("t"), 10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        assert throttled.warning("out of files: %s", "a")
        for _second in range(1, 10):
            clock.advance(1000)
            assert not throttled.warning("out of files: %s", "b")
        clock.advance(1000)
        assert throttled.warning("out of files: %s", "c")
    assert [r.getMessage() for r in caplog.records] == [
        "out of files: a", "out of files: c (9 more like it in the last 10 s)"]
    assert all(r.exc_info is None for r in caplog.records)


def test_out_of_descriptors_is_emfile_or_enfile() -> None:
    assert out_of_descriptors(OSError(errno.EMFILE, "Too many open files"))
    assert out_of_descriptors(OSError(errno.ENFILE, "Too many open files in system"))
    assert not out_of_descriptors(OSError(errno.ENOSPC, "No space left"))
    assert not out_of_descriptors(ValueError("x"))


class _Conn:
    def __init__(self, active: float, busy: bool = False) -> None:
        self.active = active
        self._busy = busy

    def busy(self) -> bool:
        return self._busy

    def expire(self) -> None:
        pass


def test_idle_connections_are_those_quiet_for_longer_and_not_being_answered() -> None:
    quiet, recent, waiting = _Conn(0.0), _Conn(9.0), _Conn(0.0, busy=True)
    assert idle_among([quiet, recent, waiting], now=10.0, idle_s=5.0) == [quiet]
    assert sweep_interval(600_000) == 1.0
    assert sweep_interval(1_500) == 0.15
    assert sweep_interval(10) == 0.05
