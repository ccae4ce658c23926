"""The sandbox on a Ray cluster: `RaySandbox` has `Sandbox`'s interface and
runs each request on a sandbox worker, a Ray actor driving its own node's
Docker engine with the single-machine sandbox (any mode, rewardbox.sandbox.modes).

Workers go to the nodes that advertise the custom resource `rewardbox_sandbox`
(`ray start --resources='{"rewardbox_sandbox": 1}'`): the nodes with an engine
and the image. GPU nodes without one advertise nothing and get no worker. The
resource marks a node; its amount does not matter (each worker takes a sliver
of it, so any number of callers and option sets fit).

Workers are named actors in the namespace "rewardbox", one name per node, slot
and configuration: every process of a job that scores (OpenRLHF imports its
reward file in several actors) shares the same workers instead of starting
its own. A worker lives as long as the process that made it; when it goes,
the others start it again.

The dispatcher sends each request to the ready worker with the least work
per container, keeping at most `in_flight_per_worker` requests on each; the
rest wait in this process, at most `max_queued` of them, beyond which
`submit` blocks (backpressure). A worker or a whole node that dies takes no
sample with it: its requests go back to the front of the queue for the
survivors, a `WorkerLost` warning says so, and each request's future is set
exactly once. With no worker left, new nodes are looked for; after
`wait_for_workers_s` without one, the waiting requests fail with
`ClusterUnavailable`, a `SandboxError` (a failure of ours, never a reward).

The jobs live in modules of their own: the worker (the actor on a node,
`ray_worker.py`), the workers' lifecycle (start, health, loss:
`ray_lifecycle.py`) and the dispatcher (queue and thread: `ray_dispatch.py`);
this module puts them together behind the `SandboxBackend` interface.
"""

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import TypedDict

import ray

from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.engine import EngineProbe
from rewardbox.sandbox.models import RunRequest, RunResult
from rewardbox.sandbox.ray_dispatch import REFRESH_S, Dispatcher
from rewardbox.sandbox.ray_lifecycle import RETRY_NODE_S, WorkerHandle, WorkerLost, Workers, connect
from rewardbox.sandbox.ray_worker import NAMESPACE, RESOURCE, WORKER_SHARE, SandboxWorker, WorkerCounters, WorkerInfo
from rewardbox.sandbox.runner import SandboxStats

__all__ = ["DEFAULT_MAX_ATTEMPTS", "DEFAULT_MAX_QUEUED", "DEFAULT_WAIT_FOR_WORKERS_S", "NAMESPACE", "REFRESH_S",
           "RESOURCE", "RETRY_NODE_S", "WORKER_SHARE", "ClusterStats", "RaySandbox", "SandboxWorker", "WorkerCounters",
           "WorkerInfo", "WorkerLost", "WorkerRow"]

DEFAULT_MAX_QUEUED = 10_000
DEFAULT_WAIT_FOR_WORKERS_S = 60.0
DEFAULT_MAX_ATTEMPTS = 3  # workers a request may lose before it fails (a request that kills its workers)


class _WorkerRowBase(TypedDict):
    name: str
    node_id: str
    ready: bool
    in_flight: int  # as the dispatcher counts: sent and not yet back
    capacity: int
    containers: int


class WorkerRow(_WorkerRowBase, total=False):
    """One live worker in `cluster_stats`; the worker's own counters once polled."""

    runs: int
    running: int
    peak_in_flight: int


class ClusterStats(TypedDict):
    workers: list[WorkerRow]
    queued: int
    peak_queued: int
    max_queued: int
    workers_lost: int
    redispatched: int


def _row(worker: WorkerHandle) -> WorkerRow:
    row: WorkerRow = {"name": worker.name, "node_id": worker.node_id, "ready": worker.ready,
                      "in_flight": worker.in_flight, "capacity": worker.capacity, "containers": worker.containers}
    if worker.counters is not None:
        row["runs"] = worker.counters["runs"]
        row["running"] = worker.counters["running"]
        row["peak_in_flight"] = worker.counters["peak_in_flight"]
    return row


