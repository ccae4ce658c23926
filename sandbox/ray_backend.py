"""The sandbox on a Ray cluster: `RaySandbox` has `Sandbox`'s interface and
runs each request on a sandbox worker, a Ray actor driving its own node's
Docker engine with the single-machine sandbox (any mode, rewardbox.sandbox.modes).

Workers go to the nodes that advertise the custom resource `rewardbox_sandbox`
(`ray start --resources='{"rewardbox_sandbox": 1}'`): the nodes with an engine
and the image. GPU nodes without one advertise nothing and get no worker. The
resource marks a node; its amount does not matter (each worker takes a sliver
of it, so any number of callers and option sets fit).

Workers are named actors in the namespace "rewardbox", one name per node, slot
and set of options: every process of a job that scores (OpenRLHF imports its
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
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rewardbox.sandbox.config import SandboxConfig, make_local_sandbox
from rewardbox.sandbox.engine import EngineProbe
from rewardbox.sandbox.errors import ClusterUnavailable, EngineUnavailable, SandboxError
from rewardbox.sandbox.models import Limits, RunRequest, RunResult
from rewardbox.sandbox.runner import DEFAULT_IMAGE, SandboxStats

log = logging.getLogger(__name__)

RESOURCE = "rewardbox_sandbox"
NAMESPACE = "rewardbox"
WORKER_SHARE = 0.001  # of RESOURCE per worker: the resource selects nodes, it does not count workers
DEFAULT_MAX_QUEUED = 10_000
DEFAULT_WAIT_FOR_WORKERS_S = 60.0
DEFAULT_MAX_ATTEMPTS = 3  # workers a request may lose before it fails (a request that kills its workers)
REFRESH_S = 10.0  # how often the dispatcher looks for new nodes and polls the workers' counters
RETRY_NODE_S = 30.0  # a node whose worker failed to start is tried again after this long


class WorkerLost(UserWarning):
    """A sandbox worker (or its node) died; its requests went to the others."""


class SandboxWorker:
    """The Ray actor on one node: the single-machine sandbox of the given
    options, driven concurrently (an async actor: each call awaits its run)."""

    def __init__(self, options: dict[str, Any]):
        options = dict(options)
        options.setdefault("max_containers", os.cpu_count() or 2)
        self.sandbox = make_local_sandbox(SandboxConfig(**options))
        self.node_id = ray.get_runtime_context().get_node_id()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.runs = 0

    async def info(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": socket.gethostname(), "pid": os.getpid(),
                "max_containers": self.sandbox.max_containers}

    async def run(self, request: RunRequest) -> RunResult | SandboxError:
        """The run's result, or the sandbox's own failure as a value (so the
        caller can tell it from the worker dying)."""
        self.in_flight += 1
        self.runs += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await asyncio.wrap_future(self.sandbox.submit(request))
        except SandboxError as exc:
            return exc
        finally:
            self.in_flight -= 1

    async def stats(self) -> dict[str, Any]:
        """Counters as this worker sees them: requests received (`runs`), at
        once now (`running`) and at most (`peak_in_flight`), and its sandbox's."""
        return {"sandbox": self.sandbox.stats().model_dump(), "runs": self.runs, "running": self.in_flight,
                "peak_in_flight": self.peak_in_flight}


@dataclass(eq=False)
class _Worker:
    name: str
    node_id: str
    actor: Any
    ready: bool = False
    alive: bool = True
    capacity: int = 1  # requests in flight at most (in_flight_per_worker, or 2 per container)
    containers: int = 1
    in_flight: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _Job:
    request: RunRequest
    future: "Future[RunResult]"
    attempts: int = 0


