"""The Ray backend's dispatcher: one thread that sends each request to the
ready worker with the least work per container, keeping at most a worker's
capacity in flight on it; the rest wait in this process, at most
`max_queued` of them, beyond which `submit` blocks (backpressure).

A worker or a whole node that dies takes no sample with it: its requests
go back to the front of the queue for the survivors and each request's
future is set exactly once (`settle`). With no worker left, new nodes are
looked for; after `wait_for_workers_s` without one, the waiting requests
fail with `ClusterUnavailable`.

Everything the Ray callbacks learn arrives as `News` (a worker started, a
request came back, counters arrived), handled on the dispatcher's thread;
each turn of the thread is one `Step`.
"""

import logging
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import ray

from rewardbox.sandbox.errors import ClusterUnavailable, EngineUnavailable, SandboxError
from rewardbox.sandbox.models import RunRequest, RunResult
from rewardbox.sandbox.ray_lifecycle import WorkerHandle, Workers
from rewardbox.sandbox.ray_worker import RunOutcome, WorkerCounters, WorkerInfo

log = logging.getLogger(__name__)

T = TypeVar("T")

REFRESH_S = 10.0  # how often the dispatcher looks for new nodes and polls the workers' counters


@dataclass(eq=False)
class Job:
    """A request waiting or in flight, and its caller's future."""

    request: RunRequest
    future: "Future[RunResult]"
    attempts: int = 0  # workers it was sent to


# The news the Ray callbacks hand to the dispatcher's thread.


@dataclass(frozen=True)
class Started:
    worker: WorkerHandle
    future: "Future[WorkerInfo]"


@dataclass(frozen=True)
class Finished:
    worker: WorkerHandle
    job: Job
    outcome: "Future[RunOutcome] | BaseException"  # its answer, or why it could not be sent


@dataclass(frozen=True)
class Polled:
    worker: WorkerHandle
    future: "Future[WorkerCounters]"


News = Started | Finished | Polled


class Step(Enum):
    """What one turn of the dispatcher's thread does (besides `Send`)."""

    NEWS = "news"  # handle what the callbacks reported
    CLOSED = "closed"  # closed with nothing waiting or in flight: the thread ends
    NO_WORKERS = "no workers"  # look for nodes; fail what waits after the bounded wait
    REFRESH = "refresh"  # new nodes get workers, live workers report their counters
    IDLE = "idle"  # waited for a change: back to the thread's loop


@dataclass(frozen=True)
class Send:
    """A step: this request to this worker (both already counted as sent)."""

    worker: WorkerHandle
    job: Job


