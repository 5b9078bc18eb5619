"""A broker as a process: Apache Kafka's wire protocol over partctl's data plane.

``partctl broker start --config server.properties`` reads Kafka's broker settings
(:mod:`broker.config`), registers the broker and stands for controller
(:class:`~replication.BrokerNode`), and serves Kafka's binary protocol
(:mod:`broker.server`, one module per API group in :mod:`broker.apis`) so that Kafka's own
clients produce to and consume from partctl's logs unchanged.
"""
