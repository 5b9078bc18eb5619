"""``partctl elect preferred``: ask the controller to move leadership back to the preferred
replicas (Kafka's kafka-leader-election --election-type preferred)."""

from __future__ import annotations

import argparse
from typing import TextIO

from partctl.commands.common import admin, count
from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    elect = sub.add_parser("elect", help="leader elections")
    esub = elect.add_subparsers(dest="action", metavar="ACTION", required=True)
    preferred = esub.add_parser("preferred", parents=[common],
                                help="move leadership back to preferred replicas")
    preferred.add_argument("--topic")
    preferred.add_argument("--partition", type=count(0))
    preferred.set_defaults(func=cmd_preferred)


def cmd_preferred(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition

    if (args.partition is None) != (args.topic is None) and args.partition is not None:
        raise UserError("--partition needs --topic")
    with admin(args) as a:
        if args.topic is None:
            partitions = None
        elif args.partition is None:
            described = a.describe_topics([args.topic])[0]
            partitions = [TopicPartition(args.topic, p.partition) for p in described.partitions]
        else:
            partitions = [TopicPartition(args.topic, args.partition)]
        if a.controller_status().broker_id is None:
            raise UserError("no controller is active to carry out the election")
        requested = a.elect_preferred(partitions)
    print(f"Requested a preferred replica election for {len(requested)} partition(s).",
          file=out)
    return 0