class Dispatcher:
    """The queue, the requests in flight and the dispatching thread's steps,
    over `workers` (which share its lock)."""

    def __init__(self, workers: Workers, max_queued: int, wait_for_workers_s: float, max_attempts: int):
        self.workers = workers
        self.cond = workers.cond
        self.max_queued = max_queued
        self.wait_for_workers_s = wait_for_workers_s
        self.max_attempts = max_attempts
        self.queue: deque[Job] = deque()
        self.news: deque[News] = deque()
        self.sent: set[Job] = set()  # requests on a worker, until their news is handled
        self.closed = False
        self.redispatched = 0
        self.peak_queued = 0
        self._no_workers_since: float | None = None
        self._gcs_address: str | None = None

    # Callers' side.

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        job = Job(request, Future())
        with self.cond:
            while len(self.queue) >= self.max_queued and not self.closed:
                self.cond.wait()
            if self.closed:
                raise SandboxError("the Ray sandbox is closed")
            self.queue.append(job)
            self.peak_queued = max(self.peak_queued, len(self.queue))
            self.cond.notify_all()
        return job.future

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def start(self) -> threading.Thread:
        """Workers on every sandbox node, the first one awaited, then the thread."""
        self.workers.start(self._on_info)
        self._await_first_worker()
        self._gcs_address = ray.get_runtime_context().gcs_address
        # The thread holds the dispatcher only while it works: one nobody holds any more stops.
        thread = threading.Thread(target=run_dispatcher, args=(weakref.ref(self),), name="rewardbox-ray-dispatch",
                                  daemon=True)
        thread.start()
        return thread

    # What the Ray callbacks (on Ray's thread) report.

    def _tell(self, news: News) -> None:
        with self.cond:
            self.news.append(news)
            self.cond.notify_all()

    def _on_info(self, worker: WorkerHandle, future: "Future[WorkerInfo]") -> None:
        self._tell(Started(worker, future))

    def _on_counters(self, worker: WorkerHandle, future: "Future[WorkerCounters]") -> None:
        self._tell(Polled(worker, future))

    def _await_first_worker(self) -> None:
        deadline = time.monotonic() + self.wait_for_workers_s
        while True:
            self._handle_news()
            with self.cond:
                if self.workers.any_ready():
                    return
                if not self.workers.alive() or time.monotonic() >= deadline:
                    break
                if not self.news:
                    self.cond.wait(0.1)
        raise ClusterUnavailable(self.workers.none_left("no sandbox worker could start"))

    def _handle_news(self) -> None:
        """Workers started or failed to, requests came back, counters arrived."""
        while True:
            with self.cond:
                if not self.news:
                    return
                news = self.news.popleft()
            if isinstance(news, Started):
                self.workers.started(news.worker, news.future)
            elif isinstance(news, Finished):
                self._finished(news)
            else:
                self.workers.polled(news.worker, news.future)

    # The thread's steps.

    def step(self, next_refresh: float) -> float | None:
        """One step of the dispatcher: the next refresh time, or None to stop."""
        if self._cluster_gone():
            address = self.workers.address
            self._fail_all(ClusterUnavailable(f"this process left the Ray cluster at {address} (ray.shutdown)"))
            return None
        step = self._next_step(next_refresh)
        if step is Step.CLOSED:
            return None
        if step is Step.NEWS:
            self._handle_news()
        elif step is Step.NO_WORKERS:
            self._without_workers()
        elif step is Step.REFRESH:
            next_refresh = time.monotonic() + REFRESH_S
            self._refresh()
        elif isinstance(step, Send):
            self._send(step)
        return next_refresh

    def _cluster_gone(self) -> bool:
        # Checked before any other Ray call: after ray.shutdown() those would start a local Ray of their own.
        return not ray.is_initialized() or ray.get_runtime_context().gcs_address != self._gcs_address

    def _fail_all(self, error: SandboxError) -> None:
        with self.cond:
            self.closed = True
            waiting = [*self.queue, *self.sent]
            self.queue.clear()
            self.sent.clear()
            self.cond.notify_all()
        for job in waiting:
            settle(job.future, error)

    def _next_step(self, next_refresh: float) -> Step | Send:
        """Waits for something to do: a request and a worker with room for it
        (least work per container first), no worker left, or a refresh due."""
        with self.cond:
            if self.news:
                return Step.NEWS
            if self.closed and not self.queue and not self.sent:
                return Step.CLOSED
            alive = self.workers.alive()
            if not alive:
                return Step.NO_WORKERS
            self._no_workers_since = None
            now = time.monotonic()
            if now >= next_refresh:
                return Step.REFRESH
            free = [w for w in alive if w.ready and w.in_flight < w.capacity]
            if self.queue and free:
                job = self.queue.popleft()
                worker = min(free, key=lambda w: (w.in_flight / w.containers, w.in_flight))
                worker.in_flight += 1
                job.attempts += 1
                self.sent.add(job)
                self.cond.notify_all()  # room in the queue for a blocked submit
                return Send(worker, job)
            self.cond.wait(min(1.0, next_refresh - now))
            return Step.IDLE  # back to the thread's loop, which holds the dispatcher only weakly

    def _send(self, send: Send) -> None:
        worker, job = send.worker, send.job
        try:
            outcome: Future[RunOutcome] = worker.actor.run.remote(job.request).future()
        except Exception as exc:  # noqa: BLE001 - the handle is unusable: the worker is gone
            self._finished(Finished(worker, job, exc))
            return
        outcome.add_done_callback(lambda f: self._tell(Finished(worker, job, f)))

    def _finished(self, news: Finished) -> None:
        """A request came back from a worker: its result, our failure, or the worker's loss."""
        worker, job = news.worker, news.job
        failure: BaseException | None = None  # raised, never a value the worker returned
        value: RunOutcome | None = None
        if isinstance(news.outcome, BaseException):
            failure = news.outcome
        else:
            try:
                value = news.outcome.result()
            except ray.exceptions.RayTaskError as exc:  # a bug of ours inside the worker
                failure = SandboxError(f"the sandbox worker failed: {exc}")
            except Exception as exc:  # noqa: BLE001 - the worker or its node died, or its call was lost
                failure = exc
        with self.cond:
            worker.in_flight -= 1
            self.sent.discard(job)
            self.cond.notify_all()
        if failure is not None and not isinstance(failure, SandboxError):
            self.workers.lose(worker, failure)
            self._again(job, failure)
        elif isinstance(value, EngineUnavailable):  # this node's engine is gone: another node can run it
            self.workers.lose(worker, value, "lost its Docker engine")
            self._again(job, value)
        elif failure is not None:
            settle(job.future, failure)
        elif value is None:  # a worker answers a result or its sandbox's error, never nothing
            settle(job.future, SandboxError("the sandbox worker answered nothing"))
        else:
            settle(job.future, value)

    def _again(self, job: Job, cause: BaseException) -> None:
        """Back to the front of the queue, unless the request has lost too many workers."""
        if job.attempts >= self.max_attempts:
            settle(job.future, ClusterUnavailable(
                f"a request lost {job.attempts} sandbox workers in a row (last: {cause}); it is not tried again"))
            return
        with self.cond:
            self.queue.appendleft(job)
            self.redispatched += 1
            self.cond.notify_all()

    def _without_workers(self) -> None:
        """No worker is left: look for nodes; after the bounded wait, fail what waits."""
        now = time.monotonic()
        with self.cond:
            if self._no_workers_since is None:
                self._no_workers_since = now
            waited = now - self._no_workers_since
        if waited >= self.wait_for_workers_s:
            with self.cond:
                waiting = list(self.queue)
                self.queue.clear()
                self._no_workers_since = now  # requests from now on get a wait of their own
                self.cond.notify_all()
            error = ClusterUnavailable(self.workers.none_left(f"no sandbox worker was left for {waited:.0f} s"))
            for job in waiting:
                settle(job.future, error)
        try:
            self.workers.start(self._on_info, retry_node_s=2.0)
        except ray.exceptions.RayError as exc:
            log.warning("could not look for sandbox nodes: %s", exc)
        with self.cond:
            if not self.workers.alive() and not self.news:
                self.cond.wait(1.0)

    def _refresh(self) -> None:
        """New nodes get workers; live workers report their counters."""
        try:
            self.workers.start(self._on_info)
        except ray.exceptions.RayError as exc:
            log.warning("could not look for sandbox nodes: %s", exc)
        self.workers.poll(self._on_counters)


def run_dispatcher(dispatcher_ref: "weakref.ref[Dispatcher]") -> None:
    """The dispatcher's thread: steps while the dispatcher is held and open."""
    dispatcher = dispatcher_ref()
    next_refresh = time.monotonic() + REFRESH_S
    while dispatcher is not None:
        try:
            step = dispatcher.step(next_refresh)
        except Exception:  # noqa: BLE001 - the dispatcher must outlive any surprise, or every request waits forever
            log.exception("the Ray sandbox's dispatcher hit an unexpected error; it goes on")
            time.sleep(0.1)
            step = next_refresh
        if step is None:
            return
        next_refresh = step
        del dispatcher
        dispatcher = dispatcher_ref()


def settle(future: "Future[T]", outcome: "T | BaseException") -> None:
    """Sets a request's future once: a request re-sent after its worker died is answered exactly once."""
    if future.done():
        return
    try:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except Exception:  # noqa: BLE001 - set by another thread in between (InvalidStateError)
        pass
