"""The sandbox worker of the Ray backend: the actor that runs on one node
and drives that node's Docker engine with the single-machine sandbox of its
configuration (rewardbox.sandbox.config), concurrently (an async actor: each
call awaits its run). What it answers is typed here: its `WorkerInfo` when
it starts, each run's `RunOutcome`, its `WorkerCounters`.
"""

import asyncio
import functools
import os
import socket
from typing import Any, TypedDict

import ray

from rewardbox.sandbox.config import SandboxConfig, make_local_sandbox
from rewardbox.sandbox.errors import SandboxError
from rewardbox.sandbox.models import RunRequest, RunResult

RESOURCE = "rewardbox_sandbox"
NAMESPACE = "rewardbox"
WORKER_SHARE = 0.001  # of RESOURCE per worker: the resource selects nodes, it does not count workers

# The run's result, or the sandbox's own failure as a value (so the caller can tell it from the worker dying).
RunOutcome = RunResult | SandboxError


class WorkerInfo(TypedDict):
    """What a worker answers once its sandbox is made (its engine and image checked)."""

    node_id: str
    host: str
    pid: int
    max_containers: int


class WorkerCounters(TypedDict):
    """Requests received (`runs`), at once now (`running`) and at most
    (`peak_in_flight`), and the worker's sandbox's own (`SandboxStats` as a dict)."""

    sandbox: dict[str, int]
    runs: int
    running: int
    peak_in_flight: int


class SandboxWorker:
    """The Ray actor on one node: the single-machine sandbox of `config`,
    with as many containers as the node has CPUs unless the config says."""

    def __init__(self, config: SandboxConfig):
        if config.max_containers is None:
            config = config.model_copy(update={"max_containers": os.cpu_count() or 2})
        self.sandbox = make_local_sandbox(config)
        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.runs = 0

    async def info(self) -> WorkerInfo:
        return {"node_id": self.node_id, "host": socket.gethostname(), "pid": os.getpid(),
                "max_containers": self.sandbox.max_containers}

    async def run(self, request: RunRequest) -> RunOutcome:
        self.in_flight += 1
        self.runs += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await asyncio.wrap_future(self.sandbox.submit(request))
        except SandboxError as exc:
            return exc
        finally:
            self.in_flight -= 1

    async def stats(self) -> WorkerCounters:
        return {"sandbox": self.sandbox.stats().model_dump(), "runs": self.runs, "running": self.in_flight,
                "peak_in_flight": self.peak_in_flight}


@functools.cache
def worker_class() -> Any:  # Ray's ActorClass: its `.options(...).remote(...)` are dynamic
    """The actor class, made once and only when a worker is started (Ray's decorator needs Ray imported)."""
    return ray.remote(SandboxWorker)