class RaySandbox:
    """Runs `RunRequest`s on sandbox workers across a Ray cluster.

    `config.ray` is the address `ray.init` takes ("auto", also when unset:
    the cluster this machine or process belongs to); inside a Ray task or
    actor the existing connection is used. The rest of `config` is each
    worker's sandbox (mode, reuse, limits, image, runtime, retry_s, and
    max_containers per worker: unset, its node's CPU count). The keywords
    are the dispatcher's: workers per node, the resource that marks sandbox
    nodes, requests in flight per worker (unset: two per container), the
    bound on those waiting, how long to wait for a worker, and how many
    workers a request may lose.

    Example (needs a cluster with a sandbox node, so not a doctest)::

        with RaySandbox(SandboxConfig(ray="auto", mode="pooled")) as box:
            results = box.run_many(requests)
    """

    def __init__(self, config: SandboxConfig | None = None, *, workers_per_node: int = 1, resource: str = RESOURCE,
                 in_flight_per_worker: int | None = None, max_queued: int = DEFAULT_MAX_QUEUED,
                 wait_for_workers_s: float = DEFAULT_WAIT_FOR_WORKERS_S, max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        if workers_per_node < 1 or max_queued < 1 or max_attempts < 1 or (in_flight_per_worker or 1) < 1:
            raise ValueError("workers_per_node, max_queued, max_attempts and in_flight_per_worker must be at least 1")
        self.config = config = config or SandboxConfig()
        self.address = address = config.ray or "auto"
        image = config.image  # what `probe` vouches for: every worker checked it when it started
        self.image = image
        self.resource = resource
        self.max_queued = max_queued
        connect(address)
        self._workers = Workers(threading.Condition(), config, address, resource, workers_per_node,
                                in_flight_per_worker)
        self._dispatcher = Dispatcher(self._workers, max_queued, wait_for_workers_s, max_attempts)
        self._cond = self._workers.cond
        self._thread = self._dispatcher.start()

    # The interface of `SandboxBackend`.

    @property
    def max_containers(self) -> int:
        with self._cond:
            return sum(w.containers for w in self._workers.ready())

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        """A future of the run's result. Blocks while `max_queued` requests
        wait for a worker."""
        return self._dispatcher.submit(request)

    def run(self, request: RunRequest) -> RunResult:
        return self.submit(request).result()

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        futures = [self.submit(r) for r in requests]
        return [f.result() for f in futures]

    def stats(self) -> SandboxStats:
        """The workers' counters as last polled, summed over the live ones."""
        totals: dict[str, int] = {}
        with self._cond:
            polled = [w.counters["sandbox"] for w in self._workers.alive() if w.counters is not None]
        for counters in polled:
            for key, value in counters.items():
                totals[key] = totals.get(key, 0) + value
        return SandboxStats(**totals)

    def probe(self, timeout_s: float = 2.0) -> EngineProbe:
        """Reachable while a worker is ready; every worker checked its
        engine and image when it started."""
        with self._cond:
            ready = len(self._workers.ready())
        if ready:
            return EngineProbe(reachable=True, version=f"ray {ray.__version__}, {ready} sandbox worker(s)", image_present=True)
        return EngineProbe(reachable=False, error=f"no sandbox worker is ready in the Ray cluster at {self.address}")

    def cluster_stats(self) -> "ClusterStats":
        """What the dispatcher knows: workers, in flight, queued, losses."""
        with self._cond:
            workers = [_row(w) for w in self._workers.alive()]
            return {"workers": workers, "queued": len(self._dispatcher.queue), "peak_queued": self._dispatcher.peak_queued,
                    "max_queued": self.max_queued, "workers_lost": self._workers.lost,
                    "redispatched": self._dispatcher.redispatched}

    def poll(self, timeout_s: float = 10.0) -> None:
        """Refresh every live worker's counters now (for tests and benchmarks)."""
        self._workers.poll_now(timeout_s)

    def __enter__(self) -> "RaySandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Takes no more requests and returns once those it has are answered
        (as `Sandbox.close` does), by a worker or, with none left, by the
        bounded wait's error. The workers stay for the other processes that
        use them; they go with the process that made them."""
        self._dispatcher.close()
        self._thread.join()
