"""``partctl topics create | list | describe | delete``: Kafka's kafka-topics, over the admin API;
``topics describe-config | alter-config``: kafka-configs ``--entity-type topics``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from coordinator.codecs import TopicPartition
from coordinator.configdef import Effect
from coordinator.skipped import topic_problems
from coordinator.topic_config import TOPIC_CONFIG_KEYS, ConfigSource
from partctl.commands.common import admin
from partctl.errors import UserError

if TYPE_CHECKING:
    from kafkaclient.tiers import TierFigures


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = tsub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument("--replica-assignment", metavar="1:2,2:3",
                        help="explicit replicas per partition, first = preferred leader")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override (repeatable)")
    create.set_defaults(func=cmd_create)
    tsub.add_parser("list", parents=[common], help="list topics").set_defaults(func=cmd_list)
    describe = tsub.add_parser("describe", parents=[common], help="leaders, ISR, replicas")
    describe.add_argument("--topic")
    describe.set_defaults(func=cmd_describe)
    delete = tsub.add_parser("delete", parents=[common], help="mark a topic for deletion")
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=cmd_delete)
    describe_config = tsub.add_parser(
        "describe-config", parents=[common],
        help="a topic's config overrides (--all: every key, with defaults)")
    describe_config.add_argument("--topic", required=True)
    describe_config.add_argument("--all", action="store_true",
                                 help="every key, with its source and synonyms")
    describe_config.set_defaults(func=cmd_describe_config)
    alter_config = tsub.add_parser(
        "alter-config", parents=[common],
        help="set, delete, append to or subtract from a topic's config overrides")
    alter_config.add_argument("--topic", required=True)
    alter_config.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                              help="set an override (repeatable)")
    alter_config.add_argument("--delete", action="append", default=[], metavar="KEY",
                              help="remove an override: back to the default (repeatable)")
    alter_config.add_argument("--append", action="append", default=[], metavar="KEY=ITEMS",
                              help="add items to a list config (repeatable)")
    alter_config.add_argument("--subtract", action="append", default=[], metavar="KEY=ITEMS",
                              help="remove items from a list config (repeatable)")
    alter_config.add_argument("--validate-only", action="store_true",
                              help="check the change, write nothing")
    alter_config.set_defaults(func=cmd_alter_config)


def cmd_create(args: argparse.Namespace, out: TextIO) -> int:
    config = _pairs(args.config, "--config")
    broker_config = _tiering_brokers(args) if _is_tiered(config) else None
    with admin(args) as a:
        if args.replica_assignment is not None:
            if args.partitions is not None or args.replication_factor is not None:
                raise UserError("--replica-assignment excludes --partitions/--replication-factor")
            created = a.create_topic(args.topic,
                                     assignment=_parse_assignment(args.replica_assignment),
                                     config=config, broker_config=broker_config)
        else:
            if args.partitions is None or args.replication_factor is None:
                raise UserError("give --partitions and --replication-factor, "
                                "or --replica-assignment")
            created = a.create_topic(args.topic, args.partitions, args.replication_factor,
                                     config=config, broker_config=broker_config)
    print(f"Created topic {created.topic} ({len(created.partitions)} partitions, "
          f"topic id {created.topic_id}).", file=out)
    return 0


def _parse_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's --replica-assignment: partitions separated by ',', replicas by ':'."""
    out: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            out[index] = [int(b) for b in part.split(":")]
        except ValueError:
            raise UserError(f"bad --replica-assignment {text!r}: want e.g. 1:2,2:3,3:1") from None
    return out


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    """Every topic; one another tool wrote against Kafka's rules (an illegal name, a topic
    node that does not decode) is marked, its name quoted (it may hold control characters):
    brokers and the controller skip it."""
    with admin(args) as a:
        names = a.list_topics()
        problems = topic_problems(a.metadata)
    for name in names:
        problem = problems.get(name)
        if problem is None:
            print(name, file=out)
        else:
            print(_printable(f"{name!r}\t({problem})"), file=out)
    return 0


