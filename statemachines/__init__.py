"""Partition and replica state machines and the controller that drives them."""
