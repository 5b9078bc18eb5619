"""``partctl cluster snapshot``: the live cluster's brokers, racks and replicas as a planner
snapshot file (JSON or Parquet), for ``reassign generate --snapshot``.

``partctl cluster status``: one screen (rich) of the cluster as an operator watches it: the
brokers (rack, live, leaders, replicas, bytes with ``--sizes``), the controller and its epoch,
the offline, under-replicated and under-min-ISR counts, leader imbalance and the reassignments
in progress with a progress bar each (partctl/cluster_view.py reads, partctl/status_screen.py
draws). ``--watch [SECONDS]`` redraws it every SECONDS (default 2) until Ctrl-C, which ends it
with status 0; a read that fails while watching is shown on the screen and tried again.

``partctl cluster up``: a development cluster on this machine (broker/cluster.py): a
ZooKeeper or etcd server unless ``--coordinator`` names one, and N broker processes on
127.0.0.1, until Ctrl-C or SIGTERM. It prints what it started (a broker's line names its
metrics URL when ``--set metrics.listener=...`` is given), then the line a Kafka client needs
(``bootstrap.servers=127.0.0.1:9092,...``), then waits.

Stopping: the first SIGINT, SIGTERM or SIGHUP (the terminal closed) stops the brokers
together with SIGTERM (each a controlled shutdown), then the coordinator server, and removes
the directory unless ``--dir`` named it; one line sums it up. A second signal while stopping sends the brokers SIGINT (they
stop at once, still closing their logs cleanly).

A broker that exits while the cluster is up is reported in one line and the others keep
running: a broker going away is a case a development cluster is for (its leaders move to the
others when they hold replicas). When every broker has exited, or the coordinator server has,
there is nothing left to serve: the cluster stops by itself.

Exit status: 0 stopped on request and every broker stopped cleanly; 1 a broker that could not
start (everything started is stopped first; one ``partctl: error:`` line with the broker's own
reason), an unreachable ``--coordinator``, a broker that failed while up (a non-zero status)
or did not stop cleanly; 2 a usage error; 130 stopped at once by a second signal.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from contextlib import closing
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from partctl.commands.common import (
    cluster_options,
    connect,
    count,
    id_list,
    open_cluster,
    reword,
    seconds,
    sizes,
    timeout_option,
)
from partctl.errors import UserError, user_error

if TYPE_CHECKING:
    from broker.cluster import LocalCluster
    from rebalancer.snapshot import Snapshot

MAX_PORT = 65535
WATCH_EVERY = 2.0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    cluster = sub.add_parser("cluster", help="the cluster as a planner snapshot; a development "
                                             "cluster on this machine")
    clsub = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    snap = clsub.add_parser("snapshot", parents=[cluster_options(), timeout_option()],
                            help="write brokers, racks and replicas to a JSON or Parquet file")
    snap.add_argument("-o", "--output", required=True, metavar="FILE",
                      help="snap.json or snap.parquet")
    snap.add_argument("--decommission", metavar="5,9", help="brokers to be removed")
    snap.add_argument("--new-brokers", metavar="7,8", help="brokers just added")
    snap.add_argument("--sizes", metavar="FILE",
                      help='partition sizes: {"partitions": [{"topic", "partition", '
                           '"size_bytes"}]} (default: read from the cluster with '
                           '--bootstrap-server, unknown with --coordinator)')
    snap.add_argument("--plot", metavar="FILE",
                      help="also draw replicas, leaders and bytes per broker, grouped by rack "
                           "(cluster.png; needs the plot extra)")
    snap.set_defaults(func=cmd_snapshot)
    status = clsub.add_parser("status", parents=[common],
                              help="one screen: brokers, controller, offline and "
                                   "under-replicated partitions, reassignments in progress")
    status.add_argument("--watch", type=seconds, nargs="?", const=WATCH_EVERY, metavar="SECONDS",
                        help=f"redraw every SECONDS (default {WATCH_EVERY:g}) until Ctrl-C")
    status.add_argument("--sizes", metavar="FILE",
                        help='partition sizes, for bytes per broker: {"partitions": [{"topic", '
                             '"partition", "size_bytes"}]} (default: unknown)')
    status.set_defaults(func=cmd_status)
    up = clsub.add_parser("up", parents=[common],
                          help="run a coordinator server and N brokers on this machine until "
                               "Ctrl-C (for development)")
    # $PARTCTL_COORDINATOR is not read: a server is started
    reword(up, "coordinator", "a ZooKeeper or etcd that runs already, zookeeper://h:p/chroot or "
                              "etcd://h:p/prefix (default: start one, see --store)")
    up.add_argument("--brokers", type=count(1), default=3, metavar="N",
                    help="broker processes, ids 1..N (default 3)")
    up.add_argument("--store", choices=("zookeeper", "etcd"),
                    help="the server to start when no --coordinator is given (default: the one "
                         "whose data is in --dir, else zookeeper if installed, else etcd)")
    up.add_argument("--dir", metavar="DIR",
                    help="where the server's data and each broker's properties, log and "
                         "partitions go; kept, and a cluster started again on it finds its "
                         "topics (default: a temporary directory removed at the end)")
    up.add_argument("--base-port", type=count(1), metavar="P",
                    help="listen on ports P..P+N-1 (default: free ports)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties setting for every broker (repeatable), e.g. "
                         "--set num.partitions=3")
    up.set_defaults(func=cmd_up)


def cmd_snapshot(args: argparse.Namespace, out: TextIO) -> int:
    if args.plot:
        from partctl.plot import check_plot_target

        check_plot_target(args.plot)
    override = sizes(args)
    with closing(open_cluster(args)) as access:
        view = access.view(sizes=override is None)
    snap = view.snapshot(decommission=id_list(args.decommission, "--decommission"),
                         new_brokers=id_list(args.new_brokers, "--new-brokers"),
                         sizes=override)
    _write_snapshot(snap, args.output)
    racks = sorted({b.rack for b in snap.brokers if b.rack is not None})
    print(f"Wrote a snapshot of {len(snap.brokers)} brokers ({len(racks)} racks) and "
          f"{len(snap.partitions)} partitions ({len({p.topic for p in snap.partitions})} "
          f"topics) to {args.output}.", file=out)
    if args.plot:
        from partctl.plot import plot_loads
        from partctl.render import broker_loads
        from rebalancer.plan import Plan

        plot_loads(broker_loads(snap, Plan(partitions=())), args.plot, compare=False,
                   title=f"partctl cluster snapshot: {len(snap.brokers)} brokers, "
                         f"{len(snap.partitions)} partitions")
        print(f"Picture of the load per broker written to {args.plot}.", file=out)
    return 0


def _write_snapshot(snap: Snapshot, path: str) -> None:
    from rebalancer.snapshot import save_snapshot

    try:
        save_snapshot(snap, path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


# --- cluster status ------------------------------------------------------------------------------


def _pause(seconds: float) -> None:
    """The wait between two redraws of ``--watch`` (its own name, for the tests)."""
    time.sleep(seconds)


def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    from rich.console import Console

    from partctl.cluster_view import read_cluster
    from partctl.status_screen import status_screen

    known = sizes(args)
    console = Console(file=out, highlight=False)
    with connect(args) as client:
        view = read_cluster(client, sizes=known)
        if args.watch is None:
            console.print(status_screen(view))
            return 0
        from rich.live import Live

        try:
            with Live(status_screen(view), console=console, auto_refresh=False,
                      screen=False) as live:
                while True:
                    _pause(args.watch)
                    try:
                        view, note = read_cluster(client, sizes=known), None
                    except Exception as exc:  # shown, and read again at the next refresh
                        if user_error(exc) is None:
                            raise
                        note = f"refresh failed at {time.strftime('%H:%M:%S')}: {exc}"
                    live.update(status_screen(view, note=note), refresh=True)
        except KeyboardInterrupt:
            return 0


# --- cluster up ----------------------------------------------------------------------------------


def _settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"bad --set {pair!r}: want key=value, e.g. num.partitions=3")
        settings[key.strip()] = value.strip()
    return settings


class _Signals:
    """SIGINT, SIGTERM and SIGHUP (the terminal closed) counted instead of raised: the first
    asks for a stop, the second for a stop at once. The previous handlers come back on exit."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, object] = {}

    def _on(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)

    def stopping(self) -> bool:
        return bool(self.received)

    def at_once(self) -> bool:
        return len(self.received) > 1

    def __enter__(self) -> _Signals:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._previous[signum] = signal.signal(signum, self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def cmd_up(args: argparse.Namespace, out: TextIO) -> int:
    from broker.cluster import ClusterError, start_cluster

    extra = _settings(args.set)
    if args.base_port is not None and args.base_port + args.brokers - 1 > MAX_PORT:
        raise UserError(f"--base-port {args.base_port}: ports up to "
                        f"{args.base_port + args.brokers - 1} for {args.brokers} brokers, past "
                        f"{MAX_PORT}")
    if args.coordinator and args.store:
        raise UserError("give --coordinator (a server that runs) or --store (one to start), "
                        "not both")

    def started(line: str) -> None:
        print(f"partctl cluster: {line}", file=out, flush=True)

    with _Signals() as signals:
        try:
            cluster = start_cluster(
                args.brokers, coordinator_url=args.coordinator, store=args.store,
                directory=args.dir, base_port=args.base_port, extra=extra,
                connect_timeout=args.timeout, stopping=signals.stopping, started=started)
        except ClusterError as exc:
            raise UserError(str(exc)) from None
        if signals.stopping():
            return _stop(cluster, signals, out, 0)
        print(f"bootstrap.servers={cluster.bootstrap_servers}", file=out, flush=True)
        print(f"partctl cluster: {len(cluster.brokers)} broker(s) on "
              f"{cluster.coordinator_url}, in {cluster.directory}; Ctrl-C stops them",
              file=out, flush=True)
        try:
            status = _watch(cluster, signals)
        except BaseException:  # a bug: stop the processes before it is reported
            cluster.stop(timeout=30)
            raise
        return _stop(cluster, signals, out, status)


def _watch(cluster: LocalCluster, signals: _Signals) -> int:
    """Wait for a signal, reporting brokers that exit; 1 when a broker failed (one stopped
    cleanly by someone else, status 0, is no failure)."""
    status = 0
    while not signals.stopping():
        for broker in cluster.newly_exited():
            if broker.process.returncode != 0:
                status = 1
            others = any(b.running() for b in cluster.brokers)
            print(f"partctl cluster: broker {broker.broker_id} (pid {broker.pid}) has stopped: "
                  f"{broker.exit_reason()}" + ("; the others keep running" if others else ""),
                  file=sys.stderr, flush=True)
        if all(b.broker_id in cluster.statuses for b in cluster.brokers):
            print("partctl cluster: every broker has exited: stopping", file=sys.stderr,
                  flush=True)
            return 1
        if cluster.server is not None and not cluster.server.running():
            print(f"partctl cluster: the {cluster.server.kind} server exited (log "
                  f"{cluster.server.log_path}): stopping", file=sys.stderr, flush=True)
            return 1
        time.sleep(0.2)
    return status


def _stop(cluster: LocalCluster, signals: _Signals, out: TextIO, status: int) -> int:
    server = cluster.server
    statuses = cluster.stop(at_once=signals.at_once)
    ids = ", ".join(str(b) for b in sorted(statuses)) or "none"
    codes = ", ".join(str(statuses[b]) for b in sorted(statuses))
    where = ("removed" if cluster.remove_directory else "kept") + f" {cluster.directory}"
    print(f"partctl cluster: stopped brokers {ids} (exit statuses {codes})"
          + (f" and {server.kind}" if server is not None else "") + f"; {where}", file=out,
          flush=True)
    if signals.at_once():
        return 130
    # -SIGTERM: a broker still starting, ended by our SIGTERM before it could take it
    clean = all(s in (0, -signal.SIGTERM) for s in statuses.values())
    return status if clean else 1

