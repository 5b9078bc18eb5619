"""A rebalance of --partitions partitions through Kafka's Admin API, timed; prints numbers.

    .venv/bin/python benchmarks/admin_rebalance.py --bootstrap-server 127.0.0.1:9092
        [--partitions 1000] [--replication-factor 2] [--max-concurrent-moves 50]
        [--fill-bytes 0] [--keep] [--remove-broker ID]

Against a running cluster reached by bootstrap alone (a Kafka 4.x KRaft cluster of three or
more brokers, say; any cluster partctl's ``--bootstrap-server`` reaches): one topic of
--partitions partitions at --replication-factor is created with every replica on the first
RF brokers (leaders alternating), optionally given --fill-bytes of data per partition, and then
rebalanced over every broker with the planner's ``balance`` goal, scoped to that topic, as
``partctl reassign generate --bootstrap-server ... --goal balance`` plans it.

Measured (seconds, wall clock of this process):

- *view*: the live snapshot (DescribeCluster, ListPartitionReassignments, Metadata of every
  topic, DescribeLogDirs of every broker), as ``reassign generate`` reads it;
- *plan*: planning with the local engine on that snapshot;
- *execute*: ``AdminAccess.execute``, as ``partctl reassign execute`` runs it: validating the
  plan against the cluster, the overlap check, AlterPartitionReassignments in batches of at
  most --max-concurrent-moves, and polling ListPartitionReassignments (every 0.2 s) until the
  controller has finished every move (new replicas created, caught up, in the ISR, the old
  ones removed) and the metadata shows each partition at its target;
- *total*: the three together (not the topic's creation, filling or deletion).

With ``--remove-broker ID``, ``partctl rebalance remove-brokers ID`` instead: the topic's
replicas are spread over every broker (partition p on brokers p, p+1, ... round the list), and
broker ID is drained as the command does it: *view* (the live snapshot with sizes) and *plan*
(``rebalancer.operations.remove_brokers`` on the whole cluster) are its dry run, *execute* its
``--execute`` (without a throttle). The drained broker is left empty.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkaclient.admin import AdminClient  # noqa: E402
from rebalancer.admin_access import AdminAccess  # noqa: E402
from rebalancer.engines import plan_reassignment  # noqa: E402
from rebalancer.goals import parse_goal  # noqa: E402
from rebalancer.live_snapshot import scope_snapshot  # noqa: E402
from rebalancer.operations import remove_brokers  # noqa: E402
from rebalancer.plan import Plan  # noqa: E402
from rebalancer.snapshot import Snapshot  # noqa: E402


def create_topic(bootstrap: str, topic: str, partitions: int, brokers: list[int], rf: int,
                 fill: int, *, spread: bool = False) -> None:
    """The topic on the first ``rf`` brokers (leaders alternating), or with ``spread`` round
    every broker."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    first = brokers if spread else brokers[:rf]
    assignment = [[first[(p + i) % len(first)] for i in range(rf)] for p in range(partitions)]
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                  replica_assignment=assignment)])[topic].result(120)
    if fill:
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20})
        value = b"x" * min(fill, 100_000)
        for p in range(partitions):
            for _ in range(max(1, fill // len(value))):
                producer.produce(topic, value=value, partition=p)
                producer.poll(0)
        producer.flush(300)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(120)


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, timeout: float = 300
                     ) -> None:
    deadline = time.monotonic() + timeout
    while True:
        info = admin.topics([topic]).get(topic)
        if info is not None and len(info.partitions) == partitions and all(
                p.leader >= 0 for p in info.partitions):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: no leader for every partition after {timeout}s")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--replication-factor", type=int, default=2)
    parser.add_argument("--max-concurrent-moves", type=int, default=50)
    parser.add_argument("--fill-bytes", type=int, default=0, help="data per partition")
    parser.add_argument("--keep", action="store_true", help="keep the topic afterwards")
    parser.add_argument("--remove-broker", type=int, default=None, metavar="ID",
                        help="time `partctl rebalance remove-brokers ID` instead of a balance")
    args = parser.parse_args()

    topic = f"bench-admin-rebalance-{uuid.uuid4().hex[:8]}"
    access = AdminAccess(AdminClient(args.bootstrap_server, timeout=120),
                         description=f"bootstrap {args.bootstrap_server}")
    try:
        brokers = sorted(access.admin.describe_cluster().brokers, key=lambda b: b.id)
        ids = [b.id for b in brokers]
        if len(ids) <= args.replication_factor:
            raise SystemExit(f"needs more than {args.replication_factor} brokers, the cluster "
                             f"has {len(ids)}")
        removing = args.remove_broker
        if removing is not None and removing not in ids:
            raise SystemExit(f"broker {removing} is not in the cluster (brokers {ids})")
        where = "every broker" if removing is not None else \
            f"brokers {ids[:args.replication_factor]}"
        print(f"cluster: {len(ids)} brokers; topic {topic}: {args.partitions} partitions at "
              f"RF {args.replication_factor} on {where}, {args.fill_bytes} bytes each")
        create_topic(args.bootstrap_server, topic, args.partitions, ids,
                     args.replication_factor, args.fill_bytes, spread=removing is not None)
        wait_for_leaders(access.admin, topic, args.partitions)

        started = time.monotonic()
        view = access.view()
        viewed = time.monotonic()
        snap: Snapshot
        plan: Plan
        if removing is not None:  # as `partctl rebalance remove-brokers ID`: the whole cluster
            op = remove_brokers(view, [removing])
            snap, plan = op.snapshot, op.plan
            print(f"remove-brokers {removing}: the dry run's view and plan below")
        else:
            snap = scope_snapshot(view.snapshot(), topics=[topic])
            plan = plan_reassignment(snap, [parse_goal("balance")], engine="local")
        planned = time.monotonic()
        result = access.execute(plan, max_concurrent_moves=args.max_concurrent_moves,
                                poll_interval=0.2, timeout=3600)
        executed = time.monotonic()
        if not result.ok:
            print(f"execution failed: {len(result.failed)} partition(s), e.g. "
                  f"{next(iter(result.failed.items()))}")
            return 1
        before = {p.key: p.replicas for p in snap.partitions}
        moved = sum(len(set(m.replicas) - set(before[(m.topic, m.partition)]))
                    for m in plan.partitions)
        print(f"plan: {len(plan.partitions)} partitions reassigned, {moved} replicas moved, "
              f"at most {args.max_concurrent_moves} partitions at a time")
        print(f"view    {viewed - started:8.2f} s  ({len(view.partitions)} partitions in the "
              f"cluster, sizes of {len(view.log_dirs)} log dirs)")
        print(f"plan    {planned - viewed:8.2f} s")
        print(f"execute {executed - planned:8.2f} s  ({len(result.done)} done)")
        print(f"total   {executed - started:8.2f} s")
    finally:
        if not args.keep:
            try:
                delete_topic(args.bootstrap_server, topic)
            except Exception as exc:  # the numbers are printed already
                print(f"could not delete {topic}: {exc}")
        access.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
