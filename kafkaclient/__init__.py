"""Kafka's protocol as a client: connections to brokers (:mod:`.connection`), their TLS and SASL
(:mod:`.security`), kio's messages across versions (:mod:`.messages`), the frame reader both
sides share (:mod:`.frames`, :mod:`.wire_check`), Java ``.properties`` files
(:mod:`.properties`) and the Admin API (:mod:`.admin`).

Used by the brokers (a follower fetching from its leader, the controller's channel), the
rebalancer (plans carried out on any Kafka cluster by its Admin API) and the CLI alike. It sits
below all three and imports nothing above the controller-broker contract.
"""
