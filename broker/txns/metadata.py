"""A transactional id's metadata, its states and their legal transitions (Kafka's
``TransactionMetadata`` and ``TransactionState``).

Every change goes in two steps, as in Kafka: ``prepare_*`` checks the transition against
:data:`VALID_PREVIOUS` and returns the target as a frozen :class:`Transit` while the metadata
records it as pending (so no second change starts meanwhile); once the target is written to
``__transaction_state``, :meth:`TxnMetadata.complete` applies it (after checking it is the
pending one), and a failed write clears the pending state instead. The decisions are pure: no
I/O, no clock (times are passed in).

States (Kafka's ids and names): Empty (0), Ongoing (1), PrepareCommit (2), PrepareAbort (3),
CompleteCommit (4), CompleteAbort (5), Dead (6, an id being expired), PrepareEpochFence (7, an
ongoing transaction whose producer is being fenced: it goes on to PrepareAbort with the bumped
epoch).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.txns.records import TxnLogValue

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "VALID_PREVIOUS",
    "IllegalTransition",
    "Transit",
    "TxnMetadata",
    "TxnState",
    "epoch_exhausted",
    "legal",
]

log = logging.getLogger(__name__)


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = (1 << 15) - 1


class TxnState(enum.IntEnum):
    """A transaction's state; the value is Kafka's id, :attr:`label` its name."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def by_label(cls, label: str) -> TxnState | None:
        return _BY_LABEL.get(label)

    @property
    def expirable(self) -> bool:
        """Whether an id idle in this state may be expired (Kafka's isExpirationAllowed)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_LABELS = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
           TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
           TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
           TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_LABEL = {v: k for k, v in _LABELS.items()}

S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
"""Each state's legal predecessors (Kafka's ``validPreviousStates``)."""


def legal(old: TxnState, new: TxnState) -> bool:
    return old in VALID_PREVIOUS[new]


def epoch_exhausted(epoch: int) -> bool:
    """No epoch bump is left for this producer id (Kafka: >= Short.MaxValue - 1)."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(RuntimeError):
    """A transition the table refuses, or a completion that is not the pending one: a bug,
    logged to the state-change log; nothing is changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transit:
    """The target of one transition (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int

    def value(self) -> TxnLogValue:
        """What is written to ``__transaction_state`` for it."""
        return TxnLogValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           timeout_ms=self.timeout_ms, status=int(self.state),
                           partitions=() if self.state is S.EMPTY else tuple(
                               sorted(self.partitions)),
                           last_update_ms=self.last_update_ms, start_ms=self.start_ms)


