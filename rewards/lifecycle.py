"""Stopping at once: Ctrl-C on `rewardbox score`, SIGTERM or SIGINT on `rewardbox serve`
(whose server is `rewards/server/stopping.py`).

`Sandbox.close()` waits for every run submitted, queued ones included, each
up to its deadline. A stop cannot wait that long (Docker and Kubernetes kill
after 10 and 30 s), so `StoppableSandbox.stop()` answers every unfinished run
with `Stopped` first, then removes the containers under them and closes.
"""

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

from rewardbox.sandbox import ContainerLost, LazySandbox, RunRequest, RunResult, SandboxBackend, SandboxError
from rewardbox.sandbox.engine import AttachChannel, ContainerState, DockerEngine
from rewardbox.sandbox.modes import make_sandbox
from rewardbox.sandbox.runner import DEFAULT_MAX_CONTAINERS

log = logging.getLogger(__name__)

WAIT_SLICE_S = 1.0  # a stop ends a wait on a container within this long


class Stopped(SandboxError):
    """The sandbox was stopped before this run finished."""


class StoppableEngine(DockerEngine):
    """A `DockerEngine` that knows the containers it made, so that `stop()`
    can remove them all and refuse to make, attach, start or wait on any
    after: a run whose container is removed under it then fails with
    `Stopped` instead of being repeated in a new container."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._made: set[str] = set()
        self._made_lock = threading.Lock()
        self._stopped = False
        super().__init__(*args, **kwargs)

    def _refuse_if_stopped(self) -> None:
        if self._stopped:
            raise Stopped("the sandbox is stopping")

    def create(self, *args: Any, **kwargs: Any) -> str:
        self._refuse_if_stopped()
        container_id = super().create(*args, **kwargs)
        with self._made_lock:
            self._made.add(container_id)
        # A create that was under way when stop() looked: its caller's next
        # call is refused, and the caller removes it.
        return container_id

    def attach(self, container_id: str, stderr_tail: int | None = None) -> AttachChannel:
        self._refuse_if_stopped()
        return super().attach(container_id, stderr_tail)

    def start(self, container_id: str) -> None:
        self._refuse_if_stopped()
        super().start(container_id)

    def wait(self, container_id: str, timeout_s: float) -> tuple[ContainerState, bool]:
        self._refuse_if_stopped()
        return super().wait(container_id, timeout_s)

    def _waited(self, container_id: str, timeout_s: float, condition: str = "not-running") -> bool:
        # In slices, each after a look at the stop: `wait` and `ended` wait up to 30 s for a container
        # (a removal the engine has not reported, a container it is not asked to remove), and a stop
        # must end the run's thread under them at once, not when that wait runs out.
        deadline = time.monotonic() + timeout_s
        while True:
            self._refuse_if_stopped()
            remaining = deadline - time.monotonic()
            if super()._waited(container_id, max(min(remaining, WAIT_SLICE_S), 0.001), condition):
                return True
            if remaining <= WAIT_SLICE_S:
                return False

    def remove(self, container_id: str) -> None:
        super().remove(container_id)
        with self._made_lock:
            self._made.discard(container_id)

    def stop(self) -> None:
        """Refuses new containers and removes every one made (running, warm
        or starting), several at once. Idempotent."""
        self._stopped = True
        with self._made_lock:
            made = list(self._made)
        if not made:
            return
        with ThreadPoolExecutor(min(len(made), 8), thread_name_prefix="rewardbox-stop") as removing:
            for result in [removing.submit(self.remove, cid) for cid in made]:
                if (exc := result.exception()) is not None:
                    log.warning("could not remove a sandbox container while stopping: %s", exc)

    def close(self) -> None:
        if self._stopped:
            self.stop()  # what was being made while the first sweep ran
        super().close()


class StoppableSandbox(LazySandbox):
    """A `LazySandbox` (made on first use, of this configuration) that `stop()`
    ends at once. Its runs' futures are its own, so that stopping can answer
    them without waiting for the threads under them."""

    def __init__(self, **options: Any):
        super().__init__(**options)
        self._engine: StoppableEngine | None = None
        self._runs: dict[Future[RunResult], Future[RunResult]] = {}  # ours -> the sandbox's, until answered
        self._runs_lock = threading.Lock()
        self._stopped = False

    @property
    def max_containers(self) -> int:
        sandbox = self._sandbox  # on Ray, the cluster's count once known
        return sandbox.max_containers if sandbox is not None else super().max_containers

    @property
    def sandbox(self) -> SandboxBackend:
        with self._lock:
            if self._stopped:
                raise Stopped("the sandbox is stopping")
            if self._sandbox is None:
                self._sandbox = self._make()
            return self._sandbox

    def _make(self) -> SandboxBackend:
        config = self.config
        if config.ray or self.engine is not None:
            # Its containers are the cluster's, or the given engine's: closing is all we can do.
            return make_sandbox(config, engine=self.engine)
        retry_s = 60.0 if config.retry_s is None else config.retry_s
        pool_size = (config.max_containers or DEFAULT_MAX_CONTAINERS) * 2 + 4  # as Sandbox sizes its own
        # Kept before the sandbox is made: a pool starts containers while it is made.
        self._engine = engine = StoppableEngine(retry_s=retry_s, pool_size=pool_size)
        try:
            return make_sandbox(config, engine=engine)
        except BaseException:  # no image, say: nothing of it may stay behind
            engine.stop()
            engine.close()
            raise

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        inner = self.sandbox.submit(request)
        outer: Future[RunResult] = Future()
        with self._runs_lock:
            if self._stopped:
                inner.cancel()
                raise Stopped("the sandbox is stopping")
            self._runs[outer] = inner
        inner.add_done_callback(lambda done: self._finished(outer, done))
        return outer

    def run(self, request: RunRequest) -> RunResult:
        return self.submit(request).result()

    def _finished(self, outer: "Future[RunResult]", inner: "Future[RunResult]") -> None:
        with self._runs_lock:
            if self._runs.pop(outer, None) is None:
                return  # stop() answered it
        if inner.cancelled():
            _fail(outer, Stopped("the sandbox was stopped before this run started"))
        elif (exc := inner.exception()) is not None:
            _fail(outer, exc)
        else:
            with suppress(InvalidStateError):  # the caller cancelled it
                outer.set_result(inner.result())

    def stop(self) -> None:
        """Answers every unfinished run with `Stopped`, refuses new ones,
        removes every container, then closes. Idempotent, thread-safe; returns
        once the sandbox's threads have ended (about a second)."""
        with self._runs_lock:
            self._stopped = True
            runs, self._runs = self._runs, {}
        for outer, inner in runs.items():
            inner.cancel()  # a queued run never starts
            _fail(outer, Stopped("the sandbox was stopped before this run finished"))
        with _quiet_while_stopping():
            if self._engine is not None:
                self._engine.stop()
            self.close()


@contextmanager
def _quiet_while_stopping() -> Iterator[None]:
    """Drops the sandbox's warnings about runs and starts that the stop itself
    ends (their containers removed, new ones refused): expected, not news."""

    def not_of_the_stop(record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, (Stopped, ContainerLost, OSError)) for arg in args)

    loggers = [logging.getLogger(name) for name in ("rewardbox.sandbox.pool", "rewardbox.sandbox.runner")]
    for logger in loggers:
        logger.addFilter(not_of_the_stop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(not_of_the_stop)


def _fail(future: Future[RunResult], exc: BaseException) -> None:
    with suppress(InvalidStateError):  # the caller cancelled it
        future.set_exception(exc)
