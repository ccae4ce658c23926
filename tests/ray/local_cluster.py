"""A Ray cluster on this machine: a head and more node processes, each a
real `ray start` advertising the sandbox resource, all on loopback. For
trying the Ray backend on one machine, for its tests and its benchmark.

Ray turns 127.0.0.1 into the machine's routable address when it can find
one, so a cluster that must stay on loopback runs in a network namespace
holding only `lo` (`scripts/loopback-only`); `start` refuses a cluster whose
nodes are on any other address when `loopback_only` is set.

Test-only code: it lives beside the Ray tier, which imports it by its file's
name (`from local_cluster import LocalCluster`), as the benchmark does
(bench/bench.py adds this folder to its path); the package does not ship it.

    with LocalCluster(nodes=2) as cluster:
        box = RaySandbox(SandboxConfig(ray=cluster.address))
        ...
        cluster.kill_node(1)   # SIGKILL every process of the second node
"""

import ctypes
import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from rewardbox.sandbox.ray_backend import NAMESPACE, RESOURCE

# Ray's worker processes take ports 10002-19999 by default; the head's port stays outside.
_WORKER_PORTS = range(10002, 20000)
_PR_SET_PDEATHSIG = 1
# Seconds until a dead node is declared dead: Ray's defaults take about half a minute.
FAST_FAILURE_DETECTION = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


class LocalCluster:
    """`nodes` node processes (the first is the head), each with `cpus` CPUs
    and `sandbox` units of the sandbox resource (0: a node without an engine,
    like a GPU node); `node_env` adds environment variables to single nodes."""

    def __init__(self, nodes: int = 2, cpus: int = 1, sandbox: float | list[float] = 1, loopback_only: bool = True,
                 env: dict[str, str] | None = None, node_env: dict[int, dict[str, str]] | None = None):
        self.amounts = sandbox if isinstance(sandbox, list) else [sandbox] * nodes
        if len(self.amounts) != nodes or nodes < 1:
            raise ValueError("one sandbox amount per node, and at least one node")
        self.cpus = cpus
        self.loopback_only = loopback_only
        # Ray 2.60 turns on token authentication for a local cluster when a token file exists
        # (~/.ray/auth_token, written by any earlier local `ray.init()` on this machine), and the
        # nodes and this driver then disagree: the loopback cluster runs without, both sides.
        os.environ["RAY_AUTH_MODE"] = "disabled"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **FAST_FAILURE_DETECTION, **(env or {})}
        self.node_env = node_env or {}  # more variables for one node (its workers inherit them)
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rbray-", dir="/tmp"))  # short: Ray's socket paths have a limit
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes] | None] = []

    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 60.0) -> None:
        """Starts every node, then joins this process to the cluster."""
        try:
            for index in range(len(self.amounts)):
                self.processes.append(self._start_node(index))
                if index == 0:
                    _wait_for_port(self.port, timeout_s)
            ray.init(address=self.address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False,
                     configure_logging=False)
            deadline = time.monotonic() + timeout_s
            while len(self.alive_nodes()) < len(self.amounts):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {len(self.alive_nodes())} of {len(self.amounts)} Ray nodes came up; "
                                       f"logs in {self.temp_dir}")
                time.sleep(0.2)
            if self.loopback_only:
                outside = [n["NodeManagerAddress"] for n in self.alive_nodes() if not _loopback(n["NodeManagerAddress"])]
                if outside:
                    raise RuntimeError(f"Ray nodes on {outside}, not loopback: run in a network namespace holding only "
                                       "`lo` (scripts/loopback-only)")
        except BaseException:
            self.stop()
            raise

    def _start_node(self, index: int) -> subprocess.Popen[bytes]:
        command = [str(Path(sys.executable).with_name("ray")), "start", "--block", "--node-ip-address=127.0.0.1",
                   f"--num-cpus={self.cpus}", f"--resources={{\"{RESOURCE}\": {self.amounts[index]}}}",
                   "--disable-usage-stats", f"--temp-dir={self.temp_dir}"]
        if index == 0:
            command += ["--head", f"--port={self.port}", "--include-dashboard=false"]
        else:
            command += [f"--address={self.address}"]
        log = open(self.temp_dir / f"node-{index}.log", "wb")  # noqa: SIM115 (the node's output for its whole life)
        # A session of its own: kill_node() kills the node's every process at once.
        # SIGTERM when this process dies: `ray start --block` then stops its node.
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**self.env, **self.node_env.get(index, {})},
                                start_new_session=True,
                                preexec_fn=_terminate_with_parent)

    def alive_nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # Ray's own function is unannotated
        return [n for n in nodes if n.get("Alive")]

    def node_id(self, index: int) -> str:
        """The Ray node id of node `index`: its raylet's, found in the node's session."""
        process = self.processes[index]
        if process is None:
            raise LookupError(f"node {index} was killed")
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or os.getsid(int(entry.name)) != process.pid:
                    continue
                arguments = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, AttributeError):
                continue
            if arguments[0].endswith(b"/raylet"):
                for argument in arguments:
                    if argument.startswith(b"--node_id="):
                        return argument.split(b"=", 1)[1].decode()
        raise LookupError(f"node {index} is not running")

    def kill_node(self, index: int) -> None:
        """SIGKILL every process of node `index`: its raylet, its workers, `ray start`."""
        process = self.processes[index]
        if process is None:
            return
        _kill_session(process.pid)
        process.wait(timeout=30)
        self.processes[index] = None

    def stop(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
        for index in reversed(range(len(self.processes))):
            self.kill_node(index)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _terminate_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _WORKER_PORTS:
            return port


def _wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the Ray head did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s")


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _kill_session(session: int) -> None:
    """Every process whose session is `session` (Ray's workers may have process groups of their own)."""
    for _ in range(3):
        found = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.getsid(int(entry.name)) == session:
                    os.kill(int(entry.name), signal.SIGKILL)
                    found = True
            except (ProcessLookupError, PermissionError):
                continue
        if not found:
            return
        time.sleep(0.1)
