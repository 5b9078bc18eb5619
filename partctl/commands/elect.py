"""``partctl elect preferred``: move leadership back to the preferred replicas (Kafka's
kafka-leader-election --election-type preferred), either way in: ElectLeaders by Kafka's Admin
API (``--bootstrap-server``), or ``/admin/preferred_replica_election`` for the controller
(``--coordinator``)."""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import TextIO

from partctl.commands.common import cluster_options, count, open_cluster, timeout_option
from partctl.errors import UserError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    elect = sub.add_parser("elect", help="leader elections")
    esub = elect.add_subparsers(dest="action", metavar="ACTION", required=True)
    preferred = esub.add_parser("preferred", parents=[cluster_options(), timeout_option()],
                                help="move leadership back to preferred replicas")
    preferred.add_argument("--topic")
    preferred.add_argument("--partition", type=count(0))
    preferred.set_defaults(func=cmd_preferred)


def cmd_preferred(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition
    from partctl.render import render_election
    from rebalancer.access import CoordinatorAccess

    if args.partition is not None and args.topic is None:
        raise UserError("--partition needs --topic")
    if args.topic is not None:
        from coordinator.layout import validate_topic

        try:
            validate_topic(args.topic)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    with closing(open_cluster(args)) as access:
        partitions: list[TopicPartition] | None
        if args.topic is None:
            partitions = None
        elif args.partition is None:
            view = access.view(sizes=False)
            partitions = [p.tp for p in view.partitions if p.topic == args.topic]
            if not partitions:
                raise UserError(f"topic {args.topic} does not exist")
        else:
            partitions = [TopicPartition(args.topic, args.partition)]
        if isinstance(access, CoordinatorAccess):
            from coordinator.admin import Admin

            if Admin(access.coordinator).controller_status().broker_id is None:
                raise UserError("no controller is active to carry out the election")
        result = access.elect_preferred(partitions)
    print(render_election(result), file=out)
    return 1 if result.failed else 0
