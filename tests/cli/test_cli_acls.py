"""``partctl acls add | list | remove`` on the coordinator: Kafka's ACL nodes written directly
(as ``kafka-acls --authorizer-properties zookeeper.connect=...``), printed as kafka-acls prints
them; bad input is one line, exit 1, and nothing written."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator

import pytest

import coordinator
from coordinator.base import Coordinator
from partctl.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def store() -> Iterator[tuple[str, Coordinator]]:
    url = f"memory://acls-{uuid.uuid4().hex[:10]}"
    client = coordinator.connect(url)
    yield url, client
    client.close()


def test_add_list_remove(store: tuple[str, Coordinator]) -> None:
    url, client = store
    code, out, err = run("acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
                         "--operation", "Describe", "--topic", "orders", "--group", "billing",
                         "--coordinator", url)
    assert (code, err) == (0, "")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " \
           "patternType=LITERAL)`" in out
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out
    assert json.loads(client.get("/kafka-acl/Group/billing")[0])["acls"][0]["operation"] in (
        "Read", "Describe")
    code, _, err = run("acls", "add", "--deny-principal", "User:*", "--host", "10.0.0.9",
                       "--topic", "ord", "--resource-pattern-type", "PREFIXED",
                       "--coordinator", url)
    assert (code, err) == (0, "")
    assert json.loads(client.get("/kafka-acl-extended/prefixed/Topic/ord")[0]) == {
        "version": 1, "acls": [{"principal": "User:*", "permissionType": "Deny",
                                "operation": "All", "host": "10.0.0.9"}]}
    code, out, _ = run("acls", "list", "--coordinator", url)
    assert code == 0 and out.count("Current ACLs for resource") == 3
    code, out, _ = run("acls", "list", "--topic", "orders", "--resource-pattern-type", "MATCH",
                       "--coordinator", url)
    assert code == 0 and out.count("Current ACLs for resource") == 2  # orders and ord*
    code, out, _ = run("acls", "list", "--principal", "User:*", "--coordinator", url)
    assert out.count("Current ACLs") == 1 and "name=ord," in out
    code, out, _ = run("acls", "remove", "--topic", "orders", "--operation", "Read",
                       "--coordinator", url)
    assert code == 0 and "operation=READ" in out and "DESCRIBE" not in out
    assert len(json.loads(client.get("/kafka-acl/Topic/orders")[0])["acls"]) == 1
    code, out, _ = run("acls", "remove", "--topic", "orders", "--coordinator", url)
    assert code == 0 and client.exists("/kafka-acl/Topic/orders") is None


@pytest.mark.parametrize(("argv", "message"), [
    (["add", "--allow-principal", "alice", "--topic", "t"], "not of the form Type:name"),
    (["add", "--allow-principal", "User:a", "--operation", "Jump", "--topic", "t"],
     "--operation: unknown Operation 'Jump'"),
    (["add", "--allow-principal", "User:a"], "give a resource"),
    (["add", "--topic", "t"], "give --allow-principal or --deny-principal"),
    (["add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "ANY"],
     "LITERAL or PREFIXED"),
    (["add", "--allow-principal", "User:a", "--topic", "*", "--resource-pattern-type",
      "PREFIXED"], "PREFIXED pattern cannot be '*'"),
    (["add", "--allow-principal", "User:a", "--topic", "a/b"], "'a/b': illegal characters"),
    (["list", "--topic", "a b"], "'a b': illegal characters"),
    (["remove", "--allow-principal", "User:a"], "give a resource to remove"),
    (["list", "--command-config", "/dev/null"], "--command-config goes with"),
])
def test_bad_input_is_one_line_and_writes_nothing(store: tuple[str, Coordinator],
                                                  argv: list[str], message: str) -> None:
    url, client = store
    code, out, err = run("acls", *argv, "--coordinator", url)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert client.exists("/kafka-acl") is None and client.exists("/kafka-acl-changes") is None
