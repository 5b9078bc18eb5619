"""Broker tests: produce, fetch and replication between broker processes: clients, recovery, compaction, throttles."""
