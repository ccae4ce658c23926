"""Runs requests in fresh containers: one container per run, destroyed after.

`Sandbox` is thread-safe. It bounds the containers running at once, enforces
each run's deadline from the host by killing the container, drains and caps
the container's output while it runs, and retries a whole run (in a new
container) when the engine fails under it. `stats()` and `probe()` are for
monitoring: plain numbers, read by the service's `/metrics` and `/healthz`.
"""

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict

from rewardbox.images import image_tag
from rewardbox.sandbox.cpu_pins import CpuPins, cpuset_cpus
from rewardbox.sandbox.engine import AttachChannel, DockerEngine, EngineProbe, probe_engine
from rewardbox.sandbox.errors import ContainerLost, EngineUnavailable, HarnessError, SandboxError
from rewardbox.sandbox.languages import default_image, language
from rewardbox.sandbox.models import Limits, RunRequest, RunResult
from rewardbox.sandbox.protocol import (
    MAX_REPORT_BYTES,
    PHASE_HARNESS_ERROR,
    Report,
    encode_request,
    new_nonce,
    parse_report,
)
from rewardbox.sandbox.session import AsyncSession, Grader, Session, SessionEnded, SessionLimits
from rewardbox.sandbox.session_warm import WarmSessions
from rewardbox.sandbox.verdict import ContainerFacts, judge

log = logging.getLogger(__name__)

# The lean image built from this package's harness (`rewardbox image build`).
DEFAULT_IMAGE = image_tag("python")
DEFAULT_MAX_CONTAINERS = 4
DEFAULT_RETRY_S = 60.0
# Read beyond the output limit: the harness's report (test records, output heads),
# its prefix and signature. Only the solution's own output is held to the limit.
REPORT_MARGIN_BYTES = MAX_REPORT_BYTES + (64 << 10)


class SandboxStats(BaseModel):
    """A sandbox's counters at one moment; all zero for a sandbox not yet made."""

    model_config = ConfigDict(frozen=True)

    containers_running: int = 0  # running a run (cold mode: created and not yet removed)
    containers_warm: int = 0  # pooled modes: started, or starting, and waiting for a run
    engine_errors: int = 0  # engine calls and run connections that failed on the engine's side
    engine_call_retries: int = 0  # engine calls repeated after such a failure
    run_retries: int = 0  # whole runs, and sessions lost while starting, made again in a new container