def _printable(text: str) -> str:
    """``text`` with every character that is not printable escaped (never raw to a terminal)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else ascii(c)[1:-1] for c in text)


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    topics = [args.topic] if args.topic else None
    with admin(args) as a:
        described = a.describe_topics(topics)
        tiered = [TopicPartition(desc.name, p.partition) for desc in described
                  if _is_tiered(a.topic_config(desc.name)) for p in desc.partitions]
    figures, unavailable = _tier_figures(args, tiered)
    for desc in described:
        rf = len(desc.partitions[0].replicas) if desc.partitions else 0
        flag = "\tMarkedForDeletion: true" if desc.deleting else ""
        print(f"Topic: {desc.name}\tTopicId: {desc.topic_id}\tPartitionCount: "
              f"{len(desc.partitions)}\tReplicationFactor: {rf}{flag}", file=out)
        for p in desc.partitions:
            leader = "none" if p.leader in (None, -1) else p.leader
            line = (f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                    f"LeaderEpoch: {p.leader_epoch if p.leader_epoch is not None else '-'}\t"
                    f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
            if p.adding or p.removing:
                line += f"\tAdding: {_ids(p.adding)}\tRemoving: {_ids(p.removing)}"
            tier = figures.get(TopicPartition(desc.name, p.partition))
            if tier is not None:
                line += (f"\tLogStart: {_figure(tier.log_start)}\tLocalLogStart: "
                         f"{_figure(tier.local_log_start)}\tRemoteBytes: "
                         f"{_figure(tier.remote_bytes)}")
            print(line, file=out)
    if unavailable:
        print(f"LogStart, LocalLogStart and RemoteBytes unavailable: {unavailable}", file=out)
    return 0


def _is_tiered(overrides: dict[str, str]) -> bool:
    return overrides.get("remote.storage.enable", "false").strip().lower() == "true"


def _tier_figures(args: argparse.Namespace, tiered: list[TopicPartition]
                  ) -> tuple[dict[TopicPartition, TierFigures], str]:
    """The two tiers of ``tiered`` partitions from their leaders (kafkaclient/tiers.py), reached
    at the brokers registered at the coordinator; on failure, nothing and why."""
    if not tiered:
        return {}, ""
    from kafkaclient.groups import GroupAdminError
    from kafkaclient.tiers import TierAdmin
    from partctl.commands.groups import registered_brokers

    try:
        with TierAdmin(registered_brokers(args), timeout=args.timeout) as tiers:
            found = tiers.tiers(tiered)
    except (GroupAdminError, UserError) as exc:
        return {}, str(exc)
    return found, ""


def _tiering_brokers(args: argparse.Namespace) -> dict[str, str]:
    """What a tiered topic is validated against (Kafka's brokers check it against their own
    settings; this command writes to the coordinator): ``remote.log.storage.system.enable`` as
    every live broker sets it, asked of them over Kafka's protocol. A broker without it, or
    one that cannot be asked, is a user error: its replicas could not tier."""
    from kafkaclient.groups import GroupAdminError
    from kafkaclient.tiers import TierAdmin
    from partctl.commands.groups import registered_brokers

    try:
        with TierAdmin(registered_brokers(args), timeout=args.timeout) as tiers:
            enabled = tiers.remote_storage_system_enabled()
    except GroupAdminError as exc:
        raise UserError(f"remote.storage.enable: cannot learn whether the brokers tier: {exc}"
                        ) from None
    off = sorted(b for b, on in enabled.items() if not on)
    if off or not enabled:
        raise UserError("remote.storage.enable: Tiered Storage functionality is disabled in "
                        f"broker(s) {_ids(off)} (remote.log.storage.system.enable is not "
                        "true); topic cannot be configured with remote log storage")
    return {"remote.log.storage.system.enable": "true"}


def _figure(value: int | None) -> str:
    return "-" if value is None else str(value)


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    with admin(args) as a:
        a.delete_topic(args.topic)
    print(f"Topic {args.topic} is marked for deletion.", file=out)
    return 0


def cmd_describe_config(args: argparse.Namespace, out: TextIO) -> int:
    with admin(args) as a:
        entries = a.describe_topic_config(args.topic)
    shown = entries if args.all else [e for e in entries
                                      if e.source is ConfigSource.TOPIC_CONFIG]
    print(f"{'All' if args.all else 'Dynamic'} configs for topic {args.topic} are:", file=out)
    for e in shown:
        synonyms = ", ".join(f"{_source(s.source)}:{s.name}={_shown(s.name, s.value)}"
                             for s in e.synonyms)
        sensitive = str(_secret(e.name, e.value)).lower()
        line = f"  {e.name}={_shown(e.name, e.value)} sensitive={sensitive} synonyms={{{synonyms}}}"
        key = TOPIC_CONFIG_KEYS.get(e.name)
        if e.effect is not Effect.APPLIED and key is not None and key.note:
            line += f" (partctl: {key.note})"
        print(line, file=out)
    return 0


def _secret(name: str, value: str | None) -> bool:
    from broker.security.settings import hides_value

    return hides_value(name, value)


def _shown(name: str, value: str | None) -> str | None:
    """A value as kafka-configs prints it: null for a secret (a password, a URL with
    credentials)."""
    return "null" if _secret(name, value) else value


def cmd_alter_config(args: argparse.Namespace, out: TextIO) -> int:
    sets = _pairs(args.set, "--set")
    appends = _pairs(args.append, "--append")
    subtracts = _pairs(args.subtract, "--subtract")
    if not (sets or args.delete or appends or subtracts):
        raise UserError("give at least one of --set, --delete, --append, --subtract")
    with admin(args) as a:
        tiered = _is_tiered(sets) or _is_tiered(a.topic_config(args.topic))
        broker_config = _tiering_brokers(args) if tiered else None
        change = a.alter_topic_config(args.topic, sets, args.delete, append=appends,
                                      subtract=subtracts, validate_only=args.validate_only,
                                      broker_config=broker_config)
    verb = "would be" if args.validate_only else "are now"
    overrides = ", ".join(f"{k}={v}" for k, v in sorted(change.overrides.items())) or "none"
    print(f"Config overrides of topic {args.topic} {verb}: {overrides}.", file=out)
    return 0


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments (the value may hold '=' and be empty)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UserError(f"bad {option} {item!r}: want KEY=VALUE")
        if key.strip() in out:
            raise UserError(f"{option} names {key.strip()} twice")
        out[key.strip()] = value
    return out


_SOURCE_NAMES = {ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG"}
"""Kafka's admin client names (ConfigEntry.ConfigSource) where they differ from the wire's."""


def _source(source: ConfigSource) -> str:
    return _SOURCE_NAMES.get(source, source.name)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)
