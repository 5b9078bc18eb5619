"""The three-broker clusters of the transaction tests that are shared between modules."""

from __future__ import annotations

from ..data.test_cluster_clients import Trio

__all__ = ["UnverifiedTrio"]


class UnverifiedTrio(Trio):
    """Brokers that append transactional batches without asking a coordinator (KIP-890's
    verification off, as Kafka allows), so the data plane is tested on batches written raw."""

    def settings(self) -> str:
        return super().settings() + "transaction.partition.verification.enable=false\n"
