"""Coordinator credentials from the caller, the URL and the environment: found in that order,
refused with one clear message when incomplete, and never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.credentials import (
    ENV_PASSWORD,
    ENV_PASSWORD_FILE,
    ENV_USER,
    Credentials,
    CredentialsError,
    from_environment,
)

SECRET = "hunter2"


def test_the_environment_gives_a_user_and_a_password() -> None:
    assert from_environment({}) is None
    assert from_environment({ENV_USER: "kafka", ENV_PASSWORD: SECRET}) == Credentials("kafka",
                                                                                     SECRET)


def test_the_password_may_come_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text(f"{SECRET}\nignored\n")
    found = from_environment({ENV_USER: "kafka", ENV_PASSWORD_FILE: str(path)})
    assert found == Credentials("kafka", SECRET)


@pytest.mark.parametrize(("env", "message"), [
    ({ENV_USER: "kafka"}, "neither"),
    ({ENV_PASSWORD: SECRET}, f"{ENV_USER} is not"),
    ({ENV_USER: "kafka", ENV_PASSWORD: SECRET, ENV_PASSWORD_FILE: "/x"}, "not both"),
    ({ENV_USER: "kafka", ENV_PASSWORD_FILE: "/nonexistent/pw"}, "cannot read /nonexistent/pw"),
    ({ENV_USER: "ka:fka", ENV_PASSWORD: SECRET}, "cannot hold ':'"),
])
def test_incomplete_settings_are_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(CredentialsError, match=message) as info:
        from_environment(env)
    assert SECRET not in str(info.value)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("\n")
    with pytest.raises(CredentialsError, match="holds no password"):
        from_environment({ENV_USER: "kafka", ENV_PASSWORD_FILE: str(path)})


def test_the_password_is_never_shown() -> None:
    creds = Credentials("kafka", SECRET)
    for shown in (repr(creds), str(creds), f"{creds}", repr([creds]), repr({"c": creds})):
        assert SECRET not in shown and "***" in shown
