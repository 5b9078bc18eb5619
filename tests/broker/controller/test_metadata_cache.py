"""The broker's metadata cache: UpdateMetadata replaces the live brokers and updates only the
partitions it names (the delete marker drops one, and a topic with none left); a snapshot once
taken never changes; the observing handler applies only what the replica manager accepted."""

from __future__ import annotations

import asyncio
import threading

from broker.metadata_cache import MetadataCache, ObservingHandler
from broker.purgatory import Purgatory
from coordinator.codecs import TopicPartition
from interbroker.channel import BrokerResponse
from interbroker.errors import ErrorCode
from interbroker.requests import LiveBroker, UpdateMetadataPartition, UpdateMetadataRequest


def update(partitions: list[tuple[str, int, int]], brokers: tuple[int, ...] = (1,),
           controller: int = 1) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=controller, controller_epoch=1, broker_epoch=-1,
        partitions=tuple(UpdateMetadataPartition(t, p, 1, leader, 0, (1,), 0, (1,))
                         for t, p, leader in partitions),
        live_brokers=tuple(LiveBroker(id=b) for b in brokers))


def test_updates_are_partial_and_snapshots_stay_as_taken() -> None:
    cache = MetadataCache()
    assert cache.snapshot.controller_id == -1 and not cache.snapshot.topics
    cache.update(update([("a", 0, 1), ("a", 1, 1), ("b", 0, 1)], brokers=(1, 2)))
    before = cache.snapshot
    cache.update(update([("a", 1, 2)], brokers=(1,), controller=2))
    after = cache.snapshot
    assert sorted(before.topics["a"]) == [0, 1] and before.topics["a"][1].leader == 1
    assert set(before.brokers) == {1, 2}
    assert after.topics["a"][1].leader == 2 and after.topics["a"][0].leader == 1
    assert set(after.brokers) == {1} and after.controller_id == 2
    assert after.contains(TopicPartition("b", 0))
    cache.update(update([("b", 0, -2), ("a", 0, -2)]))  # deleting: forget them
    assert "b" not in cache.snapshot.topics
    assert sorted(cache.snapshot.topics["a"]) == [1]
    assert not cache.snapshot.contains(TopicPartition("a", 0))


class Inner:
    def __init__(self, error: ErrorCode = ErrorCode.NONE) -> None:
        self.error = error

    def handle_leader_and_isr(self, request):  # noqa: ANN001, ANN201
        return BrokerResponse(error=self.error)

    def handle_update_metadata(self, request):  # noqa: ANN001, ANN201
        return BrokerResponse(error=self.error)

    def handle_stop_replica(self, request):  # noqa: ANN001, ANN201
        return BrokerResponse(error=self.error)


def test_only_accepted_metadata_is_applied_and_every_request_is_reported() -> None:
    cache = MetadataCache()
    changes = []
    refused = ObservingHandler(Inner(ErrorCode.STALE_CONTROLLER_EPOCH), cache,
                               lambda: changes.append(1))
    refused.handle_update_metadata(update([("a", 0, 1)]))
    assert not cache.snapshot.topics
    accepted = ObservingHandler(Inner(), cache, lambda: changes.append(2))
    accepted.handle_update_metadata(update([("a", 0, 1)]))
    accepted.handle_leader_and_isr(None)
    accepted.handle_stop_replica(None)
    assert "a" in cache.snapshot.topics
    assert changes == [1, 2, 2, 2]


def test_purgatory_completes_once_when_woken_and_able_or_at_its_timeout() -> None:
    loop = asyncio.new_event_loop()
    try:
        purgatory = Purgatory(loop)
        ready = {"a": False}
        done: list[str] = []
        purgatory.park(["a"], 60, lambda: ready["a"], lambda: done.append("a"))
        purgatory.park(["b"], 0.01, lambda: False, lambda: done.append("b"))
        purgatory.wake("a")  # not able yet
        assert done == [] and len(purgatory) == 2
        ready["a"] = True
        woken = threading.Thread(target=purgatory.wake_threadsafe, args=("a",))
        woken.start()
        woken.join()
        loop.run_until_complete(asyncio.sleep(0.05))
        assert sorted(done) == ["a", "b"] and len(purgatory) == 0
        purgatory.wake_all()
        assert sorted(done) == ["a", "b"]  # once each
        purgatory.park(["c"], 60, lambda: False, lambda: done.append("c"))
        purgatory.complete_all()
        assert done[-1] == "c"
    finally:
        loop.close()


def test_topic_ids_live_as_long_as_their_topic_stays() -> None:
    import uuid

    cache = MetadataCache()
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cache.update(update([("a", 0, 1), ("b", 0, 1)]))
    snap = cache.set_topic_ids({"a": a, "b": b, "elsewhere": c})  # only topics held
    assert dict(snap.topic_ids) == {"a": a, "b": b}
    assert dict(snap.topic_names) == {a: "a", b: "b"}
    assert dict(cache.set_topic_ids({"a": c}).topic_ids)["a"] == a  # an id is set once
    cache.update(update([("a", 1, 1)]))
    assert dict(cache.snapshot.topic_ids) == {"a": a, "b": b}  # kept across updates
    cache.update(update([("b", 0, -2)]))  # deleted: its id goes with it
    assert dict(cache.snapshot.topic_names) == {a: "a"}
    cache.update(update([("b", 0, 1)]))  # created again under the name: no id until read
    assert "b" not in cache.snapshot.topic_ids
    assert dict(cache.set_topic_ids({"b": c}).topic_ids) == {"a": a, "b": c}


def test_topic_ids_the_controller_sends_are_taken() -> None:
    import dataclasses
    import uuid

    from broker.apis.topic_ids import text_of

    cache = MetadataCache()
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cache.update(dataclasses.replace(update([("a", 0, 1), ("b", 0, 1)]),
                                     topic_ids={"a": text_of(a), "gone": text_of(b)}))
    assert dict(cache.snapshot.topic_ids) == {"a": a}  # only topics held
    cache.set_topic_ids({"b": b})
    assert dict(cache.snapshot.topic_names) == {a: "a", b: "b"}
    cache.update(dataclasses.replace(update([("b", 0, 1)]), topic_ids={"b": text_of(c)}))
    assert cache.snapshot.topic_ids["b"] == c  # the controller's id wins over one read
    assert cache.snapshot.topic_names[c] == "b"


def test_topics_with_names_kafka_forbids_are_left_out_with_one_warning(caplog) -> None:  # noqa: ANN001
    import logging

    caplog.set_level(logging.WARNING)
    cache = MetadataCache(1)
    for _ in range(3):
        cache.update(update([("good", 0, 1), ("ü", 0, 1), ("a b", 0, 1), ("x" * 300, 0, 1)]))
    assert list(cache.snapshot.topics) == ["good"]
    assert len([r for r in caplog.records if "skipping topic" in r.getMessage()]) == 3
