"""Broker tests: the Kafka protocol: framing, the schema walk, the API table, every API served, hostile requests."""
