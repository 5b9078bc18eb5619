"""Producer ids for InitProducerId, handed out from blocks this broker claims in the coordinator.

An idempotent producer needs an id no other producer of the cluster has. Kafka's brokers take
them from blocks of 1000 claimed at ``/latest_producer_id_block`` (Kafka's ZkProducerIdManager;
here :meth:`coordinator.metadata.MetadataClient.claim_producer_id_block`), so no id is handed
out twice, across brokers or restarts, without a coordinator write per producer.

A :class:`ProducerIdManager` hands ids out of its current block and, once 90% of it is gone
(Kafka's ``PidPrefetchThreshold``), claims the next block on a background thread, so that
InitProducerId rarely waits for the coordinator: only when the next block has not arrived by
the time the current one runs out does a call wait, up to its timeout, and then fails with
:class:`ProducerIdsUnavailable` (``COORDINATOR_LOAD_IN_PROGRESS``, which clients retry: Kafka's
RPC manager answers the same while its next block is on the way).

What the broker's InitProducerId handler calls (no transactional id: every request gets a new
id at epoch 0, as Kafka's transaction coordinator does for a producer without one)::

    try:
        producer_id, producer_epoch = manager.init_producer_id(timeout=0.5)
    except ProducerIdsUnavailable as exc:
        error = exc.error_code          # COORDINATOR_LOAD_IN_PROGRESS (14)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import NamedTuple

from coordinator.codecs import PRODUCER_ID_BLOCK_SIZE, ProducerIdBlock
from coordinator.metadata import MetadataClient
from coordinator.retry import Retry
from interbroker.errors import ErrorCode

__all__ = ["ProducerIdAndEpoch", "ProducerIdManager", "ProducerIdsUnavailable"]

log = logging.getLogger(__name__)

PREFETCH_THRESHOLD = 0.9
"""Share of a block handed out before the next one is claimed (Kafka's PidPrefetchThreshold)."""

CLAIM_RETRY = Retry(max_tries=None, delay=0.05, max_delay=1.0, deadline=10.0)
"""How a claim rides out connection losses (Kafka's RPC manager retries after 50 ms)."""


class ProducerIdAndEpoch(NamedTuple):
    """InitProducerId's answer: a pair, so that ``pid, epoch = ...`` reads as Kafka's does."""

    producer_id: int
    producer_epoch: int


class ProducerIdsUnavailable(Exception):
    """No producer id could be handed out in time (no block yet, the coordinator unreachable):
    the request is answered with :attr:`error_code` and the client retries."""

    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdManager:
    """Producer ids of broker ``broker_id``, from blocks claimed through ``metadata`` (a client
    on the broker's coordinator session). Thread-safe; nothing touches the coordinator before
    :meth:`start` or the first request.

    ``block_size`` and ``prefetch_threshold`` are Kafka's (1000, 0.9); ``retry`` is how long a
    claim rides out connection losses."""

    def __init__(
        self,
        metadata: MetadataClient,
        broker_id: int,
        *,
        block_size: int = PRODUCER_ID_BLOCK_SIZE,
        prefetch_threshold: float = PREFETCH_THRESHOLD,
        retry: Retry = CLAIM_RETRY,
    ) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be positive: {block_size}")
        if not 0 < prefetch_threshold <= 1:
            raise ValueError(f"prefetch_threshold must be in (0, 1]: {prefetch_threshold}")
        self.broker_id = broker_id
        self._metadata = metadata
        self._block_size = block_size
        self._threshold = prefetch_threshold
        self._retry = retry
        self._cond = threading.Condition()
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._prefetch_at = 0
        self._spare: ProducerIdBlock | None = None
        self._claim: threading.Thread | None = None
        self._error: BaseException | None = None
        self._closed = False
        self.blocks_claimed = 0
        """Blocks this manager claimed (for tests and metrics)."""

    # -- handing out ---------------------------------------------------------------------------

    def init_producer_id(self, timeout: float = 5.0) -> ProducerIdAndEpoch:
        """InitProducerId for a producer without a transactional id: a new producer id, at
        epoch 0. Waits at most ``timeout`` seconds (0: not at all) when no id is at hand;
        raises :class:`ProducerIdsUnavailable` then."""
        return ProducerIdAndEpoch(self.next_producer_id(timeout), 0)

    def next_producer_id(self, timeout: float = 5.0) -> int:
        """The next id of this broker's blocks (see :meth:`init_producer_id`)."""
        deadline = time.monotonic() + timeout
        failed_while_waiting = False
        with self._cond:
            while True:
                if self._closed:
                    raise ProducerIdsUnavailable(f"broker {self.broker_id}: producer ids closed")
                block = self._block
                if block is not None and self._next_id <= block.block_end:
                    producer_id = self._next_id
                    self._next_id += 1
                    if producer_id >= self._prefetch_at and self._spare is None:
                        self._start_claim()
                    return producer_id
                if self._spare is not None:
                    self._take_spare()
                    continue
                if self._claim is None:
                    if failed_while_waiting:
                        raise ProducerIdsUnavailable(
                            f"broker {self.broker_id}: could not claim producer ids: "
                            f"{self._error}") from self._error
                    self._start_claim()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProducerIdsUnavailable(
                        f"broker {self.broker_id}: the next block of producer ids is not "
                        f"there yet{f' (last claim failed: {self._error})' if self._error else ''}")
                self._cond.wait(left)
                failed_while_waiting = self._claim is None and self._spare is None

    def start(self) -> ProducerIdManager:
        """Claim the first block now, in the background, so that the first request finds it."""
        with self._cond:
            if self._block is None and self._spare is None:
                self._start_claim()
        return self

    @property
    def current_block(self) -> ProducerIdBlock | None:
        """The block ids are handed out from (None before the first)."""
        return self._block

    def close(self, timeout: float = 5.0) -> None:
        """Stop: waiting calls fail, a claim in flight is let go (its ids are never used)."""
        with self._cond:
            self._closed = True
            claim = self._claim
            self._cond.notify_all()
        if claim is not None:
            claim.join(timeout)

    # -- claiming ------------------------------------------------------------------------------

    def _take_spare(self) -> None:
        block = self._spare
        assert block is not None
        self._block, self._spare = block, None
        self._next_id = block.block_start
        self._prefetch_at = block.block_start + int(block.size * self._threshold)

    def _start_claim(self) -> None:
        """Claim the next block on a thread of its own, unless one is on the way (lock held)."""
        if self._claim is not None or self._closed:
            return
        self._claim = threading.Thread(target=self._run_claim, daemon=True,
                                       name=f"producer-id-block-{self.broker_id}")
        self._claim.start()

    def _run_claim(self) -> None:
        block: ProducerIdBlock | None = None
        error: BaseException | None = None
        try:
            block = self._retry(self._metadata.claim_producer_id_block, self.broker_id,
                                size=self._block_size)
        except Exception as exc:  # reported to the callers waiting, and retried by the next
            error = exc
            log.warning("broker %d could not claim a block of producer ids: %s",
                        self.broker_id, exc)
        with self._cond:
            self._claim = None
            self._error = error
            if block is not None and not self._closed:
                self._spare = block
                self.blocks_claimed += 1
                if self._block is None:
                    self._take_spare()
            self._cond.notify_all()

    def __repr__(self) -> str:
        return f"ProducerIdManager(broker={self.broker_id}, block={self._block})"
