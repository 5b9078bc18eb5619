"""The transaction coordinator (KIP-98 as Kafka 3.9 runs it): ``__transaction_state`` in
Kafka's record format (:mod:`.records`), the transactions' metadata and legal transitions
(:mod:`.metadata`), the partitions loaded and written (:mod:`.loading`,
:mod:`.state_manager`), the markers sent to partition leaders (:mod:`.markers`) and the
decisions of the transaction APIs (:mod:`.coordinator`)."""

from broker.txns.config import TRANSACTION_STATE_TOPIC, TxnConfig
from broker.txns.coordinator import TransactionCoordinator
from broker.txns.metadata import Transit, TxnMetadata, TxnState
from broker.txns.records import TxnLogValue, TxnRecordError
from broker.txns.state_manager import TxnStateManager, TxnSummary

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionCoordinator",
    "Transit",
    "TxnConfig",
    "TxnLogValue",
    "TxnMetadata",
    "TxnRecordError",
    "TxnState",
    "TxnStateManager",
    "TxnSummary",
]
