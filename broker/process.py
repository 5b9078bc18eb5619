"""``partctl broker start``: one broker as a process, from start to exit status.

Start-up follows a Kafka broker's: read ``server.properties``; bind the listeners (a port of 0
gets a free one, registered as bound); connect to the coordinator, open the logs (recovering
them) and register ``/brokers/ids/<id>`` with Kafka's JSON, the advertised listeners as its
endpoints, then stand for controller (a :class:`~replication.BrokerNode`, whose replica manager
answers the controller through a :class:`~broker.metadata_cache.ObservingHandler` that keeps
the broker's metadata cache, and whose followers fetch from their leaders over Kafka's protocol,
:mod:`broker.fetch_client`); then serve. The controller, in this process or another, reaches
the broker over its listeners with Kafka's protocol, and this broker's controller reaches the
others the same way (:class:`~broker.controller_channel.KafkaNetwork`): the controller's
requests are served as soon as the listeners accept, clients' once the first metadata is in.
When it serves clients, one line on stderr says so::

    partctl broker 1: serving PLAINTEXT://127.0.0.1:9092 on zookeeper://127.0.0.1:2181/kafka

With ``metrics.listener`` set, the metrics are served from start-up on (:mod:`broker.metrics`),
and a line before that one says where (the port bound, when the listener asked for port 0)::

    partctl broker 1: metrics on http://127.0.0.1:9404/metrics

Stopping: SIGTERM asks the controller (ControlledShutdown to its endpoint) to move this
broker's leaderships away (a controlled shutdown, ``controlled.shutdown.max.retries`` attempts ``controlled.shutdown.retry.backoff.ms``
apart; partitions no other broker holds a replica of cannot move and do not hold it back), while
clients are still served; then the listeners close and the logs are closed cleanly
(checkpoints, clean-shutdown markers). A second SIGTERM, or SIGINT at any time, skips what is
left of the controlled shutdown and stops at once (still closing the logs cleanly); one more
signal after that exits on the spot.

Exit status:

==== =========================================================================================
0    stopped on SIGTERM (the controlled shutdown done, or given up after its retries: logged)
1    a configuration or start-up error (bad ``server.properties``, coordinator unreachable,
     listener address taken, log directory unusable), or a fatal error while serving: one
     ``partctl: error:`` line
2    a usage error on the command line (argparse)
130  stopped at once by SIGINT
143  stopped at once by a second SIGTERM
==== =========================================================================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TextIO

from kio.schema.errors import ErrorCode

from broker.apis import BrokerServices, default_registry
from broker.config import BrokerConfig, ConfigError, Listener, load_config
from broker.controller_channel import CONTROLLER_API_KEYS, KafkaNetwork
from broker.fetch_client import NetworkTransport, broker_fetch_transport
from broker.fetch_sessions import FetchSessionCache
from broker.garbage import GarbageCollection
from broker.groups import GroupCoordinator
from broker.logs import LineWriter, exit_now, lines_for, setup_logging
from broker.metadata_cache import MetadataCache, ObservingHandler
from broker.metrics.collector import KafkaCollector
from broker.metrics.server import MetricsServer
from broker.metrics.traffic import RequestTimes, TopicTraffic
from broker.open_files import Budget, log_open_file_limit, raise_open_file_limit
from broker.purgatory import Purgatory
from broker.security.authorizer import Authorizer
from broker.security.credentials import CredentialCache
from broker.security.sasl import listener_auth
from broker.server import KafkaServer
from broker.txns import TransactionCoordinator
from coordinator.admin import Admin, InvalidRequest
from coordinator.assignment import assign_replicas
from coordinator.codecs import BrokerInfo, TopicPartition
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient, TopicExists
from coordinator.url import redact
from elections.controller_election import NotController
from interbroker.channel import RequestHandler
from interbroker.errors import BrokerNotAvailable, StaleBrokerEpoch
from interbroker.requests import LiveBroker
from kafkaclient.security.connector import Connector
from kafkaclient.security.tls import TlsError
from node.broker_node import BrokerNode
from replication.errors import StorageError

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "SIGNAL_EXIT_BASE", "BrokerProcess",
           "registration", "run", "run_process", "setup_logging"]

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
SIGNAL_EXIT_BASE = 128
SWITCH_INTERVAL = 0.0005
"""Seconds a thread holds the interpreter before one waiting is let in (Python's default is
0.005). A broker's threads that make system calls (the event loop, the handler of the
controller's requests writing its log lines and epoch files, the fetchers) give the
interpreter up at each call and wait for it again behind the busy ones: at the default, a
broker taking leadership of 1,667 partitions spent over a second of its LeaderAndIsr waiting so,
and its event loop answered the controller late by as much. A tenth of the default shortens
each wait tenfold for a few more switches."""


def registration(config: BrokerConfig, bound_ports: dict[str, int]) -> BrokerInfo:
    """The broker's ``/brokers/ids/<id>`` node as Kafka 3.9 writes it (version 5): the
    advertised endpoints, their security protocols, the rack, no features (a ZooKeeper-mode
    broker registers none); ``host`` and ``port`` from the first PLAINTEXT endpoint, for old
    clients, or empty and -1 without one."""
    advertised = config.advertised(bound_ports)
    plaintext = next((e for e in advertised if e.security_protocol == "PLAINTEXT"), None)
    return BrokerInfo(
        id=config.broker_id,
        host=plaintext.host if plaintext is not None else "",
        port=plaintext.port if plaintext is not None else -1,
        rack=config.rack,
        endpoints=tuple(e.connection_string for e in advertised),
        security_protocol_map={e.name: e.security_protocol for e in advertised},
        features={},
    )


def _listening(listener: Listener, port: int) -> str:
    return Listener(name=listener.name, host=listener.host, port=port).connection_string


class BrokerProcess:
    """One run of a broker: :meth:`main` returns the exit status."""

    def __init__(self, config: BrokerConfig, *, err: TextIO) -> None:
        self.config = config
        self.err = err
        self.metadata = MetadataCache(config.broker_id)
        self.node: BrokerNode | None = None
        self.server: KafkaServer | None = None
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.metrics: MetricsServer | None = None
        thaw = config.gc_thaw_interval_ms
        self.garbage = GarbageCollection(thaw_interval=thaw / 1000.0 if thaw >= 0 else None)
        self._stop: asyncio.Future[int] | None = None
        self._at_once: asyncio.Event | None = None
        self._signals: list[int] = []
        self._final = False

    def _error(self, message: str) -> int:
        print(f"partctl: error: broker {self.config.broker_id}: {message}", file=self.err,
              flush=True)
        return EXIT_ERROR

    # -- signals -------------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        self._signals.append(signum)
        first = len(self._signals) == 1
        if self._final:
            exit_now(SIGNAL_EXIT_BASE + signum)  # third time: no more waiting
        name = signal.Signals(signum).name
        assert self._stop is not None and self._at_once is not None
        if first and signum == signal.SIGTERM:
            log.info("SIGTERM: shutting down (a second SIGTERM or SIGINT stops at once)")
        else:
            log.info("%s: stopping at once", name)
            self._at_once.set()
        if not self._stop.done():
            self._stop.set_result(signum)

    def _exit_status(self) -> int:
        if self._at_once is not None and self._at_once.is_set():
            later = [s for s in self._signals if s == signal.SIGINT] or self._signals[1:]
            return SIGNAL_EXIT_BASE + (later[0] if later else self._signals[0])
        return EXIT_OK

    # -- topic creation (auto.create.topics.enable) ----------------------------------------------

    def _create_topic(self, name: str, partitions: int, replication_factor: int) -> ErrorCode:
        """Create ``name`` as an admin would (runs off the loop). The Metadata answer for a topic
        just created is LEADER_NOT_AVAILABLE: its leaders are elected next; one that would take
        a broker past its open-file share (:mod:`broker.open_files`) is POLICY_VIOLATION."""
        node = self.node
        assert node is not None and node.coordinator is not None
        try:
            brokers = MetadataClient(node.coordinator).brokers()
            if replication_factor > len(brokers):
                log.info("not creating topic %s: replication factor %d larger than the %d "
                         "broker(s) registered", name, replication_factor, len(brokers))
                return ErrorCode.invalid_replication_factor
            try:
                assignment = assign_replicas({b: r.info.rack for b, r in brokers.items()},
                                             partitions, replication_factor)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
            too_many = Budget.now(self.config.broker_id, self.metadata.snapshot).admit(
                assignment)
            if too_many is not None:
                log.info("not creating topic %s: %s", name, too_many)
                return ErrorCode.policy_violation
            Admin(node.coordinator).create_topic(name, assignment=assignment)
            log.info("created topic %s (%d partitions, replication factor %d) on a client's "
                     "request", name, partitions, replication_factor)
        except TopicExists:
            pass
        except InvalidRequest as exc:
            log.info("not creating topic %s: %s", name, exc)
            return ErrorCode.invalid_request
        except (CoordinatorError, ValueError) as exc:
            log.warning("creating topic %s failed: %s", name, exc)
            return ErrorCode.unknown_server_error
        return ErrorCode.leader_not_available

    # -- controlled shutdown -----------------------------------------------------------------------

    def _still_led(self, remaining: tuple[TopicPartition, ...]) -> list[TopicPartition]:
        """The partitions the controller could still move: those with a replica on another
        broker (Kafka's controller leaves the others alone, and retrying cannot change that)."""
        node = self.node
        assert node is not None and node.replica_manager is not None
        movable = []
        for tp in remaining:
            status = node.replica_manager.status(tp)
            if status is None or any(r != self.config.broker_id for r in status.replicas):
                movable.append(tp)
        return movable

    async def _controlled_shutdown(self) -> None:
        node = self.node
        assert node is not None and node.participant is not None and self._at_once is not None
        participant = node.participant
        loop = asyncio.get_running_loop()
        timeout = self.config.request_timeout_ms / 1000
        attempts = self.config.controlled_shutdown_max_retries
        backoff = self.config.controlled_shutdown_retry_backoff_ms / 1000
        for attempt in range(1, attempts + 1):
            try:
                asking = loop.run_in_executor(None, participant.controlled_shutdown, timeout)
                interrupted = asyncio.ensure_future(self._at_once.wait())
                either: set[asyncio.Future[Any]] = {asking, interrupted}
                done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                interrupted.cancel()
                if asking not in done:
                    return
                movable = self._still_led(asking.result())
                if not movable:
                    log.info("controlled shutdown succeeded")
                    return
                log.info("controlled shutdown attempt %d/%d: %d partition(s) still led here",
                         attempt, attempts, len(movable))
            except (NotController, BrokerNotAvailable, StaleBrokerEpoch, CoordinatorError,
                    TimeoutError) as exc:
                log.info("controlled shutdown attempt %d/%d failed: %s", attempt, attempts, exc)
            if attempt < attempts:
                try:
                    await asyncio.wait_for(self._at_once.wait(), backoff)
                    return
                except TimeoutError:
                    pass
        log.warning("controlled shutdown did not complete after %d attempt(s): stopping "
                    "anyway; the leaders here go offline until the controller moves them",
                    attempts)

    # -- the run ---------------------------------------------------------------------------------

    async def _await_first_metadata(self) -> None:
        """Wait (at most ``request.timeout.ms``, or until stopped) for the controller's first
        UpdateMetadata to list this broker before clients are served.

        Until then the metadata cache knows no broker and no controller, and a client that
        connects in that window is told an empty cluster: librdkafka's admin client then waits
        for a controller it does not look up again for many seconds. Kafka's own brokers come
        up the same way (KRaft brokers wait for the metadata log to catch up); a broker that
        hears from no controller in time serves anyway, with a warning."""
        assert self._stop is not None
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        me = self.config.broker_id
        while me not in self.metadata.snapshot.brokers and not self._stop.done():
            if time.monotonic() >= deadline:
                log.warning("no metadata from a controller after %d ms: serving anyway; "
                            "clients see no brokers until the controller is heard from",
                            self.config.request_timeout_ms)
                return
            await asyncio.sleep(0.01)

    def _fetch_transport(self) -> NetworkTransport:
        """How this broker's followers reach their leaders: Kafka's Fetch to each leader's
        ``inter.broker.listener.name`` endpoint, found (on every lookup, so brokers may come,
        go and move) in the live brokers the controller's requests named: LeaderAndIsr's live
        leaders as the replica manager keeps them, then the metadata cache."""

        def from_replica_manager() -> Mapping[int, LiveBroker]:
            node = self.node
            rm = node.replica_manager if node is not None else None
            return rm.live_brokers if rm is not None else {}

        return broker_fetch_transport(
            self.config, [from_replica_manager, lambda: self.metadata.snapshot.brokers])

    async def main(self) -> int:
        try:
            return await self._main()
        finally:
            if self.metrics is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.metrics.close)
                self.metrics = None

    def _serve_metrics(self, traffic: TopicTraffic, requests: RequestTimes) -> None:
        """Bind ``metrics.listener`` (OSError when it cannot be) and serve the metrics there
        from now on: what is not there yet (the replica manager, the groups) is left out of
        a scrape until it is."""
        assert self.config.metrics_listener is not None
        host, port = self.config.metrics_listener
        loop = asyncio.get_running_loop()

        collector = KafkaCollector(
            controller=lambda: self.node.controller if self.node is not None else None,
            replica_manager=lambda: (self.node.replica_manager if self.node is not None
                                     else None),
            groups=lambda: self.groups, loop=loop, traffic=traffic, requests=requests,
            transactions=lambda: self.transactions, fetch_sessions=lambda: self.fetch_sessions,
            garbage=lambda: self.garbage if self.garbage.installed else None)
        self.metrics = MetricsServer(collector, host, port)

    async def _main(self) -> int:
        config = self.config
        limits = raise_open_file_limit()
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        self._at_once = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        registry = default_registry()
        purgatory = Purgatory(loop)
        credentials = CredentialCache()
        try:
            security = listener_auth(config.listener_security, credentials)
            connector = (Connector(config.inter_broker_security)
                         if config.inter_broker_security.protocol != "PLAINTEXT" else None)
        except TlsError as exc:
            return self._error(str(exc))
        server = self.server = KafkaServer(config.listeners, registry,
                                           max_request_bytes=config.socket_request_max_bytes,
                                           security=security,
                                           connections_max_idle_ms=config.connections_max_idle_ms)
        try:
            ports = await server.bind()
        except OSError as exc:
            return self._error(f"cannot listen on "
                               f"{', '.join(x.connection_string for x in config.listeners)}: "
                               f"{exc.strerror or exc}")
        traffic: TopicTraffic | None = None
        if config.metrics_listener is not None:
            traffic, server.request_times = TopicTraffic(), RequestTimes()
            try:
                self._serve_metrics(traffic, server.request_times)
            except OSError as exc:
                await server.close()
                host, port = config.metrics_listener
                return self._error(f"cannot listen on metrics.listener http://{host}:{port}: "
                                   f"{exc.strerror or exc}")

        def changed() -> None:
            purgatory.wake_threadsafe()
            if self.groups is not None:
                self.groups.manager.leadership_changed()
            if self.transactions is not None:
                self.transactions.manager.leadership_changed()

        def wrap(handler: RequestHandler) -> RequestHandler:
            return ObservingHandler(handler, self.metadata, changed)

        # The controller's requests and controlled shutdown over Kafka's protocol, on the
        # inter-broker listener (broker/controller_channel.py).
        network = KafkaNetwork(node_id=config.broker_id,
                               listener=config.inter_broker_listener_name,
                               request_timeout=config.request_timeout_ms / 1000,
                               connector=connector)
        transport = self._fetch_transport()
        node = self.node = BrokerNode(
            config.coordinator_url, config.broker_id, config.log_dir,
            network=network, transport=transport, rack=config.rack,
            replica_config=config.replica_config(),
            controller_config=config.controller_config(),
            connect_options=config.connect_options(),
            registration=registration(config, ports), wrap_handler=wrap)
        try:
            await loop.run_in_executor(None, node.start)
        except CoordinatorError as exc:
            await server.close()
            transport.close()
            node.shutdown()
            network.close()
            return self._error(f"coordinator {redact(config.coordinator_url)}: {exc}")
        except (StorageError, OSError) as exc:
            await server.close()
            transport.close()
            node.shutdown()
            network.close()
            return self._error(f"log directory {config.log_dir}: {exc}")
        assert node.replica_manager is not None and node.participant is not None
        assert node.coordinator is not None
        if any(a.sasl is not None for a in security.values()):
            # SCRAM users, followed from /config/users before any client is served
            credentials = CredentialCache(node.coordinator)
            for name, auth in list(security.items()):
                security[name] = dataclasses.replace(auth, credentials=credentials)
            try:
                await loop.run_in_executor(None, credentials.start)
            except CoordinatorError as exc:
                await server.close()
                transport.close()
                await loop.run_in_executor(None, node.shutdown)
                network.close()
                return self._error(f"coordinator {redact(config.coordinator_url)}: {exc}")
            server.security = security
        authorizer = None
        if config.authorizer:
            # ACLs, loaded and followed before any client is served
            authorizer = Authorizer(node.coordinator, super_users=config.super_users,
                                    allow_if_no_acls=config.allow_everyone_if_no_acl_found)
            try:
                await loop.run_in_executor(None, authorizer.start)
            except CoordinatorError as exc:
                credentials.close()
                await server.close()
                transport.close()
                await loop.run_in_executor(None, node.shutdown)
                network.close()
                return self._error(f"coordinator {redact(config.coordinator_url)}: {exc}")
        groups = self.groups = GroupCoordinator(config.broker_id, node.replica_manager,
                                                self.metadata, purgatory, loop, config.groups)
        groups.consumer.authorizing = authorizer is not None
        groups.manager.start()
        transactions = self.transactions = TransactionCoordinator(
            config.broker_id, node.replica_manager, self.metadata, purgatory, loop,
            node.producer_ids, config.transactions,
            listener=config.inter_broker_listener_name, connector=connector)
        transactions.start()
        server.services = BrokerServices(
            broker_id=config.broker_id, config=config, replica_manager=node.replica_manager,
            metadata=self.metadata, purgatory=purgatory, loop=loop,
            cluster_id=node.participant.cluster_id, create_topic=self._create_topic,
            registry=registry, admin=Admin(node.coordinator), controller=lambda: node.controller,
            producer_ids=node.producer_ids, network=network, groups=groups,
            authorizer=authorizer, traffic=traffic, transactions=transactions,
            fetch_sessions=self.fetch_sessions)
        # The controller reaches this broker over the listeners too: they serve its requests
        # (and ApiVersions) at once, everything else once its first metadata is in.
        server.gate, server.ungated = asyncio.Event(), CONTROLLER_API_KEYS
        await server.start_serving()
        await self._await_first_metadata()
        # What the broker started with (modules, its partitions' state) is frozen before the
        # clients come: the collector's full passes walk only what comes after (broker.garbage)
        self.garbage.install()
        server.gate.set()
        if not self._stop.done():
            log_open_file_limit(limits)
            if self.metrics is not None:
                print(f"partctl broker {config.broker_id}: metrics on {self.metrics.url}",
                      file=self.err, flush=True)
            serving = ", ".join(_listening(x, ports[x.name]) for x in config.listeners)
            print(f"partctl broker {config.broker_id}: serving {serving} on "
                  f"{redact(config.coordinator_url)}", file=self.err, flush=True)
        await self._stop
        if not self._at_once.is_set() and config.controlled_shutdown_enable:
            await self._controlled_shutdown()
        self._final = True
        transactions.stop()
        groups.manager.stop()
        purgatory.complete_all()
        credentials.close()
        if authorizer is not None:
            authorizer.close()
        await server.close()
        transport.close()  # fetches waiting on leaders end now, so the fetchers stop at once
        await loop.run_in_executor(None, node.shutdown)
        network.close()
        self.garbage.remove()
        log.info("stopped")
        return self._exit_status()


