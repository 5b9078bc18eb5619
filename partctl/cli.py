"""The partctl command line: thin over the library (parse, build clients, call, render).

A user error prints one line, ``partctl: error: ...``, and exits 1; nothing is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from partctl import __version__

ENV_COORDINATOR = "PARTCTL_COORDINATOR"


class UserError(Exception):
    """An error to report in one line, without a traceback."""


def _coordinator_url(args: argparse.Namespace) -> str:
    url = args.coordinator or os.environ.get(ENV_COORDINATOR)
    if not url:
        raise UserError(f"no coordinator: pass --coordinator URL or set {ENV_COORDINATOR}")
    return url


def _admin(args: argparse.Namespace):  # noqa: ANN202 - statemachines imported lazily
    import coordinator
    from statemachines import Admin

    client = coordinator.connect(_coordinator_url(args), timeout=args.timeout)
    args._opened.append(client)
    return Admin(client)


def _parse_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's --replica-assignment: partitions separated by ',', replicas by ':'."""
    out: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            out[index] = [int(b) for b in part.split(":")]
        except ValueError:
            raise UserError(f"bad --replica-assignment {text!r}: want e.g. 1:2,2:3,3:1") from None
    return out


# --- topics ------------------------------------------------------------------------------------


def cmd_topics_create(args: argparse.Namespace, out: TextIO) -> int:
    admin = _admin(args)
    if args.replica_assignment:
        if args.partitions or args.replication_factor:
            raise UserError("--replica-assignment excludes --partitions/--replication-factor")
        created = admin.create_topic(args.topic,
                                     assignment=_parse_assignment(args.replica_assignment))
    else:
        if not args.partitions or not args.replication_factor:
            raise UserError("give --partitions and --replication-factor, "
                            "or --replica-assignment")
        created = admin.create_topic(args.topic, args.partitions, args.replication_factor)
    print(f"Created topic {created.topic} ({len(created.partitions)} partitions, "
          f"topic id {created.topic_id}).", file=out)
    return 0


def cmd_topics_list(args: argparse.Namespace, out: TextIO) -> int:
    for name in _admin(args).list_topics():
        print(name, file=out)
    return 0


def cmd_topics_describe(args: argparse.Namespace, out: TextIO) -> int:
    topics = [args.topic] if args.topic else None
    for desc in _admin(args).describe_topics(topics):
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
            print(line, file=out)
    return 0


def cmd_topics_delete(args: argparse.Namespace, out: TextIO) -> int:
    _admin(args).delete_topic(args.topic)
    print(f"Topic {args.topic} is marked for deletion.", file=out)
    return 0


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


# --- controller and elections ------------------------------------------------------------------


def cmd_controller_status(args: argparse.Namespace, out: TextIO) -> int:
    status = _admin(args).controller_status()
    if status.broker_id is None:
        raise UserError(f"no controller is active (controller epoch {status.epoch})"
                        if status.epoch is not None else "no controller has ever been elected")
    print(f"Controller: broker {status.broker_id}\tEpoch: {status.epoch}", file=out)
    return 0


def cmd_elect_preferred(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition

    if (args.partition is None) != (args.topic is None) and args.partition is not None:
        raise UserError("--partition needs --topic")
    admin = _admin(args)
    if args.topic is None:
        partitions = None
    elif args.partition is None:
        described = admin.describe_topics([args.topic])[0]
        partitions = [TopicPartition(args.topic, p.partition) for p in described.partitions]
    else:
        partitions = [TopicPartition(args.topic, args.partition)]
    if admin.controller_status().broker_id is None:
        raise UserError("no controller is active to carry out the election")
    requested = admin.elect_preferred(partitions)
    print(f"Requested a preferred replica election for {len(requested)} partition(s).",
          file=out)
    return 0


# --- demo ------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from partctl.demo import DemoOptions, run_demo

    if args.messages < 1 or args.partitions < 1 or args.batch < 1:
        raise UserError("--messages, --partitions and --batch must be positive")
    result = run_demo(DemoOptions(messages=args.messages, partitions=args.partitions,
                                  batch=args.batch), out)
    return 0 if result.ok else 1


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="partctl",
        description="Controller and election service for partitioned, replicated logs.",
    )
    parser.add_argument("--version", action="version", version=f"partctl {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--coordinator", metavar="URL",
                        help=f"memory://NAME, zookeeper://h:p/chroot or etcd://h:p/prefix "
                             f"(default: ${ENV_COORDINATOR})")
    common.add_argument("--timeout", type=float, default=5.0,
                        help="seconds to wait for the coordinator (default 5)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = tsub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument("--replica-assignment", metavar="1:2,2:3",
                        help="explicit replicas per partition, first = preferred leader")
    create.set_defaults(func=cmd_topics_create)
    tsub.add_parser("list", parents=[common], help="list topics").set_defaults(
        func=cmd_topics_list)
    describe = tsub.add_parser("describe", parents=[common], help="leaders, ISR, replicas")
    describe.add_argument("--topic")
    describe.set_defaults(func=cmd_topics_describe)
    delete = tsub.add_parser("delete", parents=[common], help="mark a topic for deletion")
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=cmd_topics_delete)

    controller = sub.add_parser("controller", help="the active controller")
    csub = controller.add_subparsers(dest="action", metavar="ACTION", required=True)
    csub.add_parser("status", parents=[common], help="who is controller, at which epoch"
                    ).set_defaults(func=cmd_controller_status)

    elect = sub.add_parser("elect", help="leader elections")
    esub = elect.add_subparsers(dest="action", metavar="ACTION", required=True)
    preferred = esub.add_parser("preferred", parents=[common],
                                help="move leadership back to preferred replicas")
    preferred.add_argument("--topic")
    preferred.add_argument("--partition", type=int)
    preferred.set_defaults(func=cmd_elect_preferred)

    demo = sub.add_parser("demo", help="an embedded 3-broker cluster loses a leader and "
                                       "gets it back; checks every acknowledged message")
    demo.add_argument("--messages", type=int, default=10_000,
                      help="messages per produce phase (three phases; default 10000)")
    demo.add_argument("--partitions", type=int, default=3, help="partitions (default 3)")
    demo.add_argument("--batch", type=int, default=20, help="messages per batch (default 20)")
    demo.set_defaults(func=cmd_demo)
    return parser


def _quiet_client_logs() -> None:
    """Client libraries log every reconnect attempt; the CLI reports failures itself, once."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.ERROR, format="partctl: %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    from coordinator import CoordinatorError

    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_client_logs()
    func: Callable[[argparse.Namespace, TextIO], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(out)
        return 0
    args._opened = []
    try:
        return func(args, out)
    except (UserError, CoordinatorError, ValueError) as exc:
        print(f"partctl: error: {exc}", file=err)
        return 1
    except KeyboardInterrupt:
        print("partctl: interrupted", file=err)
        return 130
    finally:
        for client in args._opened:
            client.close()


if __name__ == "__main__":
    sys.exit(main())
