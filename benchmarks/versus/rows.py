"""The rows, measured on one running system: each step adds its figures to the results or one
failure line, and the next step runs regardless."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import cpu_seconds
from benchmarks.versus import java, rdkafka
from benchmarks.versus.metadata import BrokerView, Poller, all_led, ask
from benchmarks.versus.systems import System, SystemError_, rss_kib
from benchmarks.versus.table import Results, Row, target_for

ROWS = ("produce", "consume", "txn-produce", "txn-consume", "latency", "e2e", "cpu", "rss",
        "start", "controller")
DATA_PLANE = ("produce", "consume", "txn-produce", "txn-consume", "latency", "e2e", "cpu")
CLIENTS = ("java", "rdkafka")
PARTITIONS = 6
POLL_PERIOD = 0.05
"""Seconds from one of a step's Metadata questions to a broker to the next (each broker asked
on a thread and over a connection of its own, kept for the step; at once if an answer took
longer): the steps are timed to within it. A fixed cadence, so that how fast this process
reads an answer does not change how much asking the brokers serve while a step is timed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    produce_bytes: int
    consume_bytes: int
    latency_seconds: float
    e2e_seconds: float
    warmup_seconds: float
    """Seconds at each rate the Java latency rows send before what they judge (the client's
    warm-up): sent, and figured in the rows of the whole run, but not in the judged ones."""
    replicas: tuple[int, int]
    log_bytes: int


@dataclass(eq=False)
class Step:
    """What every step shares: the options, the results, where to write, the tools' Kafka."""

    rows: tuple[str, ...]
    clients: tuple[str, ...]
    sizes: Sizes
    results: Results
    work: Path
    tools: str
    """The Kafka version whose Java tools load every system (the same client for all)."""
    started: float
    latency_tools: str | None = None
    """The Kafka 4.x version whose ProducerPerformance times the Java latency rows (it can
    leave the client's warm-up out, ``--warmup-records``; 3.9.1's cannot); None: none is
    resolved, and those rows fail with one line."""

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}s] {text}", flush=True)

    def run(self, system: System, what: str, body: Callable[[], None]) -> None:
        self.say(f"{system.label}: {what}")
        try:
            body()
        except (SystemError_, OSError, RuntimeError, ValueError, KeyError) as exc:
            line = f"FAILED {system.label}: {what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            self.results.fail(line)
            print(line, file=sys.stderr, flush=True)
        except Exception as exc:  # a client library's own error types: one line too
            line = f"FAILED {system.label}: {what}: {type(exc).__name__}: {exc}"
            self.results.fail(line)
            print(line, file=sys.stderr, flush=True)


# --- helpers ------------------------------------------------------------------------------------


def _long_admin(system: System, timeout: float) -> dict[str, object]:
    """An admin client's settings for a request that may take ``timeout``: librdkafka cuts a
    request at ``socket.timeout.ms`` (60 s) whatever the operation and request timeouts say,
    and adding 4,000 partitions at RF 3 took both partctl and Kafka 3.9.1 longer than that
    here."""
    return {"bootstrap.servers": system.bootstrap,
            "socket.timeout.ms": int(min(timeout, 300.0) * 1000)}  # librdkafka's maximum


