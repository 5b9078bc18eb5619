"""``partctl groups list | describe | delete | reset-offsets``: Kafka's kafka-consumer-groups, over
Kafka's protocol (kafkaclient/groups.py).

The cluster is reached as Kafka's tool reaches it, by ``--bootstrap-server HOST:PORT[,...]``,
or through the coordinator (``--coordinator URL`` or $PARTCTL_COORDINATOR): the brokers
registered there are the bootstrap servers (their PLAINTEXT listeners). ``--timeout`` bounds
connecting, each request, and the waiting for a cluster that is moving (a coordinator loading).

- ``list``: every group of every broker, with its state and protocol type (``--state`` keeps
  the groups in the states named, as Kafka's ``--list --state``).
- ``describe``: per partition the committed offset, the log end and the lag, with the member
  consuming it; ``--members`` the members and their assignments; ``--state`` the group's
  state, assignor and coordinator. A group its coordinator does not know (no members, no
  offsets) does not exist: one error line, exit 1.
- ``delete``: DeleteGroups; a group with members is refused (NON_EMPTY_GROUP), as is an unknown
  one (GROUP_ID_NOT_FOUND).
- ``reset-offsets``: the plan (TOPIC PARTITION NEW-OFFSET, kafkaclient/offset_reset.py) and, with
  ``--execute``, its commit (OffsetCommit without a member or generation, as Kafka's admin
  commits). Only a group without members can be reset: one error line, exit 1, nothing
  committed. Without ``--dry-run`` or ``--execute`` a warning says it is a dry run.

A bad option value (``--to-offset x``, a malformed ``--to-datetime``, ``--by-duration`` or
``--bootstrap-server``) is argparse's usage error, exit 2, as in every partctl command.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TextIO

from partctl.commands.common import ENV_COORDINATOR, connect, count, reword
from partctl.errors import UserError

if TYPE_CHECKING:
    from coordinator.codecs import TopicPartition
    from kafkaclient.groups import GroupAdmin, GroupDescription
    from kafkaclient.offset_reset import ResetSpec

MAX_PORT = 65535
MISSING = "-"
STATES = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "Stable",
          "Dead", "Empty")
"""A group's states as ListGroups names them: a classic group's, and a KIP-848 consumer
group's (Assigning, Reconciling)."""
INACTIVE = ("Empty", "Dead")
"""The states a group's offsets may be reset in: no member consumes."""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups and reset "
                                           "their offsets (as kafka-consumer-groups)")
    gsub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("--bootstrap-server", type=bootstrap_servers, metavar="HOST:PORT[,...]",
                         help="brokers to start from (default: the brokers registered at "
                              "--coordinator)")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser = gsub.add_parser(name, parents=[common, cluster], help=text)
        reword(parser, "timeout", "seconds to wait for the coordinator, a broker's answer, and "
                                  "a cluster that is moving (default 5)")
        return parser

    lister = action("list", "every group on every broker, with its state and protocol type")
    lister.add_argument("--state", type=state_list, metavar="STATE[,STATE]",
                        help=f"only groups in these states ({', '.join(STATES)})")
    lister.set_defaults(func=cmd_list)

    describe = action("describe", "offsets and lag per partition, members or state of groups")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", metavar="GROUP", help="(repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every group of the cluster")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="offsets and lag per partition (the default)")
    view.add_argument("--members", action="store_true", help="members and their assignments")
    view.add_argument("--state", action="store_true",
                      help="state, assignor, coordinator and member count")
    describe.set_defaults(func=cmd_describe)

    delete = action("delete", "delete groups without members (and their offsets)")
    delete.add_argument("--group", action="append", required=True, metavar="GROUP",
                        help="(repeatable)")
    delete.set_defaults(func=cmd_delete)

    reset = action("reset-offsets", "plan, and with --execute commit, new offsets for a "
                                    "group without members")
    reset.add_argument("--group", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument("--to-offset", type=count(0), metavar="N",
                    help="offset N (within the log start and end)")
    to.add_argument("--shift-by", type=integer, metavar="N",
                    help="the committed offset plus N, N may be negative")
    to.add_argument("--to-datetime", type=datetime_ms, metavar="TIME",
                    help="the first record at or after TIME, ISO 8601: 2026-11-24T07:00:00, "
                         "...Z, ...+01:00, ...T07:00:00.000 (no zone: local time)")
    to.add_argument("--by-duration", type=duration, metavar="PnDTnHnMnS",
                    help="the first record at or after now minus the duration (ISO 8601, "
                         "e.g. PT1H30M)")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--all-topics", action="store_true",
                       help="the topics the group has committed offsets for")
    where.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                       help="a topic, or some of its partitions (repeatable)")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="show the plan only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the plan")
    reset.set_defaults(func=cmd_reset_offsets)


# --- option values -------------------------------------------------------------------------------


def bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT...]`` (an IPv6 host in brackets)."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        host, colon, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= MAX_PORT:
            raise argparse.ArgumentTypeError(f"want HOST:PORT[,HOST:PORT...], got {text!r}")
        out.append((host, int(port)))
    return out