class RaySandbox:
    """Runs `RunRequest`s on sandbox workers across a Ray cluster.

    `address` is what `ray.init` takes ("auto": the cluster this machine or
    process belongs to); inside a Ray task or actor the existing connection
    is used. The other options are the workers' sandbox options (mode, reuse,
    limits, image, runtime, max_containers per worker, retry_s).

    Example (needs a cluster with a sandbox node, so not a doctest)::

        with RaySandbox("auto", mode="pooled") as box:
            results = box.run_many(requests)
    """

    def __init__(self, address: str | None = "auto", *, mode: str = "pooled", reuse: int | None = None,
                 limits: Limits | None = None, image: str = DEFAULT_IMAGE, runtime: str | None = None,
                 max_containers: int | None = None, retry_s: float | None = None, workers_per_node: int = 1,
                 resource: str = RESOURCE, in_flight_per_worker: int | None = None, max_queued: int = DEFAULT_MAX_QUEUED,
                 wait_for_workers_s: float = DEFAULT_WAIT_FOR_WORKERS_S, max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        if workers_per_node < 1 or max_queued < 1 or max_attempts < 1 or (in_flight_per_worker or 1) < 1:
            raise ValueError("workers_per_node, max_queued, max_attempts and in_flight_per_worker must be at least 1")
        self.address = address
        self.image = image
        self.resource = resource
        self.workers_per_node = workers_per_node
        self.in_flight_per_worker = in_flight_per_worker
        self.max_queued = max_queued
        self.wait_for_workers_s = wait_for_workers_s
        self.max_attempts = max_attempts
        options = {"mode": mode, "reuse": reuse, "limits": limits, "image": image, "runtime": runtime,
                   "max_containers": max_containers, "retry_s": retry_s}
        self.options = {key: value for key, value in options.items() if value is not None}
        self._options_key = _digest(self.options)
        _connect(address)
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        # Ray runs future callbacks on its own thread, which must not call into
        # Ray (ray.kill there deadlocks): they hand their news to the dispatcher.
        self._news: deque[tuple] = deque()
        self._sent: set[_Job] = set()  # requests on a worker, until their news is handled
        self._workers: dict[str, _Worker] = {}
        self._failed_nodes: dict[str, float] = {}  # node id -> when its worker failed to start
        self._closed = False
        self._lost = 0
        self._redispatched = 0
        self._peak_queued = 0
        self._no_workers_since: float | None = None
        self._start_workers()
        self._await_first_worker()
        self._gcs_address = ray.get_runtime_context().gcs_address
        # The thread holds the sandbox only while it works: one nobody holds any more stops.
        self._thread = threading.Thread(target=_dispatch, args=(weakref.ref(self),), name="rewardbox-ray-dispatch",
                                        daemon=True)
        self._thread.start()

    # The interface of `Sandbox`.

    @property
    def max_containers(self) -> int:
        with self._cond:
            return sum(w.containers for w in self._workers.values() if w.alive and w.ready)

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        """A future of the run's result. Blocks while `max_queued` requests
        wait for a worker."""
        job = _Job(request, Future())
        with self._cond:
            while len(self._queue) >= self.max_queued and not self._closed:
                self._cond.wait()
            if self._closed:
                raise SandboxError("the Ray sandbox is closed")
            self._queue.append(job)
            self._peak_queued = max(self._peak_queued, len(self._queue))
            self._cond.notify_all()
        return job.future

    def run(self, request: RunRequest) -> RunResult:
        return self.submit(request).result()

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        futures = [self.submit(r) for r in requests]
        return [f.result() for f in futures]

    def stats(self) -> SandboxStats:
        """The workers' counters as last polled, summed over the live ones."""
        totals: dict[str, int] = {}
        with self._cond:
            polled = [w.stats.get("sandbox", {}) for w in self._workers.values() if w.alive]
        for counters in polled:
            for key, value in counters.items():
                totals[key] = totals.get(key, 0) + value
        return SandboxStats(**totals)

    def probe(self, timeout_s: float = 2.0) -> EngineProbe:
        """Reachable while a worker is ready; every worker checked its
        engine and image when it started."""
        with self._cond:
            ready = sum(1 for w in self._workers.values() if w.alive and w.ready)
        if ready:
            return EngineProbe(reachable=True, version=f"ray {ray.__version__}, {ready} sandbox worker(s)", image_present=True)
        return EngineProbe(reachable=False, error=f"no sandbox worker is ready in the Ray cluster at {self.address}")

    def cluster_stats(self) -> dict[str, Any]:
        """What the dispatcher knows: workers, in flight, queued, losses."""
        with self._cond:
            workers = [{"name": w.name, "node_id": w.node_id, "ready": w.ready, "in_flight": w.in_flight,
                        "capacity": w.capacity, "containers": w.containers,
                        **{k: v for k, v in w.stats.items() if k != "sandbox"}}
                       for w in self._workers.values() if w.alive]
            return {"workers": workers, "queued": len(self._queue), "peak_queued": self._peak_queued,
                    "max_queued": self.max_queued, "workers_lost": self._lost, "redispatched": self._redispatched}

    def poll(self, timeout_s: float = 10.0) -> None:
        """Refresh every live worker's counters now (for tests and benchmarks)."""
        with self._cond:
            workers = [w for w in self._workers.values() if w.alive and w.ready]
        for worker in workers:
            try:
                stats = ray.get(worker.actor.stats.remote(), timeout=timeout_s)
            except Exception:  # noqa: BLE001 - a dead worker shows on its next request
                continue
            with self._cond:
                worker.stats = stats

    def __enter__(self) -> "RaySandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Takes no more requests and returns once those it has are answered
        (as `Sandbox.close` does), by a worker or, with none left, by the
        bounded wait's error. The workers stay for the other processes that
        use them; they go with the process that made them."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()

    # Workers.

    def _start_workers(self, retry_node_s: float = RETRY_NODE_S) -> None:
        """A worker for every free slot of every live node that advertises
        the resource, except nodes whose worker failed to start within `retry_node_s`."""
        now = time.monotonic()
        for node in ray.nodes():
            node_id = node["NodeID"]
            if not node.get("Alive") or node.get("Resources", {}).get(self.resource, 0) <= 0:
                continue
            if node_id in self._failed_nodes and now - self._failed_nodes[node_id] < retry_node_s:
                continue
            for slot in range(self.workers_per_node):
                name = f"rewardbox-{self._options_key}-{node_id[:16]}-{slot}"
                with self._cond:
                    current = self._workers.get(name)
                    if current is not None and current.alive:
                        continue
                try:
                    actor = _worker_class().options(
                        name=name, namespace=NAMESPACE, get_if_exists=True, max_restarts=0, num_cpus=0,
                        resources={self.resource: WORKER_SHARE}, max_concurrency=1000,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                    ).remote(self.options)
                    ready = actor.info.remote()
                except Exception as exc:  # noqa: BLE001 - the node went away meanwhile, or the name holds a dead worker
                    log.warning("could not start a sandbox worker on node %s: %s", node_id[:12], exc)
                    self._failed_nodes[node_id] = now
                    continue
                worker = _Worker(name=name, node_id=node_id, actor=actor)
                with self._cond:
                    self._workers[name] = worker
                ready.future().add_done_callback(lambda f, w=worker: self._tell("started", w, f))

    def _tell(self, *news: Any) -> None:
        with self._cond:
            self._news.append(news)
            self._cond.notify_all()

    def _started(self, worker: _Worker, future: Future) -> None:
        try:
            info = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker could not start: no engine, no image, node gone
            with self._cond:
                self._failed_nodes[worker.node_id] = time.monotonic()
            self._lose(worker, exc, "could not start")
            return
        with self._cond:
            worker.containers = int(info["max_containers"])
            worker.capacity = self.in_flight_per_worker or 2 * worker.containers
            worker.ready = worker.alive
            self._cond.notify_all()
        log.info("sandbox worker %s ready on %s (pid %s, %d containers)", worker.name, info["host"], info["pid"],
                 worker.containers)

    def _await_first_worker(self) -> None:
        deadline = time.monotonic() + self.wait_for_workers_s
        while True:
            self._handle_news()
            with self._cond:
                if any(w.ready for w in self._workers.values()):
                    return
                if not any(w.alive for w in self._workers.values()) or time.monotonic() >= deadline:
                    break
                if not self._news:
                    self._cond.wait(0.1)
        raise ClusterUnavailable(self._none_left("no sandbox worker could start"))

    def _handle_news(self) -> None:
        """Workers started or failed to, requests came back, counters arrived."""
        while True:
            with self._cond:
                if not self._news:
                    return
                kind, worker, *rest = self._news.popleft()
            if kind == "started":
                self._started(worker, *rest)
            elif kind == "finished":
                self._finished(worker, *rest)
            elif kind == "polled":
                self._polled(worker, *rest)

    def _none_left(self, what: str) -> str:
        return (f"{what} in the Ray cluster at {self.address}: no live node advertises the resource "
                f"{self.resource!r} with a working Docker engine and the image {self.image}. Start sandbox nodes with "
                f"`ray start --resources='{{\"{self.resource}\": 1}}'` (README, Scaling out on Ray).")

    def _lose(self, worker: _Worker, cause: BaseException | str, what: str = "was lost") -> None:
        with self._cond:
            if not worker.alive:
                return
            worker.alive = False
            worker.ready = False
            self._lost += 1
            left = sum(1 for w in self._workers.values() if w.alive)
            self._cond.notify_all()
        reason = str(cause).strip().splitlines()[0][:300] if str(cause).strip() else type(cause).__name__
        message = (f"rewardbox: sandbox worker {worker.name} on node {worker.node_id[:12]} {what} ({reason}); "
                   f"its requests in flight go to the {left} other worker(s)")
        log.warning("%s", message)
        warnings.warn(message, WorkerLost, stacklevel=2)
        with contextlib.suppress(Exception):  # already gone with its node
            ray.kill(worker.actor, no_restart=True)

    # Dispatching.

    def _step(self, next_refresh: float) -> float | None:
        """One step of the dispatcher: the next refresh time, or None to stop."""
        if self._cluster_gone():
            self._fail_all(ClusterUnavailable(f"this process left the Ray cluster at {self.address} (ray.shutdown)"))
            return None
        step, worker, job = self._next_step(next_refresh)
        if step == "closed":
            return None
        if step == "news":
            self._handle_news()
        elif step == "no workers":
            self._without_workers()
        elif step == "refresh":
            next_refresh = time.monotonic() + REFRESH_S
            self._refresh()
        elif step == "send":
            self._send(worker, job)
        return next_refresh

    def _cluster_gone(self) -> bool:
        # Checked before any other Ray call: after ray.shutdown() those would start a local Ray of their own.
        return not ray.is_initialized() or ray.get_runtime_context().gcs_address != self._gcs_address

    def _fail_all(self, error: SandboxError) -> None:
        with self._cond:
            self._closed = True
            waiting = [*self._queue, *self._sent]
            self._queue.clear()
            self._sent.clear()
            self._cond.notify_all()
        for job in waiting:
            _settle(job.future, exception=error)

    def _next_step(self, next_refresh: float) -> tuple[str, Any, Any]:
        """Waits for something to do: a request and a worker with room for it
        (least work per container first), no worker left, or a refresh due."""
        with self._cond:
            if self._news:
                return "news", None, None
            if self._closed and not self._queue and not self._sent:
                return "closed", None, None
            alive = [w for w in self._workers.values() if w.alive]
            if not alive:
                return "no workers", None, None
            self._no_workers_since = None
            now = time.monotonic()
            if now >= next_refresh:
                return "refresh", None, None
            free = [w for w in alive if w.ready and w.in_flight < w.capacity]
            if self._queue and free:
                job = self._queue.popleft()
                worker = min(free, key=lambda w: (w.in_flight / w.containers, w.in_flight))
                worker.in_flight += 1
                job.attempts += 1
                self._sent.add(job)
                self._cond.notify_all()  # room in the queue for a blocked submit
                return "send", worker, job
            self._cond.wait(min(1.0, next_refresh - now))
            return "idle", None, None  # back to the thread's loop, which holds the sandbox only weakly

    def _send(self, worker: _Worker, job: _Job) -> None:
        try:
            ref = worker.actor.run.remote(job.request)
        except Exception as exc:  # noqa: BLE001 - the handle is unusable: the worker is gone
            self._finished(worker, job, None, exc)
            return
        ref.future().add_done_callback(lambda f: self._tell("finished", worker, job, f))

    def _finished(self, worker: _Worker, job: _Job, future: Future | None, error: BaseException | None = None) -> None:
        """A request came back from a worker: its result, our failure, or the worker's loss."""
        try:
            value = future.result() if future is not None else None
        except ray.exceptions.RayTaskError as exc:  # a bug of ours inside the worker
            value, error = None, SandboxError(f"the sandbox worker failed: {exc}")
        except Exception as exc:  # noqa: BLE001 - the worker or its node died, or its call was lost
            value, error = None, exc
        with self._cond:
            worker.in_flight -= 1
            self._sent.discard(job)
            self._cond.notify_all()
        if error is not None and not isinstance(error, SandboxError):
            self._lose(worker, error)
            self._again(job, error)
        elif isinstance(value, EngineUnavailable):  # this node's engine is gone: another node can run it
            self._lose(worker, value, "lost its Docker engine")
            self._again(job, value)
        elif error is not None:
            _settle(job.future, exception=error)
        elif isinstance(value, SandboxError):
            _settle(job.future, exception=value)
        else:
            _settle(job.future, result=value)

    def _again(self, job: _Job, cause: BaseException) -> None:
        """Back to the front of the queue, unless the request has lost too many workers."""
        if job.attempts >= self.max_attempts:
            _settle(job.future, exception=ClusterUnavailable(
                f"a request lost {job.attempts} sandbox workers in a row (last: {cause}); it is not tried again"))
            return
        with self._cond:
            self._queue.appendleft(job)
            self._redispatched += 1
            self._cond.notify_all()

    def _without_workers(self) -> None:
        """No worker is left: look for nodes; after the bounded wait, fail what waits."""
        now = time.monotonic()
        with self._cond:
            if self._no_workers_since is None:
                self._no_workers_since = now
            waited = now - self._no_workers_since
        if waited >= self.wait_for_workers_s:
            with self._cond:
                waiting = list(self._queue)
                self._queue.clear()
                self._no_workers_since = now  # requests from now on get a wait of their own
                self._cond.notify_all()
            error = ClusterUnavailable(self._none_left(f"no sandbox worker was left for {waited:.0f} s"))
            for job in waiting:
                _settle(job.future, exception=error)
        try:
            self._start_workers(retry_node_s=2.0)
        except ray.exceptions.RayError as exc:
            log.warning("could not look for sandbox nodes: %s", exc)
        with self._cond:
            if not any(w.alive for w in self._workers.values()) and not self._news:
                self._cond.wait(1.0)

    def _refresh(self) -> None:
        """New nodes get workers; live workers report their counters."""
        try:
            self._start_workers()
        except ray.exceptions.RayError as exc:
            log.warning("could not look for sandbox nodes: %s", exc)
        with self._cond:
            workers = [w for w in self._workers.values() if w.alive and w.ready]
            # A dead worker stays while its requests' news is on the way.
            self._workers = {name: w for name, w in self._workers.items() if w.alive or w.in_flight}
        for worker in workers:
            try:
                ref = worker.actor.stats.remote()
            except Exception as exc:  # noqa: BLE001 - Ray already knows the worker is gone
                self._lose(worker, exc)
                continue
            ref.future().add_done_callback(lambda f, w=worker: self._tell("polled", w, f))

    def _polled(self, worker: _Worker, future: Future) -> None:
        try:
            stats = future.result()
        except Exception:  # noqa: BLE001 - a dead worker shows on its next request
            return
        with self._cond:
            worker.stats = stats


def _dispatch(box_ref: "weakref.ref[RaySandbox]") -> None:
    """The dispatcher's thread: steps while the sandbox is held and open."""
    box = box_ref()
    next_refresh = time.monotonic() + REFRESH_S
    while box is not None:
        try:
            step = box._step(next_refresh)
        except Exception:  # noqa: BLE001 - the dispatcher must outlive any surprise, or every request waits forever
            log.exception("the Ray sandbox's dispatcher hit an unexpected error; it goes on")
            time.sleep(0.1)
            step = next_refresh
        if step is None:
            return
        next_refresh = step
        del box
        box = box_ref()


_WORKER_CLASS: Any = None


def _worker_class() -> Any:
    global _WORKER_CLASS
    if _WORKER_CLASS is None:
        _WORKER_CLASS = ray.remote(SandboxWorker)
    return _WORKER_CLASS


def _connect(address: str | None) -> None:
    """Joins the cluster, unless this process is already part of one."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False,
                 configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ClusterUnavailable(f"cannot join the Ray cluster at {address}: {exc}") from exc


def _digest(options: dict[str, Any]) -> str:
    """Workers of the same options share a name; other options get other workers."""
    plain = {key: value.model_dump() if hasattr(value, "model_dump") else value for key, value in options.items()}
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:10]


def _settle(future: Future, result: Any = None, exception: BaseException | None = None) -> None:
    """Sets a request's future once: a request re-sent after its worker died is answered exactly once."""
    if future.done():
        return
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except Exception:  # noqa: BLE001 - set by another thread in between (InvalidStateError)
        pass
