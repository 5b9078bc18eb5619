"""Broker tests of transactions' data plane: markers, the last stable offset, read_committed."""
