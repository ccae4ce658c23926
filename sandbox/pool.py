"""Runs requests in pooled containers: each long-lived, hardened like a
single-use one, serving runs one at a time, from a clean slate each.

A container's PID 1 is the pool supervisor (images/python/harness/
pool_supervisor.py): it forks each run's test process from a warm process that
has pytest imported, kills every process of the run afterwards, empties the
writable dirs, and says "recycle" when anything of the run could outlive it.
The host retires a container after that, after
`reuse` runs, after `max_age_s`, or when its deadline passed. A retirement
that can be seen coming (the last runs of `reuse`, the last seconds of
`max_age_s`) has its replacement started ahead, while the old container still
serves, so that no run waits for a start; the old one goes once the new one
is warm. An unforeseen one (a "recycle", a lost container) is replaced in the
background at once.

`reuse=1` gives each run a container nothing else has used, started ahead of
demand: the single-use guarantee at a lower latency than `Sandbox`.

Pooled containers do not outlive the process that made them, however it ends
(SIGKILL included: a process pool's terminated workers, a killed Ray actor).
The supervisor exits at EOF on its stdin, which the engine closes when our
attached connection goes, and the engine removes a pooled container once it
exits. So how one ended under a run is read from the engine's events.
"""

import logging
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rewardbox.sandbox.cpu_pins import cpuset_cpus
from rewardbox.sandbox.engine import AttachChannel, DockerEngine
from rewardbox.sandbox.errors import ContainerLost, SandboxError
from rewardbox.sandbox.harness_protocol import harness_protocol
from rewardbox.sandbox.languages import LONGEST_COMPILE_S
from rewardbox.sandbox.models import Limits, RunRequest, RunResult
from rewardbox.sandbox.protocol import READY, Report, encode_request, new_nonce, parse_report
from rewardbox.sandbox.runner import (
    DEFAULT_IMAGE,
    DEFAULT_MAX_CONTAINERS,
    DEFAULT_RETRY_S,
    REPORT_MARGIN_BYTES,
    ContainerFate,
    InheritedCrash,
    Sandbox,
    SandboxStats,
)

log = logging.getLogger(__name__)

# The harness dir is the image's (rbprotocol.HARNESS_DIR), not a host copy.
POOL_COMMAND = ["python3", "-I", "-B", f"{harness_protocol().HARNESS_DIR}/pool_supervisor.py"]
# What gVisor's sandbox exits with when its sentry panics (Go's status for one):
# seen when a new process could not get a host thread ("error initializing first
# thread: resource temporarily unavailable") at a run after a fork bomb's.
GVISOR_SENTRY_PANIC = 2
DEFAULT_REUSE = 1000  # each run is checked clean; a start costs as much CPU as ~10 runs
DEFAULT_MAX_AGE_S = 600.0
READY_TIMEOUT_S = 60.0
# How far ahead of a foreseen retirement its replacement starts: a start takes
# up to a few seconds under load, in which a container may serve tens of quick
# runs. Retiring up to that many runs early costs little: a start per ~1000 runs.
SPARE_LEAD_RUNS = 100
SPARE_LEAD_S = 15.0


_LIVE_POOLS: "weakref.WeakSet[PooledSandbox]" = weakref.WeakSet()


def warm_container_ids() -> set[str]:
    """The warm containers of every pool of this process that is not closed:
    they wait for runs, they are not left behind."""
    return {cid for pool in list(_LIVE_POOLS) for cid in pool.warm_ids()}


@dataclass(eq=False)
class PoolContainer:
    """One pooled container and its open attach channel."""

    id: str
    channel: AttachChannel
    limits: Limits
    image: str
    created: float = field(default_factory=time.monotonic)
    created_at: float = field(default_factory=time.time)  # wall clock, for the engine's event log
    runs: int = 0
    retiring: bool = False  # its replacement is started: it goes once that one is warm
    cpus: tuple[int, ...] = ()  # the CPUs it is pinned to (none: not pinned); its replacement's