def create_topic(system: System, name: str, partitions: int, timeout: float = 600.0) -> None:
    """A topic of ``partitions`` partitions, RF 3, min ISR 2 (Kafka's Admin API through
    librdkafka), waited for until every broker names a leader for each partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_long_admin(system, timeout))
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=timeout, request_timeout=timeout)[name].result(timeout)
    wait_led(system, {name: partitions}, timeout)


def grow_topic(system: System, name: str, partitions: int, timeout: float = 600.0) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient(_long_admin(system, timeout))
    admin.create_partitions([NewPartitions(name, partitions)], operation_timeout=timeout,
                            request_timeout=timeout)[name].result(timeout)
    wait_led(system, {name: partitions}, timeout)


def live(system: System) -> set[int]:
    return {i for i, n in system.nodes.items() if n.running()}


def wait_led(system: System, topics: dict[str, int], timeout: float, *,
             gone: int | None = None, start: float | None = None) -> float:
    """Until every running broker (but ``gone``) names a live leader other than ``gone`` for
    every partition of ``topics``: the seconds from ``start`` (default: now) to the answer
    of the last broker to show it. Each broker is asked every :data:`POLL_PERIOD` on a
    thread and a connection of its own: asked in turn, a broker busy taking leaderships
    over (a 5,000-partition Metadata answered in a few hundred ms) held the question to the
    next one back, and a step's end was seen up to two such answers late."""
    if start is None:
        start = time.perf_counter()
    waiting = live(system) if gone is None else {i for i in system.nodes if i != gone}
    names = list(topics)
    deadline = start + timeout
    shown: dict[int, float] = {}
    failed: dict[int, BaseException] = {}
    stop = threading.Event()

    def poll(i: int) -> None:
        try:
            with Poller() as poller:
                while not stop.is_set() and time.perf_counter() <= deadline:
                    asked = time.perf_counter()
                    view = poller.ask(system.nodes[i].address, names)
                    if all_led(view, topics, live=live(system) - {gone}, gone=gone):
                        shown[i] = time.perf_counter()
                        return
                    stop.wait(max(0.0, asked + POLL_PERIOD - time.perf_counter()))
        except Exception as exc:  # noqa: BLE001 - said in the step's one line below
            failed[i] = exc

    threads = [threading.Thread(target=poll, args=(i,), name=f"wait-led-{i}", daemon=True)
               for i in sorted(waiting)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    finally:
        stop.set()
    if failed:
        i, exc = min(failed.items())
        raise SystemError_(f"asking broker {i} for metadata failed: {type(exc).__name__}: {exc}")
    missing = sorted(waiting - set(shown))
    if missing:
        raise SystemError_(f"brokers {missing} did not show a live leader"
                           + (f" other than broker {gone}" if gone is not None else "")
                           + f" for every partition of {', '.join(names)} in {timeout:.0f}s")
    return max(shown.values(), default=time.perf_counter()) - start


def broker_cpu(system: System) -> float:
    return sum(cpu_seconds(pid) or 0.0 for pid in system.pids().values())


QUIET_CORES = 1.0
"""The brokers' summed CPU rate (cores) under which :func:`wait_quiet` counts them settled."""


def wait_quiet(step: Step, system: System, limit: float = 60.0) -> None:
    """Until the brokers have finished what the previous step set off (a topic's growth:
    followers' first fetches, epoch files): their summed CPU, over two 1-second windows in a
    row, under :data:`QUIET_CORES` and within 0.1 core or 20% of each other, so that a timed
    step starts from a settled cluster. Said, with the rate, when it settles; said and not
    failed after ``limit`` seconds."""
    began = time.monotonic()
    rates: list[float] = []
    last, at = broker_cpu(system), time.monotonic()
    while time.monotonic() - began < limit:
        time.sleep(1.0)
        now, when = broker_cpu(system), time.monotonic()
        rates.append((now - last) / (when - at))
        last, at = now, when
        if len(rates) >= 2:
            a, b = rates[-2:]
            if max(a, b) < QUIET_CORES and abs(a - b) <= max(0.1, 0.2 * max(a, b)):
                step.say(f"{system.label}: brokers settled at {b:.2f} cores after "
                         f"{time.monotonic() - began:.0f} s")
                return
    step.say(f"{system.label}: brokers not settled after {limit:.0f} s "
             f"({rates[-1] if rates else 0:.2f} cores); timing anyway")


def settled_rss(system: System, settle: float = 20.0) -> dict[int, int]:
    """Each broker's VmRSS (KiB) once the sum has stopped moving by 1% over 2 s (at most
    ``settle`` seconds)."""
    def sample() -> dict[int, int]:
        return {i: rss_kib(pid) or 0 for i, pid in system.pids().items()}

    deadline = time.monotonic() + settle
    last = sample()
    while time.monotonic() < deadline:
        time.sleep(2)
        now = sample()
        if abs(sum(now.values()) - sum(last.values())) <= 0.01 * sum(last.values()):
            return now
        last = now
    return last


def topic_counts(view: BrokerView | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (topic, p) in (view.leaders if view else {}):
        counts[topic] = max(counts.get(topic, 0), p + 1)
    return counts


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


# --- the data plane -----------------------------------------------------------------------------


def produce_rows(step: Step, system: System) -> None:
    configs = [(1024, "none"), (1024, "lz4"), (100, "none"), (100, "lz4")]
    if "produce" not in step.rows:  # the CPU row alone: its one load
        configs = configs[:1]
    for size, compression in configs:
        records = max(1000, step.sizes.produce_bytes // size)
        for client in step.clients:
            topic = f"p{size}-{compression}-{client}"

            def body(size: int = size, compression: str = compression, client: str = client,
                     topic: str = topic, records: int = records) -> None:
                create_topic(system, topic, PARTITIONS)
                before = broker_cpu(system)
                if client == "java":
                    got = java.produce(step.tools, step.work, system.bootstrap, topic,
                                       records=records, size=size, compression=compression)
                else:
                    got = rdkafka.produce(system.bootstrap, topic, records=records, size=size,
                                          compression=compression)
                used = broker_cpu(system) - before
                if "produce" in step.rows:
                    step.results.add(Row(
                        key=f"produce.{size}.{compression}.{client}",
                        label=f"produce {_kib(size)} {compression} ({client})", unit="MB/s",
                        better="higher", target=target_for("throughput")), system.key,
                        got["mbps"])
                if "cpu" in step.rows and size == 1024 and compression == "none":
                    step.results.add(Row(
                        key=f"cpu.{client}", label=f"brokers' CPU per MB, 1 KiB ({client})",
                        unit="s/MB", better="lower", target=target_for("cpu")), system.key,
                        used / (records * size / 1e6))

            step.run(system, f"produce {records} x {_kib(size)} {compression} ({client})", body)


def consume_rows(step: Step, system: System) -> None:
    records = max(1000, step.sizes.consume_bytes // 1024)
    ready: list[bool] = []

    def fill() -> None:
        # Evenly: a consumer from the start reads to the end of every partition, and the
        # fullest one, read last and alone, is read a fetch per fetch.max.wait.ms (the Java
        # consumer keeps a partition with buffered records out of its next fetch, which
        # then waits at the leader on the partitions it has finished); with the sticky
        # partitioner's uneven shares that tail moved the figure 5x between runs, Kafka's too.
        create_topic(system, "consume", PARTITIONS)
        rdkafka.produce(system.bootstrap, "consume", records=records, size=1024,
                        partitions=PARTITIONS)
        ready.append(True)

    step.run(system, f"fill the consume topic: {records} x 1 KiB", fill)
    if not ready:
        return
    for client in step.clients:
        def body(client: str = client) -> None:
            if client == "java":
                got = java.consume(step.tools, step.work, system.bootstrap, "consume",
                                   messages=records)
            else:
                got = rdkafka.consume(system.bootstrap, "consume", PARTITIONS, messages=records)
            step.results.add(Row(key=f"consume.{client}",
                                 label=f"consume from the start ({client})", unit="MB/s",
                                 better="higher", target=target_for("throughput")),
                             system.key, got["mbps"])

        step.run(system, f"consume {records} x 1 KiB from the start ({client})", body)


_LATENCY_SPLIT = (("rtt_p50", "the brokers' round trip p50"),
                  ("rtt_p99", "the brokers' round trip p99"),
                  ("queue_p99", "in the client's queue p99"))
"""librdkafka's split of a produce's latency (:func:`rdkafka.latency`), shown beside it."""


def _latency_rows(step: Step, system: System, prefix: str, label: str, client: str,
                  got: dict[str, float]) -> None:
    for pct, name in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
        step.results.add(Row(key=f"{prefix}.{pct}.{client}", label=f"{label} {name} ({client})",
                             unit="ms", better="lower",
                             target=None if pct == "p50" else target_for("tail")),
                         system.key, got[pct])
    warmup = step.sizes.warmup_seconds
    for pct, name in (("all_p99", "p99"), ("all_p999", "p99.9")):
        if pct in got:  # shown, not judged: the client's own warm-up is in it
            step.results.add(Row(key=f"{prefix}.{pct}.{client}",
                                 label=f"{label}, its first {warmup:g} s too, {name} ({client})",
                                 unit="ms", better="lower"), system.key, got[pct])
    for part, name in _LATENCY_SPLIT:
        if part in got:
            step.results.add(Row(key=f"{prefix}.{part}.{client}",
                                 label=f"{label}: {name} ({client})", unit="ms",
                                 better="lower"), system.key, got[part])


def latency_rows(step: Step, system: System) -> None:
    made: list[bool] = []

    def topic() -> None:
        create_topic(system, "latency", PARTITIONS)
        made.append(True)

    step.run(system, "create the latency topic", topic)
    if not made:
        return
    seconds = step.sizes.latency_seconds
    for rate in (1000, 10_000):
        for client in step.clients:
            def body(rate: int = rate, client: str = client) -> None:
                if client == "java":
                    if step.latency_tools is None:
                        raise SystemError_("no Kafka 4.x resolved: the Java latency rows run "
                                           "its ProducerPerformance (--warmup-records)")
                    # the client's warm-up (its JVM compiling the send path on the cores
                    # the brokers use) is sent first and left out of the judged figures;
                    # linger.ms 0 as 3.9.1's client has it (4.x's default is 5)
                    warmup = int(rate * step.sizes.warmup_seconds)
                    got = java.produce(step.latency_tools, step.work, system.bootstrap,
                                       "latency", records=int(rate * seconds) + warmup,
                                       size=1024, throughput=rate, warmup=warmup, linger_ms=0)
                else:
                    got = rdkafka.latency(system.bootstrap, "latency", rate=rate,
                                          seconds=seconds, size=1024)
                _latency_rows(step, system, f"latency.{rate}", f"produce latency @{rate:,}/s",
                              client, got)

            step.run(system, f"produce latency at {rate:,}/s for {seconds:g} s ({client})", body)


def e2e_rows(step: Step, system: System) -> None:
    seconds = step.sizes.e2e_seconds
    for client in step.clients:
        def body(client: str = client) -> None:
            topic = f"e2e-{client}"
            create_topic(system, topic, PARTITIONS)
            if client == "java":
                got = java.end_to_end(step.tools, step.work, system.bootstrap, topic,
                                      messages=int(200 * seconds), size=1024)
                label = "end-to-end, one at a time"
            else:
                got = rdkafka.end_to_end(system.bootstrap, topic, PARTITIONS, rate=1000,
                                         seconds=seconds, size=1024)
                label = "end-to-end @1,000/s"
            for pct in ("p50", "p99"):  # the p50 shown, not judged
                step.results.add(Row(key=f"e2e.{pct}.{client}", label=f"{label} {pct} ({client})",
                                     unit="ms", better="lower",
                                     target=None if pct == "p50" else target_for("tail")),
                                 system.key, got[pct])

        step.run(system, f"end-to-end latency, 1 KiB, {seconds:g} s ({client})", body)


# --- the brokers: memory, start, the controller -------------------------------------------------


def _add_rss(step: Step, system: System, what: str, label: str) -> None:
    rss = settled_rss(system)
    if len(rss) != len(system.nodes):
        raise SystemError_(f"VmRSS read for brokers {sorted(rss)} only")
    step.results.add(Row(key=f"rss.{what}.sum", label=f"brokers' RSS {label}, sum of 3",
                         unit="MiB", better="lower", target=target_for("rss")), system.key,
                     sum(rss.values()) / 1024)
    step.results.add(Row(key=f"rss.{what}.max", label=f"brokers' RSS {label}, largest",
                         unit="MiB", better="lower", target=target_for("rss")), system.key,
                     max(rss.values()) / 1024)


def big_topic(step: Step, system: System, with_rss: bool) -> bool:
    """The topic of many partitions (``replicas`` per broker at RF 3), RSS measured at each
    size when ``with_rss``; whether it stands at the larger size."""
    small, large = step.sizes.replicas
    done: list[bool] = []

    def first() -> None:
        create_topic(system, "big", small)
        if with_rss:
            _add_rss(step, system, f"{small}", f"with {small:,} replicas each")
        done.append(True)

    def second() -> None:
        grow_topic(system, "big", large)
        if with_rss:
            _add_rss(step, system, f"{large}", f"with {large:,} replicas each")
        done.append(True)

    step.run(system, f"a topic of {small:,} partitions (RF 3)", first)
    if done:
        step.run(system, f"grow it to {large:,} partitions", second)
    return len(done) == 2


def rss_idle(step: Step, system: System) -> None:
    step.run(system, "brokers' RSS, idle", lambda: _add_rss(step, system, "idle", "idle"))


def controller_rows(step: Step, system: System) -> None:
    """Controlled shutdown of a broker that is not the controller, then SIGKILL of the
    controller's broker; each timed until every live broker names no partition of the big
    topic led by the broker gone."""
    large = step.sizes.replicas[1]
    topics = {"big": large}

    def shutdown() -> None:
        # a partition whose ISR is the victim alone would go offline (no unclean election):
        # every follower caught up first, as an operator waits before a rolling restart
        wait_full_isr(step, system, "big", 300)
        wait_quiet(step, system)
        controller = system.controller()
        victim = next(i for i in sorted(system.nodes) if i != controller)
        view = ask(system.nodes[victim].address, ["big"])
        led = sum(1 for leader in (view.leaders.values() if view else ()) if leader == victim)
        step.say(f"{system.label}: broker {victim} leads {led} of {large}; SIGTERM")
        node = system.nodes[victim]
        start = time.perf_counter()
        node.signal(signal.SIGTERM)
        took = wait_led(system, topics, 300, gone=victim, start=start)
        step.results.add(Row(key="controller.shutdown",
                             label=f"controlled shutdown, leader of 1/3 of {large:,}",
                             unit="s", better="lower", target=target_for("controller")),
                         system.key, took)
        node.wait(300)
        system.wait_unregistered({victim})
        node.start()
        system.wait_serving(300)
        wait_led(system, topics, 300)
        preferred(step, system, "big")

    def failover() -> None:
        controller = system.controller()
        if controller is None:
            raise SystemError_("no controller in /controller")
        wait_quiet(step, system)
        view = ask(system.nodes[controller].address, ["big"])
        led = sum(1 for leader in (view.leaders.values() if view else ()) if leader == controller)
        step.say(f"{system.label}: controller {controller} leads {led} of {large}; SIGKILL")
        with system.watching():
            start = time.perf_counter()
            system.nodes[controller].kill()
            gone = None
            deadline = start + 120
            while gone is None:
                if system.controller() != controller:
                    gone = time.perf_counter()
                elif time.perf_counter() > deadline:
                    raise SystemError_("/controller still names the killed broker after 120 s")
                else:
                    time.sleep(0.01)
        end = start + wait_led(system, topics, 300, gone=controller, start=start)
        step.results.add(Row(key="controller.failover",
                             label=f"controller failover, leader of 1/3 of {large:,} (from "
                                   "/controller gone)", unit="s", better="lower",
                             target=target_for("controller")), system.key, end - gone)
        step.results.add(Row(key="controller.failover_kill",
                             label="controller failover (from SIGKILL, session 6 s)",
                             unit="s", better="lower"), system.key, end - start)
        system.wait_unregistered({controller})
        system.nodes[controller].start()
        system.wait_serving(300)
        wait_led(system, topics, 300)

    step.run(system, "controlled shutdown of a broker", shutdown)
    step.run(system, "hot failover of the controller", failover)


def wait_full_isr(step: Step, system: System, topic: str, timeout: float) -> BrokerView | None:
    """Until broker 1's Metadata shows every partition of ``topic`` with all the brokers in
    its ISR (said, not failed, after ``timeout``): the last view."""
    deadline = time.monotonic() + timeout
    while True:
        view = ask(system.nodes[1].address, [topic])
        if view is not None and view.isr and min(view.isr.values()) == len(system.nodes):
            return view
        if time.monotonic() > deadline:
            step.say(f"{system.label}: ISRs of {topic} not full after {timeout:.0f} s")
            return view
        time.sleep(0.2)


def preferred(step: Step, system: System, topic: str) -> None:
    """A preferred leader election of every partition of ``topic`` (Kafka's Admin API), so
    that the next step finds each broker leading a third again; a refusal is said, not
    failed (the next step's figure says how many the broker led)."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    view = wait_full_isr(step, system, topic, 120)  # the restarted broker back in every ISR
    partitions = [TopicPartition(topic, p) for (_t, p) in (view.leaders if view else {})]
    admin = AdminClient({"bootstrap.servers": system.bootstrap})  # held until the answer
    try:
        answers = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(180)
    except Exception as exc:  # noqa: BLE001 - librdkafka's KafkaException: said in one line
        step.say(f"{system.label}: preferred election of {topic}: {exc}")
        return
    refused = {str(e) for e in answers.values()
               if e is not None and "ELECTION_NOT_NEEDED" not in str(e)}
    if refused:
        step.say(f"{system.label}: preferred election of {topic}: {sorted(refused)[:2]}")


def start_rows(step: Step, system: System) -> None:
    """Fill a topic to the log size, then stop every broker cleanly and start them, then
    SIGKILL every broker and start them (recovery): each from the launch until every broker
    answers Metadata with a live leader for every partition of every topic."""
    records = max(1000, step.sizes.log_bytes // 1024)
    expected: dict[str, int] = {}

    def fill() -> None:
        create_topic(system, "log", PARTITIONS)
        rdkafka.produce(system.bootstrap, "log", records=records, size=1024)
        expected.update(topic_counts(ask(system.nodes[1].address, None, timeout=60)))

    def restart(how: str) -> None:
        if how == "clean":
            system.stop(300)
        else:
            system.kill_all()
        system.wait_unregistered(set(system.nodes), 120)
        start = time.perf_counter()
        for node in system.nodes.values():
            node.start()
        system.wait_serving(600)
        took = wait_led(system, expected, 600, start=start)
        replicas = sum(expected.values())
        step.results.add(Row(key=f"start.{how}",
                             label=("start after a clean stop" if how == "clean"
                                    else "start after SIGKILL (recovery)")
                             + f", {replicas:,} replicas each", unit="s", better="lower",
                             target=target_for("start")), system.key, took)

    step.run(system, f"fill a topic with {records} x 1 KiB", fill)
    if expected:
        step.run(system, "stop cleanly, start, until every partition is led",
                 lambda: restart("clean"))
        step.run(system, "SIGKILL, start (recovery), until every partition is led",
                 lambda: restart("kill"))
