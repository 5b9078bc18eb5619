"""``partctl acls add | list | remove``: ACLs in the manner of Kafka's ``kafka-acls``.

Principals (``--allow-principal``, ``--deny-principal``), operations (``--operation``, All by
default when adding), resources (``--topic``, ``--group``, ``--transactional-id``, each
repeatable, and ``--cluster``) and ``--resource-pattern-type`` (LITERAL or PREFIXED; for list
and remove also ANY and MATCH). The cluster is reached by ``--bootstrap-server`` (CreateAcls,
DescribeAcls, DeleteAcls; client security from ``--command-config``, Kafka's client keys) or
the coordinator (``--coordinator``: the ACL nodes written directly, as ``kafka-acls
--authorizer-properties zookeeper.connect=...`` did).
"""

from __future__ import annotations

import argparse
import builtins
import re
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from partctl.commands.common import cluster_way, command_config_security, connect
from partctl.errors import UserError

_HOST_HELP = "the host the ACL applies to (default '*': any)"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    acls = sub.add_parser("acls", help="add, list and remove ACLs (as kafka-acls)")
    asub = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                       help="a broker to send the ACL requests to (default: write the ACL "
                            "nodes on --coordinator)")
    where.add_argument("--command-config", metavar="FILE",
                       help="client properties for --bootstrap-server (security.protocol, "
                            "sasl.mechanism, sasl.jaas.config, ssl.truststore.location ...)")
    resources = argparse.ArgumentParser(add_help=False)
    resources.add_argument("--topic", action="append", default=[], metavar="NAME")
    resources.add_argument("--group", action="append", default=[], metavar="NAME")
    resources.add_argument("--transactional-id", action="append", default=[], metavar="NAME")
    resources.add_argument("--cluster", action="store_true", help="the Cluster resource")
    resources.add_argument("--operation", action="append", default=[], metavar="OP",
                           help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                "DescribeConfigs, AlterConfigs, IdempotentWrite, All")
    resources.add_argument("--allow-principal", action="append", default=[], metavar="P",
                           help="Type:name, e.g. User:alice (User:* for everyone)")
    resources.add_argument("--deny-principal", action="append", default=[], metavar="P")
    resources.add_argument("--host", default=None, metavar="HOST", help=_HOST_HELP)
    add = asub.add_parser("add", parents=[common, where, resources], help="add ACLs")
    add.add_argument("--resource-pattern-type", default="LITERAL", metavar="TYPE",
                     help="LITERAL (default) or PREFIXED")
    add.set_defaults(func=cmd_add)
    listing = asub.add_parser("list", parents=[common, where, resources], help="list ACLs")
    listing.add_argument("--resource-pattern-type", default="ANY", metavar="TYPE",
                         help="ANY (default), MATCH, LITERAL or PREFIXED")
    listing.add_argument("--principal", default=None, metavar="P",
                         help="only the ACLs of this principal")
    listing.set_defaults(func=cmd_list)
    remove = asub.add_parser("remove", parents=[common, where, resources],
                             help="remove ACLs (those matching every option given)")
    remove.add_argument("--resource-pattern-type", default="LITERAL", metavar="TYPE",
                        help="LITERAL (default), PREFIXED, ANY or MATCH")
    remove.set_defaults(func=cmd_remove)


_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


# --- parsing ---------------------------------------------------------------------------------


def _parse(cls: Any, text: str, option: str) -> Any:
    from broker.security.acls import AclError

    try:
        return cls.parse(text)
    except AclError as exc:
        raise UserError(f"{option}: {exc}") from None


