"""``partctl transactions list | describe | describe-producers | abort | find-hanging``: Kafka's
kafka-transactions (KIP-664), over Kafka's protocol (kafkaclient/transactions.py).

The cluster is reached by ``--bootstrap-server`` (with ``--command-config``), as Kafka's tool
reaches it, or through the coordinator (``--coordinator URL`` or $PARTCTL_COORDINATOR): the
brokers registered there are the bootstrap servers (their PLAINTEXT listeners). The tables are
Kafka's: the same columns, each padded to its widest value and followed by a tab.

- ``list``: every transactional id of every coordinator, with its producer id and state
  (``--state`` and ``--producer-id`` filter as ListTransactions does, ``--duration-filter``
  keeps those running longer than so many milliseconds);
- ``describe --transactional-id``: its coordinator, producer id and epoch, state, timeout, when
  the ongoing transaction started and how long it has run, and its partitions;
- ``describe-producers --topic --partition [--broker-id]``: the partition's active producers
  as its leader (or the broker named) holds them;
- ``abort --topic --partition``: an abort marker for the open transaction that starts at
  ``--start-offset`` (found with DescribeProducers), or for ``--producer-id``,
  ``--producer-epoch`` and ``--coordinator-epoch`` given;
- ``find-hanging (--broker-id | --topic [--partition]) [--max-transaction-timeout MIN]``: open
  transactions older than the longest transaction timeout (15 minutes by default) that no
  coordinator will end.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from partctl.commands.common import (
    cluster_options,
    cluster_way,
    command_config_security,
    count,
    reword,
    timeout_option,
)
from partctl.errors import UserError

if TYPE_CHECKING:
    from coordinator.codecs import TopicPartition
    from kafkaclient.transactions import TransactionAdmin

NONE = "None"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    txns = sub.add_parser("transactions", help="list, describe and abort transactions, find "
                                               "hanging ones (as kafka-transactions)")
    tsub = txns.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser = tsub.add_parser(name, parents=[cluster_options(), timeout_option()], help=text)
        reword(parser, "timeout", "seconds for connecting and each call, the waits for a "
                                  "coordinator that is loading included (default 30)")
        parser.set_defaults(timeout=30.0)
        return parser

    lister = action("list", "every transactional id of every coordinator, with its state")
    lister.add_argument("--state", action="append", default=[], metavar="STATE",
                        help="only transactions in this state (repeatable): Empty, Ongoing, "
                             "PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, "
                             "PrepareEpochFence")
    lister.add_argument("--producer-id", action="append", default=[], type=count(0),
                        metavar="ID", help="only this producer id's (repeatable)")
    lister.add_argument("--duration-filter", type=count(0), metavar="MS",
                        help="only transactions running longer than MS milliseconds (brokers "
                             "on Kafka 3.8 or later)")
    lister.set_defaults(func=cmd_list)

    describe = action("describe", "the state of one transactional id at its coordinator")
    describe.add_argument("--transactional-id", required=True)
    describe.set_defaults(func=cmd_describe)

    producers = action("describe-producers", "the active producers of a partition")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=count(0), required=True)
    producers.add_argument("--broker-id", type=count(0),
                           help="the replica on this broker (default: the leader's)")
    producers.set_defaults(func=cmd_describe_producers)

    abort = action("abort", "abort an open (hanging) transaction in a partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=count(0), required=True)
    abort.add_argument("--start-offset", type=count(0),
                       help="the first offset of the transaction to abort")
    abort.add_argument("--producer-id", type=count(0))
    abort.add_argument("--producer-epoch", type=count(0))
    abort.add_argument("--coordinator-epoch", type=int,
                       help="below 0 (a transaction that never had a marker): sent as 0")
    abort.set_defaults(func=cmd_abort)

    hanging = action("find-hanging", "open transactions no coordinator will end")
    hanging.add_argument("--broker-id", type=count(0),
                         help="the partitions with a replica on this broker")
    hanging.add_argument("--topic")
    hanging.add_argument("--partition", type=count(0))
    hanging.add_argument("--max-transaction-timeout", type=count(1), default=15, metavar="MIN",
                         help="the longest transaction timeout of any producer, in minutes "
                              "(default 15, Kafka's transaction.max.timeout.ms)")
    hanging.set_defaults(func=cmd_find_hanging)


@contextmanager
def transaction_admin(args: argparse.Namespace) -> Iterator[TransactionAdmin]:
    """The client on ``--bootstrap-server`` (secured by ``--command-config``), else on the
    PLAINTEXT listeners of the brokers registered at the coordinator."""
    from kafkaclient.bootstrap import format_address
    from kafkaclient.transactions import TransactionAdmin

    bootstrap, command_config, _url = cluster_way(args, what="cluster")
    if bootstrap:
        admin = TransactionAdmin(bootstrap, security=command_config_security(command_config),
                                 timeout=args.timeout)
    else:
        from partctl.commands.groups import registered_brokers

        servers = ",".join(format_address(a) for a in registered_brokers(args))
        admin = TransactionAdmin(servers, timeout=args.timeout)
    with admin:
        yield admin


def _topic(name: str) -> str:
    from coordinator.layout import validate_topic

    try:
        validate_topic(name)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return name


def _partition(args: argparse.Namespace) -> TopicPartition:
    from coordinator.codecs import TopicPartition

    return TopicPartition(_topic(args.topic), args.partition)


def _table(headers: tuple[str, ...], rows: Sequence[tuple[object, ...]], out: TextIO) -> None:
    from kafkaclient.transactions import render_table

    print(render_table(headers, rows), file=out)


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    from kafkaclient.transactions import STATES

    unknown = [s for s in args.state if s not in STATES]
    if unknown:
        raise UserError(f"--state {unknown[0]}: not a transaction state (one of "
                        f"{', '.join(STATES)})")
    with transaction_admin(args) as admin:
        listings = admin.list_transactions(states=args.state, producer_ids=args.producer_id,
                                           min_duration_ms=args.duration_filter)
    rows = [(t.transactional_id, t.coordinator, t.producer_id, t.state)
            for t in sorted(listings, key=lambda t: (t.coordinator, t.transactional_id))]
    _table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows, out)
    return 0


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    if not args.transactional_id:
        raise UserError("--transactional-id must not be empty")
    with transaction_admin(args) as admin:
        d = admin.describe_transaction(args.transactional_id)
    now = int(time.time() * 1000)
    start = NONE if d.start_time_ms is None else str(d.start_time_ms)
    duration = NONE if d.start_time_ms is None else str(now - d.start_time_ms)
    partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)
    _table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs", "TopicPartitions"),
           [(d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
             d.timeout_ms, start, duration, partitions)], out)
    return 0


def cmd_describe_producers(args: argparse.Namespace, out: TextIO) -> int:
    tp = _partition(args)
    with transaction_admin(args) as admin:
        states = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
    rows: list[tuple[object, ...]] = [
        (p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
         p.last_timestamp, NONE if p.txn_start_offset is None else p.txn_start_offset)
        for p in states]
    _table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
            "LastTimestamp", "CurrentTransactionStartOffset"), rows, out)
    return 0


def cmd_abort(args: argparse.Namespace, out: TextIO) -> int:
    tp = _partition(args)
    by_producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None and args.producer_id is None:
        raise UserError("the transaction to abort must be given by --start-offset, or by "
                        "--producer-id, --producer-epoch and --coordinator-epoch")
    if args.start_offset is not None and any(v is not None for v in by_producer):
        raise UserError("give --start-offset or --producer-id, --producer-epoch and "
                        "--coordinator-epoch, not both")
    if args.start_offset is None and None in by_producer:
        missing = "--producer-epoch" if args.producer_epoch is None else "--coordinator-epoch"
        raise UserError(f"--producer-id needs {missing}")
    with transaction_admin(args) as admin:
        if args.start_offset is not None:
            states = admin.describe_producers([tp])[tp]
            found = [p for p in states if p.txn_start_offset == args.start_offset]
            if not found:
                raise UserError(f"no open transaction starts at offset {args.start_offset} in "
                                f"{tp.topic}-{tp.partition}")
            producer_id, epoch = found[0].producer_id, found[0].producer_epoch
            coordinator_epoch = max(found[0].coordinator_epoch, 0)
        else:
            producer_id, epoch, coordinator_epoch = by_producer
        admin.abort_transaction(tp, producer_id=producer_id, producer_epoch=epoch,
                                coordinator_epoch=coordinator_epoch)
    print(f"Aborted the transaction of producer {producer_id} (epoch {epoch}) in "
          f"{tp.topic}-{tp.partition}", file=out)
    return 0


def cmd_find_hanging(args: argparse.Namespace, out: TextIO) -> int:
    from coordinator.codecs import TopicPartition

    if args.topic is None and args.broker_id is None:
        raise UserError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise UserError("--partition needs --topic")
    now = int(time.time() * 1000)
    with transaction_admin(args) as admin:
        if args.partition is not None:
            partitions = [TopicPartition(_topic(args.topic), args.partition)]
        else:
            topics = None if args.topic is None else [_topic(args.topic)]
            partitions = admin.partitions_of(topics, args.broker_id)
        hanging = admin.find_hanging(partitions, broker_id=args.broker_id,
                                     max_timeout_ms=args.max_transaction_timeout * 60_000,
                                     now_ms=now) if partitions else []
    rows: list[tuple[object, ...]] = [
        (h.tp.topic, h.tp.partition, h.producer.producer_id, h.producer.producer_epoch,
         h.producer.coordinator_epoch, h.producer.txn_start_offset, h.producer.last_timestamp,
         (now - h.producer.last_timestamp) // 60_000) for h in hanging]
    _table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
            "StartOffset", "LastTimestamp", "Duration(min)"), rows, out)
    return 0
