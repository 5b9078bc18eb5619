"""Who appends to a leader's log (:class:`AppendOrigin`), which decides what the producer
state checks; re-exported by :mod:`replication.protocol`, where the data plane's request values
are. A module of its own so that the log can import it without the protocol module (which
names the log's slices)."""

from __future__ import annotations

import enum

__all__ = ["AppendOrigin"]


class AppendOrigin(enum.Enum):
    """Who appends to a leader's log, which decides what the producer state checks (Kafka's
    AppendOrigin; a follower's appends are a third kind, unchecked, with their own path).

    - ``CLIENT``: a producer's Produce. Every check: the sequence (a retry of one of the last
      five batches is answered with its offsets and not appended again), the epoch, the
      transaction's state; control batches are refused.
    - ``COORDINATOR``: a group or transaction coordinator writing to a log it owns, or a
      partition leader writing a transaction marker (WriteTxnMarkers). No sequence check and
      no duplicate detection (a coordinator writes a transactional offset commit at base
      sequence 0 as often as it likes), but the producer epoch is still checked (an older one
      is INVALID_PRODUCER_EPOCH), a transactional batch still opens or extends the producer's
      transaction, and control batches (markers) are taken and checked against the
      producer's epoch and coordinator epoch.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
