"""Broker tests: the admin APIs, Kafka's admin clients, broker configuration and DescribeConfigs."""
