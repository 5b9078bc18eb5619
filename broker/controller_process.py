"""``partctl controller start``: a controller candidate without a data plane, as a process.

A dedicated controller is a candidate like any broker's (any candidate may win the election),
without logs and without clients: it reads ``controller.properties``
(:func:`~broker.config.parse_controller_config`: ``node.id``, ``zookeeper.connect`` or
``partctl.coordinator``, ``listeners``, the controller's settings), binds its listeners,
connects to the coordinator, registers its endpoints in ``/partctl/controllers/<id>`` (partctl's
own node: a controller is no broker, so it stays out of ``/brokers/ids``; brokers read its
endpoint there to ask it for their controlled shutdown), stands for controller and, once
elected, drives the brokers over Kafka's protocol (:mod:`broker.controller_channel`). It serves
ApiVersions and ControlledShutdown only. One line on stderr says it runs::

    partctl controller 100: serving PLAINTEXT://127.0.0.1:9093 on zookeeper://127.0.0.1:2181/kafka

Brokers that should leave the role to it set ``partctl.controller.candidate=false``. With
``metrics.listener`` it serves the controller's metrics (:mod:`broker.metrics`) and says where,
in a line before that one (``partctl controller 100: metrics on http://127.0.0.1:9405/metrics``).

Exit status, as ``partctl broker start``'s: 0 stopped by SIGTERM (it resigns, deleting
``/controller`` if it held it); 1 a configuration or start-up error (bad file, coordinator
unreachable, listener address taken, the id registered as a broker or by another controller),
one ``partctl: error:`` line; 130 stopped by SIGINT; 143 a second SIGTERM while stopping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from typing import TextIO

import coordinator
from broker.apis import ControllerNodeServices, controller_registry
from broker.config import BrokerConfig
from broker.controller_channel import KafkaNetwork
from broker.logs import exit_now
from broker.metrics.collector import KafkaCollector
from broker.metrics.server import MetricsServer
from broker.process import EXIT_ERROR, EXIT_OK, SIGNAL_EXIT_BASE, registration, run_process
from broker.security.credentials import CredentialCache
from broker.security.sasl import listener_auth
from broker.server import KafkaServer
from coordinator import layout
from coordinator.base import Coordinator
from coordinator.errors import CoordinatorError, NodeExists, NoNode
from coordinator.metadata import MetadataClient
from coordinator.model import SessionState
from coordinator.url import redact
from kafkaclient.security.connector import Connector
from kafkaclient.security.tls import TlsError
from statemachines.controller import Controller

__all__ = ["ControllerProcess", "run"]

log = logging.getLogger(__name__)


class ControllerProcess:
    """One run of a controller-only candidate: :meth:`main` returns the exit status."""

    def __init__(self, config: BrokerConfig, *, err: TextIO) -> None:
        self.config = config
        self.err = err
        self.coordinator: Coordinator | None = None
        self.controller: Controller | None = None
        self._node_data = b""
        self._signals: list[int] = []
        self._stop: asyncio.Future[int] | None = None
        self.metrics: MetricsServer | None = None

    def _error(self, message: str) -> int:
        print(f"partctl: error: controller {self.config.broker_id}: {message}", file=self.err,
              flush=True)
        return EXIT_ERROR

    def _on_signal(self, signum: int) -> None:
        self._signals.append(signum)
        if len(self._signals) > 1:
            exit_now(SIGNAL_EXIT_BASE + signum)  # a second signal: no more waiting
        log.info("%s: stopping", signal.Signals(signum).name)
        assert self._stop is not None
        if not self._stop.done():
            self._stop.set_result(signum)

    def _start(self, network: KafkaNetwork, info_data: bytes) -> None:
        """Connect, register the endpoints, stand (off the loop: it blocks)."""
        config = self.config
        client = self.coordinator = coordinator.connect(config.coordinator_url,
                                                        **config.connect_options())
        metadata = MetadataClient(client)
        metadata.ensure_layout()
        me = config.broker_id
        if client.exists(layout.broker(me)) is not None:
            raise _StartError(f"node.id {me} is registered as a broker (/brokers/ids/{me}); "
                              "a controller's id must differ from every broker's")
        self._node_data = info_data
        try:
            client.create(layout.controller_node(me), info_data, ephemeral=True,
                          make_parents=True)
        except NodeExists:
            raise _StartError(f"node.id {me} is in use by another controller "
                              f"({layout.controller_node(me)})") from None
        client.add_listener(self._on_session)
        controller = self.controller = Controller(client, me, network.channel(),
                                                  config=config.controller_config())
        network.register_controller(me, controller)
        controller.start()

    def _on_session(self, state: SessionState) -> None:
        """A new session after the old one expired: register the endpoints again."""
        client = self.coordinator
        if state is not SessionState.CONNECTED or client is None or self.controller is None:
            return
        path = layout.controller_node(self.config.broker_id)
        try:
            stat = client.exists(path)
            if stat is None:
                client.create(path, self._node_data, ephemeral=True, make_parents=True)
        except CoordinatorError:
            log.exception("controller %d could not register again", self.config.broker_id)

    def _close(self, network: KafkaNetwork) -> None:
        if self.controller is not None:
            self.controller.close()
        client = self.coordinator
        if client is not None:
            client.remove_listener(self._on_session)
            try:
                client.delete(layout.controller_node(self.config.broker_id))
            except (NoNode, CoordinatorError):
                pass
            try:
                client.close()
            except CoordinatorError:
                log.debug("closing the session failed", exc_info=True)
        network.close()

    async def main(self) -> int:
        try:
            return await self._main()
        finally:
            if self.metrics is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.metrics.close)
                self.metrics = None

    async def _main(self) -> int:
        config = self.config
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        registry = controller_registry()
        self.credentials = CredentialCache()
        try:
            security = listener_auth(config.listener_security, self.credentials)
            connector = (Connector(config.inter_broker_security)
                         if config.inter_broker_security.protocol != "PLAINTEXT" else None)
        except TlsError as exc:
            return self._error(str(exc))
        server = KafkaServer(config.listeners, registry,
                             max_request_bytes=config.socket_request_max_bytes,
                             security=security,
                             connections_max_idle_ms=config.connections_max_idle_ms)
        try:
            ports = await server.bind()
        except OSError as exc:
            return self._error(f"cannot listen on "
                               f"{', '.join(x.connection_string for x in config.listeners)}: "
                               f"{exc.strerror or exc}")
        if config.metrics_listener is not None:
            host, port = config.metrics_listener
            try:
                self.metrics = MetricsServer(KafkaCollector(controller=lambda: self.controller),
                                             host, port)
            except OSError as exc:
                await server.close()
                return self._error(f"cannot listen on metrics.listener http://{host}:{port}: "
                                   f"{exc.strerror or exc}")
        network = KafkaNetwork(node_id=config.broker_id,
                               listener=config.inter_broker_listener_name,
                               request_timeout=config.request_timeout_ms / 1000,
                               connector=connector)
        info = registration(config, ports)
        try:
            await loop.run_in_executor(None, self._start, network, info.encode())
        except (CoordinatorError, _StartError) as exc:
            await server.close()
            await loop.run_in_executor(None, self._close, network)
            if isinstance(exc, _StartError):
                return self._error(str(exc))
            return self._error(f"coordinator {redact(config.coordinator_url)}: {exc}")
        if any(a.sasl is not None for a in security.values()):
            assert self.coordinator is not None
            cache = CredentialCache(self.coordinator)
            try:
                await loop.run_in_executor(None, cache.start)
            except CoordinatorError as exc:
                await server.close()
                await loop.run_in_executor(None, self._close, network)
                return self._error(f"coordinator {redact(config.coordinator_url)}: {exc}")
            self.credentials = cache
            server.security = {name: dataclasses.replace(auth, credentials=cache)
                               for name, auth in security.items()}
        server.services = ControllerNodeServices(
            broker_id=config.broker_id, loop=loop, registry=registry,
            controller=lambda: self.controller)
        await server.start_serving()
        if self.metrics is not None:
            print(f"partctl controller {config.broker_id}: metrics on {self.metrics.url}",
                  file=self.err, flush=True)
        serving = ", ".join(info.endpoints)
        print(f"partctl controller {config.broker_id}: serving {serving} on "
              f"{redact(config.coordinator_url)}", file=self.err, flush=True)
        signum = await self._stop
        self.credentials.close()
        await server.close()
        await loop.run_in_executor(None, self._close, network)
        log.info("stopped")
        return EXIT_OK if signum == signal.SIGTERM else SIGNAL_EXIT_BASE + signum


class _StartError(Exception):
    """A start-up refusal with its one line for the user."""


def run(config_path: str, *, err: TextIO | None = None, log_format: str = "text") -> int:
    """Run the controller configured by ``config_path`` until it is stopped; the status."""
    return run_process(config_path, err, role="controller", controller_only=True,
                       log_format=log_format,
                       main=lambda config, out: ControllerProcess(config, err=out).main())
