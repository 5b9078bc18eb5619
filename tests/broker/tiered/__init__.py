"""Broker tests: tiered storage (KIP-405) across broker processes."""
