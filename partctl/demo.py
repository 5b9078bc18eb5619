"""``partctl demo``: a three-broker embedded cluster losing a leader and getting it back.

Everything runs in this process on the memory coordinator, with real logs in a temporary
directory: the controller elects leaders, replica managers replicate, a producer writes with
acks=all while a leader is killed (losing what it had not fsynced), the broker restarts,
recovers, catches up and takes leadership back by a preferred election. A watcher prints every
change of controller and of each partition's leader, leader epoch and ISR as it is stored. The
end is a table per partition and a check that every acknowledged message is readable exactly
once at the offset it was acknowledged at; the exit status is non-zero if it is not.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import coordinator
from coordinator import layout
from coordinator.admin import controller_status
from coordinator.codecs import PartitionStateNode, TopicPartition
from coordinator.metadata import MetadataClient
from node import EmbeddedCluster, Producer, check_acknowledged, embedded_replica_config

__all__ = ["DemoOptions", "DemoResult", "run_demo"]

TOPIC = "demo"


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    messages: int = 10_000
    """Messages per produce phase (three phases)."""
    partitions: int = 3
    batch: int = 20
    """Messages per produced batch."""
    root: Path | None = None
    """Where the brokers' log directories go (a temporary directory by default)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    acknowledged: int
    missing: int
    duplicated: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.acknowledged > 0 and not self.missing and not self.duplicated


@dataclass(slots=True)
class _Acked:
    """What the producer got acknowledged: partition -> offset -> value."""

    by_tp: dict[TopicPartition, dict[int, bytes]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, tp: TopicPartition, base: int, values: list[bytes]) -> None:
        with self.lock:
            target = self.by_tp.setdefault(tp, {})
            for i, v in enumerate(values):
                target[base + i] = v

    def count(self) -> int:
        with self.lock:
            return sum(len(m) for m in self.by_tp.values())


class _Watcher:
    """Prints controller and partition state changes as the coordinator reports them.

    Watch callbacks only wake a printer thread, which reads the current state and prints what
    differs from what it printed last (so a burst of changes may print as one line)."""

    def __init__(self, url: str, topic: str, say: Callable[[str], None], started: float
                 ) -> None:
        self._client = coordinator.connect(url)
        self._metadata = MetadataClient(self._client)
        self._topic = topic
        self._say = say
        self._started = started
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._seen_controller: tuple[int | None, int | None] = (None, None)
        self._seen: dict[TopicPartition, PartitionStateNode] = {}
        self._tps: list[TopicPartition] = []
        self._watches = [self._client.watch_data(layout.CONTROLLER, self._poke)]
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demo-watcher")
        self._thread.start()

    def _poke(self, _event: object) -> None:
        self._wake.set()

    def follow(self, tps: list[TopicPartition]) -> None:
        self._tps = list(tps)
        for tp in tps:
            self._watches.append(self._client.watch_data(
                layout.partition_state(tp.topic, tp.partition), self._poke))
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
            self.report()

    def report(self) -> None:
        """Print whatever changed since the last report (also called at quiet points, so the
        story prints in order)."""
        with self._lock:
            self._report()

    def _report(self) -> None:
        try:
            status = controller_status(self._metadata)
            states = self._metadata.partition_states(self._tps) if self._tps else {}
        except coordinator.CoordinatorError:
            return
        now = f"[dim]{time.monotonic() - self._started:6.2f}s[/dim]"
        controller = (status.broker_id, status.epoch)
        if controller != self._seen_controller and status.broker_id is not None:
            self._say(f"  {now}  [bold magenta]controller[/]: broker {status.broker_id}, "
                      f"controller epoch {status.epoch}")
            self._seen_controller = controller
        for tp in self._tps:
            item = states.get(tp)
            if item is None:
                continue
            new, old = item.value, self._seen.get(tp)
            if old is not None and (old.leader, old.leader_epoch, old.isr) == (
                    new.leader, new.leader_epoch, new.isr):
                continue
            self._seen[tp] = new
            self._say(f"  {now}  {_tp(tp)}  {_change(old, new)}")

    def close(self) -> None:
        self.report()
        self._stop.set()
        self._wake.set()
        self._thread.join(5)
        for watch in self._watches:
            watch.cancel()
        self._client.close()


