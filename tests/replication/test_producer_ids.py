"""InitProducerId's ids on every backend: unique across brokers claiming at once and across
restarts, the next block claimed before the current one runs out, and a retriable error when
no block can be had in time."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from coordinator import layout
from coordinator.metadata import MetadataClient
from coordinator.retry import Retry
from interbroker.errors import ErrorCode
from replication.producer_ids import (
    ProducerIdAndEpoch,
    ProducerIdManager,
    ProducerIdsUnavailable,
)
from tests.contract.conftest import BACKENDS, Harness, MemoryHarness, _harness
from tests.waiting import wait_until


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    harness = _harness(request)
    yield harness
    harness.close()


def manager(harness: Harness, broker: int, **options: object) -> ProducerIdManager:
    md = MetadataClient(harness.connect())
    md.ensure_layout()
    return ProducerIdManager(md, broker, **options)  # type: ignore[arg-type]


def test_the_first_id_is_zero_at_epoch_zero(backend: Harness) -> None:
    m = manager(backend, 1)
    assert m.init_producer_id() == ProducerIdAndEpoch(producer_id=0, producer_epoch=0)
    block = m.current_block
    assert block is not None and (block.broker, block.block_start, block.block_end) == (1, 0, 999)
    m.close()


def test_ids_are_unique_across_brokers_and_restarts(backend: Harness) -> None:
    brokers, per_broker = 3, 2_500  # three blocks of 1000 each
    managers = [manager(backend, b) for b in range(brokers)]
    got: dict[int, list[int]] = {b: [] for b in range(brokers)}
    errors: list[BaseException] = []
    start = threading.Barrier(brokers)

    def run(b: int) -> None:
        try:
            start.wait()
            got[b] = [managers[b].init_producer_id(timeout=30).producer_id
                      for _ in range(per_broker)]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(b,)) for b in range(brokers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    every = [pid for ids in got.values() for pid in ids]
    assert len(set(every)) == brokers * per_broker
    assert all(ids == sorted(ids) for ids in got.values())  # each broker's in order
    for m in managers:
        m.close()
    # Restarted brokers (new sessions, new managers) never hand out an id given before, even
    # those of blocks the old incarnations had claimed but not used up.
    again = [manager(backend, b) for b in range(brokers)]
    fresh = [m.init_producer_id().producer_id for m in again]
    assert min(fresh) > max(every)
    assert len(set(fresh)) == brokers
    assert [m.blocks_claimed for m in managers] == [3] * brokers  # 2,500 ids: no fourth yet
    for m in again:
        m.close()


def test_the_next_block_is_claimed_before_the_current_one_runs_out(backend: Harness) -> None:
    m = manager(backend, 7, block_size=100)
    md = MetadataClient(backend.connect())
    first = [m.next_producer_id() for _ in range(90)]
    assert first == list(range(90)) and m.blocks_claimed == 1
    m.next_producer_id()  # the 91st id (90% of the block): the next block is claimed now
    wait_until(lambda: m.blocks_claimed == 2, message="the next block")
    node = md.producer_id_block()
    assert node is not None and node.value is not None and node.value.block_start == 100
    # ... so the rest of this block and the next never wait for the coordinator
    assert [m.next_producer_id(timeout=0) for _ in range(60)] == list(range(91, 151))
    m.close()


def test_without_a_block_in_time_the_answer_is_retriable() -> None:
    harness = MemoryHarness()
    try:
        client = harness.connect()
        MetadataClient(client).ensure_layout()
        quick = Retry(max_tries=None, delay=0.01, max_delay=0.05, deadline=0.3)
        m = ProducerIdManager(MetadataClient(client), 1, block_size=10, retry=quick)
        client.suspend()  # type: ignore[attr-defined]
        with pytest.raises(ProducerIdsUnavailable) as raised:
            m.init_producer_id(timeout=5)
        assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS == 14
        with pytest.raises(ProducerIdsUnavailable):
            m.init_producer_id(timeout=0)  # no waiting at all
        client.resume()  # type: ignore[attr-defined]
        assert m.init_producer_id(timeout=10).producer_id == 0
        assert client.get(layout.LATEST_PRODUCER_ID_BLOCK)[0].startswith(b'{"version":1')
        m.close()
        with pytest.raises(ProducerIdsUnavailable, match="closed"):
            m.init_producer_id()
    finally:
        harness.close()
