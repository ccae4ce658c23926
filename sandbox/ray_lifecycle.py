"""The sandbox workers' lifecycle, as the Ray backend's dispatcher sees them:
started on every node that advertises the resource (`Workers.start`), ready
once they answer (`Workers.started`), polled for their counters, and lost
(`Workers.lose`: a `WorkerLost` warning, the actor killed) when they or
their node die; a node whose worker failed to start is tried again later.

Workers are named actors in the namespace "rewardbox", one name per node,
slot and configuration: every process of a job that scores shares the same
workers instead of starting its own.

Ray runs future callbacks on its own thread, which must not call into Ray
(ray.kill there deadlocks): `start` and `poll` hand their futures to the
caller's callbacks, and the dispatcher's thread handles them.
"""

import contextlib
import functools
import hashlib
import json
import logging
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypedDict

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.errors import ClusterUnavailable
from rewardbox.sandbox.ray_worker import NAMESPACE, WORKER_SHARE, WorkerCounters, WorkerInfo, worker_class

log = logging.getLogger(__name__)

RETRY_NODE_S = 30.0  # a node whose worker failed to start is tried again after this long


class WorkerLost(UserWarning):
    """A sandbox worker (or its node) died; its requests went to the others."""


class RayNode(TypedDict, total=False):
    """The fields of `ray.nodes()` read here."""

    NodeID: str
    Alive: bool
    Resources: dict[str, float]
    NodeManagerAddress: str


def ray_nodes() -> list[RayNode]:
    nodes: list[RayNode] = ray.nodes()  # type: ignore[no-untyped-call]  # Ray's own function carries no annotations
    return nodes


@dataclass(eq=False)
class WorkerHandle:
    """One worker as the dispatcher tracks it (under the shared lock)."""

    name: str
    node_id: str
    actor: Any  # Ray's ActorHandle of a SandboxWorker: its methods' `.remote` are dynamic
    ready: bool = False
    alive: bool = True
    capacity: int = 1  # requests in flight at most (in_flight_per_worker, or 2 per container)
    containers: int = 1
    in_flight: int = 0
    counters: WorkerCounters | None = None  # as last polled


OnInfo = Callable[[WorkerHandle, "Future[WorkerInfo]"], None]
OnCounters = Callable[[WorkerHandle, "Future[WorkerCounters]"], None]


