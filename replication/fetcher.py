"""A follower broker's replica fetcher: truncate by leader epochs, then fetch from the leaders.

One :class:`ReplicaFetcher` serves every partition its broker follows. A partition enters it in
the *truncating* state whenever its leader or leader epoch changes, and leaves that state after
the OffsetsForLeaderEpoch rounds of :mod:`replication.truncation` (KIP-101 as refined by
KIP-279): ask about the latest local epoch; if the leader answers with an epoch this log does
not have, cut where the largest local epoch below it ends and ask about that one; once the
epochs match, cut at the smaller of the two end offsets. It then fetches from its log end.
Never does it truncate to its high watermark (unless a test switches on
``ReplicaConfig.legacy_hw_truncation`` to show what that rule breaks).

:meth:`ReplicaFetcher.run_once` does one round over all partitions, which is what deterministic
tests drive; :meth:`ReplicaFetcher.start` runs rounds on a background thread, sleeping when a
round moved nothing until a leader it fetches from appends (or the backoff passes). The leaders
are reached through ``transport``, a mapping from broker id to a
:class:`~replication.protocol.FetchEndpoint`: in process, the brokers' replica managers; later,
network clients with the same two calls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coordinator.codecs import TopicPartition
from replication.config import ReplicaConfig
from replication.epochs import EpochEndOffset
from replication.errors import StorageError
from replication.partition import Partition
from replication.protocol import ErrorCode, FetchEndpoint
from replication.truncation import (
    AskAgain,
    Truncate,
    TruncationDecision,
    decide_truncation,
    decide_without_epochs,
    first_epoch_to_ask,
)

__all__ = ["FetchPosition", "ReplicaFetcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPosition:
    """Where a followed partition stands in its fetcher."""

    leader: int
    leader_epoch: int
    fetch_offset: int
    truncating: bool


class _State:
    __slots__ = ("leader", "leader_epoch", "fetch_offset", "truncating")

    def __init__(self, leader: int, leader_epoch: int) -> None:
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.fetch_offset = -1
        self.truncating = True


class ReplicaFetcher:
    """Fetches every partition broker ``broker_id`` follows from its leader."""

    def __init__(
        self,
        broker_id: int,
        transport: Mapping[int, FetchEndpoint],
        partitions: Callable[[TopicPartition], Partition | None],
        config: ReplicaConfig,
    ) -> None:
        self.broker_id = broker_id
        self.transport = transport
        self._partitions = partitions
        self._config = config
        self._lock = threading.Lock()
        self._states: dict[TopicPartition, _State] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed: dict[int, object] = {}
        self.epoch_requests = 0
        """OffsetsForLeaderEpoch requests sent, for tests and metrics."""
        self.fetch_requests = 0

    # -- membership ----------------------------------------------------------------------------

    def add_partition(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        """Follow ``leader`` at ``leader_epoch``: truncation first, then fetching."""
        with self._lock:
            self._states[tp] = _State(leader, leader_epoch)
        self._wake.set()

    def remove_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._states.pop(tp, None)

    def positions(self) -> dict[TopicPartition, FetchPosition]:
        with self._lock:
            return {
                tp: FetchPosition(
                    leader=s.leader, leader_epoch=s.leader_epoch,
                    fetch_offset=s.fetch_offset, truncating=s.truncating,
                )
                for tp, s in self._states.items()
            }

    # -- one round -----------------------------------------------------------------------------

    def run_once(self) -> int:
        """Truncate what needs it, then fetch once for every partition; returns the bytes
        appended plus the truncations completed (0: the round changed nothing)."""
        with self._lock:
            states = list(self._states.items())
        progress = 0
        for tp, state in states:
            endpoint = self.transport.get(state.leader)
            if endpoint is None:
                continue
            partition = self._partitions(tp)
            if partition is None:
                self.remove_partition(tp)
                continue
            if self._thread is not None:
                self._subscribe(state.leader, endpoint)
            if state.truncating:
                if not self._truncate(tp, state, partition, endpoint):
                    continue
                progress += 1
            progress += self._fetch(tp, state, partition, endpoint)
        return progress

    def _truncate(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> bool:
        epoch = state.leader_epoch
        if self._config.legacy_hw_truncation:
            leo = partition.truncate_as_follower(partition.high_watermark, epoch)
        else:
            decision = self._truncation_rounds(tp, state, partition, endpoint)
            if decision is None:
                return False
            leo = partition.truncate_as_follower(decision.offset, epoch)
        if leo is None:
            return False
        state.fetch_offset = leo
        state.truncating = False
        return True

    def _truncation_rounds(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> TruncationDecision | None:
        """Run the OffsetsForLeaderEpoch rounds; None if the leader could not answer."""
        view = partition.epoch_view()
        asked = first_epoch_to_ask(view)
        if asked is None:
            if view.log_end_offset == view.log_start_offset:
                return Truncate(offset=view.log_end_offset)
            return decide_without_epochs(view)
        for _ in range(len(view.entries) + 1):
            self.epoch_requests += 1
            answer = endpoint.offsets_for_leader_epoch(tp, asked, state.leader_epoch)
            if answer.error:
                log.debug("%s: OffsetsForLeaderEpoch(%d) from %d: %s", tp, asked,
                          state.leader, answer.error.name)
                return None
            try:
                decision = decide_truncation(
                    view, asked, EpochEndOffset(epoch=answer.epoch, end_offset=answer.end_offset)
                )
            except ValueError:
                log.warning("%s: leader %d answered epoch %d to epoch %d", tp, state.leader,
                            answer.epoch, asked)
                return None
            if not isinstance(decision, AskAgain):
                return decision
            if partition.truncate_as_follower(decision.offset, state.leader_epoch) is None:
                return None
            view = partition.epoch_view()
            asked = decision.epoch
        log.warning("%s: truncation did not converge; will retry", tp)
        return None

    def _fetch(
        self, tp: TopicPartition, state: _State, partition: Partition, endpoint: FetchEndpoint
    ) -> int:
        epoch = state.leader_epoch
        self.fetch_requests += 1
        result = endpoint.fetch(
            tp, state.fetch_offset, self._config.replica_fetch_max_bytes, self.broker_id, epoch
        )
        error = result.error
        if error == ErrorCode.NONE:
            try:
                leo = partition.append_as_follower(result.records, result.high_watermark, epoch)
            except StorageError as exc:
                # The fetched batches do not continue this log: it must have diverged.
                log.warning("%s: follower append at %d failed: %s", tp, state.fetch_offset, exc)
                if not self._config.legacy_hw_truncation:
                    state.truncating = True
                return 0
            if leo is None:
                return 0
            state.fetch_offset = leo
            return len(result.records)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if state.fetch_offset < result.log_start_offset:
                leo = partition.restart_log_as_follower(result.log_start_offset, epoch)
            elif self._config.legacy_hw_truncation:
                leo = partition.truncate_as_follower(result.log_end_offset, epoch)
            else:
                state.truncating = True
                return 0
            if leo is not None:
                state.fetch_offset = leo
                return 1
        return 0

    # -- background thread ---------------------------------------------------------------------

    def _subscribe(self, leader: int, endpoint: FetchEndpoint) -> None:
        if self._subscribed.get(leader) is endpoint:
            return
        add = getattr(endpoint, "add_append_listener", None)
        if add is not None:
            add(self._wake.set)
        self._subscribed[leader] = endpoint

    def wake(self) -> None:
        """Make the background thread run a round now."""
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{self.broker_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        backoff = self._config.replica_fetch_backoff_ms / 1000
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                moved = self.run_once()
            except Exception:  # a bug must not kill replication silently forever
                log.exception("replica fetcher of broker %d failed a round", self.broker_id)
                moved = 0
            if not moved:
                self._wake.wait(backoff)

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._wake.set()
        thread.join()
        self._thread = None
        for endpoint in self._subscribed.values():
            remove = getattr(endpoint, "remove_append_listener", None)
            if remove is not None:
                remove(self._wake.set)
        self._subscribed.clear()
