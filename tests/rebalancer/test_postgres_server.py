"""The SQL tests' own PostgreSQL (tests/postgres_server.py): on a free loopback port with its
socket in its own directory, never the machine's server on 5432; stopped and removed at the end."""

from __future__ import annotations

import os
import socket

import pytest

from tests.postgres_server import PostgresServer
from tests.servers import start_postgres

pytestmark = pytest.mark.postgres


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_session_server_is_the_tests_own(postgres_server: PostgresServer) -> None:
    import psycopg

    assert postgres_server.port != 5432 and postgres_server.running()
    with psycopg.connect(postgres_server.conninfo()) as conn:
        data, sockets, listen, fsync = (conn.execute(f"SHOW {name}").fetchone()[0] for name in
                                        ("data_directory", "unix_socket_directories",
                                         "listen_addresses", "fsync"))
    assert data == str(postgres_server.data)
    assert sockets == str(postgres_server.socket_dir)
    assert (listen, fsync) == ("127.0.0.1", "off")
    assert os.path.commonpath([data, sockets]) == str(postgres_server.directory)


def test_stop_ends_every_process_and_removes_the_directory() -> None:
    server = start_postgres()
    with server:
        assert server.running() and _listening(server.port)
        pid, port, directory = server.pid, server.port, server.directory
        with open(f"/proc/{pid}/task/{pid}/children") as f:  # the postmaster's workers
            children = [int(c) for c in f.read().split()]
        assert children
    assert not server.running()
    for p in (pid, *children):
        assert not os.path.exists(f"/proc/{p}"), f"process {p} outlived the server"
    assert not directory.exists()
    assert not _listening(port)
    server.stop()  # a second stop does nothing more