def state_list(text: str) -> list[str]:
    by_name = {s.lower(): s for s in STATES}
    out = []
    for name in (x.strip() for x in text.split(",")):
        if name.lower() not in by_name:
            raise argparse.ArgumentTypeError(f"unknown state {name!r}: the states are "
                                             f"{', '.join(STATES)}")
        out.append(by_name[name.lower()])
    return out


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def datetime_ms(text: str) -> int:
    """An ISO 8601 date and time as milliseconds since the epoch; without a zone, local time
    (as Kafka's tool reads it)."""
    try:
        if "T" not in text.upper():
            raise ValueError
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 date and time: {text!r} (want e.g. 2026-11-24T07:00:00, "
            f"2026-11-24T07:00:00Z or 2026-11-24T07:00:00.000+01:00)") from None
    if when.tzinfo is None:
        when = when.astimezone()  # the local zone
    return int(when.timestamp() * 1000)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:[.,]\d+)?)S)?)?",
                       re.IGNORECASE)


def duration(text: str) -> timedelta:
    """An ISO 8601 duration of days, hours, minutes and seconds (``P1D``, ``PT1H30M``,
    ``PT0.5S``), as Java's Duration reads them; not negative."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"not an ISO 8601 duration: {text!r} (want e.g. "
                                         f"PT1H, PT30M, P1DT12H, PT0.5S)")
    days, hours, minutes, seconds = (m or "0" for m in match.groups())
    return timedelta(days=int(days), hours=int(hours), minutes=int(minutes),
                     seconds=float(seconds.replace(",", ".")))


# --- the cluster ---------------------------------------------------------------------------------


@contextmanager
def group_admin(args: argparse.Namespace) -> Iterator[GroupAdmin]:
    """The group admin client on ``--bootstrap-server``, else on the brokers registered at the
    command's coordinator; closed with the block."""
    import os

    from kafkaclient.groups import GroupAdmin

    servers = args.bootstrap_server
    if servers and args.coordinator:
        raise UserError("give --bootstrap-server or --coordinator, not both")
    if not servers:
        if not (args.coordinator or os.environ.get(ENV_COORDINATOR)):
            raise UserError(f"no cluster: pass --bootstrap-server HOST:PORT or --coordinator "
                            f"URL, or set {ENV_COORDINATOR}")
        servers = registered_brokers(args)
    with GroupAdmin(servers, timeout=args.timeout) as admin:
        yield admin


def registered_brokers(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The PLAINTEXT listeners of the brokers registered at the command's coordinator."""
    from coordinator.metadata import MetadataClient
    from kafkaclient.groups import plaintext_addresses

    with connect(args) as client:
        brokers = MetadataClient(client).brokers()
    out = plaintext_addresses(brokers)
    if not out:
        raise UserError("no broker with a PLAINTEXT listener is registered at the coordinator" if
                        brokers else "no broker is registered at the coordinator")
    return out


# --- list ----------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.render import render_table

    with group_admin(args) as admin:
        listed = admin.list_groups(args.state or ())
    if listed:
        print(render_table(("GROUP", "STATE", "PROTOCOL-TYPE"),
                           [(g.group_id, g.state, g.protocol_type or MISSING) for g in listed]),
              file=out)
    return 0


# --- describe ------------------------------------------------------------------------------------


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    from kafkaclient.groups import LATEST, partition_lags

    with group_admin(args) as admin:
        names = args.group or [g.group_id for g in admin.list_groups()]
        described = []
        for name in dict.fromkeys(names):
            group = admin.describe(name)
            if not group.exists:
                raise UserError(f"Consumer group '{name}' does not exist.")
            described.append(group)
        if args.state:
            print(_state_table(described), file=out)
            return 0
        if args.members:
            for group in described:
                _notice(group, out)
                if group.members:
                    print(_members_table(group), file=out)
            return 0
        for group in described:
            committed = admin.committed(group.group_id)
            partitions = set(committed) | {tp for m in group.members for tp in m.assignment}
            log_end = admin.offsets(partitions, LATEST)
            _notice(group, out)
            rows = partition_lags(group, committed, log_end)
            if rows:
                print(_offsets_table(group.group_id, rows), file=out)
    return 0


def _notice(group: GroupDescription, out: TextIO) -> None:
    if not group.members:
        print(f"Consumer group '{group.group_id}' has no active members.", file=out)
    elif group.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"Warning: consumer group '{group.group_id}' is rebalancing.", file=out)


def _show(value: object) -> str:
    return MISSING if value is None or value == "" else str(value)


def _offsets_table(group_id: str, rows: Sequence) -> str:
    from partctl.render import render_table

    head = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID")
    return render_table(head, [
        (group_id, _show(r.partition and r.partition.topic),
         _show(r.partition.partition if r.partition else None), _show(r.current),
         _show(r.log_end), _show(r.lag), _show(r.member and r.member.member_id),
         _show(r.member and r.member.host), _show(r.member and r.member.client_id))
        for r in rows])


