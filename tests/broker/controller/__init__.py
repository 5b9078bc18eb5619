"""Broker tests: what passes between the controller and brokers: the channel, AlterPartition, the metadata cache."""
