"""A raw Metadata client: what one broker says the leaders are, asked over Kafka's protocol
(kafkaclient's connection, kio's messages), so that a step is measured from the brokers' side.

The product's admin client retries and routes; this asks one broker, once, and gives its
answer as it is: partition -> leader id, for the topics asked (all when None)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from kafkaclient.connection import BrokerUnreachable, KafkaConnection
from kafkaclient.messages import build, request_schema

METADATA = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerView:
    """One broker's Metadata answer: its live brokers, its controller, and the leader of each
    partition (-1: none) of the topics asked."""

    brokers: frozenset[int]
    controller: int
    leaders: dict[tuple[str, int], int]
    isr: dict[tuple[str, int], int]
    """The size of each partition's ISR."""
    topic_errors: dict[str, int]


def ask(address: tuple[str, int], topics: Sequence[str] | None, *, timeout: float = 5.0
        ) -> BrokerView | None:
    """One Metadata round trip to the broker at ``address`` on a connection of its own; None
    when it does not answer."""
    with Poller(timeout) as poller:
        return poller.ask(address, topics)


class Poller:
    """Metadata asked of the same brokers again and again, each over one connection kept
    open, as a client asks: a connection and an ApiVersions per question would cost the
    brokers more than the answer, and a step's poll would weigh on what it measures."""

    def __init__(self, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._connections: dict[tuple[str, int], KafkaConnection] = {}

    def ask(self, address: tuple[str, int], topics: Sequence[str] | None) -> BrokerView | None:
        """The broker's answer; None when it does not answer (the next question connects
        again)."""
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = KafkaConnection(
                address[0], address[1], client_id="versus-kafka", timeout=self._timeout)
        try:
            return _ask_on(connection, topics)
        except BrokerUnreachable:
            self._connections.pop(address).close()
            return None

    def close(self) -> None:
        while self._connections:
            self._connections.popitem()[1].close()

    def __enter__(self) -> Poller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ask_on(connection: KafkaConnection, topics: Sequence[str] | None) -> BrokerView | None:
    version = connection.version(METADATA, 1, 12)
    if version is None:
        return None
    cls = request_schema(METADATA, version)
    module = sys.modules[cls.__module__]
    wanted = None if topics is None else tuple(
        build(module.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    response = connection.call(build(
        cls, topics=wanted, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False))
    leaders: dict[tuple[str, int], int] = {}
    isr: dict[tuple[str, int], int] = {}
    errors: dict[str, int] = {}
    for topic in response.topics:
        if int(topic.error_code):
            errors[str(topic.name)] = int(topic.error_code)
        for p in topic.partitions:
            leaders[(str(topic.name), int(p.partition_index))] = int(p.leader_id)
            isr[(str(topic.name), int(p.partition_index))] = len(p.isr_nodes)
    return BrokerView(brokers=frozenset(int(b.node_id) for b in response.brokers),
                      controller=int(response.controller_id), leaders=leaders,
                      isr=isr, topic_errors=errors)


def all_led(view: BrokerView | None, topics: dict[str, int], *, live: set[int],
            gone: int | None = None) -> bool:
    """Whether ``view`` names a live leader (not ``gone``) for every partition of ``topics``
    (name -> partition count)."""
    if view is None or view.topic_errors:
        return False
    for topic, count in topics.items():
        for p in range(count):
            leader = view.leaders.get((topic, p), -1)
            if leader < 0 or leader == gone or leader not in live:
                return False
    return True
