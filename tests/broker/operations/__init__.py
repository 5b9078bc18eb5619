"""Broker tests: a broker process run: start and stop, logs, metrics, resource limits."""
