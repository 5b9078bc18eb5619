"""The truncation rule KIP-101 replaced, as a test double: a follower cuts its log to its high
watermark whenever its leader or leader epoch changes, and truncates to the leader's log end
when its fetch offset is past it.

It lives here, not in the product, because its only use is to show that the scenarios of
``test_kip101.py`` and the randomized loop really test the epoch rule: run with this rule they
lose acknowledged records or leave replicas that disagree for good.
"""

from __future__ import annotations

from typing import Any

from coordinator.codecs import TopicPartition
from interbroker.errors import ErrorCode
from replication.fetcher import ReplicaFetcher, _State
from replication.partition import Partition
from replication.protocol import FetchEndpoint, FetchResult
from replication.replica_manager import ReplicaManager

__all__ = ["HwRuleFetcher", "HwRuleReplicaManager"]


class HwRuleFetcher(ReplicaFetcher):
    """A fetcher that truncates by the high watermark instead of the leader-epoch rounds."""

    def follow(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        # The old rule cut the log to the HW on every change of leader or epoch, at once, as
        # the LeaderAndIsr request made the replica a follower (with or without a leader).
        partition = self._partitions(tp)
        if partition is not None:
            partition.truncate_as_follower(partition.high_watermark, leader_epoch)
        super().follow(tp, leader, leader_epoch)

    def _truncation_offset(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> int | None:
        return partition.high_watermark

    def _diverged(
        self, tp: TopicPartition, state: _State, partition: Partition, result: FetchResult
    ) -> int:
        if result.error != ErrorCode.OFFSET_OUT_OF_RANGE:
            return 0  # batches that do not follow on: the old rule had no answer, it retries
        leo = partition.truncate_as_follower(result.log_end_offset, state.leader_epoch)
        if leo is None:
            return 0
        state.fetch_offset = leo
        return 1


class HwRuleReplicaManager(ReplicaManager):
    """A replica manager whose fetcher follows the old rule (see :class:`HwRuleFetcher`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fetcher = HwRuleFetcher(self.broker_id, self.fetcher.transport, self.partition,
                                     self.config)
