"""``partctl ui``: serve the cluster page (partctl/webui/) until Ctrl-C or SIGTERM.

It connects to the coordinator and reads the cluster once before it listens (an unreachable
coordinator, a missing ``--plan`` or ``--sizes`` file: one error line, exit 1, nothing
served), then listens on ``--listen`` only (default 127.0.0.1:8080; port 0 picks a free one),
prints the page's address and serves until a signal, which ends it with status 0.

Read-only unless ``--allow-actions``, which needs a user with SCRAM credentials in the cluster
to log in as (``partctl users create``): the actions are behind HTTP Basic auth checked against
them (failed logins from one address slowed down), and the command refuses to start on a
cluster without one. Each action is then authorized by the cluster's ACLs as the brokers
authorize the Kafka API that does the same (Alter on the Cluster); ``--super-users`` and
``--allow-everyone-if-no-acl-found`` are the brokers' ``super.users`` and
``allow.everyone.if.no.acl.found`` (false by default, as Kafka's: on a cluster without ACLs,
give it, or name the users allowed in ``--super-users``).

Only requests whose ``Host`` names this server are answered (DNS rebinding):
``--allowed-host NAME[:PORT]`` (repeatable) lists the names; by default the listening address,
localhost and 127.0.0.1 at its port.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

from partctl.commands.common import connect, read_text, seconds_or_zero, sizes
from partctl.errors import UserError

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_REFRESH = 10.0
MAX_PORT = 65535


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) to listen on."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or int(port) > MAX_PORT:
        raise argparse.ArgumentTypeError(f"want HOST:PORT, e.g. {DEFAULT_LISTEN}, got {text!r}")
    return host, int(port)


def super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users``: ``User:a;User:b``."""
    users = [u.strip() for u in text.split(";") if u.strip()]
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise argparse.ArgumentTypeError(f"{user!r} is not a principal (User:name)")
    return frozenset(users)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    ui = sub.add_parser("ui", parents=[common],
                        help="serve the cluster page (brokers, topics, under-replicated "
                             "partitions, reassignments) until Ctrl-C")
    ui.add_argument("--listen", type=listen_address, default=listen_address(DEFAULT_LISTEN),
                    metavar="HOST:PORT", help=f"where to listen (default {DEFAULT_LISTEN}; "
                                              f"port 0: a free one)")
    ui.add_argument("--refresh", type=seconds_or_zero, default=DEFAULT_REFRESH,
                    metavar="SECONDS", help=f"reload the page every SECONDS (default "
                                            f"{DEFAULT_REFRESH:g}; 0: never)")
    ui.add_argument("--allow-actions", action="store_true",
                    help="offer preferred elections and cancelling the reassignment, to users "
                         "of the cluster (HTTP Basic auth against their SCRAM credentials)")
    ui.add_argument("--super-users", type=super_users, default=frozenset(),
                    metavar="User:a;User:b",
                    help="principals allowed every action whatever the ACLs (the brokers' "
                         "super.users)")
    ui.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                    help="with no ACL on the Cluster, any user of the cluster may act (the "
                         "brokers' allow.everyone.if.no.acl.found; default: only super users)")
    ui.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                    help="a host name the page answers for (repeatable; default: the "
                         "listening address, localhost and 127.0.0.1 at its port)")
    ui.add_argument("--plan", metavar="FILE",
                    help="a reassignment plan (JSON) to picture before and after")
    ui.add_argument("--state-change-log", metavar="FILE",
                    help="the state-change log (a broker's or controller's "
                         "partctl.state.change.log.file): its last lines show as the "
                         "recent state changes")
    ui.add_argument("--sizes", metavar="FILE",
                    help='partition sizes, for bytes per broker: {"partitions": [{"topic", '
                         '"partition", "size_bytes"}]} (default: unknown)')
    ui.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.metadata import MetadataClient
    from partctl.webui import ClusterPage, serve

    plan = read_text(args.plan, "--plan") if args.plan else None
    known = sizes(args)
    if args.state_change_log:
        read_text(args.state_change_log, "--state-change-log")  # there and readable
    host, port = args.listen
    with connect(args) as client:
        if args.allow_actions and not any(MetadataClient(client).all_user_configs().values()):
            raise UserError("--allow-actions: the cluster has no user to log in as; create one "
                            "with partctl users create")
        app = ClusterPage(client, refresh=args.refresh, allow_actions=args.allow_actions,
                          plan=plan, state_change_log=args.state_change_log, sizes=known,
                          timeout=args.timeout, refresh_in_background=True,
                          super_users=args.super_users,
                          allow_if_no_acls=args.allow_everyone_if_no_acl_found)
        app.view()  # the cluster can be read
        try:
            server = serve(app, host, port, allowed_hosts=args.allowed_host)
        except OSError as exc:
            raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        except ValueError as exc:  # a malformed --allowed-host
            raise UserError(str(exc)) from None
        try:
            with _stop_on_signal() as stop:  # before the line that says it serves
                bound = server.server_address
                host = str(bound[0])
                shown = f"[{host}]" if ":" in host else host
                mode = "actions allowed" if args.allow_actions else "read-only"
                print(f"partctl ui: serving http://{shown}:{bound[1]}/ ({mode}); Ctrl-C stops "
                      f"it", file=out, flush=True)
                while not stop.wait(0.5):
                    pass
        finally:
            server.shutdown()
            server.server_close()
            app.close()
    print("partctl ui: stopped", file=out, flush=True)
    return 0


@contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while in the block (the command runs in the main
    thread, where signals go); the previous handlers come back after it."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
