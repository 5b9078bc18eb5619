"""What several command groups share: option value types, the coordinator a command connects to,
the files it reads, and the ``--db`` option.

Connections are opened for a ``with`` block (``with connect(args) as client``, ``with
admin(args) as a``), so they are closed on every path out of a command: its result, a user
error, a bug, Ctrl-C.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from partctl.errors import UserError

if TYPE_CHECKING:
    from coordinator.admin import Admin
    from coordinator.base import Coordinator
    from kafkaclient.security.settings import ClientSecurity
    from rebalancer.access import ClusterAccess

ENV_COORDINATOR = "PARTCTL_COORDINATOR"


# --- option values -------------------------------------------------------------------------------


def finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds (float() alone takes -1, nan and inf)."""
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def seconds_or_zero(text: str) -> float:
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def reword(parser: argparse.ArgumentParser, dest: str, text: str) -> None:
    """Give option ``dest`` of ``parser`` its own help ``text``. An option from a parent parser
    is the parent's one Action object, shared by every command built from it: its help is
    changed on a copy, put in its place in this parser only."""
    import copy

    for index, action in enumerate(parser._actions):
        if action.dest != dest:
            continue
        mine = copy.copy(action)
        mine.help = text
        parser._actions[index] = mine
        for option in action.option_strings:
            parser._option_string_actions[option] = mine
        for group in parser._action_groups + parser._mutually_exclusive_groups:
            group._group_actions[:] = [mine if a is action else a for a in group._group_actions]


def log_format_option(parser: argparse.ArgumentParser) -> None:
    """``--log-format text|json`` for a long-running process (broker/logs.py)."""
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="log lines as text (default) or as one JSON object per line")


def id_list(text: str | None, option: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"bad {option} {text!r}: want broker ids like 1,2,3") from None


# --- the coordinator -----------------------------------------------------------------------------


def coordinator_url(args: argparse.Namespace) -> str:
    url = args.coordinator or os.environ.get(ENV_COORDINATOR)
    if not url:
        raise UserError(f"no coordinator: pass --coordinator URL or set {ENV_COORDINATOR}")
    return url


def connect(args: argparse.Namespace) -> Coordinator:
    """A session on the command's coordinator, for a ``with`` block: ``--connect-timeout``
    where the command has one (``reassign execute``, whose ``--timeout`` is the execution's),
    else ``--timeout``; ``--session-timeout`` where the command has one."""
    import coordinator

    timeout = getattr(args, "connect_timeout", None) or args.timeout
    options = {"session_timeout": args.session_timeout} if "session_timeout" in args else {}
    return coordinator.connect(coordinator_url(args), timeout=timeout, **options)


@contextmanager
def admin(args: argparse.Namespace) -> Iterator[Admin]:
    """The admin API over a session on the command's coordinator, closed with the block."""
    from coordinator.admin import Admin

    with connect(args) as client:
        yield Admin(client)


# --- the cluster, either way in ------------------------------------------------------------------

ADMIN_TIMEOUT = 30.0
"""The least time an Admin API request gets (a DescribeLogDirs of a big broker takes a while),
whatever ``--timeout`` says of connecting."""


def cluster_options() -> argparse.ArgumentParser:
    """A parent parser for the commands that reach a live cluster, either way in: Kafka's Admin
    API (``--bootstrap-server``, ``--command-config``, as Kafka's tools take them) or the
    coordinator's admin nodes (``--coordinator``). :func:`open_cluster` opens the one given."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="the cluster by Kafka's Admin API: any Kafka 3.x or 4.x cluster, "
                             "KRaft or ZooKeeper mode, or partctl's brokers")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for --bootstrap-server, as Kafka's tools take "
                             "them (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*)")
    parser.add_argument("--coordinator", metavar="URL",
                        help=f"the cluster by its coordinator instead: zookeeper://h:p/chroot, "
                             f"etcd://h:p/prefix or memory://NAME (default: ${ENV_COORDINATOR})")
    return parser


def timeout_option() -> argparse.ArgumentParser:
    """``--timeout S``: how long to wait for the cluster (the top-level parser's, for commands
    that take :func:`cluster_options` instead of its ``--coordinator``)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--timeout", type=seconds, default=5.0, metavar="S",
                        help="seconds to wait for the cluster (default 5)")
    return parser


def cluster_given(args: argparse.Namespace) -> bool:
    """Whether the command was given a cluster (an option, or $PARTCTL_COORDINATOR)."""
    return bool(getattr(args, "bootstrap_server", None) or getattr(args, "coordinator", None)
                or os.environ.get(ENV_COORDINATOR))