class TxnMetadata:
    """One transactional id's state, held by its coordinator (on the broker's loop)."""

    __slots__ = ("failed_epoch_fence", "last_producer_epoch", "last_producer_id",
                 "last_update_ms", "partitions", "pending", "producer_epoch", "producer_id",
                 "start_ms", "state", "timeout_ms", "transactional_id")

    def __init__(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                 timeout_ms: int, state: TxnState = S.EMPTY,
                 last_producer_id: int = NO_PRODUCER_ID,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH,
                 partitions: set[tuple[str, int]] | None = None, start_ms: int = -1,
                 last_update_ms: int = -1) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set[tuple[str, int]] = set(partitions or ())
        self.start_ms = start_ms
        self.last_update_ms = last_update_ms
        self.pending: TxnState | None = None
        self.failed_epoch_fence = False
        """A fence whose write failed: the next fence does not bump the epoch again."""

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        state = TxnState(value.status)
        return cls(transactional_id, producer_id=value.producer_id,
                   producer_epoch=value.producer_epoch, timeout_ms=value.timeout_ms,
                   state=state, partitions=set(value.partitions) if state is not S.EMPTY
                   else set(), start_ms=value.start_ms, last_update_ms=value.last_update_ms)

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, producer {self.producer_id} epoch "
                f"{self.producer_epoch}, {self.state.label}"
                f"{f' -> {self.pending.label}' if self.pending is not None else ''}, "
                f"{len(self.partitions)} partition(s))")

    @property
    def in_transition(self) -> bool:
        return self.pending is not None

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- preparing ---------------------------------------------------------------------------

    def _prepare(self, state: TxnState, *, producer_id: int | None = None,
                 epoch: int | None = None, last_epoch: int | None = None,
                 timeout_ms: int | None = None,
                 partitions: frozenset[tuple[str, int]] | None = None,
                 start_ms: int | None = None, now_ms: int | None = None) -> Transit:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: to {state.label} while "
                                    f"{self.pending.label} is pending")
        new_pid = self.producer_id if producer_id is None else producer_id
        new_epoch = self.producer_epoch if epoch is None else epoch
        if new_pid < 0 or (state is not S.DEAD and new_epoch < 0):
            raise IllegalTransition(f"{self.transactional_id}: producer {new_pid} epoch "
                                    f"{new_epoch}")
        if not legal(self.state, state):
            log.error("transactional id %s: %s -> %s refused (not a legal "
                                   "transition)", self.transactional_id, self.state.label,
                                   state.label)
            raise IllegalTransition(f"{self.transactional_id}: {self.state.label} -> "
                                    f"{state.label} is not a legal transition")
        transit = Transit(
            producer_id=new_pid, last_producer_id=self.producer_id, producer_epoch=new_epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms, state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            last_update_ms=self.last_update_ms if now_ms is None else now_ms)
        self.pending = state
        return transit

    def prepare_fence_epoch(self) -> Transit:
        """Ongoing -> PrepareEpochFence with the epoch bumped (not again after a fence whose
        write failed)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: the epoch cannot be bumped")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, epoch=epoch, last_epoch=NO_PRODUCER_EPOCH)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> Transit | ErrorCode:
        """InitProducerId: Empty with the epoch bumped, or a retry of a bump answered with the
        same epoch (KIP-360), or PRODUCER_FENCED for an epoch neither current nor last."""
        if epoch_exhausted(self.producer_epoch):
            raise IllegalTransition(f"{self.transactional_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("transactional id %s: epoch %d is neither the current %d nor the last %d",
                     self.transactional_id, expected_epoch, self.producer_epoch,
                     self.last_producer_epoch)
            return ErrorCode.producer_fenced
        return self._prepare(S.EMPTY, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1, now_ms=now_ms)

    def prepare_rotation(self, producer_id: int, timeout_ms: int, now_ms: int, *,
                         record_last_epoch: bool) -> Transit:
        """A new producer id at epoch 0 (the epochs of the old one are exhausted)."""
        if self.has_pending_transaction:
            raise IllegalTransition(f"{self.transactional_id}: rotation with a transaction")
        return self._prepare(S.EMPTY, producer_id=producer_id, epoch=0,
                             last_epoch=self.producer_epoch if record_last_epoch
                             else NO_PRODUCER_EPOCH, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1, now_ms=now_ms)

    def prepare_add_partitions(self, added: frozenset[tuple[str, int]], now_ms: int) -> Transit:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.start_ms
        return self._prepare(S.ONGOING, partitions=frozenset(self.partitions | added),
                             start_ms=start, now_ms=now_ms)

    def prepare_end(self, state: TxnState, now_ms: int) -> Transit:
        """Ongoing -> PrepareCommit or PrepareAbort."""
        return self._prepare(state, now_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> Transit:
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (the markers are
        written)."""
        target = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.failed_epoch_fence = False
        return self._prepare(target, partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self) -> Transit:
        return self._prepare(S.DEAD, partitions=frozenset())

    # -- completing --------------------------------------------------------------------------

    def abandon(self) -> None:
        """The pending transition's write failed: nothing changes."""
        self.pending = None

    def complete(self, transit: Transit) -> None:
        """Apply ``transit``, now written (Kafka's ``completeTransitionTo`` and its checks)."""
        if self.pending is not transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {transit.state.label} "
                                    f"while {self.pending.label if self.pending else 'nothing'}"
                                    " is pending")
        same_producer = (transit.producer_epoch == self.producer_epoch
                         and transit.producer_id == self.producer_id)
        match transit.state:
            case S.EMPTY:
                bump = (transit.producer_epoch == self.producer_epoch + 1
                        or (transit.producer_epoch == 0
                            and transit.producer_id != self.producer_id))
                ok = ((transit.producer_epoch == self.producer_epoch or bump)
                      and not transit.partitions and transit.start_ms == -1)
            case S.ONGOING:
                ok = (same_producer and self.partitions <= transit.partitions
                      and self.timeout_ms == transit.timeout_ms)
            case S.PREPARE_ABORT | S.PREPARE_COMMIT:
                ok = (same_producer and self.partitions == transit.partitions
                      and self.timeout_ms == transit.timeout_ms
                      and self.start_ms == transit.start_ms)
            case S.COMPLETE_ABORT | S.COMPLETE_COMMIT:
                ok = (same_producer and self.timeout_ms == transit.timeout_ms
                      and transit.start_ms != -1)
            case _:  # Dead is removed, never applied; PrepareEpochFence is never written
                ok = False
        if not ok:
            log.error("transactional id %s: completing %s refused: %r", self
                                   .transactional_id, transit.state.label, transit)
            raise IllegalTransition(f"{self.transactional_id}: unexpected {transit!r}")
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.start_ms = transit.start_ms
        self.partitions = set(transit.partitions)
        self.last_update_ms = transit.last_update_ms
        self.state = transit.state
        self.pending = None

    def remove_partition(self, tp: tuple[str, int]) -> None:
        """A marker is written to ``tp`` (or its topic is gone)."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: removing a partition in "
                                    f"{self.state.label}")
        self.partitions.discard(tp)
