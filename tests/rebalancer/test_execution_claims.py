"""Executing plans on every backend: the claim on ``/admin/reassign_partitions`` (two runs never
both write it; a run tops up only its own node), resuming a run, and riding out an outage.

A cluster of participants runs on the backend; the executor has a session of its own, through
the harness's TCP proxy on ZooKeeper and etcd (or a memory session it can suspend), so that its
connection can be cut while the cluster carries on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator import Coordinator, layout
from coordinator.codecs import ReassignmentOwner, TopicPartition
from coordinator.metadata import MetadataClient
from rebalancer import ExecutionResult, ReassignmentInProgress, execute_plan, verify_plan
from rebalancer.execution import ClaimRefused, claim_decision, plan_digest
from tests.contract.conftest import BACKENDS, Harness, _harness
from tests.rebalancer.test_execution import Live, plan_of, tp
from tests.waiting import wait_until


class OnBackend:
    """A live cluster on a backend, and an executor session that can lose its connection."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.live = Live(url=harness.url())
        self.client = harness.connect(proxied=True, session_timeout=6.0)
        self.md = self.live.md

    def close(self) -> None:
        self.live.close()
        self.harness.close()


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[OnBackend]:
    on = OnBackend(_harness(request))
    yield on
    on.close()


def moves_of(md: MetadataClient) -> dict[TopicPartition, tuple[int, ...]]:
    node = md.reassignment()
    return {} if node is None else dict(node.value)