def _tp(tp: TopicPartition) -> str:
    return f"[cyan]{tp.topic}-{tp.partition}[/]"


def _ids(ids: tuple[int, ...]) -> str:
    return escape(str(list(ids)))


def _change(old: PartitionStateNode | None, new: PartitionStateNode) -> str:
    isr = _ids(new.isr)
    if old is None:
        return f"leader {new.leader}  leader epoch {new.leader_epoch}  ISR {isr}"
    parts = []
    if old.leader != new.leader:
        parts.append(f"[bold yellow]leader {old.leader} -> {new.leader}[/]")
    else:
        parts.append(f"leader {new.leader}")
    if old.leader_epoch != new.leader_epoch:
        parts.append(f"[bold]leader epoch {old.leader_epoch} -> {new.leader_epoch}[/]")
    else:
        parts.append(f"leader epoch {new.leader_epoch}")
    if old.isr != new.isr:
        parts.append(f"[green]ISR {_ids(old.isr)} -> {isr}[/]")
    else:
        parts.append(f"ISR {isr}")
    return "  ".join(parts)


def _record_ack(acked: _Acked, tp: TopicPartition, values: list[bytes], future: Any) -> None:
    if future.exception() is None:
        acked.add(tp, future.result().base_offset, values)


def _produce(producer: Producer, tps: list[TopicPartition], messages: int, batch: int,
             tag: str, acked: _Acked) -> None:
    """Send ``messages`` unique values in batches round-robin over ``tps``; wait for all."""
    futures = []
    for n, start in enumerate(range(0, messages, batch)):
        tp = tps[n % len(tps)]
        values = [f"{tag}-{i:07d}".encode() for i in range(start, min(start + batch, messages))]
        future = producer.send(tp, values)
        future.add_done_callback(functools.partial(_record_ack, acked, tp, values))
        futures.append(future)
    for future in futures:
        future.exception()  # wait; failures show up in the final check


