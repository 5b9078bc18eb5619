"""The HTTP endpoint a process serves its metrics on (``metrics.listener``).

A small threaded HTTP server (a thread per scrape, off the process's event loop) on the
listener's address: ``GET /metrics`` (or ``/``) answers with
:meth:`~broker.metrics.collector.KafkaCollector.exposition` in Prometheus's text format,
anything else 404. No process or platform metrics: what is served is what docs/metrics.md
lists. Port 0 binds a free port; :attr:`MetricsServer.port` says which.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

__all__ = ["CONTENT_TYPE", "MetricsServer"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus's text exposition format."""


class Exposition(Protocol):
    def exposition(self) -> bytes: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    source: Exposition


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self.send_error(404)
            return
        try:
            body = self.server.source.exposition()
        except Exception:  # a bug: the scrape fails, the process goes on
            log.exception("rendering the metrics failed")
            self.send_error(500)
            return
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Scrapes are not logged (one a second per Prometheus)."""


class MetricsServer:
    """Serves ``source`` at ``http://host:port/metrics`` until :meth:`close`; an empty host
    listens on every interface."""

    def __init__(self, source: Exposition, host: str, port: int) -> None:
        """Binds at once: OSError when the address is taken or cannot be bound."""
        server_class = _V6Server if ":" in host else _Server
        self._server = server_class((host, port), _Handler)
        self._server.source = source
        self.host = host
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="partctl-metrics", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        host = self.host or "0.0.0.0"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