class ContainerFate(BaseModel):
    """How a container ended under a run."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = None
    oom_killed: bool = False  # memory ran out in this run
    lost: str | None = None  # why the end was nobody's doing in the run (None: it was the run's, or ours)


class InheritedCrash(Exception):
    """A reused container's sandbox crashed under a run, which may be what an
    earlier run left (gVisor's sentry panics when the host threads of a fork
    bomb's killed processes are still there). `run` repeats the run once in a
    container that has served no run, so nothing an earlier run left can be
    there; if that crashes too, `result` (the run killed) is its grade. Never
    leaves `run`."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result


class Sandbox:
    """Runs `RunRequest`s in hardened, single-use containers.

    Example (needs an engine and the image, so not a doctest)::

        with Sandbox() as box:
            result = box.run(RunRequest(
                files={"solution.py": "x = 1"},
                tests={"test_x.py": "from solution import x\ndef test_x(): assert x == 1"}))
            assert result.verdict is Verdict.PASSED
    """

    def __init__(self, image: str = DEFAULT_IMAGE, max_containers: int = DEFAULT_MAX_CONTAINERS,
                 engine: DockerEngine | None = None, runtime: str | None = None, retry_s: float = DEFAULT_RETRY_S,
                 sweep: bool = True, warm_sessions: int = 0, images: Mapping[str, str] | None = None,
                 pin_cpus: str | None = None):
        """`warm_sessions`: session containers kept made ahead for
        `session()` with the default limits (`keep_sessions_warm`); 0: none.
        `images`: the image of another language than Python's, by its name
        (default: its toolchain image, `rewardbox.sandbox.languages.default_image`);
        `image` runs Python. `pin_cpus`: pin each container to CPUs of this
        set (`all`, or `0-3,8`), spread evenly (rewardbox.sandbox.cpu_pins);
        None: the kernel places them."""
        self.image = image
        self.images = {language(name).name: tag for name, tag in (images or {}).items()}
        self._images_present = {image}
        self.runtime = runtime
        self.max_containers = max_containers
        self.engine = engine or DockerEngine(retry_s=retry_s, pool_size=max_containers * 2 + 4)
        self.engine.require_image(image)
        self._gvisor = self.engine.require_runtime(runtime)
        self._pins = CpuPins(pin_cpus, self.engine.cpu_count()) if pin_cpus else None
        if sweep:
            self.engine.sweep()
        self._slots = threading.BoundedSemaphore(max_containers)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._containers = 0
        self._run_errors = 0
        self._run_retries = 0
        self._warm: WarmSessions | None = None
        self._warm_lock = threading.Lock()
        if warm_sessions:
            self.keep_sessions_warm(warm_sessions)

    def image_for(self, name: str) -> str:
        """The image that runs code in the language `name`."""
        name = language(name).name
        if name == "python":
            return self.image
        return self.images.get(name) or default_image(name)

    def _image_of(self, request: RunRequest) -> str:
        """The image of the request's language, checked on the engine once:
        ImageMissing, with its build command, when the engine lacks it."""
        image = self.image_for(request.language)
        if image not in self._images_present:
            self.engine.require_image(image)
            self._images_present.add(image)
        return image

    def _runs_binaries(self, image: str) -> bool:
        """Whether a container of `image` runs programs from its work dir: one
        of another language than Python, whose compiled binary is written
        there. Python's keeps it noexec."""
        return image != self.image

    def stats(self) -> SandboxStats:
        engine = self.engine.stats
        with self._stats_lock:
            return SandboxStats(containers_running=self._containers, engine_errors=engine.errors + self._run_errors,
                                engine_call_retries=engine.retries, run_retries=self._run_retries)

    def probe(self, timeout_s: float = 2.0) -> EngineProbe:
        """A quick look at the engine and the image (see `probe_engine`)."""
        return probe_engine(self.image, getattr(self.engine, "base_url", None), timeout_s)

    def _pin(self, limits: Limits, like: tuple[int, ...] = ()) -> tuple[int, ...]:
        """The CPUs a new container is pinned to (see CpuPins.take); none
        when the sandbox does not pin. Each is given back by `_unpin`."""
        return self._pins.take(limits.cpus, like) if self._pins is not None else ()

    def _unpin(self, cpus: tuple[int, ...]) -> None:
        if self._pins is not None:
            self._pins.give_back(cpus)

    def _count(self, containers: int = 0, run_errors: int = 0, run_retries: int = 0) -> None:
        with self._stats_lock:
            self._containers += containers
            self._run_errors += run_errors
            self._run_retries += run_retries

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.keep_sessions_warm(0)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.engine.close()

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_containers, thread_name_prefix="rewardbox-run")
        return self._pool.submit(self.run, request)

    def session(self, limits: Limits | None = None, session_limits: SessionLimits | None = None,
                grader: Grader[Any] | None = None) -> Session:
        """A container of its own for one agent rollout, with this sandbox's
        image and runtime and the hardening of a run (sandbox/session.py).
        It takes none of `max_containers`' slots: its grading runs do.
        From the warm set (`keep_sessions_warm`) when it holds one of these
        limits, else made now."""
        warm = self._warm
        if warm is not None:
            taken = warm.take(limits or Limits(), session_limits or SessionLimits())
            if taken is not None:
                taken.grader = grader
                return taken
        return self._new_session(limits, session_limits, grader)

    def _new_session(self, limits: Limits | None, session_limits: SessionLimits | None,
                     grader: Grader[Any] | None = None, warm_wait_s: float = 0.0) -> Session:
        deadline = time.monotonic() + self.engine.retry_s
        while True:
            try:
                return Session(self.engine, self.image, limits=limits, session_limits=session_limits,
                               runtime=self.runtime, gvisor=self._gvisor, grader=grader, warm_wait_s=warm_wait_s)
            except SessionEnded as exc:
                # Its container ended while starting, before the caller had it:
                # nothing the caller did (a gVisor sandbox on a loaded host can
                # die so). Make another, as a run is, while the retry budget lasts.
                if time.monotonic() >= deadline:
                    raise
                log.warning("a session's container was lost while starting (%s); making another", exc)
                self._count(run_retries=1)
                time.sleep(1.0)

    def keep_sessions_warm(self, size: int, limits: Limits | None = None,
                           session_limits: SessionLimits | None = None) -> None:
        """Keeps `size` session containers of these limits made ahead
        (sandbox/session_warm.py), in place of any warm set before; 0 removes
        the warm set. Blocks only to remove the containers of the set replaced."""
        if size < 0:
            raise ValueError(f"warm sessions must be 0 or more, not {size}")
        chosen, chosen_session = limits or Limits(), session_limits or SessionLimits()
        with self._warm_lock:
            old, self._warm = self._warm, None
            if size:
                self._warm = WarmSessions(lambda wait_s: self._new_session(chosen, chosen_session, warm_wait_s=wait_s),
                                          size, chosen, chosen_session)
        if old is not None:
            old.close()

    @property
    def warm_sessions(self) -> int:
        """Session containers ready to hand out now."""
        warm = self._warm
        return 0 if warm is None else len(warm)

    def async_session(self, limits: Limits | None = None, session_limits: SessionLimits | None = None,
                      grader: Grader[Any] | None = None) -> AsyncSession:
        """`session` for asyncio: `async with box.async_session() as s:`."""
        return AsyncSession(lambda: self.session(limits, session_limits, grader))

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        """Results in the order of the requests, up to `max_containers` at once."""
        futures = [self.submit(r) for r in requests]
        return [f.result() for f in futures]

    def run(self, request: RunRequest) -> RunResult:
        deadline = time.monotonic() + self.engine.retry_s
        crashed = False
        with self._slots:
            while True:
                try:
                    return self._run_once(request, unused=crashed)
                except InheritedCrash as exc:
                    if crashed:
                        # A second time: the run's own doing, graded as it ended.
                        return exc.result
                    crashed = True
                    log.warning("%s; running it again in a container that has served no run", exc)
                    self._count(run_retries=1)
                except (OSError, EngineUnavailable, ContainerLost) as exc:
                    if 400 <= (getattr(exc, "status_code", None) or 0) < 500:
                        # The engine refused the request itself: repeating it cannot help.
                        raise SandboxError(f"the Docker engine refused the run: {exc}") from exc
                    # The engine failed under a run, or someone stopped its container;
                    # nothing the code did. Start again in a fresh container while the
                    # retry budget lasts.
                    if not isinstance(exc, EngineUnavailable):  # those attempts are counted by the engine
                        self._count(run_errors=1)
                    if time.monotonic() >= deadline:
                        if isinstance(exc, SandboxError):
                            raise
                        raise EngineUnavailable(f"lost the connection to the Docker engine: {exc}") from exc
                    log.warning("run failed on the engine side (%s); retrying in a new container", exc)
                    self._count(run_retries=1)
                    time.sleep(1.0)

    def _run_once(self, request: RunRequest, unused: bool = False) -> RunResult:
        """One run in a container of its own (`unused`, the pool's ask for a
        container that has served no run, holds here for every run)."""
        limits = request.limits
        nonce = new_nonce()
        name = f"rewardbox-{uuid.uuid4().hex[:16]}"
        started = time.monotonic()
        created_at = time.time()
        image = self._image_of(request)
        cpus = self._pin(limits)
        try:
            container_id = self.engine.create(image, limits, name, runtime=self.runtime, gvisor=self._gvisor,
                                              exec_work=self._runs_binaries(image), cpuset=cpuset_cpus(cpus))
        except BaseException:
            self._unpin(cpus)
            raise
        self._count(containers=1)
        try:
            channel = self.engine.attach(container_id)
            try:
                self.engine.start(container_id)
                hard_deadline = time.monotonic() + request.deadline_s()
                channel.send(encode_request(request, nonce))
                channel.end_input()
                capped, deadline_hit = _drain(channel, hard_deadline, limits.output_bytes + REPORT_MARGIN_BYTES)
            finally:
                channel.close()
            report = parse_report(bytes(channel.stdout), nonce)
            fate = self._stop(container_id, report, killed=capped or deadline_hit, created_at=created_at,
                              sent_at=created_at)
        finally:
            try:
                self.engine.remove(container_id)
            finally:
                self._count(containers=-1)
                self._unpin(cpus)
        return self._finish(container_id, report, fate, started, deadline_hit=deadline_hit, capped=capped,
                            stderr=bytes(channel.stderr[-4096:]).decode("utf-8", "replace"))

    # -- the end of a run, cold or pooled ------------------------------------

    def _stop(self, container_id: str, report: Report | None, *, killed: bool, created_at: float,
              sent_at: float) -> ContainerFate:
        """Kills the container if the run is over without it (deadline, output
        cap), waits for its end, and raises ContainerLost when that end was
        nobody's doing in the run (stopped from outside): the caller repeats the
        run in a new container. `created_at` and `sent_at` are wall-clock times
        of the container's creation and of the run's request."""
        if killed:
            self.engine.kill(container_id)
        fate = self._await_end(container_id, report, killed=killed, created_at=created_at, sent_at=sent_at)
        if fate.lost is not None:
            raise ContainerLost(f"{fate.lost} (exit code {fate.exit_code})")
        return fate

    def _await_end(self, container_id: str, report: Report | None, *, killed: bool, created_at: float,
                   sent_at: float) -> ContainerFate:
        """A single-use container's end, from its state; lost when it did not
        report and, though neither we nor its memory killed it, the engine was
        told to kill or stop it."""
        state, killed_late = self.engine.wait(container_id, timeout_s=30)
        lost = (report is None and not (killed or killed_late or state.oom_killed)
                and self.engine.stopped_from_outside(container_id, since=created_at))
        return ContainerFate(exit_code=state.exit_code, oom_killed=state.oom_killed,
                             lost=f"container {container_id[:12]} was killed or stopped from outside" if lost else None)

    @staticmethod
    def _finish(container_id: str, report: Report | None, fate: ContainerFate | None, started: float, *,
                deadline_hit: bool = False, capped: bool = False, stderr: str = "") -> RunResult:
        """The run's verdict, after the harness's own failures are raised: one
        before the run's code started is ContainerLost (repeated elsewhere),
        any other not caused by the run a HarnessError. `fate` is None for a
        container that reported and serves again (its report then says whether
        memory ran out)."""
        if report is not None and report.phase == PHASE_HARNESS_ERROR:
            if report.not_started:
                # Nothing of the run's code ran (a pool's zygote could not fork): the
                # caller runs it again in a fresh container, as after a lost one.
                raise ContainerLost(f"container {container_id[:12]} could not start the run: {report.message}")
            if not report.harness_attacked:
                raise HarnessError(f"the sandbox harness failed: {report.message}")
        facts = ContainerFacts(
            deadline_hit=deadline_hit,
            oom_killed=fate.oom_killed if fate is not None else report is not None and report.oom_killed,
            exit_code=fate.exit_code if fate is not None else None,
            output_capped=capped,
            duration_s=round(time.monotonic() - started, 6),
            stderr=stderr,
        )
        return judge(report, facts)


def _drain(channel: AttachChannel, deadline: float, cap: int) -> tuple[bool, bool]:
    """Reads the run's output until EOF, the deadline, or `cap` bytes; whether
    the cap, and whether the deadline, ended it."""
    while True:
        try:
            if not channel.read(deadline):
                return False, False
        except TimeoutError:
            return False, True
        if channel.received > cap:
            return True, False
