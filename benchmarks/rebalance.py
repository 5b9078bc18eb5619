"""How long a classic consumer group takes to rebalance after a member dies; prints numbers.

    .venv/bin/python benchmarks/rebalance.py [--partitions 300] [--rounds 3]
                                             [--session-timeout-ms 6000]

A ZooKeeper started for the run on this machine's loopback and three ``partctl broker start``
processes (``offsets.topic.num.partitions=10``, ``group.initial.rebalance.delay.ms=0``); one
topic of ``--partitions`` partitions at replication factor 1 (the rebalance touches no data).
Three members, each a process of its own (this script with ``--member``): confluent-kafka
consumers of one group, the eager ``range`` assignor, ``session.timeout.ms`` as given,
``heartbeat.interval.ms`` 500, polling every 50 ms; each writes down, with the wall clock, every
assignment it gets.

Each round: with all partitions assigned, one member is SIGKILLed (no LeaveGroup: only its
session timeout tells the coordinator). Measured:

- *session fired*: from the kill to the coordinator's log line saying the member failed its
  session timeout (the protocol's own wait: at most the session timeout after the member's
  last heartbeat);
- *rebalance*: from that line to the moment the surviving members' latest assignments cover
  every partition (the last of their assignment callbacks): what the rebalance itself costs,
  the join phase (the survivors learn of it at their next heartbeat, every 500 ms, and rejoin),
  the leader's assignment, SyncGroup and the stored generation (acks=all), and librdkafka's
  callbacks. The target is at most 1 s.

Then a new member is started in the dead one's place and the group settles before the next
round. The broker log's clock and the members' are this machine's wall clock; the log line has
millisecond resolution.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import add_server_options, server_label, start_server  # noqa: E402
from broker.cluster import start_cluster  # noqa: E402

TOPIC = "bench-rebalance"
GROUP = "bench-rebalance"
_FIRED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO partctl\.groups: group "
                    + GROUP + r": member (\S+) failed its session timeout")


def member(bootstrap: str, session_ms: int, out_path: str) -> None:
    """A member process: consume the topic in the group, log assignments with the time."""
    import confluent_kafka as ck

    stopping = [False]
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__(0, True))
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                            "session.timeout.ms": session_ms, "heartbeat.interval.ms": 500,
                            "partition.assignment.strategy": "range",
                            "enable.auto.commit": False})
    with open(out_path, "a") as out:
        def assigned(_c: object, partitions: list) -> None:
            numbers = ",".join(str(p.partition) for p in partitions)
            print(f"A {time.time():.6f} {numbers}", file=out, flush=True)

        def revoked(_c: object, _partitions: list) -> None:
            print(f"R {time.time():.6f}", file=out, flush=True)

        consumer.subscribe([TOPIC], on_assign=assigned, on_revoke=revoked)
        while not stopping[0]:
            consumer.poll(0.05)
    consumer.close()


class Member:
    def __init__(self, name: str, bootstrap: str, session_ms: int, directory: Path) -> None:
        self.path = directory / f"member-{name}.txt"
        self.proc = subprocess.Popen([sys.executable, __file__, "--member", bootstrap,
                                      str(session_ms), str(self.path)],
                                     stderr=subprocess.DEVNULL)

    def latest(self) -> tuple[float, set[int]] | None:
        """The last assignment: (when, partitions); None before the first."""
        if not self.path.exists():
            return None
        last = None
        for line in self.path.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "A":
                last = (float(parts[1]), {int(p) for p in parts[2].split(",") if p}
                        if len(parts) > 2 else set())
            elif parts and parts[0] == "R":
                last = (float(parts[1]), set())
        return last


def settled(members: list[Member], partitions: int, after: float) -> float | None:
    """When the members' latest assignments (all made after ``after``) first covered every
    partition exactly once; None if they do not yet."""
    latest = [m.latest() for m in members]
    if any(x is None or x[0] < after for x in latest):
        return None
    covered = [p for _, ps in latest for p in ps]  # type: ignore[misc]
    if sorted(covered) != list(range(partitions)):
        return None
    return max(t for t, _ in latest)  # type: ignore[misc]


def wait(condition: object, timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()  # type: ignore[operator]
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


def fired_at(logs: list[Path], after: float) -> float | None:
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            found = _FIRED.match(line)
            if found:
                stamp = datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")
                when = stamp.timestamp()
                if when >= after:
                    return when
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--keep", action="store_true",
                        help="keep the run's directory (broker logs, members' records)")
    parser.add_argument("--member", nargs=3, help=argparse.SUPPRESS)
    add_server_options(parser)
    args = parser.parse_args()
    if args.member:
        member(args.member[0], int(args.member[1]), args.member[2])
        return
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-rebalance-"))
    cluster = None
    members: list[Member] = []
    results: list[tuple[float, float]] = []
    try:
        cluster = start_cluster(3, coordinator_url=zk.url("/bench"), directory=directory / "cluster",
                                extra={"offsets.topic.num.partitions": "10",
                                       "group.initial.rebalance.delay.ms": "0"})
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(60)
        print(f"3 brokers up ({bootstrap}); topic of {args.partitions} partitions", flush=True)
        members = [Member(str(i), bootstrap, args.session_timeout_ms, directory)
                   for i in range(3)]
        wait(lambda: settled(members, args.partitions, 0.0), 120, "the first assignment")
        logs = [b.log_path for b in cluster.brokers]
        for round_ in range(args.rounds):
            time.sleep(2)
            victim = members.pop(0)
            killed = time.time()
            victim.proc.kill()
            victim.proc.wait(10)
            fired = wait(lambda k=killed: fired_at(logs, k), 60, "the session timeout")
            done = wait(lambda k=killed: settled(members, args.partitions, k), 60,
                        "the survivors to hold every partition")
            results.append((fired - killed, done - fired))  # type: ignore[operator]
            print(f"round {round_ + 1}: session fired {fired - killed:.3f} s after the kill, "
                  f"all assigned {done - fired:.3f} s later", flush=True)
            members.append(Member(f"r{round_}", bootstrap, args.session_timeout_ms, directory))
            started = time.time()
            wait(lambda s=started: settled(members, args.partitions, s), 120,
                 "the group to take the new member")
    finally:
        for m in members:
            m.proc.send_signal(signal.SIGTERM)
        for m in members:
            try:
                m.proc.wait(30)
            except subprocess.TimeoutExpired:
                m.proc.kill()
        if cluster is not None:
            cluster.stop()
        zk.stop()
        if args.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    print(f"\nclassic group, eager range assignor: 3 members (confluent-kafka "
          f"{confluent_kafka.version()[0]}), {args.partitions} partitions, session.timeout.ms "
          f"{args.session_timeout_ms}, heartbeat.interval.ms 500; 3 partctl broker processes")
    print(server_label(args))
    print(f"{'round':>5} {'kill -> session fired (s)':>26} {'fired -> all assigned (s)':>26}")
    for i, (fired, rebalance) in enumerate(results, 1):
        print(f"{i:>5} {fired:>26.3f} {rebalance:>26.3f}")
    if results:
        worst = max(r for _, r in results)
        print(f"worst rebalance beyond the session timeout: {worst:.3f} s (target <= 1 s)")


if __name__ == "__main__":
    main()
