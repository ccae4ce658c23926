"""The one module that talks to Docker.

Every call that is safe to repeat is retried with exponential backoff and
jitter for a bounded time (`retry_s`); then `EngineUnavailable` is raised.
Creating a container is not safe to repeat, so each container gets a unique
name first: a create retried after a lost answer meets a name conflict and
adopts the container it already made, never a second one.

For monitoring, failed attempts and retries are counted in `EngineStats`, and
`probe_engine` takes a quick look for health checks: plain values, which the
service turns into `/metrics` and `/healthz` (no metrics library here).
"""

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import cached_property
from typing import Any, TypeVar

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions
from docker.types import LogConfig, Ulimit
from pydantic import BaseModel, ConfigDict
from tenacity import (
    RetryCallState,
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_delay,
    wait_random_exponential,
)

from rewardbox.images import build_hint
from rewardbox.sandbox.errors import ContainerLost, EngineUnavailable, ImageMissing, RuntimeMissing
from rewardbox.sandbox.gvisor_seccomp import gvisor_seccomp_option
from rewardbox.sandbox.languages import LONGEST_COMPILE_S
from rewardbox.sandbox.models import Limits
from rewardbox.sandbox.protocol import SANDBOX_GID, SANDBOX_UID, WORK_DIR

log = logging.getLogger(__name__)
T = TypeVar("T")

LABEL = "rewardbox"
OWNER_LABEL = "rewardbox.owner"
EXPIRES_LABEL = "rewardbox.expires"
# The harness's unprivileged user (rbprotocol.py), who owns the work dir.
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_GID}"
DISK_HINT = "free space on the filesystem of the engine's data root (`docker info`: Docker Root Dir)"
# gVisor's own host threads count against the container's pids limit (about
# 60 at start, a few more per process inside: gVisor issue #2490), while the
# processes inside are its tasks. Under gVisor the limit is widened so that
# it still bounds the code, not gVisor's start-up.
GVISOR_PIDS_BASE = 64
GVISOR_PIDS_PER_PROCESS = 6
REMOVAL_LOOK_S = 1.0  # a wait for a container's removal, between looks at whether it is gone (_removed_within)
# A frame of the attach stream: stream id (1 stdout, 2 stderr), three bytes of
# padding, the payload's length (big-endian); then the payload.
FRAME_HEADER = struct.Struct(">BxxxL")
STDERR_STREAM = 2
ENGINE_HINT = (
    "start a Docker engine (Debian: `apt-get install docker.io && dockerd &`, "
    "or `systemctl start docker`) and check DOCKER_HOST"
)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError)):
        return True
    if isinstance(exc, docker.errors.APIError) and not isinstance(exc, docker.errors.NotFound):
        return exc.status_code is not None and exc.status_code >= 500
    return isinstance(exc, docker.errors.DockerException) and "Error while fetching server API version" in str(exc)


def _read_timed_out(exc: requests.exceptions.RequestException) -> bool:
    """Whether a call ran out of its read timeout. The engine answers a wait's
    headers at once and its body when the container gets there, so a wait's
    timeout comes while reading the body, which requests raises as a
    ConnectionError around urllib3's ReadTimeoutError, not as ReadTimeout."""
    cause = exc.args[0] if exc.args else None
    return isinstance(exc, requests.exceptions.ReadTimeout) or isinstance(cause, urllib3.exceptions.ReadTimeoutError)


def _out_of_space(exc: BaseException) -> bool:
    return "no space left on device" in str(exc).lower()


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def _process_start(pid: int) -> str:
    """Start time of a process (so a reused pid is not mistaken for its owner)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner label still runs (True for
    another machine's: there only the expiry can tell)."""
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: only its expiry can tell
    return _process_start(int(pid)) == started


@contextmanager
def _lost_if_gone(container_id: str) -> Iterator[None]:
    """A container that vanished under a run was removed from outside."""
    try:
        yield
    except docker.errors.NotFound as exc:
        raise ContainerLost(f"container {container_id[:12]} was removed from outside: {exc}") from None


