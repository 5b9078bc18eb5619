"""How long a consumer group takes to rebalance after a member dies, classic beside KIP-848;
prints numbers.

    .venv/bin/python benchmarks/rebalance.py [--partitions 300] [--rounds 3]
                                             [--session-timeout-ms 6000]
                                             [--protocols classic,consumer]

A ZooKeeper started for the run on this machine's loopback and three ``partctl broker start``
processes (``offsets.topic.num.partitions=10``, ``group.initial.rebalance.delay.ms=0``); one
topic of ``--partitions`` partitions at replication factor 1 (the rebalance touches no data).
Three members, each a process of its own (this script with ``--member``): confluent-kafka
consumers of one group, polling every 50 ms; each writes down, with the wall clock, the
partitions it holds after every assignment callback. Per protocol, one group on the same
cluster:

- *classic*: the eager ``range`` assignor in the clients, ``session.timeout.ms`` as given,
  ``heartbeat.interval.ms`` 500;
- *consumer* (KIP-848, ``group.protocol=consumer``): the broker's ``uniform`` assignor, the
  brokers' ``group.consumer.session.timeout.ms`` as given and
  ``group.consumer.heartbeat.interval.ms`` 500; assignments are incremental (a survivor keeps
  what it had and only gains the dead member's partitions).

Each round: with all partitions assigned, one member is SIGKILLed (no LeaveGroup: only its
session timeout tells the coordinator). Measured:

- *session fired*: from the kill to the coordinator's log line saying the member failed its
  session timeout (the protocol's own wait: at most the session timeout after the member's
  last heartbeat);
- *rebalance*: from that line to the moment the surviving members' latest assignments cover
  every partition (the last of their assignment callbacks): what the rebalance itself costs.
  Classic: the join phase (the survivors learn of it at their next heartbeat, every 500 ms,
  and rejoin), the leader's assignment, SyncGroup and the stored generation (acks=all), and
  librdkafka's callbacks. KIP-848: the new target (computed and stored, acks=all, when the
  member is fenced), each survivor's next heartbeat (every 500 ms) bringing its new
  partitions, and librdkafka's callbacks. The target is at most 1 s.

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
PROTOCOLS = ("classic", "consumer")


def _fired(group: str) -> re.Pattern[str]:
    return re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO "
                      r"partctl\.groups(?:\.consumer)?: group " + re.escape(group)
                      + r": member (\S+) failed its session timeout")


def member(bootstrap: str, session_ms: int, out_path: str, protocol: str) -> None:
    """A member process: consume the topic in the group, log what it holds with the time."""
    import confluent_kafka as ck

    stopping = [False]
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__(0, True))
    settings: dict[str, object] = {"bootstrap.servers": bootstrap,
                                   "group.id": f"{GROUP}-{protocol}",
                                   "enable.auto.commit": False}
    if protocol == "consumer":
        settings.update({"group.protocol": "consumer", "group.remote.assignor": "uniform"})
    else:
        settings.update({"session.timeout.ms": session_ms, "heartbeat.interval.ms": 500,
                         "partition.assignment.strategy": "range"})
    consumer = ck.Consumer(settings)
    incremental = protocol == "consumer"
    held: set[int] = set()
    with open(out_path, "a") as out:
        def write() -> None:
            numbers = ",".join(str(p) for p in sorted(held))
            print(f"A {time.time():.6f} {numbers}", file=out, flush=True)

        def assigned(_c: object, partitions: list) -> None:
            if not incremental:
                held.clear()
            held.update(p.partition for p in partitions)
            write()

        def revoked(_c: object, partitions: list) -> None:
            if incremental:
                held.difference_update(p.partition for p in partitions)
            else:
                held.clear()
            write()

        consumer.subscribe([TOPIC], on_assign=assigned, on_revoke=revoked)
        while not stopping[0]:
            consumer.poll(0.05)
    consumer.close()


class Member:
    def __init__(self, name: str, bootstrap: str, session_ms: int, directory: Path,
                 protocol: str) -> None:
        self.path = directory / f"member-{protocol}-{name}.txt"
        self.proc = subprocess.Popen([sys.executable, __file__, "--member", bootstrap,
                                      str(session_ms), str(self.path), protocol],
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


def fired_at(logs: list[Path], after: float, pattern: re.Pattern[str]) -> float | None:
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            found = pattern.match(line)
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
    parser.add_argument("--protocols", default=",".join(PROTOCOLS),
                        help="which group protocols to measure, in order (classic,consumer)")
    parser.add_argument("--member", nargs=4, help=argparse.SUPPRESS)
    add_server_options(parser)
    args = parser.parse_args()
    if args.member:
        member(args.member[0], int(args.member[1]), args.member[2], args.member[3])
        return
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not protocols or any(p not in PROTOCOLS for p in protocols):
        parser.error(f"--protocols: name some of {', '.join(PROTOCOLS)}")
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    zk = start_server("zookeeper", args)
    directory = Path(tempfile.mkdtemp(prefix="partctl-rebalance-"))
    cluster = None
    members: list[Member] = []
    results: dict[str, list[tuple[float, float]]] = {p: [] for p in protocols}
    try:
        cluster = start_cluster(3, coordinator_url=zk.url("/bench"), directory=directory / "cluster",
                                extra={"offsets.topic.num.partitions": "10",
                                       "group.initial.rebalance.delay.ms": "0",
                                       "group.consumer.session.timeout.ms":
                                           str(args.session_timeout_ms),
                                       "group.consumer.heartbeat.interval.ms": "500"})
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(60)
        print(f"3 brokers up ({bootstrap}); topic of {args.partitions} partitions", flush=True)
        logs = [b.log_path for b in cluster.brokers]
        for protocol in protocols:
            pattern = _fired(f"{GROUP}-{protocol}")
            members = [Member(str(i), bootstrap, args.session_timeout_ms, directory, protocol)
                       for i in range(3)]
            wait(lambda ms=members: settled(ms, args.partitions, 0.0), 120,
                 "the first assignment")
            for round_ in range(args.rounds):
                time.sleep(2)
                victim = members.pop(0)
                killed = time.time()
                victim.proc.kill()
                victim.proc.wait(10)
                fired = wait(lambda k=killed, p=pattern: fired_at(logs, k, p), 60,
                             "the session timeout")
                done = wait(lambda k=killed, ms=members: settled(ms, args.partitions, k), 60,
                            "the survivors to hold every partition")
                results[protocol].append((fired - killed, done - fired))  # type: ignore[operator]
                print(f"{protocol} round {round_ + 1}: session fired {fired - killed:.3f} s "
                      f"after the kill, all assigned {done - fired:.3f} s later", flush=True)
                members.append(Member(f"r{round_}", bootstrap, args.session_timeout_ms,
                                      directory, protocol))
                started = time.time()
                wait(lambda s=started, ms=members: settled(ms, args.partitions, s), 120,
                     "the group to take the new member")
            for m in members:
                m.proc.send_signal(signal.SIGTERM)
            for m in members:
                m.proc.wait(30)
            members = []
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
    print(f"\n3 members (confluent-kafka {confluent_kafka.version()[0]}), {args.partitions} "
          f"partitions, session timeout {args.session_timeout_ms} ms, heartbeat interval "
          f"500 ms; 3 partctl broker processes. classic: eager range assignor in the clients; "
          f"consumer: KIP-848, the broker's uniform assignor")
    print(server_label(args))
    print("kill -> fired: from the SIGKILL to the coordinator's session-timeout line; "
          "fired -> all assigned: from that line to the survivors' last assignment callback "
          "covering every partition")
    header = "".join(f" {p + ' kill->fired (s)':>26} {p + ' fired->assigned (s)':>28}"
                     for p in protocols)
    print(f"{'round':>5}{header}")
    for i in range(args.rounds):
        row = ""
        for p in protocols:
            if i < len(results[p]):
                fired, rebalance = results[p][i]
                row += f" {fired:>26.3f} {rebalance:>28.3f}"
            else:
                row += f" {'-':>26} {'-':>28}"
        print(f"{i + 1:>5}{row}")
    for p in protocols:
        if results[p]:
            worst = max(r for _, r in results[p])
            print(f"{p}: worst rebalance beyond the session timeout: {worst:.3f} s "
                  f"(target <= 1 s)")


if __name__ == "__main__":
    main()
