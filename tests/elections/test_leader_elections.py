"""Kafka's four partition leader elections, pinned as tables."""

from __future__ import annotations

import pytest

from elections import (
    ControlledShutdown,
    Election,
    LeaderAndIsr,
    Offline,
    Preferred,
    Reassign,
    apply_election,
    elect,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    elector,
)

# Rows: (id, assignment, isr, live, unclean, expected) with expected = (leader, isr, unclean) or None.
OFFLINE = [
    ("first-live-in-isr", [1, 2, 3], [1, 2, 3], {1, 2, 3}, False, (1, [1, 2, 3], False)),
    ("assignment-order", [1, 2, 3], [3, 2, 1], {1, 2, 3}, False, (1, [3, 2, 1], False)),
    ("preferred-dead", [1, 2, 3], [1, 2, 3], {2, 3}, False, (2, [2, 3], False)),
    ("isr-keeps-its-order", [1, 2, 3], [3, 1, 2], {2, 3}, False, (2, [3, 2], False)),
    ("preferred-not-in-isr", [1, 2, 3], [2, 3], {1, 2, 3}, False, (2, [2, 3], False)),
    ("only-last-qualifies", [1, 2, 3], [1, 3], {2, 3}, False, (3, [3], False)),
    ("isr-outside-assignment", [1, 2], [9, 2], {1, 2, 9}, False, (2, [9, 2], False)),
    ("empty-isr-clean", [1, 2, 3], [], {1, 2, 3}, False, None),
    ("empty-isr-unclean", [1, 2, 3], [], {2, 3}, True, (2, [2], True)),
    ("isr-all-dead-clean", [1, 2, 3], [1], {2, 3}, False, None),
    ("isr-all-dead-unclean", [1, 2, 3], [1], {3, 2}, True, (2, [2], True)),
    ("unclean-allowed-but-clean-possible", [1, 2, 3], [3], {1, 3}, True, (3, [3], False)),
    ("all-dead-clean", [1, 2, 3], [1, 2, 3], set(), False, None),
    ("all-dead-unclean", [1, 2, 3], [1, 2, 3], set(), True, None),
    ("live-outside-assignment-ignored", [1, 2], [], {7, 8}, True, None),
    ("empty-assignment", [], [1], {1}, True, None),
    ("single-replica", [5], [5], {5}, False, (5, [5], False)),
    ("list-inputs", [1, 2, 3], [2, 3], [3, 2], False, (2, [2, 3], False)),
]


def _expected(row: tuple[int, list[int], bool] | None) -> Election | None:
    if row is None:
        return None
    leader, isr, unclean = row
    return Election(leader=leader, isr=tuple(isr), unclean=unclean)


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [row[1:] for row in OFFLINE],
    ids=[row[0] for row in OFFLINE],
)
def test_offline_election_follows_kafka_rules(assignment, isr, live, unclean, expected):
    assert elect_offline(assignment, isr, live, unclean) == _expected(expected)
    assert elect(Offline(unclean=unclean), assignment, isr, live) == _expected(expected)


def test_offline_election_defaults_to_clean():
    assert elect_offline([1, 2], [1], {2}) is None
    assert Offline() == Offline(unclean=False)


# Rows: (id, target, isr, live, expected leader or None). The ISR is always returned unchanged.
REASSIGN = [
    ("first-of-target", [4, 5, 6], [1, 4, 5, 6], {1, 4, 5, 6}, 4),
    ("target-order-not-isr-order", [6, 5, 4], [4, 5, 6], {4, 5, 6}, 6),
    ("target-head-dead", [4, 5, 6], [4, 5, 6], {5, 6}, 5),
    ("target-head-not-in-isr", [4, 5, 6], [1, 5, 6], {1, 4, 5, 6}, 5),
    ("old-replica-not-in-target-never-elected", [4, 5], [1, 2], {1, 2, 4, 5}, None),
    ("no-target-replica-qualifies", [4, 5], [4, 5], {1}, None),
    ("empty-isr", [4, 5], [], {4, 5}, None),
    ("keeps-dead-isr-members", [4, 5], [1, 5], {5}, 5),
    ("empty-target", [], [1], {1}, None),
]