class EngineStats:
    """Failures on the engine's side since this engine was made. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors = 0
        self._retries = 0

    def failed(self) -> None:
        """An engine call failed on the engine's side (connection lost,
        timeout, 5xx), retried or not."""
        with self._lock:
            self._errors += 1

    def retried(self) -> None:
        """An engine call is about to be repeated after such a failure."""
        with self._lock:
            self._retries += 1

    @property
    def errors(self) -> int:
        return self._errors

    @property
    def retries(self) -> int:
        return self._retries


class EngineProbe(BaseModel):
    """One quick look at the engine, for health checks. `image_present` is
    False when the engine could not be asked."""

    model_config = ConfigDict(frozen=True)

    reachable: bool
    version: str | None = None
    image_present: bool = False
    error: str | None = None


def probe_engine(image: str, base_url: str | None = None, timeout_s: float = 2.0) -> EngineProbe:
    """Is the engine answering, and does it hold `image`? No retries, and a
    client of its own with a short timeout: a health check must answer
    quickly, and the sandbox's client may be busy with long waits. Blocks for
    at most about three times `timeout_s`."""
    try:
        if base_url:
            # docker's stubs say int; requests, which gets it, takes a float.
            api = docker.APIClient(base_url=base_url, version="auto", timeout=timeout_s)  # type: ignore[arg-type]
        else:
            api = docker.from_env(timeout=timeout_s).api  # type: ignore[arg-type]  # as above
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        return EngineProbe(reachable=False, error=f"{exc}"[:500])
    try:
        version = api.version(api_version=False).get("Version")
        try:
            api.inspect_image(image)  # type: ignore[no-untyped-call]  # unannotated in docker's stubs
            present = True
        except docker.errors.ImageNotFound:
            present = False
        return EngineProbe(reachable=True, version=version, image_present=present)
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        return EngineProbe(reachable=False, error=f"{exc}"[:500])
    finally:
        api.close()


class ContainerEnd(BaseModel):
    """How an auto-removed container ended, as the engine's events recorded it
    (the container itself is gone)."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = None  # None: no "die" event seen
    oom_at: tuple[float, ...] = ()  # Unix times of its "oom" events: a pooled container outlives a run's OOM kill
    finished_at: float = float("inf")  # Unix time of the "die" event
    stopped_from_outside: bool = False  # a kill or stop the engine was asked for

    def oom_since(self, t: float) -> bool:
        """Whether memory ran out at or after `t` (a run's start), not in an earlier run."""
        return any(at >= t for at in self.oom_at)


def container_end(events: list[dict[str, Any]]) -> ContainerEnd:
    """A container's end from its events (as `APIClient.events(decode=True)` yields them).

    >>> end = container_end([{"Action": "oom", "timeNano": 1200000000}, {"Action": "die", "timeNano": 1500000000,
    ...                      "Actor": {"Attributes": {"exitCode": "137"}}}])
    >>> end
    ContainerEnd(exit_code=137, oom_at=(1.2,), finished_at=1.5, stopped_from_outside=False)
    >>> end.oom_since(1.0), end.oom_since(1.3)
    (True, False)
    """
    end = ContainerEnd()
    oom_at: list[float] = []
    for event in events:
        action = event.get("Action") or event.get("status")
        at = int(event.get("timeNano") or 0) / 1e9 or float(event.get("time") or "inf")
        if action == "die":
            code = str(((event.get("Actor") or {}).get("Attributes") or {}).get("exitCode"))
            end = end.model_copy(update={"exit_code": int(code) if code.lstrip("-").isdigit() else None,
                                         "finished_at": at})
        elif action == "oom":
            oom_at.append(at)
        elif action in ("kill", "stop"):
            end = end.model_copy(update={"stopped_from_outside": True})
    return end.model_copy(update={"oom_at": tuple(oom_at)})


