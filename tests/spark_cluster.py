"""A Spark standalone cluster on loopback for tests and benchmarks' checks: a master and workers
started from the installed pyspark distribution (``bin/spark-class``), each on free ports, their
logs in a directory of the caller's; stopped by PID (the process group each was started in)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.servers import free_port

__all__ = ["SparkCluster", "start_spark_cluster"]



def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class SparkCluster:
    master_url: str
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.processes):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.processes.clear()


def _env(logs: Path) -> dict[str, str]:
    home = _spark_home()
    return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(logs), "SPARK_WORKER_DIR": str(logs / "work"),
            "SPARK_DAEMON_MEMORY": "512m", "SPARK_NO_DAEMONIZE": "1"}


def _launch(logs: Path, name: str, args: list[str]) -> subprocess.Popen[bytes]:
    out = (logs / f"{name}.log").open("wb")
    try:
        return subprocess.Popen([str(_spark_home() / "bin" / "spark-class"), *args],
                                env=_env(logs), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        out.close()


def _wait_for(cluster: SparkCluster, name: str, pattern: str, timeout: float) -> None:
    log = cluster.logs / f"{name}.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if re.search(pattern, text):
            return
        if any(p.poll() is not None for p in cluster.processes):
            break
        time.sleep(0.2)
    cluster.stop()
    raise AssertionError(f"spark {name} not ready ({pattern!r}):\n"
                         f"{log.read_text(errors='replace')[-3000:] if log.exists() else ''}")


def start_spark_cluster(logs: Path, *, workers: int = 1, cores: int = 1, memory: str = "1g",
                        timeout: float = 120.0) -> SparkCluster:
    """A master on 127.0.0.1 (free ports, its UI too) and ``workers`` workers of ``cores``
    cores and ``memory`` each, registered with it before this returns."""
    logs.mkdir(parents=True, exist_ok=True)
    port, ui = free_port(), free_port()
    cluster = SparkCluster(master_url=f"spark://127.0.0.1:{port}", logs=logs)
    cluster.processes.append(_launch(logs, "master", [
        "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
        "--webui-port", str(ui)]))
    _wait_for(cluster, "master", r"I have been elected leader", timeout)
    for i in range(workers):
        cluster.processes.append(_launch(logs, f"worker-{i}", [
            "org.apache.spark.deploy.worker.Worker", cluster.master_url, "--host", "127.0.0.1",
            "--port", str(free_port()), "--webui-port", str(free_port()),
            "--cores", str(cores), "--memory", memory, "--work-dir", str(logs / f"work-{i}")]))
        _wait_for(cluster, f"worker-{i}", r"Successfully registered with master", timeout)
    return cluster