class PooledSandbox(Sandbox):
    """A `Sandbox` whose containers serve up to `reuse` runs each (see module doc).

    The same interface and the same verdicts as `Sandbox`; `max_containers`
    bounds the containers running runs, and as many more may be starting or
    waiting warm.
    """

    def __init__(self, image: str = DEFAULT_IMAGE, max_containers: int = DEFAULT_MAX_CONTAINERS,
                 engine: DockerEngine | None = None, runtime: str | None = None, retry_s: float = DEFAULT_RETRY_S,
                 sweep: bool = True, *, reuse: int = DEFAULT_REUSE, max_age_s: float = DEFAULT_MAX_AGE_S,
                 limits: Limits | None = None, warm: int | None = None, warm_sessions: int = 0,
                 images: Mapping[str, str] | None = None, pin_cpus: str | None = None):
        super().__init__(image, max_containers, engine, runtime, retry_s, sweep, warm_sessions, images, pin_cpus)
        if reuse < 1:
            raise ValueError("reuse must be at least 1")
        self.reuse = reuse
        # Containers kept waiting or starting. More than one per slot does not pay
        # even for single-use ones: their starts then compete with the runs for CPU.
        self.warm = warm or self.max_containers
        self.max_age_s = max_age_s
        self._idle: deque[PoolContainer] = deque()
        self._starting = 0
        self._removing = 0
        self._busy = 0
        self._closed = False
        self._changed = threading.Condition()
        self._background = ThreadPoolExecutor(self.warm, thread_name_prefix="rewardbox-pool")
        _LIVE_POOLS.add(self)
        # A pool dropped without close(), or still open when the interpreter exits,
        # removes its waiting containers all the same.
        weakref.finalize(self, _abandon, self.engine, self._idle)
        for _ in range(self.warm):  # ahead of demand
            self._replenish(limits or Limits(), self.image)

    def close(self) -> None:
        self.keep_sessions_warm(0)
        with self._changed:
            self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._background.shutdown(wait=True)
        with self._changed:
            idle = list(self._idle)
            self._idle.clear()  # in place: the finalizer holds this deque
        for container in idle:
            self._remove(container)
        self.engine.close()

    def warm_ids(self) -> list[str]:
        """The containers waiting warm for a run, by id."""
        with self._changed:
            return [container.id for container in self._idle]

    def stats(self) -> SandboxStats:
        stats = super().stats()
        with self._changed:
            busy = self._busy
        return stats.model_copy(update={"containers_running": busy,
                                        "containers_warm": max(0, stats.containers_running - busy)})

    # -- the pool ----------------------------------------------------------

    def _start(self, limits: Limits, image: str, spare_for: PoolContainer | None = None) -> PoolContainer:
        """A container of `image` whose supervisor is warm and waiting for a
        request; pinned to the CPUs of the one it replaces, if `spare_for`."""
        name = f"rewardbox-{uuid.uuid4().hex[:16]}"
        compile_s = max(limits.compile_timeout_s, LONGEST_COMPILE_S)
        lifetime = self.max_age_s + self.reuse * (limits.timeout_s + compile_s + limits.startup_grace_s)
        command = POOL_COMMAND + (["--once"] if self.reuse == 1 else [])
        cpus = self._pin(limits, spare_for.cpus if spare_for is not None else ())
        try:
            container_id = self.engine.create(image, limits, name, runtime=self.runtime, gvisor=self._gvisor,
                                              command=command, lifetime_s=lifetime, auto_remove=True,
                                              exec_work=self._runs_binaries(image), cpuset=cpuset_cpus(cpus))
        except BaseException:
            self._unpin(cpus)
            raise
        self._count(containers=1)
        channel = None
        try:
            # Only the tail of a long-lived container's stderr is ever shown.
            channel = self.engine.attach(container_id, stderr_tail=4096)
            self.engine.start(container_id)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while READY not in channel.stdout:
                if not channel.read(deadline):
                    raise ContainerLost(f"pool container {container_id[:12]} exited while starting: "
                                        f"{bytes(channel.stderr[-500:]).decode('utf-8', 'replace')}")
            del channel.stdout[:channel.stdout.index(READY) + len(READY)]
            return PoolContainer(container_id, channel, limits, image, cpus=cpus)
        except BaseException:
            if channel is not None:
                channel.close()
            self._remove_id(container_id)
            self._unpin(cpus)
            raise

    def _replenish(self, limits: Limits, image: str) -> None:
        with self._changed:
            if self._closed or len(self._idle) + self._starting >= self.warm:
                return
            self._starting += 1
        self._background.submit(self._start_into_idle, limits, image)

    def _start_into_idle(self, limits: Limits, image: str, spare_for: PoolContainer | None = None) -> None:
        container = None
        try:
            container = self._start(limits, image, spare_for)
        except Exception as exc:  # noqa: BLE001 - a run that needs one will start it and see the error
            log.warning("could not start a pooled container ahead of demand: %s", exc)
        retired = None
        with self._changed:
            self._starting -= 1
            if container is None and spare_for is not None:
                spare_for.retiring = False  # replaced when it goes, as an unforeseen end is
            if container is not None and not self._closed:
                self._idle.append(container)
                # The one it replaces, if waiting idle, goes now (a busy one goes when given back).
                retired = next((c for c in self._idle if c.retiring and _same_container(c, container)), None)
                if retired is not None:
                    self._idle.remove(retired)
                container = None
            self._changed.notify_all()
        if retired is not None:
            self._remove_in_background(retired)
        if container is not None:
            self._remove(container)

    def _take(self, limits: Limits, image: str, unused: bool = False) -> PoolContainer:
        """A warm container of `image` with these limits: an idle one (one not
        retiring first), one being started, or a new one; with `unused`, one
        that has served no run (a run made again after an InheritedCrash). A
        container taken for one of its last runs has its replacement started now."""
        container: PoolContainer | None = None
        with self._changed:
            while True:
                matching = [c for c in self._idle if c.image == image and _same_limits(c.limits, limits)
                            and not (unused and c.runs)]
                if matching:
                    container = next((c for c in matching if not c.retiring), matching[0])
                    self._idle.remove(container)
                    container.runs += 1
                    spare = self._ending_soon(container)
                    break
                if not self._starting or self._idle:
                    break
                self._changed.wait()
        if container is None:
            container = self._start(limits, image)
            container.runs += 1
            spare = self._ending_soon(container)
        if spare:
            self._start_spare(container)
        return container

    def _ending_soon(self, container: PoolContainer) -> bool:
        """Whether the container's retirement is near and its replacement not
        yet started (marks it as started when so). Under the pool's lock, or
        on a container no other thread holds."""
        if container.retiring:
            return False
        # None by runs for a few-run container (`reuse=1`: the warm ones are its spares already).
        lead = min(SPARE_LEAD_RUNS, self.reuse // 4)
        near = (lead > 0 and container.runs >= self.reuse - lead
                or time.monotonic() - container.created >= self.max_age_s - min(SPARE_LEAD_S, self.max_age_s / 4))
        container.retiring = near
        return near

    def _start_spare(self, container: PoolContainer) -> None:
        """Starts the replacement of a container near its retirement, beyond
        the warm bound: the old one still serves until it is warm."""
        with self._changed:
            if self._closed:
                return
            self._starting += 1
        self._background.submit(self._start_into_idle, container.limits, container.image, container)

    def _give_back(self, container: PoolContainer, recycle: str | None) -> None:
        old = time.monotonic() - container.created > self.max_age_s
        if recycle is None and container.runs < self.reuse and not old:
            with self._changed:
                replaced = container.retiring and any(
                    not c.retiring and _same_container(c, container) for c in self._idle)
                if not self._closed and not replaced:
                    self._idle.append(container)
                    # Retiring ones, then the oldest (those with other limits first), go when there are too many.
                    evicted = None
                    if len(self._idle) > self.warm:
                        evicted = next((c for c in self._idle if c.retiring), self._idle[0])
                        self._idle.remove(evicted)
                    self._changed.notify_all()
                    if evicted is not None:
                        self._remove_in_background(evicted)
                    return
        self._remove_in_background(container)
        if not container.retiring:  # a retiring one's replacement is under way or warm already
            self._replenish(container.limits, container.image)

    def settle(self, timeout_s: float = 60.0) -> bool:
        """Waits until no container is starting or being removed (for
        measurements that must not catch a replacement half made); True if so."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._starting or self._removing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _remove_in_background(self, container: PoolContainer) -> None:
        # Its CPUs are free for a replacement started before the engine has removed it.
        self._release_cpus(container)
        with self._changed:
            self._removing += 1
        self._background.submit(self._remove_counted, container)

    def _remove_counted(self, container: PoolContainer) -> None:
        try:
            self._remove(container)
        finally:
            with self._changed:
                self._removing -= 1
                self._changed.notify_all()

    def _remove(self, container: PoolContainer) -> None:
        container.channel.close()
        self._release_cpus(container)
        self._remove_id(container.id)

    def _release_cpus(self, container: PoolContainer) -> None:
        """Gives back the CPUs a container is pinned to, once: on the way out."""
        with self._changed:
            cpus, container.cpus = container.cpus, ()
        self._unpin(cpus)

    def _remove_id(self, container_id: str) -> None:
        try:
            self.engine.remove(container_id)
        except SandboxError as exc:
            log.warning("could not remove pooled container %s: %s", container_id[:12], exc)
        finally:
            self._count(containers=-1)

    # -- one run -----------------------------------------------------------

    def _run_once(self, request: RunRequest, unused: bool = False) -> RunResult:
        container = self._take(request.limits, self._image_of(request), unused=unused)
        with self._changed:
            self._busy += 1
        try:
            return self._run_on(container, request)
        finally:
            with self._changed:
                self._busy -= 1

    def _run_on(self, container: PoolContainer, request: RunRequest) -> RunResult:
        limits = request.limits
        nonce = new_nonce()
        started = time.monotonic()
        sent_at = time.time()
        deadline = started + request.deadline_s()
        cap = limits.output_bytes + REPORT_MARGIN_BYTES
        channel = container.channel
        report, deadline_hit, capped = None, False, False
        try:
            channel.send(encode_request(request, nonce) + b"\n")
            while report is None:
                report = _take_report(channel, nonce)
                if report is not None:
                    break
                if len(channel.stdout) > cap:
                    capped = True
                    break
                try:
                    if not channel.read(deadline):
                        break  # the container ended
                except TimeoutError:
                    deadline_hit = True
                    break
        except BaseException:
            self._remove_in_background(container)
            self._replenish(container.limits, container.image)
            raise
        if report is not None:
            self._give_back(container, report.recycle)
            return self._finish(container.id, report, None, started)
        # No report: the container ended, or we end it. Its events say why.
        try:
            fate = self._stop(container.id, None, killed=deadline_hit or capped, created_at=container.created_at,
                              sent_at=sent_at)
        finally:
            self._remove_in_background(container)
            self._replenish(container.limits, container.image)
        result = self._finish(container.id, None, fate, started, deadline_hit=deadline_hit, capped=capped,
                              stderr=bytes(channel.stderr[-4096:]).decode("utf-8", "replace"))
        if (self._gvisor and fate.exit_code == GVISOR_SENTRY_PANIC and not (deadline_hit or capped)
                and container.runs > 1):
            raise InheritedCrash(f"gVisor's sandbox in pooled container {container.id[:12]} crashed "
                                 f"(exit code {fate.exit_code}) after {container.runs - 1} earlier runs", result)
        return result

    def _await_end(self, container_id: str, report: Report | None, *, killed: bool, created_at: float,
                   sent_at: float) -> ContainerFate:
        """A pooled container's end, from the engine's events (it is removed
        once it exits). Its harness is pid 1, which the code cannot kill: a
        container that ended under a run, unless we killed it, died of memory,
        or was stopped from outside (an idle one, say, before this run came), or
        went down with an earlier run's memory (the container outlives an OOM
        kill; its events keep it)."""
        end, killed_late = self.engine.ended(container_id, since=created_at, timeout_s=30)
        ended = not killed and not killed_late  # on its own, under this run
        oom_in_run = end.oom_since(sent_at)
        lost = ended and not oom_in_run and (end.finished_at < sent_at or end.stopped_from_outside or bool(end.oom_at))
        # Under gVisor the kernel's OOM killer takes the whole sandbox (its
        # processes are the host's), and the engine does not flag OOMKilled: a
        # container that ended on SIGKILL under a run, not from outside, died of memory.
        died_of_memory = ended and end.exit_code == 137
        return ContainerFate(exit_code=end.exit_code, oom_killed=oom_in_run or died_of_memory,
                             lost=f"pooled container {container_id[:12]} was killed or stopped from outside, "
                                  "or by an earlier run's memory" if lost else None)


def _abandon(engine: DockerEngine, idle: "deque[PoolContainer]") -> None:
    while idle:
        container = idle.pop()
        container.channel.close()
        try:
            engine.remove(container.id)
        except Exception as exc:  # noqa: BLE001 - at exit or in the collector: warn, never raise
            log.warning("could not remove pooled container %s: %s", container.id[:12], exc)


def _same_limits(a: Limits, b: Limits) -> bool:
    """Whether a container made for limits `a` enforces `b` (the time and
    output limits are the host's and the harness's, per run)."""
    per_run = {"timeout_s", "compile_timeout_s", "startup_grace_s", "output_bytes"}
    return a.model_dump(exclude=per_run) == b.model_dump(exclude=per_run)


def _same_container(a: PoolContainer, b: PoolContainer) -> bool:
    """Whether either container can serve the other's runs."""
    return a.image == b.image and _same_limits(a.limits, b.limits)


def _take_report(channel: AttachChannel, nonce: str) -> Report | None:
    """This run's report if a whole line of it has arrived (consumed with all
    before it); None otherwise."""
    end = channel.stdout.rfind(b"\n")
    if end < 0:
        return None
    report = parse_report(bytes(channel.stdout[:end]), nonce)
    if report is not None:
        del channel.stdout[:end + 1]
    return report