@pytest.mark.parametrize(
    ("target", "isr", "live", "leader"),
    [row[1:] for row in REASSIGN],
    ids=[row[0] for row in REASSIGN],
)
def test_reassign_election_follows_kafka_rules(target, isr, live, leader):
    expected = None if leader is None else Election(leader=leader, isr=tuple(isr))
    assert elect_reassign(target, isr, live) == expected
    # The strategy carries the target; the assignment argument is not consulted.
    assert elect(Reassign(target=tuple(target)), [99], isr, live) == expected


# Rows: (id, assignment, isr, live, expected leader or None). The ISR is always unchanged.
PREFERRED = [
    ("preferred-live-in-isr", [1, 2, 3], [2, 3, 1], {1, 2, 3}, 1),
    ("preferred-dead", [1, 2, 3], [1, 2, 3], {2, 3}, None),
    ("preferred-not-in-isr", [1, 2, 3], [2, 3], {1, 2, 3}, None),
    ("no-fallback-to-second", [1, 2, 3], [2], {2, 3}, None),
    ("preferred-already-leader-still-elected", [2, 1], [2, 1], {1, 2}, 2),
    ("keeps-dead-isr-members", [1, 2, 3], [1, 3], {1}, 1),
    ("empty-assignment", [], [1], {1}, None),
    ("empty-isr", [1, 2], [], {1, 2}, None),
]


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "leader"),
    [row[1:] for row in PREFERRED],
    ids=[row[0] for row in PREFERRED],
)
def test_preferred_election_follows_kafka_rules(assignment, isr, live, leader):
    expected = None if leader is None else Election(leader=leader, isr=tuple(isr))
    assert elect_preferred(assignment, isr, live) == expected
    assert elect(Preferred(), assignment, isr, live) == expected