class InBackground(threading.Thread):
    """Run ``execute_plan`` in a thread; ``outcome`` is its result or the error it raised."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.args, self.kwargs = args, kwargs
        self.outcome: ExecutionResult | BaseException | None = None

    def run(self) -> None:
        try:
            self.outcome = execute_plan(*self.args, **self.kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.outcome = exc


# --- the claim -----------------------------------------------------------------------------


def test_claim_decision_is_pure() -> None:
    own = {tp("t", 0): (3, 4), tp("t", 1): (4, 1)}
    assert claim_decision(own, None, None) == "create"
    assert claim_decision(own, {tp("t", 1): (4, 1)}, None) == "adopt"
    refused = claim_decision(own, {tp("t", 1): (4, 1), tp("u", 0): (1, 2)}, None)
    assert isinstance(refused, ClaimRefused) and refused.owner is None
    assert "(u-0 -> [1, 2])" in refused.reason and "no partctl execute" in refused.reason
    assert isinstance(claim_decision(own, {tp("t", 0): (4, 3)}, None), ClaimRefused)
    holder = ReassignmentOwner(run="r", digest="ab" * 32, partitions=7, plan="plan-b.json",
                               host="ops1", pid=42, timestamp="1700000000000")
    refused = claim_decision(own, None, holder)  # a run between its batches still holds it
    assert isinstance(refused, ClaimRefused) and refused.owner == holder
    assert ("plan plan-b.json (sha256 abababababab, 7 partition(s)), executed by pid 42 on ops1 "
            "since 2023-11-14 22:13:20 UTC") in refused.reason
    # --additional: other moves are joined, unless one moves a partition of the plan elsewhere
    # or a run is executing them
    others = {tp("t", 1): (4, 1), tp("u", 0): (1, 2)}
    assert claim_decision(own, others, None, additional=True) == "join"
    assert claim_decision(own, {tp("t", 1): (4, 1)}, None, additional=True) == "adopt"
    assert claim_decision(own, None, None, additional=True) == "create"
    clash = claim_decision(own, {tp("t", 0): (4, 3)}, None, additional=True)
    assert isinstance(clash, ClaimRefused) and "(t-0 -> [4, 3])" in clash.reason
    assert isinstance(claim_decision(own, others, holder, additional=True), ClaimRefused)


def test_a_run_holds_its_claim_between_batches_and_a_second_plan_is_refused(
        cluster: OnBackend) -> None:
    """The node is gone for a moment whenever a run's moves all finished before it tops the
    node up: a second plan started then must still be refused, naming the first."""
    live = cluster.live
    live.create("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    live.create("u", {0: [1, 2]})
    plan_a = plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 3], tp("t", 2): [3, 4]})
    plan_b = plan_of({tp("u", 0): [3, 4]})
    second: list[InBackground] = []

    def between_batches(_progress: object) -> None:
        if second:
            return
        wait_until(lambda: live.md.reassignment() is None, timeout=15,
                   message="the first batch done and the node gone")
        live.followers.running.clear()
        run_b = InBackground(live.client, plan_b, poll_interval=0.05, timeout=30,
                             label="plan-b.json")
        second.append(run_b)
        run_b.start()
        # refused (the fix), or (without it) its move in a node of its own
        wait_until(lambda: run_b.outcome is not None or tp("u", 0) in moves_of(live.md),
                   timeout=15, message="the second run refused or started")
        live.followers.running.set()

    result = execute_plan(cluster.client, plan_a, max_concurrent_moves=2, poll_interval=0.05,
                          timeout=60, progress=between_batches, label="plan-a.json")
    second[0].join(30)
    refused = second[0].outcome
    assert isinstance(refused, ReassignmentInProgress), refused
    assert refused.owner is not None and refused.owner.plan == "plan-a.json"
    assert refused.owner.pid == os.getpid() and refused.owner.digest == plan_digest(plan_a)
    assert "plan plan-a.json (sha256 " in str(refused) and "3 partition(s)" in str(refused)
    assert result.ok and verify_plan(live.client, plan_a).all_done
    assert live.replicas("u") == {0: (1, 2)}  # the refused plan wrote nothing
    assert live.client.exists(layout.REASSIGN_PARTITIONS_OWNER) is None  # released at the end


def test_two_plans_started_together_one_claims_and_the_other_is_refused(
        cluster: OnBackend) -> None:
    live = cluster.live
    live.create("t", {0: [1, 2], 1: [2, 1]})
    live.followers.running.clear()  # the winner's moves stay pending while the loser tries
    plans = {"a.json": plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 3]}),
             "b.json": plan_of({tp("t", 0): [4, 1], tp("t", 1): [1, 3]})}
    barrier = threading.Barrier(2)
    clients: dict[str, Coordinator] = {"a.json": cluster.client,
                                       "b.json": cluster.harness.connect()}

    def start(name: str) -> None:
        barrier.wait()
        runs[name].run()

    runs = {name: InBackground(clients[name], plan, poll_interval=0.05, timeout=60, label=name)
            for name, plan in plans.items()}
    threads = [threading.Thread(target=start, args=(name,)) for name in plans]
    for t in threads:
        t.start()
    wait_until(lambda: any(isinstance(r.outcome, ReassignmentInProgress)
                           for r in runs.values()), timeout=20, message="one run refused")
    live.followers.running.set()
    for t in threads:
        t.join(60)
    refused = [n for n, r in runs.items() if isinstance(r.outcome, ReassignmentInProgress)]
    won = [n for n, r in runs.items() if isinstance(r.outcome, ExecutionResult)]
    assert len(refused) == 1 and len(won) == 1, {n: r.outcome for n, r in runs.items()}
    error = runs[refused[0]].outcome
    assert isinstance(error, ReassignmentInProgress) and error.owner is not None
    assert error.owner.plan == won[0] and f"plan {won[0]} (sha256 " in str(error)
    result = runs[won[0]].outcome
    assert isinstance(result, ExecutionResult) and result.ok
    assert verify_plan(live.client, plans[won[0]]).all_done
    assert not verify_plan(live.client, plans[refused[0]]).all_done


def test_a_run_never_tops_up_a_node_it_did_not_write(cluster: OnBackend) -> None:
    """Between two batches another tool creates the node: the run adds nothing to it, stops
    submitting and says why; the moves it had sent complete."""
    live = cluster.live
    live.create("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    live.create("u", {0: [1, 2]})
    plan = plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 3], tp("t", 2): [3, 4]})
    seen: list[dict[TopicPartition, tuple[int, ...]]] = []

    def between_batches(_progress: object) -> None:
        if seen:
            return
        wait_until(lambda: live.md.reassignment() is None, timeout=15,
                   message="the first batch done and the node gone")
        live.followers.running.clear()
        live.md.request_reassignment({tp("u", 0): [3, 4]})  # Kafka's tool would do the same
        seen.append(moves_of(live.md))

    result = execute_plan(cluster.client, plan, max_concurrent_moves=2, poll_interval=0.05,
                          timeout=60, progress=between_batches, label="plan.json")
    assert moves_of(live.md) == {tp("u", 0): (3, 4)} == seen[0]  # untouched by the run
    assert result.done == (tp("t", 0), tp("t", 1)) and result.not_sent == (tp("t", 2),)
    assert result.failed[tp("t", 2)].startswith(
        "not started: another reassignment took /admin/reassign_partitions (u-0 -> [3, 4])")
    assert result.stopped is not None and "u-0 -> [3, 4]" in result.stopped
    assert live.replicas("t")[2] == (1, 2)
    live.followers.running.set()
    wait_until(lambda: live.md.reassignment() is None, timeout=15)


def test_execute_again_resumes_the_moves_a_stopped_run_left(cluster: OnBackend) -> None:
    live = cluster.live
    live.create("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    live.followers.running.clear()
    plan = plan_of({tp("t", 0): [3, 4], tp("t", 1): [4, 3], tp("t", 2): [3, 4]})
    first = execute_plan(cluster.client, plan, max_concurrent_moves=2, poll_interval=0.05,
                         timeout=0.5, label="plan.json")
    assert first.timed_out and first.in_flight == (tp("t", 0), tp("t", 1))
    assert first.not_sent == (tp("t", 2),) and not first.done
    assert set(moves_of(live.md)) == {tp("t", 0), tp("t", 1)}
    # another plan is refused, naming the moves in the way
    with pytest.raises(ReassignmentInProgress, match=r"not this plan's \(t-0 -> \[3, 4\]"):
        execute_plan(cluster.client, plan_of({tp("t", 0): [2, 3]}), timeout=5)
    live.followers.running.set()
    again = execute_plan(cluster.client, plan, max_concurrent_moves=2, poll_interval=0.05,
                         timeout=60, label="plan.json")
    assert again.ok and again.done == (tp("t", 0), tp("t", 1), tp("t", 2))
    assert verify_plan(live.client, plan).all_done and live.md.reassignment() is None


# --- outages -------------------------------------------------------------------------------


def test_a_run_rides_out_an_outage_shorter_than_the_session(cluster: OnBackend) -> None:
    """The executor's connection is cut for 3s (its session lasts 6s) with its first moves in
    the node; the moves stall until the connection is back, so the run cannot finish around
    the outage. It carries on after it and finishes the plan."""
    live = cluster.live
    live.create("t", {p: [1 + p % 2, 2 - p % 2] for p in range(6)})
    plan = plan_of({tp("t", p): [3 + p % 2, 4 - p % 2] for p in range(6)})
    outage: list[threading.Thread] = []

    def cut_then_resume() -> None:
        cluster.harness.drop(cluster.client, 3.0)
        live.followers.running.set()

    def cut_once(_progress: object) -> None:
        if not outage:
            live.followers.running.clear()
            outage.append(threading.Thread(target=cut_then_resume))
            outage[0].start()

    result = execute_plan(cluster.client, plan, max_concurrent_moves=2, poll_interval=0.05,
                          timeout=120, progress=cut_once, label="plan.json")
    outage[0].join(30)
    assert result.ok and result.stopped is None, result
    assert verify_plan(live.client, plan).all_done and live.md.reassignment() is None


def test_a_run_claims_its_node_again_after_an_outage_outlived_its_session(
        cluster: OnBackend) -> None:
    """The connection is down longer than the session (2s) but not than the run's patience
    (twice the session): the session ends and its owner node with it; back, the run takes its
    own moves over again and finishes the plan."""
    live = cluster.live
    client = cluster.harness.connect(proxied=True, session_timeout=2.0)
    live.create("t", {p: [1 + p % 2, 2 - p % 2] for p in range(4)})
    plan = plan_of({tp("t", p): [3 + p % 2, 4 - p % 2] for p in range(4)})
    outage: list[threading.Thread] = []
    sessions: list[int] = [client.session_id]

    def cut_then_resume() -> None:
        try:
            cluster.harness.drop(client, 3.0)
            wait_until(lambda: live.client.exists(layout.REASSIGN_PARTITIONS_OWNER) is None,
                       timeout=20, message="the expired session's owner node gone")
        finally:
            live.followers.running.set()

    def cut_once(_progress: object) -> None:
        if not outage:
            live.followers.running.clear()
            outage.append(threading.Thread(target=cut_then_resume))
            outage[0].start()

    result = execute_plan(client, plan, max_concurrent_moves=2, poll_interval=0.05,
                          timeout=60, progress=cut_once, label="plan.json")
    outage[0].join(30)
    sessions.append(client.session_id)
    assert sessions[0] != sessions[1]  # the session did end
    assert result.ok and result.stopped is None, result
    assert verify_plan(live.client, plan).all_done and live.md.reassignment() is None