def cluster_way(args: argparse.Namespace, *, what: str = "cluster"
                ) -> tuple[str | None, str | None, str | None]:
    """The one way in the command was given, as (bootstrap servers, --command-config path,
    coordinator URL): the bootstrap servers (and maybe a properties file), or a coordinator URL
    (``--coordinator``, else $PARTCTL_COORDINATOR, a default ``--bootstrap-server``
    overrides). Every command that reaches a cluster either way checks here, in this order, so
    that the same mistake reads the same in each: an unreadable or invalid ``--command-config``
    file, both ways, ``--command-config`` without ``--bootstrap-server``, neither, malformed
    bootstrap servers. ``what`` is the thing reached, in the line for neither."""
    bootstrap = getattr(args, "bootstrap_server", None)
    command_config = getattr(args, "command_config", None)
    url = getattr(args, "coordinator", None)
    if command_config:
        command_config_security(command_config)
    if bootstrap and url:
        raise UserError("give --bootstrap-server or --coordinator, not both")
    if command_config and not bootstrap:
        raise UserError("--command-config goes with --bootstrap-server")
    if bootstrap:
        from kafkaclient.admin import AdminError
        from kafkaclient.bootstrap import parse_bootstrap

        try:
            parse_bootstrap(bootstrap)
        except AdminError as exc:
            raise UserError(str(exc)) from None
        return bootstrap, command_config, None
    url = url or os.environ.get(ENV_COORDINATOR)
    if not url:
        raise UserError(f"no {what}: pass --bootstrap-server HOST:PORT or --coordinator URL, "
                        f"or set {ENV_COORDINATOR}")
    return None, None, url


def command_config_security(path: str | None) -> ClientSecurity:
    """The client security of ``--command-config FILE`` (None: plaintext), Kafka's client keys:
    a file that cannot be read, then one whose settings are wrong, each one line naming the
    file (never a value from it)."""
    from kafkaclient.security.settings import (
        ClientSecurity,
        SecurityConfigError,
        read_client_properties,
    )

    if path is None:
        return ClientSecurity()
    read_text(path, "--command-config file")
    try:
        return read_client_properties(path)
    except SecurityConfigError as exc:
        raise UserError(str(exc)) from None


def open_cluster(args: argparse.Namespace) -> ClusterAccess:
    """The cluster of :func:`cluster_options`, to close after use (``with closing(...)``):
    ``--bootstrap-server`` (with ``--command-config``) or ``--coordinator`` (else
    $PARTCTL_COORDINATOR, a default that ``--bootstrap-server`` overrides). Both, or neither, is
    one line; so is ``--command-config`` without ``--bootstrap-server``. The wait is
    ``--connect-timeout`` where the command has one, else ``--timeout``."""
    from rebalancer.access import open_access

    bootstrap, command_config, url = cluster_way(args)
    timeout = getattr(args, "connect_timeout", None) or getattr(args, "timeout", None) or 5.0
    if bootstrap:
        return open_access(bootstrap=bootstrap, command_config=command_config,
                           timeout=max(timeout, ADMIN_TIMEOUT), connect_timeout=timeout)
    options = {"session_timeout": args.session_timeout} if "session_timeout" in args else {}
    return open_access(coordinator_url=url, timeout=timeout, coordinator_options=options)


# --- files ---------------------------------------------------------------------------------------


def read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"cannot read {what} {path}: not UTF-8 text ({exc.reason} at byte "
                        f"{exc.start})") from None


def sizes(args: argparse.Namespace) -> dict[tuple[str, int], int] | None:
    """The partition sizes of ``--sizes FILE``, None without it."""
    from rebalancer.live_snapshot import parse_sizes

    return parse_sizes(read_text(args.sizes, "--sizes file")) if args.sizes else None


# --- the SQL store -------------------------------------------------------------------------------


def database_options() -> argparse.ArgumentParser:
    """``--db``, a parent parser of the commands that use the SQL store."""
    from rebalancer.store_location import DB_FILENAME, ENV_DB, ENV_HOME  # no SQLAlchemy

    database = argparse.ArgumentParser(add_help=False)
    database.add_argument("--db", metavar="URL",
                          help=f"any SQLAlchemy URL (default: ${ENV_DB}, else SQLite at "
                               f"${ENV_HOME}/{DB_FILENAME}, ~/.local/share/partctl/{DB_FILENAME})")
    return database
