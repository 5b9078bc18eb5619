"""A throw-away PostgreSQL server for the SQL tests, started from Debian's packages.

The product never starts a PostgreSQL (a team's store is a server it already runs), so this
launcher lives with the tests rather than in :mod:`coordinator.servers`. :func:`start_postgres`
makes a temporary directory, runs ``initdb`` in it (trust authentication, superuser
``postgres``, no fsync) and starts ``postgres`` on a free port of 127.0.0.1 only, with its unix
socket in that directory (never /var/run), then polls a real connection until the server
answers. :meth:`PostgresServer.stop` stops it with ``pg_ctl stop -m fast``, kills what is left
of its process group after a timeout, and removes the directory. Nothing depends on a server the
machine may run on 5432.

The binaries come from ``/usr/lib/postgresql/<version>/bin`` (the newest version that has
``initdb``, ``pg_ctl`` and ``postgres``), else from ``pg_config --bindir``. ``initdb`` and
``postgres`` refuse to run as root: as root the server runs as the ``postgres`` user that
Debian's package creates, and owns the temporary directory.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from coordinator.servers import HOST, ServerNotInstalled, ServerStartError, free_port

__all__ = ["PostgresServer", "postgres_bindir", "start_postgres"]

PROGRAMS = ("initdb", "pg_ctl", "postgres")
SUPERUSER = "postgres"
"""The superuser ``initdb`` creates (trust authentication: no password)."""


def _has_programs(bindir: Path) -> bool:
    return all(os.access(bindir / p, os.X_OK) for p in PROGRAMS)


def _version_key(bindir: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", bindir.parent.name)) or (0,)


def postgres_bindir() -> Path:
    """The directory of the newest installed ``initdb``/``pg_ctl``/``postgres``.
    Raises :class:`ServerNotInstalled` when there is none."""
    candidates = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if _has_programs(p)),
                        key=_version_key)
    if candidates:
        return candidates[-1]
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    if out and _has_programs(Path(out)):
        return Path(out)
    raise ServerNotInstalled("PostgreSQL's initdb, pg_ctl and postgres are not installed "
                             "(no /usr/lib/postgresql/*/bin; install Debian's postgresql)")


def _run_as() -> pwd.struct_passwd | None:
    """The user the server runs as: ``None`` (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise ServerNotInstalled("running as root, and there is no user 'postgres' to run "
                                 "PostgreSQL as (Debian's postgresql package creates it)") from None


@dataclass(eq=False)
class PostgresServer:
    """A running PostgreSQL and the temporary directory it owns (it has a lifetime)."""

    port: int
    process: subprocess.Popen[bytes]
    directory: Path
    bindir: Path
    user: pwd.struct_passwd | None
    host: str = HOST

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        return self.directory / "socket"

    @property
    def log_path(self) -> Path:
        return self.directory / "postgres.log"

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` as the trusted superuser."""
        return f"postgresql+psycopg://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        """The libpq connection string of ``database`` (TCP on loopback, never a socket)."""
        return (f"host={self.host} port={self.port} user={SUPERUSER} dbname={database} "
                "connect_timeout=3")

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """``pg_ctl stop -m fast``; what is left of the process group after ``timeout`` is
        killed; the directory is removed. Stopping twice does nothing more."""
        if self.process.poll() is None:
            try:
                subprocess.run([str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data),
                                "-m", "fast", "-w", "-t", str(int(timeout))],
                               **_as_user(self.user), capture_output=True, timeout=timeout + 5,
                               check=False)
            except (OSError, subprocess.SubprocessError):
                pass
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # the server runs in a session of its own, whose group is the postmaster (not
                # reaped yet, so the group id is still its) and its children
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout)
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _as_user(user: pwd.struct_passwd | None) -> dict[str, object]:
    """subprocess keywords that run a program as ``user`` (nothing when ``None``)."""
    if user is None:
        return {}
    env = {**os.environ, "HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": env}


def start_postgres(*, timeout: float = 60.0) -> PostgresServer:
    """initdb a temporary cluster and start it on a free port of 127.0.0.1; return once a
    connection succeeds. Raises :class:`ServerNotInstalled` or :class:`ServerStartError`."""
    bindir = postgres_bindir()
    user = _run_as()
    directory = Path(tempfile.mkdtemp(prefix="partctl-postgres-"))
    try:
        (directory / "socket").mkdir()
        if user is not None:
            for path in (directory, directory / "socket"):
                os.chown(path, user.pw_uid, user.pw_gid)
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(directory / "data"), "-U", SUPERUSER,
             "--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C"],
            **_as_user(user), capture_output=True, text=True, timeout=timeout, check=False)
        if init.returncode != 0:
            raise ServerStartError(f"initdb failed ({init.returncode}):\n"
                                   f"{(init.stdout + init.stderr).strip()}")
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    port = free_port()
    log = open(directory / "postgres.log", "wb")  # noqa: SIM115 (the child holds it)
    with log:
        process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(directory / "data"), "-p", str(port),
             "-c", f"listen_addresses={HOST}", "-c", f"unix_socket_directories={directory / 'socket'}",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=100"],
            **_as_user(user), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    server = PostgresServer(port=port, process=process, directory=directory, bindir=bindir,
                            user=user)
    return _wait_ready(server, timeout)


def _wait_ready(server: PostgresServer, timeout: float) -> PostgresServer:
    """Poll a real connection until it succeeds; stop the server and raise if it never does."""
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.running():
        try:
            with psycopg.connect(server.conninfo()) as conn:
                conn.execute("SELECT 1")
            return server
        except psycopg.OperationalError:
            time.sleep(0.1)
    tail = server.log_tail()
    state = "exited" if not server.running() else "did not answer"
    server.stop()
    raise ServerStartError(f"postgres on port {server.port} {state} within {timeout:.0f}s:\n{tail}")
