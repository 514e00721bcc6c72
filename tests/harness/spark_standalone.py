"""A Spark standalone cluster on loopback, from pyspark's own distribution: a master and workers.

``standalone_cluster(root, workers=2)`` starts
``<pyspark>/bin/spark-class org.apache.spark.deploy.master.Master`` and the
workers (one core each) on 127.0.0.1 with free ports, and returns once the
master's web UI (``/json/``) lists every worker ALIVE; on leaving, every
process it started is killed by process group, with the executors and Python
workers Spark started under them. Used by tests/spark/test_standalone_cluster.py
and bench/replay.py.

The cluster's processes get an environment without this interpreter's
PYTHONPATH or Spark settings: executors inherit their worker's environment,
and a test that executors need no primacy must not hand them one through it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from primacy.cli.localgroup import free_port
from tests.harness.jvm import SHORT_LIVED_JVM

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 180.0  # JVMs starting on two busy cores
# What the replay's executors need (docs/replay.md, "Run it on a cluster").
EXECUTOR_PACKAGES = ("numpy", "pyarrow", "crc32c")
# Inherited settings that would change which Python or Spark the cluster runs.
_FOREIGN = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYSPARK_", "SPARK_")


def spark_home() -> Path:
    """The Spark distribution pyspark carries (its bin/, jars/, python/lib/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def clean_environment(**settings: str) -> dict[str, str]:
    """This process's environment without Python or Spark settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN)}
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=LOOPBACK)
    env.update(settings)
    return env


def make_executor_venv(directory: Path) -> Path:
    """A virtual environment with what executors need and no primacy; returns its python.

    Made from the interpreter this one's venv was made from (the same minor
    version, which pyspark requires of driver and executors), without pip: its
    site-packages links to this interpreter's numpy, pyarrow and crc32c, each
    package with its metadata and nothing else. That is what installing the
    same versions gives, in a second instead of pip's half a minute or more.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(sys.base_prefix) / "bin" / f"python{version}"
    subprocess.run(
        [str(base), "-m", "venv", "--without-pip", str(directory)],
        check=True,
        env=clean_environment(),
    )
    site_packages = directory / "lib" / f"python{version}" / "site-packages"
    for name in EXECUTOR_PACKAGES:
        distribution = importlib.metadata.distribution(name)
        # The files' top-level names: the package, its metadata, its bundled libraries
        # ("..": its scripts in bin/, which executors do not run).
        tops = {file.parts[0] for file in distribution.files or ()} - {".."}
        for top in sorted(tops):
            (site_packages / top).symlink_to(Path(str(distribution.locate_file(top))))
    return directory / "bin" / "python"


@dataclass
class StandaloneCluster:
    """A running master and its workers; ``stop`` ends them all."""

    root: Path
    port: int
    webui_port: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def state(self) -> dict[str, Any] | None:
        """The master's own account (its web UI's JSON), or None while it does not answer."""
        url = f"http://{LOOPBACK}:{self.webui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                document: dict[str, Any] = json.load(response)
                return document
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def alive_workers(self) -> int:
        state = self.state()
        return sum(w["state"] == "ALIVE" for w in state["workers"]) if state else 0

    def completed_apps(self) -> list[dict[str, Any]]:
        state = self.state()
        return list(state["completedapps"]) if state else []

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Poll ``condition`` (the master's state); fail early if a cluster process ended."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            ended = [p for p in self.processes if p.poll() is not None]
            if ended or time.monotonic() > deadline:
                why = f"{len(ended)} cluster process(es) ended" if ended else f"{timeout_s} s"
                raise AssertionError(f"waiting for {what}: {why}\n{self.log_tails()}")
            time.sleep(0.1)

    def log_tails(self, lines: int = 15) -> str:
        tails = []
        for log in self.logs:
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            tails.append(f"--- {log.name}\n" + "\n".join(text[-lines:]))
        return "\n".join(tails)

    def start(self, name: str, *arguments: str) -> None:
        """One ``spark-class`` process in a process group of its own, logging to ``name``.log."""
        log = self.root / f"{name}.log"
        self.logs.append(log)
        env = clean_environment(
            SPARK_CONF_DIR=str(self.root / "conf"),  # empty: no site defaults
            SPARK_DAEMON_MEMORY="512m",
            SPARK_DAEMON_JAVA_OPTS=SHORT_LIVED_JVM,
        )
        with open(log, "wb") as output:
            self.processes.append(
                subprocess.Popen(
                    [str(spark_home() / "bin" / "spark-class"), *arguments],
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.root,
                    start_new_session=True,
                )
            )

    def stop(self) -> None:
        """Kill every started process's group and every process Spark started under them.

        Executors are the workers' children; each executor's Python daemon puts
        itself in a process group of its own, so descendants are collected by pid
        (psutil refuses to signal a pid reused since) before their parents die.
        """
        descendants: list[psutil.Process] = []
        for process in self.processes:
            with contextlib.suppress(psutil.Error):
                descendants += psutil.Process(process.pid).children(recursive=True)
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for descendant in descendants:
            with contextlib.suppress(psutil.Error):
                descendant.kill()
        for process in self.processes:
            process.wait(timeout=30)
        psutil.wait_procs(descendants, timeout=30)


@contextlib.contextmanager
def standalone_cluster(
    root: Path, workers: int = 2, worker_memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    """A master and ``workers`` one-core workers on loopback, ready when all are ALIVE."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "conf").mkdir(exist_ok=True)
    cluster = StandaloneCluster(root, port=free_port(LOOPBACK), webui_port=free_port(LOOPBACK))
    try:
        cluster.start(
            "master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
            "--port", str(cluster.port), "--webui-port", str(cluster.webui_port),
        )  # fmt: skip
        cluster.wait_for(
            lambda: cluster.state() is not None, "the master's web UI", START_TIMEOUT_S
        )
        for index in range(workers):
            work_dir = root / f"worker-{index}"
            work_dir.mkdir(exist_ok=True)
            cluster.start(
                f"worker-{index}", "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                "--host", LOOPBACK, "--webui-port", str(free_port(LOOPBACK)), "--cores", "1",
                "--memory", worker_memory, "--work-dir", str(work_dir),
            )  # fmt: skip
        cluster.wait_for(
            lambda: cluster.alive_workers() == workers,
            f"{workers} ALIVE workers on the master",
            START_TIMEOUT_S,
        )
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def driver_process(
    command: list[str], env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A driver (``primacy replay``, ``spark-submit``) in a process group of its own.

    Its output goes to ``log``. On leaving, the group is killed, also after a
    timeout or a failure, so nothing it started outlives the block.
    """
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def finished(
    process: subprocess.Popen[bytes], log: Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Wait for a ``driver_process``; its log is the result's stdout."""
    returncode = process.wait(timeout=timeout_s)
    return subprocess.CompletedProcess(process.args, returncode, log.read_text(errors="replace"))