def assignment_text(partitions: Sequence[TopicPartition]) -> str:
    """``topic:0,1;other:2``, topics and partitions in order; ``-`` for none."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}"
                    for t, ps in sorted(by_topic.items())) or MISSING


def _members_table(group: GroupDescription) -> str:
    from partctl.render import render_table

    instance = any(m.group_instance_id for m in group.members)
    head = ("GROUP", "CONSUMER-ID", *(("GROUP-INSTANCE-ID",) if instance else ()), "HOST",
            "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
    return render_table(head, [
        (group.group_id, m.member_id, *((_show(m.group_instance_id),) if instance else ()),
         m.host, m.client_id, len(m.assignment), assignment_text(m.assignment))
        for m in sorted(group.members, key=lambda m: m.member_id)])


def _state_table(groups: Sequence[GroupDescription]) -> str:
    from partctl.render import render_table

    head = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    return render_table(head, [
        (g.group_id, f"{g.coordinator} ({g.coordinator.node_id})", _show(g.protocol), g.state,
         len(g.members)) for g in groups])


# --- delete --------------------------------------------------------------------------------------


_DELETE_REFUSALS = {
    "non_empty_group": "it has active members",
    "group_id_not_found": "no such group",
}


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    with group_admin(args) as admin:
        results = admin.delete(list(dict.fromkeys(args.group)))
    refused = []
    for name, error in results.items():
        if error.value == 0:
            print(f"Deleted consumer group '{name}'.", file=out)
        else:
            why = _DELETE_REFUSALS.get(error.name)
            refused.append(f"cannot delete group '{name}': "
                           f"{why + ' ' if why else ''}({error.name.upper()})")
    if refused:
        raise UserError("; ".join(refused))
    return 0


# --- reset-offsets -------------------------------------------------------------------------------


def reset_spec(args: argparse.Namespace, now_ms: int) -> ResetSpec:
    from kafkaclient.offset_reset import ShiftBy, ToEarliest, ToLatest, ToOffset, ToTimestamp

    if args.to_earliest:
        return ToEarliest()
    if args.to_latest:
        return ToLatest()
    if args.to_offset is not None:
        return ToOffset(offset=args.to_offset)
    if args.shift_by is not None:
        return ShiftBy(delta=args.shift_by)
    if args.to_datetime is not None:
        return ToTimestamp(timestamp_ms=args.to_datetime)
    return ToTimestamp(timestamp_ms=now_ms - int(args.by_duration.total_seconds() * 1000))


def topic_partitions(items: Sequence[str]) -> dict[str, list[int] | None]:
    """``--topic`` values: topic -> its partitions named (None: all of them)."""
    from coordinator.layout import validate_topic

    out: dict[str, list[int] | None] = {}
    for item in items:
        topic, colon, parts = item.partition(":")
        if not topic:
            raise UserError(f"bad --topic {item!r}: want TOPIC or TOPIC:P,P")
        try:
            validate_topic(topic)
        except ValueError as exc:
            raise UserError(f"bad --topic {item!r}: {exc}") from None
        if not colon:
            out[topic] = None
            continue
        try:
            partitions = [int(p) for p in parts.split(",")]
        except ValueError:
            raise UserError(f"bad --topic {item!r}: want TOPIC or TOPIC:P,P with partition "
                            f"numbers") from None
        if topic in out and out[topic] is None:
            continue
        out[topic] = sorted(set((out.get(topic) or []) + partitions))
    return out


def cmd_reset_offsets(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition
    from partctl.render import render_table

    group_id = args.group
    spec = reset_spec(args, int(time.time() * 1000))
    wanted = topic_partitions(args.topic) if args.topic else None
    with group_admin(args) as admin:
        group = admin.describe(group_id)
        if group.state not in INACTIVE:
            raise UserError(f"Assignments can only be reset if the group '{group_id}' is "
                            f"inactive, but the current state is {group.state}.")
        committed = admin.committed(group_id) if group.exists else {}
        if wanted is None:
            partitions = sorted(committed)
            if not partitions:
                raise UserError(f"group '{group_id}' has no committed offsets: name the topics "
                                f"with --topic")
        else:
            known = admin.partitions(wanted)
            partitions = []
            for topic, asked in wanted.items():
                if topic not in known:
                    raise UserError(f"topic '{topic}' does not exist")
                missing = sorted(set(asked or ()) - set(known[topic]))
                if missing:
                    raise UserError(f"topic '{topic}' has no partition "
                                    f"{', '.join(str(p) for p in missing)} (it has "
                                    f"{len(known[topic])})")
                partitions += [TopicPartition(topic, p)
                               for p in (asked if asked is not None else sorted(known[topic]))]
        plan = admin.plan_reset(spec, partitions, committed)
        if not (args.dry_run or args.execute):
            print("WARN: neither --dry-run nor --execute was given: this is a dry run, nothing "
                  "is committed.", file=out)
        print(render_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                           [(group_id, tp.topic, tp.partition, offset)
                            for tp, offset in plan.items()]), file=out)
        if args.execute:
            admin.commit(group_id, plan)
    return 0
