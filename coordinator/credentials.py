"""The credentials a session presents to its coordinator: a user and a password, from the
caller, the URL or the environment, never shown.

Where they come from, first found wins:

1. ``credentials=`` given to :func:`coordinator.connect` (a broker's ``server.properties``);
2. the URL's user info, ``zookeeper://user:password@host:2181/chroot`` (percent-encode a ``@``,
   ``:`` or ``/`` in either);
3. the environment: ``PARTCTL_COORDINATOR_USER`` with ``PARTCTL_COORDINATOR_PASSWORD`` or
   ``PARTCTL_COORDINATOR_PASSWORD_FILE`` (the file's first line).

ZooKeeper takes them as a digest identity (``digest`` auth), etcd as a user of its auth store.
A password is never part of a repr, an error or a log line: :class:`Credentials` shows ``***``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator.errors import CoordinatorError

ENV_USER = "PARTCTL_COORDINATOR_USER"
ENV_PASSWORD = "PARTCTL_COORDINATOR_PASSWORD"
ENV_PASSWORD_FILE = "PARTCTL_COORDINATOR_PASSWORD_FILE"

__all__ = ["ENV_PASSWORD", "ENV_PASSWORD_FILE", "ENV_USER", "Credentials", "CredentialsError",
           "from_environment", "read_password_file"]


class CredentialsError(CoordinatorError):
    """Credentials that cannot be used as given (a user without a password, an unreadable
    password file); the message never holds the password."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user and its password; the repr masks the password."""

    user: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.user:
            raise CredentialsError("coordinator credentials need a user name")
        if ":" in self.user:
            raise CredentialsError(f"a coordinator user name cannot hold ':' ({self.user!r})")

    def __repr__(self) -> str:
        return f"Credentials(user={self.user!r}, password='***')"

    def __str__(self) -> str:
        return f"{self.user}:***"


def read_password_file(path: str, what: str) -> str:
    """The first line of the file at ``path`` (trailing newline dropped); ``what`` names the
    setting in the error, which names the file and never its content."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline()
    except OSError as exc:
        raise CredentialsError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CredentialsError(f"{what}: {path} is not UTF-8 text") from None
    password = line.rstrip("\r\n")
    if not password:
        raise CredentialsError(f"{what}: {path} holds no password (its first line is empty)")
    return password


def from_environment(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials the environment gives, None when ``PARTCTL_COORDINATOR_USER`` is unset."""
    env = os.environ if environ is None else environ
    user = env.get(ENV_USER)
    password, password_file = env.get(ENV_PASSWORD), env.get(ENV_PASSWORD_FILE)
    if not user:
        if password or password_file:
            raise CredentialsError(f"{ENV_PASSWORD if password else ENV_PASSWORD_FILE} is set "
                                   f"but {ENV_USER} is not")
        return None
    if password and password_file:
        raise CredentialsError(f"set {ENV_PASSWORD} or {ENV_PASSWORD_FILE}, not both")
    if password_file:
        password = read_password_file(password_file, ENV_PASSWORD_FILE)
    if not password:
        raise CredentialsError(f"{ENV_USER} is set but neither {ENV_PASSWORD} nor "
                               f"{ENV_PASSWORD_FILE}")
    return Credentials(user, password)
