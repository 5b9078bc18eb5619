"""Where a follower cuts its log before fetching: the leader-epoch protocol, as a pure decision.

Truncating to the high watermark (the pre-KIP-101 rule) is wrong both ways: a follower's HW lags
the leader's, so it throws away committed records it already has (and loses them for good if it
becomes leader next), and after an unclean sequence of failures it keeps records the new leader
overwrote. Instead the follower asks the leader where each of its epochs ended.

The rounds protocol (KIP-101 as refined by KIP-279)::

    epoch = first_epoch_to_ask(follower)          # the follower's latest epoch
    loop:
        answer = leader.OffsetsForLeaderEpoch(epoch)   # (largest leader epoch <= epoch, its end)
        decision = decide_truncation(follower, epoch, answer)
        follower.truncate_to(decision.offset)
        match decision:
            case Truncate():   done; fetch from decision.offset
            case AskAgain():   epoch = decision.epoch; go round

- The leader answers with the asked epoch: both know it, so the logs agree up to where the
  earlier of the two copies of that epoch ends: truncate to min(leader's end, follower's end of
  the epoch). Done.
- The leader answers with a smaller epoch L the follower also knows: same as above, for L.
- The leader answers with an epoch L the follower never saw: every follower epoch above L is
  unknown to the leader, so the follower cuts its log where its largest epoch below L ends (the
  start of its next epoch) and asks again about that epoch. Each round removes at least one
  follower epoch, so the rounds end.
- The asked epoch is older than every epoch the leader still has (retention removed them): the
  leader answers, as Kafka does, with the asked epoch ending where its own first epoch starts,
  which is its log start (the epoch history is cut with the log). That reads as the first case:
  the follower keeps its copy of the epoch up to there, and if its next fetch falls below the
  leader's log start, it is out of range and the follower restarts its log there.
- The leader knows no epoch at all (UNDEFINED): no follower record can be shown to match, so
  truncate to where the follower's first epoch starts.

No HW appears anywhere here on purpose. Nothing here does I/O; a fetcher thread drives the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.epochs import EpochEndOffset, EpochEntry, end_offset_for

__all__ = [
    "AskAgain",
    "FollowerEpochView",
    "Truncate",
    "TruncationDecision",
    "decide_truncation",
    "decide_without_epochs",
    "first_epoch_to_ask",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowerEpochView:
    """What the decision needs from the follower's log: its epoch history and offsets."""

    entries: tuple[EpochEntry, ...]
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncate:
    """Final: truncate the log to ``offset`` (a no-op if it is the log end) and fetch from it."""

    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AskAgain:
    """Intermediate round: truncate to ``offset``, then ask the leader about ``epoch``."""

    offset: int
    epoch: int


TruncationDecision = Truncate | AskAgain


def first_epoch_to_ask(follower: FollowerEpochView) -> int | None:
    """The epoch of the first OffsetsForLeaderEpoch request: the follower's latest.

    ``None`` means there is nothing to ask: the follower has no epoch history. An empty log
    then simply fetches from its end; a log with records but no epochs is truncated by
    :func:`decide_without_epochs`.
    """
    return follower.entries[-1].epoch if follower.entries else None


def decide_without_epochs(follower: FollowerEpochView) -> Truncate:
    """A follower without epoch history cannot prove any record matches the leader's, so it
    keeps none (every record our leaders write carries an epoch, so this is the rare case of a
    damaged cache, and refetching is the safe cost)."""
    return Truncate(offset=follower.log_start_offset)


def decide_truncation(
    follower: FollowerEpochView, asked_epoch: int, answer: EpochEndOffset
) -> TruncationDecision:
    """Decide one round of follower truncation from the leader's answer to ``asked_epoch``.

    The offset returned never exceeds the follower's log end offset. Raises ``ValueError`` if the
    answer names an epoch larger than the one asked, which no correct leader sends.
    """
    leo = follower.log_end_offset
    entries = follower.entries
    if answer.undefined:
        first_start = entries[0].start_offset if entries else follower.log_start_offset
        return Truncate(offset=min(first_start, leo))
    if answer.epoch > asked_epoch:
        raise ValueError(
            f"leader answered epoch {answer.epoch} to a request for epoch {asked_epoch}"
        )
    if not entries or answer.epoch < entries[0].epoch:
        # The follower knows no epoch <= the leader's: its own epochs are all unknown to the
        # leader, so nothing from its first epoch on can be kept.
        first_start = entries[0].start_offset if entries else leo
        return Truncate(offset=min(answer.end_offset, first_start, leo))
    mine = end_offset_for(entries, answer.epoch, leo)
    if mine.epoch != answer.epoch:
        return AskAgain(offset=min(mine.end_offset, leo), epoch=mine.epoch)
    return Truncate(offset=min(answer.end_offset, mine.end_offset, leo))