def run_process(config_path: str, err: TextIO | None, *, role: str,
                main: Callable[[BrokerConfig, TextIO], Coroutine[Any, Any, int]],
                controller_only: bool = False, log_format: str = "text") -> int:
    """Load ``config_path`` (one line and exit 1 if it is bad), log to ``err`` in
    ``log_format`` (the state-change log to ``partctl.state.change.log.file`` if set), then
    run ``main`` (a broker's or a controller's) until it is stopped; its exit status. An
    unexpected error is one line naming the ``role`` (the traceback goes to the debug log).

    Every line is written by one thread of the process's own (:class:`LineWriter`), in order,
    and all of it is written before this returns."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    writer = LineWriter()
    try:
        return _run_process(config_path, writer.stream(err or sys.stderr), role=role,
                            main=main, controller_only=controller_only, log_format=log_format)
    finally:
        writer.close()


def _run_process(config_path: str, raw: TextIO, *, role: str,
                 main: Callable[[BrokerConfig, TextIO], Coroutine[Any, Any, int]],
                 controller_only: bool, log_format: str) -> int:
    err = lines_for(raw, log_format, f"partctl.{role}")
    try:
        loaded = load_config(config_path, controller_only=controller_only)
    except ConfigError as exc:
        print(f"partctl: error: {exc}", file=err, flush=True)
        return EXIT_ERROR
    try:
        setup_logging(raw, log_format=log_format,
                      state_change_file=loaded.config.state_change_log_file)
    except OSError as exc:
        print(f"partctl: error: partctl.state.change.log.file: {exc.strerror or exc}: "
              f"{loaded.config.state_change_log_file}", file=err, flush=True)
        return EXIT_ERROR
    for warning in loaded.warnings:
        log.warning("%s", warning)
    try:
        return asyncio.run(main(loaded.config, err))
    except Exception as exc:  # a bug: one line for the user, the traceback in the log
        log.debug("the %s failed", role, exc_info=True)
        print(f"partctl: error: {role} {loaded.config.broker_id} failed: "
              f"{type(exc).__name__}: {exc}", file=err, flush=True)
        return EXIT_ERROR


def run(config_path: str, *, err: TextIO | None = None, log_format: str = "text") -> int:
    """Run the broker configured by ``config_path`` until it is stopped; the exit status."""
    return run_process(config_path, err, role="broker", log_format=log_format,
                       main=lambda config, out: BrokerProcess(config, err=out).main())