def demultiplex(frames: bytearray, stdout: bytearray, stderr: bytearray) -> None:
    """Moves every whole frame of `frames` (the attach stream's bytes, as
    received) to `stdout` or `stderr`; a partial frame stays for the next read.

    >>> frames = bytearray(FRAME_HEADER.pack(1, 2) + b"hi" + FRAME_HEADER.pack(2, 3) + b"er")
    >>> out, err = bytearray(), bytearray()
    >>> demultiplex(frames, out, err)
    >>> bytes(out), bytes(err), len(frames)
    (b'hi', b'', 10)
    >>> frames += b"r"  # the rest of the second frame
    >>> demultiplex(frames, out, err)
    >>> bytes(out), bytes(err), len(frames)
    (b'hi', b'err', 0)
    """
    while len(frames) >= FRAME_HEADER.size:
        stream, size = FRAME_HEADER.unpack_from(frames)
        if len(frames) < FRAME_HEADER.size + size:
            break
        payload = frames[FRAME_HEADER.size:FRAME_HEADER.size + size]
        del frames[:FRAME_HEADER.size + size]
        (stderr if stream == STDERR_STREAM else stdout).extend(payload)


class AttachChannel:
    """A container's attached stdin, stdout and stderr: one connection of our
    own, on which the engine multiplexes the two outputs in frames. Reads
    demultiplex them into `stdout` and `stderr` (of which only the last
    `stderr_tail` bytes are kept, when given); `close` ends the connection."""

    def __init__(self, sock: socket.socket, stderr_tail: int | None = None, early: bytes = b""):
        """`early`: the stream's first bytes, read before the channel took the socket."""
        self._sock = sock
        self._frames = bytearray()  # received, not yet a whole frame
        self._stderr_tail = stderr_tail
        self.stdout = bytearray()  # demultiplexed, not yet consumed
        self.stderr = bytearray()
        self._take(early)

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def end_input(self) -> None:
        """EOF on the container's stdin; its output can still be read."""
        self._sock.shutdown(socket.SHUT_WR)

    def read(self, deadline: float) -> bool:
        """Reads what arrives before `deadline` (a `time.monotonic()` time);
        False at EOF. Raises TimeoutError at the deadline."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self._sock.settimeout(remaining)
        chunk = self._sock.recv(65536)
        if not chunk:
            return False
        self._take(chunk)
        return True

    def _take(self, chunk: bytes) -> None:
        self._frames += chunk
        demultiplex(self._frames, self.stdout, self.stderr)
        if self._stderr_tail is not None:
            del self.stderr[:-self._stderr_tail]

    @property
    def received(self) -> int:
        """Bytes held: both outputs and a partial frame."""
        return len(self.stdout) + len(self.stderr) + len(self._frames)

    def close(self) -> None:
        # shutdown() really ends the connection; close() alone leaves it open while
        # anything else holds the socket, and the engine then blocks writing to it
        # (kill and remove hang).
        with suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def hijacked_channel(response: Any, stderr_tail: int | None = None) -> AttachChannel:
    """A channel of our own on the connection of a hijacked response (what
    docker-py's `attach_socket` and `exec_start(socket=True)` return: its
    socket, wrapped in a SocketIO on a local engine), with the stream's bytes
    that http.client's buffered reader took in with the headers. docker-py
    hands over the raw socket and those bytes were lost: an exec that wrote
    before the client read the headers (a loaded host) seemed to print
    nothing (docker/docker-py#3332, #425). The channel's socket is a dup:
    docker-py closes its own when the collector frees the response."""
    raw: socket.socket = getattr(response, "_sock", response)
    reader = getattr(getattr(getattr(getattr(response, "_response", None), "raw", None), "_fp", None), "fp", None)
    early = b""
    if reader is not None:
        timeout = raw.gettimeout()
        raw.setblocking(False)  # peek returns what is buffered, or what the socket has now; it must not wait
        try:
            with suppress(OSError, ValueError):  # ValueError: a reader already closed
                early = reader.peek()
        finally:
            raw.settimeout(timeout)
    try:
        return AttachChannel(raw.dup(), stderr_tail, early)
    finally:
        raw.close()


class ContainerState(BaseModel):
    """A stopped container's state, as the engine inspects it."""

    model_config = ConfigDict(frozen=True)

    running: bool = False
    exit_code: int | None = None
    oom_killed: bool = False


def container_state(state: Mapping[str, Any]) -> ContainerState:
    """The `State` of `APIClient.inspect_container` as a `ContainerState`.

    >>> container_state({"Running": False, "ExitCode": 137, "OOMKilled": True})
    ContainerState(running=False, exit_code=137, oom_killed=True)
    >>> container_state({})
    ContainerState(running=False, exit_code=None, oom_killed=False)
    """
    code = state.get("ExitCode")
    return ContainerState(running=bool(state.get("Running")), exit_code=code if isinstance(code, int) else None,
                          oom_killed=bool(state.get("OOMKilled")))


class DockerEngine:
    """Thin, retrying wrapper over the Docker API for sandbox containers."""

    def __init__(self, base_url: str | None = None, retry_s: float = 60.0, pool_size: int = 16,
                 sleep: Callable[[float], None] = time.sleep):
        self.base_url = base_url
        self.retry_s = retry_s
        self._sleep = sleep
        self.owner = _owner()
        self._api = self._retry(lambda: self._connect(base_url, pool_size))

    @cached_property
    def stats(self) -> EngineStats:
        # Made on first use, by the connecting call in __init__ (before any other
        # thread can see the engine), or by engines made without __init__ (test fakes).
        return EngineStats()

    @staticmethod
    def _connect(base_url: str | None, pool_size: int) -> docker.APIClient:
        # Both ask the engine its API version ("auto"): that answer is the check that
        # it is up (a ping after it was one more round trip before the first container).
        if base_url:
            return docker.APIClient(base_url=base_url, version="auto", timeout=60, max_pool_size=pool_size)
        return docker.from_env(version="auto", timeout=60, max_pool_size=pool_size).api

    def _retry(self, call: Callable[[], T]) -> T:
        stats = self.stats
        log_retry = before_sleep_log(log, logging.WARNING)

        def before_sleep(state: RetryCallState) -> None:
            stats.retried()
            log_retry(state)

        retrying = Retrying(
            retry=retry_if_exception(_transient),
            wait=wait_random_exponential(multiplier=0.2, max=5),
            stop=stop_after_delay(self.retry_s),
            sleep=self._sleep,
            after=lambda state: stats.failed(),  # tenacity calls it after each transient failure only
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(call)
        except Exception as exc:
            if _transient(exc) and _out_of_space(exc):
                log.error("Docker engine out of disk space for %.0f s: %s", self.retry_s, exc)
                raise EngineUnavailable(f"the Docker engine is out of disk space ({exc}); {DISK_HINT}") from exc
            if _transient(exc):
                log.error("Docker engine unreachable after %.0f s: %s", self.retry_s, exc)
                raise EngineUnavailable(f"the Docker engine did not answer for {self.retry_s:.0f} s ({exc}); "
                                        f"{ENGINE_HINT}") from exc
            raise

    def require_image(self, image: str) -> None:
        try:
            self._retry(lambda: self._api.inspect_image(image))  # type: ignore[no-untyped-call]  # as in probe_engine
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"the sandbox image {image} is not on the Docker engine: {build_hint(image)}") from None

    def require_runtime(self, runtime: str | None) -> bool:
        """Checks that the engine knows `runtime`; True when it is gVisor."""
        if runtime is None:
            return False
        runtimes = self._retry(lambda: self._api.info()).get("Runtimes") or {}
        if runtime not in runtimes:
            raise RuntimeMissing(f"the Docker engine has no runtime {runtime!r} (it has: {', '.join(sorted(runtimes))})"
                                 f"{': run `make gvisor` to install and register it' if runtime == 'runsc' else ''}")
        return "runsc" in str((runtimes[runtime] or {}).get("path", ""))

    def cpu_count(self) -> int:
        """The CPUs of the engine's machine (which `cpuset` names)."""
        return int(self._retry(lambda: self._api.info())["NCPU"])

    def create(self, image: str, limits: Limits, name: str, runtime: str | None = None, gvisor: bool = False,
               command: list[str] | None = None, lifetime_s: float | None = None, auto_remove: bool = False,
               exec_work: bool = False, task_limit: bool = True, cpuset: str | None = None) -> str:
        """A stopped, hardened container waiting for its input on stdin: one
        request, then EOF (the image's supervisor); or, given `command` (the pool
        supervisor, its own init), requests one per line for up to `lifetime_s`.
        With `auto_remove` the engine removes it once it exits (its end is then
        read with `ended`, not `wait`). `exec_work`: the work dir may hold
        programs to run (a compiled language's binary); else it is noexec.
        `task_limit` (gVisor only): RLIMIT_NPROC at the pids limit; a session
        leaves it to each call (its clean-up exec must start when a call
        filled it). `cpuset`: the CPUs it may run on (`0,2-3`; None: any)."""
        mb = 1024 * 1024
        pids = GVISOR_PIDS_BASE + GVISOR_PIDS_PER_PROCESS * limits.pids if gvisor else limits.pids
        host_config = self._api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs={
                # Docker mounts a tmpfs noexec unless told.
                WORK_DIR: (
                    f"rw,{'exec,' if exec_work else ''}nosuid,nodev,size={limits.work_mb}m,"
                    f"nr_inodes={limits.inodes},"
                    f"uid={SANDBOX_UID},gid={SANDBOX_GID}"
                ),
                "/tmp": f"rw,nosuid,nodev,noexec,size={limits.tmp_mb}m,nr_inodes={limits.inodes}",
                # A tmpfs of ours rather than --shm-size, which limits bytes but not files.
                "/dev/shm": f"rw,nosuid,nodev,noexec,size={limits.tmp_mb}m,nr_inodes={limits.inodes}",
            },
            cap_drop=["ALL"],
            # Under gVisor, a profile it can apply (Docker's default stops every thread there).
            security_opt=["no-new-privileges", *([gvisor_seccomp_option()] if gvisor else [])],
            mem_limit=limits.memory_mb * mb,
            memswap_limit=limits.memory_mb * mb,
            nano_cpus=int(limits.cpus * 1e9),
            cpuset_cpus=cpuset,
            pids_limit=pids,
            ulimits=[
                Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                Ulimit(name="fsize", soft=limits.file_size_mb * mb, hard=limits.file_size_mb * mb),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="msgqueue", soft=0, hard=0),  # no POSIX message queues
                # Under gVisor the code's processes and threads are its kernel's tasks, which the
                # host's pids limit does not see: RLIMIT_NPROC, counted within the sandbox, bounds
                # them (under runc it would count the uid's processes in every container).
                *([Ulimit(name="nproc", soft=limits.pids, hard=limits.pids)] if gvisor and task_limit else []),
            ],
            # Output is read from the attach stream; a log file would put the
            # code's stdout on the host's disk as well.
            log_config=LogConfig(type="none"),
            init=command is None,
            runtime=runtime,
            auto_remove=auto_remove,
        )
        compile_s = max(limits.compile_timeout_s, LONGEST_COMPILE_S)
        expires = time.time() + (lifetime_s or 0) + limits.timeout_s + compile_s + limits.startup_grace_s + 60
        labels = {LABEL: "1", OWNER_LABEL: self.owner, EXPIRES_LABEL: f"{expires:.0f}"}

        config = self._api.create_container_config(
            image,
            command,  # type: ignore[arg-type]  # the stubs want one; None (the image's own) is docker's default
            user=SANDBOX_USER, stdin_open=True, network_disabled=True, working_dir=WORK_DIR,
            hostname="sandbox", environment={}, labels=labels, host_config=host_config,
        )
        # Stdin closes when our one attached connection does: the single-use harness
        # sees EOF after its input; a pool's harness when this process goes, and exits.
        config["StdinOnce"] = True

        def create() -> str:
            try:
                # Unannotated in docker's stubs.
                made = self._api.create_container_from_config(config, name=name)  # type: ignore[no-untyped-call]
                return str(made["Id"])
            except docker.errors.APIError as exc:
                if exc.status_code == 409:  # our earlier attempt got through
                    return str(self._api.inspect_container(name)["Id"])
                if isinstance(exc, docker.errors.ImageNotFound):
                    raise ImageMissing(f"the sandbox image {image} is not on the Docker engine: "
                                       f"{build_hint(image)}") from None
                raise

        return self._retry(create)

    # attach, start and wait are not retried in place: once the engine has failed
    # under a container, the run is repeated whole in a new one (Sandbox.run).

    def attach(self, container_id: str, stderr_tail: int | None = None) -> AttachChannel:
        """A channel on the container's stdin, stdout and stderr."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        with _lost_if_gone(container_id):
            response = self._api.attach_socket(container_id, params=params)
        return hijacked_channel(response, stderr_tail)

    def start(self, container_id: str) -> None:
        with _lost_if_gone(container_id):
            self._api.start(container_id)

    def kill(self, container_id: str, signal: str | None = None) -> bool:
        """SIGKILL, or `signal`, to the container's PID 1; whether it reached
        a running container (False: gone, or not running, so the goal is met)."""
        try:  # without a signal, the call as before (the API's fakes in tests/unit take none)
            self._retry(lambda: self._api.kill(container_id, signal=signal) if signal else self._api.kill(container_id))
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):
                raise
            return False
        return True

    def wait(self, container_id: str, timeout_s: float) -> tuple[ContainerState, bool]:
        """The container's final state once it has
        stopped, and whether we had to kill it here. A lost connection to the
        engine raises (the container's end is then unknown)."""
        with _lost_if_gone(container_id):
            killed = False
            if not self._waited(container_id, timeout_s):
                killed = self.kill(container_id)  # False: it stopped by itself meanwhile
            return container_state(self._api.inspect_container(container_id)["State"]), killed

    def ended(self, container_id: str, since: float, timeout_s: float) -> tuple[ContainerEnd, bool]:
        """How an auto-removed container created after `since` ended, once the
        engine has removed it, and whether we had to kill it here. Its state is
        gone with it, so the answer comes from its events. A kill or stop among
        them counts as from outside: ask only about containers we did not kill."""
        killed = False
        if not self._removed_within(container_id, timeout_s):
            killed = self.kill(container_id)
            self._removed_within(container_id, timeout_s)
        # Nine decimals: the engine reads the fraction as nanoseconds.
        # The stubs take no string for since/until; the engine does, and only a
        # string carries the nanoseconds.
        events = self._retry(lambda: list(self._api.events(  # type: ignore[call-overload]
            since=f"{since - 1:.9f}", until=f"{time.time():.9f}", decode=True,
            filters={"container": container_id, "event": ["die", "oom", "kill", "stop"]})))
        return container_end(events), killed

    def _removed_within(self, container_id: str, timeout_s: float) -> bool:
        """Whether the container is gone within `timeout_s`. Waited for a
        second at a time, each followed by a look: the engine's wait for a
        removal that completes between its lookup of the container and its
        wait never returns (moby makes the removal's channel anew once it has
        closed it), as a forced `docker rm` of a running container brought
        about under load; that container was then taken for one we killed, and
        its run judged instead of run again."""
        deadline = time.monotonic() + timeout_s
        with suppress(docker.errors.NotFound):
            while (step := min(REMOVAL_LOOK_S, deadline - time.monotonic())) > 0:
                if self._waited(container_id, step, condition="removed"):
                    return True
                self._retry(lambda: self._api.inspect_container(container_id))  # NotFound once it is gone
            return False
        return True

    def _waited(self, container_id: str, timeout_s: float, condition: str = "not-running") -> bool:
        """Whether the container met the condition within `timeout_s` (False:
        it is still there). A lost connection raises."""
        try:
            self._api.wait(container_id, timeout=timeout_s, condition=condition)  # type: ignore[arg-type]  # int in the stubs; a float works
        except requests.exceptions.RequestException as exc:
            if _read_timed_out(exc):
                return False
            raise
        return True

    def stopped_from_outside(self, container_id: str, since: float) -> bool:
        """Whether someone told the engine to kill or stop this container: the
        code inside cannot make the engine record that. Asked only about
        containers we did not kill ourselves."""
        # Nine decimals: the engine reads the fraction as nanoseconds.
        # The stubs take no string for since/until; the engine does, and only a
        # string carries the nanoseconds.
        events = self._retry(lambda: list(self._api.events(  # type: ignore[call-overload]
            since=f"{since - 1:.9f}", until=f"{time.time():.9f}", decode=True,
            filters={"container": container_id, "event": ["kill", "stop", "destroy"]})))
        return bool(events)

    def exec(self, container_id: str, command: list[str], user: str = SANDBOX_USER,
             workdir: str = WORK_DIR) -> tuple[str, AttachChannel]:
        """Starts `command` in a running container (a session's call): its exec
        id and a channel on its stdin, stdout and stderr. Not retried: a call
        may have side effects. A container that is gone or no longer running
        raises ContainerLost."""
        try:
            with _lost_if_gone(container_id):
                made = self._api.exec_create(container_id, command, stdin=True, user=user, workdir=workdir,
                                             environment={})
                response = self._api.exec_start(made["Id"], socket=True)
        except docker.errors.APIError as exc:
            # 409: not running; a 500 "removal in progress": being removed (a session closed under a call)
            if exc.status_code == 409 or "removal in progress" in str(exc).lower():
                raise ContainerLost(f"container {container_id[:12]} is not running: {exc}") from None
            raise
        return str(made["Id"]), hijacked_channel(response)

    def exec_exit_code(self, exec_id: str) -> int | None:
        """An exec's exit status; None while it still runs."""
        try:
            info = self._retry(lambda: self._api.exec_inspect(exec_id))
        except docker.errors.NotFound as exc:  # its container was removed
            raise ContainerLost(f"exec {exec_id[:12]} is gone with its container: {exc}") from None
        code = info.get("ExitCode")
        return None if info.get("Running") or not isinstance(code, int) else code

    def remove(self, container_id: str) -> None:
        try:
            self._retry(lambda: self._api.remove_container(container_id, force=True, v=True))
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # 409: removal already under way
                raise

    def sweep(self) -> int:
        """Remove containers left behind by a process that died, or past expiry.

        Containers of live processes that share this engine are left alone.
        """
        removed = 0
        now = time.time()
        for info in self._retry(lambda: self._api.containers(all=True, filters={"label": LABEL})):
            labels = info.get("Labels") or {}
            owner = labels.get(OWNER_LABEL, "")
            try:
                expired = float(labels.get(EXPIRES_LABEL, "0")) < now
            except ValueError:
                expired = True
            if owner == self.owner or (not expired and owner_alive(owner)):
                continue
            self.remove(info["Id"])
            removed += 1
        if removed:
            log.warning("removed %d sandbox container(s) left behind by an earlier process", removed)
        return removed

    def running_containers(self) -> int:
        return len(self._retry(lambda: self._api.containers(filters={"label": f"{OWNER_LABEL}={self.owner}"})))

    def close(self) -> None:
        self._api.close()
