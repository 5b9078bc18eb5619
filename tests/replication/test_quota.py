"""The replication throttle's token bucket (Kafka's ReplicationQuotaManager) and the throttled
replica lists, on an injected clock."""

from __future__ import annotations

import pytest

from coordinator.clock import ManualClock
from coordinator.codecs import TopicPartition
from replication.quota import ReplicationQuota, ThrottledReplicas, parse_throttled_replicas


def drain(quota: ReplicationQuota, clock: ManualClock, seconds: float, read: int,
          step: float = 0.01) -> int:
    """A fetcher reading ``read`` bytes whenever the quota allows, for ``seconds``."""
    sent = 0
    end = clock.now_ms() + round(seconds * 1000)
    while clock.now_ms() < end:
        if not quota.exceeded():
            quota.record(read)
            sent += read
        clock.advance(round(step * 1000))
    return sent


@pytest.mark.parametrize(("rate", "read"), [(1_000_000, 64 * 1024), (50_000, 1000),
                                            (1_000_000, 1 << 20)])
def test_the_rate_over_a_window_is_the_limit(rate: int, read: int) -> None:
    clock = ManualClock(100_000)  # 100 s
    quota = ReplicationQuota(rate, clock=clock)
    for window in (2.0, 10.0):
        sent = drain(quota, clock, window, read)
        # at most the burst (0.1 s) and one read above the limit; at least a read below it
        assert rate * window - read <= sent <= rate * window + 0.1 * rate + read, (window, sent)


def test_an_exceeded_quota_says_how_long_to_wait() -> None:
    clock = ManualClock(100_000)  # 100 s
    quota = ReplicationQuota(1000, clock=clock)
    quota.record(1100)  # 100 in the bucket: 1000 bytes of debt
    assert quota.exceeded()
    assert quota.wait_time() == pytest.approx(1.0, abs=0.002)
    clock.advance(500)
    assert quota.exceeded() and quota.wait_time() == pytest.approx(0.5, abs=0.002)
    clock.advance(510)
    assert not quota.exceeded() and quota.wait_time() == 0.0


def test_no_rate_is_no_limit_and_a_new_rate_applies_at_once() -> None:
    clock = ManualClock(100_000)  # 100 s
    quota = ReplicationQuota(clock=clock)
    quota.record(10**12)
    assert not quota.exceeded() and quota.rate is None
    quota.set_rate(100)
    quota.record(1000)
    assert quota.exceeded()
    quota.set_rate(None)
    assert not quota.exceeded()
    quota.set_rate(-1)  # Kafka's "unlimited"
    assert quota.rate is None


def test_throttled_replica_lists_name_this_brokers_partitions() -> None:
    assert parse_throttled_replicas("0:1,0:2,1:2,3:1", 1) == {0, 3}
    assert parse_throttled_replicas("0:1, 2:1 ", 1) == {0, 2}
    assert parse_throttled_replicas("*", 7) is True
    assert parse_throttled_replicas("0:2", 1) == set()
    lists = ThrottledReplicas(1, "follower.replication.throttled.replicas")
    lists.update("t", {"follower.replication.throttled.replicas": "0:1,1:2"})
    lists.update("u", {"follower.replication.throttled.replicas": "*"})
    assert TopicPartition("t", 0) in lists and TopicPartition("t", 1) not in lists
    assert TopicPartition("u", 5) in lists and TopicPartition("v", 0) not in lists
    lists.update("t", {})
    assert TopicPartition("t", 0) not in lists
    assert set(lists.topics()) == {"u"}


def test_throttled_reads_are_what_the_bucket_holds() -> None:
    quota = ReplicationQuota(1_000_000)
    assert quota.read_size(1 << 20) == 100_000
    assert ReplicationQuota(5).read_size(1 << 20) == 1
    assert ReplicationQuota().read_size(1 << 20) == 1 << 20
