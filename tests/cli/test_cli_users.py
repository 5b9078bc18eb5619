"""``partctl users create | describe | delete``: credentials written as Kafka writes them at
``/config/users/<user>`` with a ``users/<user>`` change notification; passwords from a file or
a prompt, never printed; bad input is one line, exit 1, and nothing written."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator import layout
from coordinator.base import Coordinator
from kafkaclient.security.scram import ScramClient, ScramCredential, ScramServer
from partctl.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def store() -> Iterator[tuple[str, Coordinator]]:
    url = f"memory://users-{uuid.uuid4().hex[:10]}"
    client = coordinator.connect(url)  # keeps the in-process store alive for the test
    yield url, client
    client.close()


def password_file(tmp_path: Path, password: str) -> str:
    path = tmp_path / "pw"
    path.write_text(password + "\n")
    return str(path)


def test_create_describe_delete(store: tuple[str, Coordinator], tmp_path: Path) -> None:
    url, client = store
    password = f"pw-{uuid.uuid4().hex}"
    code, out, err = run("users", "create", "alice", "--mechanism", "SCRAM-SHA-512",
                         "--password-file", password_file(tmp_path, password),
                         "--coordinator", url)
    assert (code, err) == (0, "") and password not in out
    data, _ = client.get(layout.user_config("alice"))
    node = json.loads(data)
    assert node["version"] == 1 and list(node["config"]) == ["SCRAM-SHA-512"]
    credential = ScramCredential.decode(node["config"]["SCRAM-SHA-512"])
    assert credential.iterations == 4096
    server = ScramServer("SCRAM-SHA-512", {"alice": credential}.get)
    scram = ScramClient("SCRAM-SHA-512", "alice", password)
    scram.verify(server.step(scram.final(server.step(scram.first()))))  # the password works
    changes = client.children(layout.CONFIG_CHANGES)
    notes = [json.loads(client.get(f"{layout.CONFIG_CHANGES}/{c}")[0]) for c in changes]
    assert {"version": 2, "entity_path": "users/alice"} in notes

    code, out, err = run("users", "describe", "alice", "--coordinator", url)
    assert code == 0 and out == ("SCRAM credential configs for user-principal 'alice' are "
                                 "SCRAM-SHA-512=iterations=4096\n")
    code, out, err = run("users", "delete", "alice", "--mechanism", "SCRAM-SHA-512",
                         "--coordinator", url)
    assert code == 0
    assert json.loads(client.get(layout.user_config("alice"))[0])["config"] == {}


def test_the_prompt_reads_the_password(store: tuple[str, Coordinator],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url, client = store
    monkeypatch.setattr("getpass.getpass", lambda prompt: "typed-secret")
    code, out, err = run("users", "create", "bob", "--mechanism", "scram-sha-256",
                         "--coordinator", url)
    assert code == 0 and "typed-secret" not in out + err
    config = json.loads(client.get(layout.user_config("bob"))[0])["config"]
    assert list(config) == ["SCRAM-SHA-256"]


@pytest.mark.parametrize(("argv", "message"), [
    (["describe", "nobody"], "user 'nobody' has no SCRAM credential"),
    (["delete", "nobody", "--mechanism", "SCRAM-SHA-512"],
     "user 'nobody' has no SCRAM-SHA-512 credential"),
    (["create", "alice", "--mechanism", "SCRAM-SHA-1", "--password-file", "PW"],
     "--mechanism: 'SCRAM-SHA-1' is not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)"),
    (["create", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", "/no/such/file"],
     "cannot read --password-file /no/such/file: No such file or directory"),
    (["create", "alice", "--mechanism", "SCRAM-SHA-512", "--iterations", "100",
      "--password-file", "PW"], "--iterations: Too few iterations: 100 (at least 4096)"),
    (["create", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", "EMPTY"],
     "the password must not be empty"),
])
def test_bad_input_is_one_line_and_writes_nothing(store: tuple[str, Coordinator],
                                                  tmp_path: Path, argv: list[str],
                                                  message: str) -> None:
    url, client = store
    argv = [password_file(tmp_path, "pw-never-shown") if a == "PW" else a for a in argv]
    empty = tmp_path / "empty"
    empty.write_text("")
    argv = [str(empty) if a == "EMPTY" else a for a in argv]
    code, out, err = run("users", *argv, "--coordinator", url)
    assert code == 1 and out == ""
    assert err == f"partctl: error: {message}\n"
    assert "pw-never-shown" not in err
    assert client.exists(layout.user_config("alice")) is None