def run_demo(options: DemoOptions, out: TextIO) -> DemoResult:
    """Run the demo, printing to ``out``; returns the check's outcome."""
    console = Console(file=out, highlight=False, width=None if out.isatty() else 110)
    say = console.print
    started = time.monotonic()
    config = embedded_replica_config(min_insync_replicas=2)
    cluster = EmbeddedCluster(3, root=options.root, replica_config=config)
    watcher: _Watcher | None = None
    acked = _Acked()
    try:
        say(f"[bold]partctl demo[/]: 3 brokers in this process on [bold]{cluster.url}[/], "
            f"logs under {cluster.root}")
        cluster.start()
        watcher = _Watcher(cluster.url, TOPIC, say, started)
        watcher.report()
        say(f"\n[bold]1.[/] create topic [cyan]{TOPIC}[/]: {options.partitions} partitions, "
            "replication factor 3, min.insync.replicas 2")
        tps = cluster.create_topic(TOPIC, options.partitions, 3)
        watcher.follow(tps)
        time.sleep(0.05)
        watcher.report()
        producer = cluster.producer(max_in_flight=16)

        say(f"\n[bold]2.[/] produce {options.messages:,} messages with acks=all")
        t = time.monotonic()
        _produce(producer, tps, options.messages, options.batch, "a", acked)
        say(f"  {acked.count():,} acknowledged in {time.monotonic() - t:.2f}s; every broker "
            "fsyncs its logs")
        cluster.flush_logs()

        # The controller's own broker, so that the controller fails over too.
        controller = cluster.wait_for_controller()[0]
        led = [tp for tp in tps if cluster.leader(tp) == controller] or [tps[0]]
        victim = cluster.leader(led[0])
        role = "the controller, " if victim == controller else ""
        say(f"\n[bold]3.[/] [red]crash broker {victim}[/] ({role}leader of "
            f"{', '.join(_tp(tp) for tp in led)}) during the next produce; it loses what it "
            "wrote after that fsync")
        before = acked.count()
        t = time.monotonic()
        phase = threading.Thread(target=_produce, args=(
            producer, tps, options.messages, options.batch, "b", acked))
        phase.start()
        while acked.count() < before + options.messages // 4 and phase.is_alive():
            time.sleep(0.001)
        ends = {tp: r.log_end_offset for tp in tps
                for r in cluster.describe(tp).replicas if r.broker == victim}
        cluster.crash(victim, lose_unflushed=True)
        for tp in tps:
            cluster.wait_for_leader(tp, excluding=[victim])
        watcher.report()
        say(f"\n[bold]4.[/] keep producing while broker {victim} is down")
        phase.join()
        watcher.report()
        say(f"  {acked.count() - before:,} acknowledged in {time.monotonic() - t:.2f}s "
            f"(retries {producer.retries}; batches found already committed after an "
            f"ambiguous failure, not re-sent: {producer.recovered})")

        say(f"\n[bold]5.[/] [green]restart broker {victim}[/]: recover its logs, catch up, "
            "rejoin the ISR")
        node = cluster.restart(victim)
        say(f"  new broker epoch {node.epoch}; logs recovered in "
            f"{node.recovery_seconds or 0:.3f}s to the last fsync:")
        for tp in tps:
            say(f"    {_tp(tp)}  log end offset {ends.get(tp) or 0:,} at the crash, "
                f"{node.recovered_offsets.get(tp, 0):,} after recovery")
        for tp in tps:
            cluster.wait_for_isr(tp, timeout=30)
        watcher.report()

        say("\n[bold]6.[/] preferred leader election: leadership back to the first replica")
        cluster.elect_preferred(tps, timeout=30)
        watcher.report()
        _produce(producer, tps, options.messages, options.batch, "c", acked)
        producer.close()
        for tp in tps:
            cluster.wait_for_caught_up(tp, timeout=30)
        watcher.report()

        say("\n[bold]7.[/] where every replica stands")
        for tp in tps:
            say(_table(cluster, tp))
        return _check(cluster, tps, acked, started, say)
    finally:
        if watcher is not None:
            watcher.close()
        cluster.close()


def _table(cluster: EmbeddedCluster, tp: TopicPartition) -> Table:
    report = cluster.describe(tp)
    table = Table(title=f"{tp.topic}-{tp.partition}  leader {report.leader}  leader epoch "
                        f"{report.leader_epoch}  ISR {_ids(report.isr)}",
                  title_justify="left", min_width=60)
    for name in ("broker", "role", "in ISR", "HW", "LEO"):
        table.add_column(name, justify="right" if name in ("HW", "LEO") else "left")
    for r in report.replicas:
        table.add_row(str(r.broker), r.role, "yes" if r.broker in report.isr else "no",
                      f"{r.high_watermark:,}" if r.high_watermark is not None else "-",
                      f"{r.log_end_offset:,}" if r.log_end_offset is not None else "-")
    return table


def _check(cluster: EmbeddedCluster, tps: list[TopicPartition], acked: _Acked, started: float,
           say: Callable[[str], None]) -> DemoResult:
    consumer = cluster.consumer()
    total = missing = duplicated = 0
    for tp in tps:
        check = check_acknowledged(consumer.read_all(tp), acked.by_tp.get(tp, {}))
        total += check.acknowledged
        missing += len(check.missing)
        duplicated += len(check.duplicated)
    result = DemoResult(acknowledged=total, missing=missing, duplicated=duplicated,
                        seconds=time.monotonic() - started)
    verdict = "[bold green]OK[/]" if result.ok else "[bold red]FAILED[/]"
    say(f"\nCHECK {verdict}: {total:,} acknowledged messages; {total - missing:,} readable "
        f"exactly once at their offsets; {missing} missing or moved, {duplicated} duplicated "
        f"({result.seconds:.1f}s)")
    return result
