"""Client quotas at Kafka's ZooKeeper paths, as DescribeClientQuotas reads them (KIP-546): the
filter's rules (pure) and the reading of a store, SCRAM credentials and bad values left out."""

from __future__ import annotations

import json

import coordinator
from coordinator.client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    FilterComponent,
    check_filter,
    describe_quotas,
    matches,
    read_quotas,
)
from coordinator.metadata import MetadataClient

ALICE = (("user", "alice"),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))
DEFAULT_USER = (("user", None),)
APP = (("client-id", "app"),)


def _c(entity_type: str, match_type: int, match: str | None = None) -> FilterComponent:
    return FilterComponent(entity_type=entity_type, match_type=match_type, match=match)


def test_filter_components_match_exact_default_and_any_names() -> None:
    exact, default, any_user = (_c("user", MATCH_EXACT, "alice"), _c("user", MATCH_DEFAULT),
                                _c("user", MATCH_ANY))
    assert [matches(e, [exact], False) for e in (ALICE, ALICE_APP, DEFAULT_USER, APP)] == [
        True, True, False, False]
    assert [matches(e, [default], False) for e in (ALICE, DEFAULT_USER)] == [False, True]
    assert [matches(e, [any_user], False) for e in (ALICE, DEFAULT_USER, APP)] == [
        True, True, False]
    # strict: the entity has no type the filter does not name
    assert [matches(e, [exact], True) for e in (ALICE, ALICE_APP)] == [True, False]
    assert matches(ALICE_APP, [exact, _c("client-id", MATCH_ANY)], True)
    assert matches(APP, [], False) and not matches(APP, [], True)


def test_bad_filters_are_refused_with_kafkas_reasons() -> None:
    assert check_filter([_c("user", MATCH_ANY), _c("client-id", MATCH_EXACT, "x")]) is None
    assert check_filter([_c("", MATCH_ANY)]) == "Invalid empty entity type."
    assert "more than once" in str(check_filter([_c("user", 2), _c("user", 0, "a")]))
    assert check_filter([_c("group", MATCH_ANY)]) == "Unknown entity type group"
    assert check_filter([_c("user", 7)]) == "Unknown match type 7"
    assert "IP filter component" in str(check_filter([_c("ip", 2), _c("user", 2)]))


def test_quotas_are_read_from_kafkas_paths_without_the_scram_credentials() -> None:
    client = coordinator.connect("memory://quotas-test")
    try:
        metadata = MetadataClient(client)
        metadata.ensure_layout()

        def put(path: str, config: dict[str, str]) -> None:
            client.create(path, json.dumps({"version": 1, "config": config}).encode())

        put("/config/users/alice", {"SCRAM-SHA-256": "salt=...,iterations=8192",
                                    "producer_byte_rate": "1024"})
        put("/config/users/bob", {"SCRAM-SHA-512": "salt=...,iterations=4096"})  # no quota
        client.create("/config/users/alice/clients", b"")
        put("/config/users/alice/clients/app", {"consumer_byte_rate": "2048.5"})
        put("/config/users/%3Cdefault%3E", {"request_percentage": "not-a-number"})
        put("/config/users/<default>", {"request_percentage": "50"})
        put("/config/clients/app", {"controller_mutation_rate": "10", "other": "1"})
        put("/config/ips/127.0.0.1", {"connection_creation_rate": "5"})

        assert read_quotas(metadata) == {
            ALICE: {"producer_byte_rate": 1024.0},
            ALICE_APP: {"consumer_byte_rate": 2048.5},
            DEFAULT_USER: {"request_percentage": 50.0},
            APP: {"controller_mutation_rate": 10.0},
            (("ip", "127.0.0.1"),): {"connection_creation_rate": 5.0},
        }
        assert describe_quotas(metadata, [_c("user", MATCH_EXACT, "alice")], True) == {
            ALICE: {"producer_byte_rate": 1024.0}}
        assert set(describe_quotas(metadata, [_c("client-id", MATCH_ANY)], False)) == {
            ALICE_APP, APP}
    finally:
        client.close()