# Rows: (id, assignment, isr, live, shutting_down, expected (leader, isr) or None).
CONTROLLED_SHUTDOWN = [
    ("leader-shutting-down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, (2, [2, 3])),
    ("assignment-order", [3, 1, 2], [1, 2, 3], {1, 2, 3}, {3}, (1, [1, 2])),
    ("follower-shutting-down-keeps-leader", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {2}, (1, [1, 3])),
    ("several-shutting-down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, (3, [3])),
    ("all-shutting-down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2, 3}, None),
    ("only-candidate-dead", [1, 2], [1, 2], {1}, {1}, None),
    ("candidate-not-in-isr", [1, 2, 3], [1, 3], {1, 2, 3}, {1}, (3, [3])),
    ("dead-isr-member-kept", [1, 2, 3], [1, 2, 3], {1, 3}, {1}, (3, [2, 3])),
    ("shutting-down-outside-isr", [1, 2, 3], [2, 3], {1, 2, 3}, {1}, (2, [2, 3])),
    ("nobody-shutting-down", [1, 2], [2, 1], {1, 2}, set(), (1, [2, 1])),
    ("empty-isr", [1, 2], [], {1, 2}, {1}, None),
    ("list-inputs", [1, 2, 3], [1, 2, 3], [1, 2, 3], [1], (2, [2, 3])),
]


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [row[1:] for row in CONTROLLED_SHUTDOWN],
    ids=[row[0] for row in CONTROLLED_SHUTDOWN],
)
def test_controlled_shutdown_election_follows_kafka_rules(
    assignment, isr, live, shutting_down, expected
):
    want = None if expected is None else Election(leader=expected[0], isr=tuple(expected[1]))
    assert elect_controlled_shutdown(assignment, isr, live, shutting_down) == want
    strategy = ControlledShutdown(shutting_down=frozenset(shutting_down))
    assert elect(strategy, assignment, isr, live) == want


def test_generators_are_accepted_once_each():
    assert elect_offline([1, 2], iter([2, 1]), iter([2])) == Election(leader=2, isr=(2,))
    assert elect_controlled_shutdown([1, 2], iter([1, 2]), iter([1, 2]), iter([1])) == Election(
        leader=2, isr=(2,)
    )
    assert elect_preferred([1, 2], iter([2, 1]), iter([1])) == Election(leader=1, isr=(2, 1))
    assert elect_reassign([2], iter([1, 2]), iter([2])) == Election(leader=2, isr=(1, 2))


def test_election_isr_is_a_tuple_and_election_is_immutable():
    result = elect_offline([1, 2], {1, 2}, {1, 2})
    assert result is not None
    assert isinstance(result.isr, tuple)
    with pytest.raises(AttributeError):
        result.leader = 2  # type: ignore[misc]


def test_elect_rejects_unknown_strategy():
    with pytest.raises(TypeError):
        elect("offline", [1], [1], [1])  # type: ignore[arg-type]


def test_apply_election_bumps_leader_epoch_and_sets_controller_epoch():
    current = LeaderAndIsr(
        leader=1, leader_epoch=7, isr=(1, 2, 3), controller_epoch=4, partition_epoch=12
    )
    election = elect_offline([1, 2, 3], current.isr, {2, 3})
    assert election is not None
    nxt = apply_election(current, election, controller_epoch=5)
    assert nxt == LeaderAndIsr(
        leader=2, leader_epoch=8, isr=(2, 3), controller_epoch=5, partition_epoch=12
    )


def test_apply_election_bumps_epoch_even_when_leader_is_unchanged():
    current = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    election = elect_controlled_shutdown([1, 2], current.isr, {1, 2}, {2})
    assert election == Election(leader=1, isr=(1,))
    nxt = apply_election(current, election, controller_epoch=1)
    assert (nxt.leader, nxt.leader_epoch, nxt.isr) == (1, 1, (1,))


def test_an_elector_resolved_once_decides_each_partition_of_a_batch_by_its_rule():
    cases = [([1, 2, 3], [2, 3], [2, 3]), ([3, 1, 2], [1, 3], [1, 2, 3]), ([2, 1], [1], [1])]
    direct = {
        Offline(unclean=True): lambda a, i, lv: elect_offline(a, i, lv, unclean=True),
        Reassign(target=(3, 2)): lambda a, i, lv: elect_reassign((3, 2), i, lv),
        Preferred(): elect_preferred,
        ControlledShutdown(shutting_down=frozenset({3})):
            lambda a, i, lv: elect_controlled_shutdown(a, i, lv, {3}),
    }
    for strategy, rule in direct.items():
        run = elector(strategy)
        for assignment, isr, live in cases:
            assert run(assignment, isr, live) == rule(assignment, isr, live)


def test_the_controllers_inputs_give_what_any_iterables_give_for_every_rule_and_row():
    """The controller's mass elections run the same functions through an elector, with the
    stored ISR tuple and a frozenset of live brokers (passed through as they are): row for
    row, the Election, and its application, are what lists and sets give."""
    rows = (
        [(Offline(unclean=u), a, i, lv) for _, a, i, lv, u, _ in OFFLINE]
        + [(Reassign(target=tuple(t)), [9], i, lv) for _, t, i, lv, _ in REASSIGN]
        + [(Preferred(), a, i, lv) for _, a, i, lv, _ in PREFERRED]
        + [(ControlledShutdown(shutting_down=frozenset(sd)), a, i, lv)
           for _, a, i, lv, sd, _ in CONTROLLED_SHUTDOWN]
    )
    assert len(rows) > 20
    current = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1,), controller_epoch=2,
                           partition_epoch=9)
    for strategy, assignment, isr, live in rows:
        expected = elect(strategy, assignment, list(isr), list(live))
        got = elector(strategy)(tuple(assignment), tuple(isr), frozenset(live))
        assert got == expected, strategy
        if got is not None:
            assert type(got.isr) is tuple
            applied = apply_election(current, got, 3)
            assert applied == LeaderAndIsr(got.leader, 5, got.isr, 3, 9)
            assert type(applied) is LeaderAndIsr


def test_an_elector_is_the_public_function_itself_where_the_strategy_adds_nothing():
    """One set of rules: what the controller runs for a batch is the public function."""
    assert elector(Preferred()) is elect_preferred
    assert elector(Offline()) is elect_offline
