"""Producer id blocks at ``/latest_producer_id_block`` through the typed client, on every
backend: Kafka's JSON, the first block from an empty node, and claims by concurrent brokers
(each with its own session) that never overlap."""

from __future__ import annotations

import json
import threading

from coordinator import Coordinator, layout
from coordinator.codecs import ProducerIdBlock
from coordinator.metadata import MetadataClient
from tests.contract.conftest import Harness


def test_the_first_block_starts_at_zero_when_the_node_is_empty(client: Coordinator) -> None:
    md = MetadataClient(client)
    md.ensure_layout()  # creates the node with no data, as a broker's start-up does
    empty = md.producer_id_block()
    assert empty is not None and empty.value is None
    block = md.claim_producer_id_block(3)
    assert (block.broker, block.block_start, block.block_end) == (3, 0, 999)
    data, stat = client.get(layout.LATEST_PRODUCER_ID_BLOCK)
    assert json.loads(data) == {"version": 1, "broker": 3, "block_start": "0",
                                "block_end": "999"}
    assert stat.version == empty.version + 1
    following = md.claim_producer_id_block(4)
    assert (following.block_start, following.block_end) == (1000, 1999)


def test_a_missing_node_is_created_by_the_first_claim(client: Coordinator) -> None:
    md = MetadataClient(client)
    assert md.producer_id_block() is None
    assert md.claim_producer_id_block(1, size=10).block_end == 9
    current = md.producer_id_block()
    assert current is not None and current.value == ProducerIdBlock(
        broker=1, block_start=0, block_end=9)


def test_a_claim_that_loses_the_race_reads_again(client: Coordinator, other: Coordinator
                                                 ) -> None:
    a, b = MetadataClient(client), MetadataClient(other)
    a.ensure_layout()
    a.claim_producer_id_block(1)
    stale = a.producer_id_block()
    won = b.claim_producer_id_block(2)  # between a's read and its write
    reads = [stale]
    fresh = MetadataClient.producer_id_block
    a.producer_id_block = lambda: reads.pop() if reads else fresh(a)  # type: ignore[method-assign]
    mine = a.claim_producer_id_block(1)
    assert not reads  # the stale read was used, and its write refused
    assert (won.block_start, mine.block_start) == (1000, 2000)


def test_concurrent_brokers_never_claim_overlapping_blocks(backend: Harness) -> None:
    brokers, claims = 4, 6
    sessions = [backend.connect() for _ in range(brokers)]
    MetadataClient(sessions[0]).ensure_layout()
    got: dict[int, list[ProducerIdBlock]] = {b: [] for b in range(brokers)}
    errors: list[BaseException] = []
    start = threading.Barrier(brokers)

    def run(broker: int) -> None:
        try:
            md = MetadataClient(sessions[broker])
            start.wait()
            for _ in range(claims):
                got[broker].append(md.claim_producer_id_block(broker, size=100))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(b,)) for b in range(brokers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    blocks = sorted((blk for mine in got.values() for blk in mine), key=lambda k: k.block_start)
    assert len(blocks) == brokers * claims
    # back to back from 0, each claimed once and by the broker that got it
    assert [(k.block_start, k.block_end) for k in blocks] == [
        (i * 100, i * 100 + 99) for i in range(brokers * claims)]
    assert all(k.broker == b for b, mine in got.items() for k in mine)
    # a broker that starts afterwards, with a session of its own, continues after them all
    later = MetadataClient(backend.connect()).claim_producer_id_block(9, size=100)
    assert later.block_start == brokers * claims * 100
