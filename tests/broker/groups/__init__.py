"""Broker tests: the group coordinators: classic and KIP-848 protocols, offsets, their records, real group clients."""