class Workers:
    """The workers of one configuration, guarded by the dispatcher's `cond`."""

    def __init__(self, cond: threading.Condition, config: SandboxConfig, address: str | None, resource: str,
                 workers_per_node: int, in_flight_per_worker: int | None):
        self.cond = cond
        self.config = config
        self.address = address
        self.resource = resource
        self.workers_per_node = workers_per_node
        self.in_flight_per_worker = in_flight_per_worker
        self.key = config_digest(config)
        self.by_name: dict[str, WorkerHandle] = {}
        self.failed_nodes: dict[str, float] = {}  # node id -> when its worker failed to start
        self.lost = 0

    # Read under `cond`.

    def alive(self) -> list[WorkerHandle]:
        return [w for w in self.by_name.values() if w.alive]

    def ready(self) -> list[WorkerHandle]:
        return [w for w in self.by_name.values() if w.alive and w.ready]

    def any_ready(self) -> bool:
        # Not `ready()`: a worker lost after it was ready counts here, as it did before the first request.
        return any(w.ready for w in self.by_name.values())

    # Lifecycle.

    def start(self, on_info: OnInfo, retry_node_s: float = RETRY_NODE_S) -> None:
        """A worker for every free slot of every live node that advertises
        the resource, except nodes whose worker failed to start within `retry_node_s`."""
        now = time.monotonic()
        for node in ray_nodes():
            node_id = node["NodeID"]
            if not node.get("Alive") or node.get("Resources", {}).get(self.resource, 0) <= 0:
                continue
            if node_id in self.failed_nodes and now - self.failed_nodes[node_id] < retry_node_s:
                continue
            for slot in range(self.workers_per_node):
                name = f"rewardbox-{self.key}-{node_id[:16]}-{slot}"
                with self.cond:
                    current = self.by_name.get(name)
                    if current is not None and current.alive:
                        continue
                try:
                    actor = worker_class().options(
                        name=name, namespace=NAMESPACE, get_if_exists=True, max_restarts=0, num_cpus=0,
                        resources={self.resource: WORKER_SHARE}, max_concurrency=1000,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                    ).remote(self.config)
                    info: Future[WorkerInfo] = actor.info.remote().future()
                except Exception as exc:  # noqa: BLE001 - the node went away meanwhile, or the name holds a dead worker
                    log.warning("could not start a sandbox worker on node %s: %s", node_id[:12], exc)
                    self.failed_nodes[node_id] = now
                    continue
                worker = WorkerHandle(name=name, node_id=node_id, actor=actor)
                with self.cond:
                    self.by_name[name] = worker
                info.add_done_callback(functools.partial(on_info, worker))

    def started(self, worker: WorkerHandle, future: "Future[WorkerInfo]") -> None:
        """A worker answered: ready, or lost (no engine, no image, node gone)."""
        try:
            info = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker could not start: no engine, no image, node gone
            with self.cond:
                self.failed_nodes[worker.node_id] = time.monotonic()
            self.lose(worker, exc, "could not start")
            return
        with self.cond:
            worker.containers = int(info["max_containers"])
            worker.capacity = self.in_flight_per_worker or 2 * worker.containers
            worker.ready = worker.alive
            self.cond.notify_all()
        log.info("sandbox worker %s ready on %s (pid %s, %d containers)", worker.name, info["host"], info["pid"],
                 worker.containers)

    def lose(self, worker: WorkerHandle, cause: BaseException | str, what: str = "was lost") -> None:
        """Marks a worker dead (once), says so, and kills its actor."""
        with self.cond:
            if not worker.alive:
                return
            worker.alive = False
            worker.ready = False
            self.lost += 1
            left = len(self.alive())
            self.cond.notify_all()
        reason = str(cause).strip().splitlines()[0][:300] if str(cause).strip() else type(cause).__name__
        message = (f"rewardbox: sandbox worker {worker.name} on node {worker.node_id[:12]} {what} ({reason}); "
                   f"its requests in flight go to the {left} other worker(s)")
        log.warning("%s", message)
        warnings.warn(message, WorkerLost, stacklevel=2)
        with contextlib.suppress(Exception):  # already gone with its node
            ray.kill(worker.actor, no_restart=True)

    def poll(self, on_counters: OnCounters) -> None:
        """Forgets dead workers whose requests are all back, and asks the ready ones for their counters."""
        with self.cond:
            workers = self.ready()
            # A dead worker stays while its requests' news is on the way.
            self.by_name = {name: w for name, w in self.by_name.items() if w.alive or w.in_flight}
        for worker in workers:
            try:
                counters: Future[WorkerCounters] = worker.actor.stats.remote().future()
            except Exception as exc:  # noqa: BLE001 - Ray already knows the worker is gone
                self.lose(worker, exc)
                continue
            counters.add_done_callback(functools.partial(on_counters, worker))

    def polled(self, worker: WorkerHandle, future: "Future[WorkerCounters]") -> None:
        try:
            counters = future.result()
        except Exception:  # noqa: BLE001 - a dead worker shows on its next request
            return
        with self.cond:
            worker.counters = counters

    def poll_now(self, timeout_s: float) -> None:
        """Every ready worker's counters, waited for here (tests and benchmarks)."""
        with self.cond:
            workers = self.ready()
        for worker in workers:
            try:
                counters: WorkerCounters = ray.get(worker.actor.stats.remote(), timeout=timeout_s)
            except Exception:  # noqa: BLE001 - a dead worker shows on its next request
                continue
            with self.cond:
                worker.counters = counters

    def none_left(self, what: str) -> str:
        """The message of a `ClusterUnavailable`: what to start, and how."""
        return (f"{what} in the Ray cluster at {self.address}: no live node advertises the resource "
                f"{self.resource!r} with a working Docker engine and the image {self.config.image}. Start sandbox nodes "
                f"with `ray start --resources='{{\"{self.resource}\": 1}}'` (README, Scaling out on Ray).")


def connect(address: str | None) -> None:
    """Joins the cluster, unless this process is already part of one."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False,
                 configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ClusterUnavailable(f"cannot join the Ray cluster at {address}: {exc}") from exc


def config_digest(config: SandboxConfig) -> str:
    """Workers of the same configuration share a name; other configurations get other workers.
    The address is not part of it: the same workers serve callers that name their cluster differently.

    >>> config_digest(SandboxConfig(ray="auto")) == config_digest(SandboxConfig(ray="127.0.0.1:6379"))
    True
    >>> config_digest(SandboxConfig()) == config_digest(SandboxConfig(mode="cold"))
    False
    """
    plain = config.model_dump(exclude={"ray"}, exclude_none=True)
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:10]
