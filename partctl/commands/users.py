"""``partctl users create | describe | delete``: SCRAM credentials at ``/config/users/<user>``,
as Kafka's ``kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-512=[...]'``
writes them (with the change notification brokers follow).

The password is read from a prompt (``getpass``: not echoed) or from the first line of
``--password-file``; never from the command line, and never printed.
"""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import TextIO

from partctl.commands.common import connect
from partctl.errors import UserError

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    users = sub.add_parser("users", help="SCRAM credentials of SASL users")
    usub = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = usub.add_parser("create", parents=[common],
                             help="set a user's SCRAM credential (created or replaced)")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--mechanism", required=True, metavar="MECHANISM",
                        help="SCRAM-SHA-256 or SCRAM-SHA-512")
    create.add_argument("--iterations", type=int, default=4096,
                        help="PBKDF2 iterations, 4096 to 16384 (default 4096)")
    create.add_argument("--password-file", metavar="PATH",
                        help="read the password from the first line of PATH "
                             "(default: prompt for it)")
    create.set_defaults(func=cmd_create)
    describe = usub.add_parser("describe", parents=[common],
                               help="the mechanisms and iterations of users' credentials")
    describe.add_argument("name", metavar="NAME", nargs="?",
                          help="one user (default: every user with a credential)")
    describe.set_defaults(func=cmd_describe)
    delete = usub.add_parser("delete", parents=[common], help="delete a user's credential")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", required=True, metavar="MECHANISM",
                        help="SCRAM-SHA-256 or SCRAM-SHA-512")
    delete.set_defaults(func=cmd_delete)


def _mechanism(text: str) -> str:
    name = text.strip().upper()
    if name not in SCRAM_MECHANISMS:
        raise UserError(f"--mechanism: {text!r} is not a SCRAM mechanism "
                        f"({', '.join(SCRAM_MECHANISMS)})")
    return name


def _name(text: str) -> str:
    if not text.strip():
        raise UserError("the user name must not be empty")
    return text


def _password(args: argparse.Namespace) -> str:
    if args.password_file is not None:
        try:
            text = Path(args.password_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read --password-file {args.password_file}: "
                            f"{exc.strerror or type(exc).__name__}") from None
        except UnicodeDecodeError:
            raise UserError(f"--password-file {args.password_file}: not UTF-8 text") from None
        password = text.splitlines()[0] if text else ""
    else:
        try:
            password = getpass.getpass(f"Password for {args.name}: ")
        except EOFError:
            raise UserError("no password given (no terminal to prompt on: use "
                            "--password-file)") from None
    if not password:
        raise UserError("the password must not be empty")
    return password


def cmd_create(args: argparse.Namespace, out: TextIO) -> int:
    from broker.security.credentials import CredentialError, check_iterations, upsert
    from coordinator.metadata import MetadataClient
    from kafkaclient.security.scram import make_credential

    name, mechanism = _name(args.name), _mechanism(args.mechanism)
    try:
        check_iterations(mechanism, args.iterations)
    except CredentialError as exc:
        raise UserError(f"--iterations: {exc}") from None
    with connect(args) as client:  # the coordinator first: no password asked for in vain
        credential = make_credential(mechanism, _password(args), iterations=args.iterations)
        upsert(MetadataClient(client), name, mechanism, credential)
    print(f"Completed updating config for user {name}: {mechanism} (iterations "
          f"{args.iterations}).", file=out)
    return 0


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    from broker.security.credentials import describe
    from coordinator.metadata import MetadataClient

    name = _name(args.name) if args.name is not None else None
    with connect(args) as client:
        found = describe(MetadataClient(client), [name] if name is not None else None)
    if name is not None and not found.get(name):
        raise UserError(f"user {name!r} has no SCRAM credential")
    for user, infos in found.items():
        configs = ", ".join(f"{i.mechanism}=iterations={i.iterations}" for i in infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {configs}", file=out)
    return 0


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    from broker.security.credentials import CredentialError, remove
    from coordinator.metadata import MetadataClient

    name, mechanism = _name(args.name), _mechanism(args.mechanism)
    with connect(args) as client:
        try:
            remove(MetadataClient(client), name, mechanism)
        except CredentialError as exc:
            if exc.error == "RESOURCE_NOT_FOUND":
                raise UserError(f"user {name!r} has no {mechanism} credential") from None
            raise UserError(str(exc)) from None
    print(f"Completed updating config for user {name}: {mechanism} deleted.", file=out)
    return 0