def _resources(args: argparse.Namespace) -> list[tuple[Any, str]]:
    from broker.security.acls import CLUSTER_NAME, ResourceType

    out = [(ResourceType.TOPIC, n) for n in args.topic]
    out += [(ResourceType.GROUP, n) for n in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    for kind, name in out:
        if not name:
            raise UserError(f"an empty {kind.label} name")
    for name in args.topic:  # a name (or prefix) no topic can have is a typo, not an ACL
        if name != "*" and not _TOPIC_CHARS.fullmatch(name):
            raise UserError(f"--topic {name!r}: illegal characters (a topic name is made of "
                            f"ASCII letters, digits, '.', '_' and '-')")
    return out


def _operations(args: argparse.Namespace, default: Sequence[str]) -> list[Any]:
    from broker.security.acls import Operation

    ops = [_parse(Operation, text, "--operation") for text in args.operation or default]
    for op in ops:
        if op in (Operation.ANY, Operation.UNKNOWN):
            raise UserError(f"--operation: {op.label} is not an operation")
    return ops


def _principals(args: argparse.Namespace) -> list[tuple[str, Any]]:
    from broker.security.acls import AclError, Permission, parse_principal

    out = []
    for texts, permission in ((args.allow_principal, Permission.ALLOW),
                              (args.deny_principal, Permission.DENY)):
        for text in texts:
            try:
                out.append((parse_principal(text), permission))
            except AclError as exc:
                raise UserError(str(exc)) from None
    return out


def _bindings(args: argparse.Namespace) -> list[Any]:
    from broker.security.acls import (
        AclBinding,
        AclEntry,
        AclError,
        PatternType,
        ResourcePattern,
    )

    pattern_type = _parse(PatternType, args.resource_pattern_type, "--resource-pattern-type")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UserError("--resource-pattern-type: ACLs are added to LITERAL or PREFIXED "
                        "patterns")
    resources = _resources(args)
    if not resources:
        raise UserError("give a resource: --topic, --group, --transactional-id or --cluster")
    principals = _principals(args)
    if not principals:
        raise UserError("give --allow-principal or --deny-principal")
    host = args.host if args.host is not None else "*"
    out = []
    try:
        for kind, name in resources:
            pattern = ResourcePattern(resource_type=kind, name=name, pattern_type=pattern_type)
            from broker.security.acl_store import pattern_path

            pattern_path(pattern)
            for principal, permission in principals:
                for op in _operations(args, ["All"]):
                    out.append(AclBinding(pattern=pattern, entry=AclEntry(
                        principal=principal, host=host, operation=op, permission=permission)))
    except AclError as exc:
        raise UserError(str(exc)) from None
    return out


def _filters(args: argparse.Namespace, principal: str | None = None) -> list[Any]:
    from broker.security.acls import (
        AclBindingFilter,
        AclError,
        Operation,
        PatternType,
        Permission,
        ResourceType,
    )

    pattern_type = _parse(PatternType, args.resource_pattern_type, "--resource-pattern-type")
    if pattern_type is PatternType.UNKNOWN:
        raise UserError("--resource-pattern-type: UNKNOWN is not a pattern type")
    resources: list[tuple[Any, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    principals: list[tuple[str | None, Any]] = list(_principals(args)) or [
        (principal, Permission.ANY)]
    ops = _operations(args, []) or [Operation.ANY]
    try:
        return [AclBindingFilter(resource_type=kind, name=name, pattern_type=pattern_type,
                                 principal=p, host=args.host, operation=op, permission=perm)
                for kind, name in resources for p, perm in principals for op in ops]
    except AclError as exc:
        raise UserError(str(exc)) from None


# --- the two ways to the ACLs ----------------------------------------------------------------


class _Brokers:
    """CreateAcls, DescribeAcls and DeleteAcls (version 3) on the first bootstrap server that
    answers."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, command_config: str | None
                 ) -> None:
        from kafkaclient.bootstrap import parse_bootstrap
        from kafkaclient.connection import BrokerUnreachable, KafkaConnection
        from kafkaclient.security.connector import Connector

        security = command_config_security(command_config)
        reasons = []
        for host, port in parse_bootstrap(bootstrap):
            conn = KafkaConnection(host, port, client_id="partctl-acls", timeout=args.timeout,
                                   connector=Connector(security))
            try:
                conn.versions()  # connects (and authenticates) now
            except (BrokerUnreachable, ConnectionError, OSError) as exc:
                conn.close()
                reasons.append(str(exc))
                continue
            self.conn = conn
            return
        raise UserError(f"cannot reach any bootstrap server ({'; '.join(reasons)})")

    def close(self) -> None:
        self.conn.close()

    def _call(self, request: Any) -> Any:
        from kafkaclient.connection import BrokerUnreachable

        try:
            return self.conn.call(request)
        except (BrokerUnreachable, ConnectionError, OSError) as exc:
            raise UserError(f"the broker did not answer: {exc}") from None

    def add(self, bindings: Sequence[Any]) -> None:
        from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
        from kio.static.primitive import i8

        response = self._call(CreateAclsRequest(creations=tuple(
            AclCreation(resource_type=i8(b.pattern.resource_type.value),
                        resource_name=b.pattern.name,
                        resource_pattern_type=i8(b.pattern.pattern_type.value),
                        principal=b.entry.principal, host=b.entry.host,
                        operation=i8(b.entry.operation.value),
                        permission_type=i8(b.entry.permission.value)) for b in bindings)))
        for result in response.results:
            _check(result.error_code, result.error_message)

    def list(self, flt: Any) -> builtins.list[Any]:
        from kio.schema.describe_acls.v3.request import DescribeAclsRequest

        response = self._call(DescribeAclsRequest(**_filter_fields(flt)))
        _check(response.error_code, response.error_message)
        return _described(response.resources)

    def remove(self, flt: Any) -> builtins.list[Any]:
        from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest

        response = self._call(DeleteAclsRequest(filters=(DeleteAclsFilter(**_filter_fields(flt)),)))
        removed = []
        for result in response.filter_results:
            _check(result.error_code, result.error_message)
            removed += _matched(result.matching_acls)
        return removed


def _filter_fields(flt: Any) -> dict[str, Any]:
    from kio.static.primitive import i8

    return dict(resource_type_filter=i8(flt.resource_type.value),
                resource_name_filter=flt.name, pattern_type_filter=i8(flt.pattern_type.value),
                principal_filter=flt.principal, host_filter=flt.host,
                operation=i8(flt.operation.value), permission_type=i8(flt.permission.value))


def _binding(rtype: int, name: str, ptype: int, principal: str, host: str, op: int,
             perm: int) -> Any:
    from broker.security.acls import (
        AclBinding,
        AclEntry,
        Operation,
        PatternType,
        Permission,
        ResourcePattern,
        ResourceType,
    )

    return AclBinding(pattern=ResourcePattern(resource_type=ResourceType(rtype), name=name,
                                              pattern_type=PatternType(ptype)),
                      entry=AclEntry(principal=principal, host=host, operation=Operation(op),
                                     permission=Permission(perm)))


def _described(resources: Iterable[Any]) -> list[Any]:
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type) for r in resources for a in r.acls]


def _matched(acls: Iterable[Any]) -> list[Any]:
    return [_binding(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type) for a in acls]


def _check(code: Any, message: str | None) -> None:
    from kio.schema.errors import ErrorCode

    code = ErrorCode(int(code))
    if code is not ErrorCode.none:
        raise UserError(f"the broker refused: {code.name.upper()}"
                        + (f": {message}" if message else ""))


class _Coordinator:
    """The ACL nodes on the coordinator, written directly."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.client = connect(args)

    def close(self) -> None:
        self.client.close()

    def add(self, bindings: Sequence[Any]) -> None:
        from broker.security.acl_store import add_acls

        add_acls(self.client, bindings)

    def list(self, flt: Any) -> builtins.list[Any]:
        from broker.security.acl_store import read_all
        from broker.security.acls import AclBinding

        return [AclBinding(pattern=p, entry=e) for p, entries in read_all(self.client).items()
                for e in entries if flt.matches(AclBinding(pattern=p, entry=e))]

    def remove(self, flt: Any) -> builtins.list[Any]:
        from broker.security.acl_store import delete_acls

        return delete_acls(self.client, flt)


def _open(args: argparse.Namespace) -> _Brokers | _Coordinator:
    bootstrap, command_config, _url = cluster_way(args)
    if bootstrap:
        return _Brokers(args, bootstrap, command_config)
    return _Coordinator(args)


def _print(bindings: Iterable[Any], heading: str, out: TextIO) -> None:
    by_pattern: dict[Any, list[Any]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in sorted(by_pattern.items(), key=lambda i: (
            i[0].resource_type, i[0].pattern_type, i[0].name)):
        # Kafka's AclCommand: "<heading> `<pattern>`: \n \t<acl>\n\t<acl> \n" and a blank line
        lines = "\n".join(f"\t{e}" for e in sorted(
            entries, key=lambda e: (e.principal, e.host, e.operation, e.permission)))
        print(f"{heading} `{pattern}`: \n {lines} \n", file=out)


# --- commands --------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    bindings = _bindings(args)
    target = _open(args)
    try:
        target.add(bindings)
    finally:
        target.close()
    _print(bindings, "Adding ACLs for resource", out)
    return 0


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    filters = _filters(args, args.principal)
    target = _open(args)
    try:
        found: dict[Any, None] = {}
        for flt in filters:
            found.update(dict.fromkeys(target.list(flt)))
    finally:
        target.close()
    _print(found, "Current ACLs for resource", out)
    return 0


def cmd_remove(args: argparse.Namespace, out: TextIO) -> int:
    if not _resources(args):
        raise UserError("give a resource to remove ACLs from: --topic, --group, "
                        "--transactional-id or --cluster")
    filters = _filters(args)
    target = _open(args)
    try:
        removed: dict[Any, None] = {}
        for flt in filters:
            removed.update(dict.fromkeys(target.remove(flt)))
    finally:
        target.close()
    _print(removed, "Removed ACLs from resource", out)
    return 0
