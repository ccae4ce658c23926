"""Sessions: one hardened container that lives for one agent rollout.

A `Session` is a container of its own (never one of the pool of single runs),
made with the same hardening and limits as a run (`DockerEngine.create`), in
which an agent's tool calls run one after another: programs and shell
commands (`run`, `shell`), files under the work dir (`write_file`,
`read_file`), and at the end the graded reward of what it left (`score`),
graded the way a completion is, in a fresh single-run container.

Files and the working directory persist between calls; processes do not:
after every call, each process of the sandbox user but PID 1 is killed, save
those a call started with `background=True` (at most
`SessionLimits.background` at once, all killed at `close`).

The container ends itself: its PID 1 (`WATCHDOG`) exits at the session's
lifetime, or once no call has come for `idle_s`, so a session whose owner was
`kill -9`'d or forgot to close goes without the host; the engine removes it
(AutoRemove), and `DockerEngine.sweep` removes one whose owner died as it does
a run's.
"""

import asyncio
import secrets
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import Field

from rewardbox.sandbox.engine import GVISOR_PIDS_BASE, GVISOR_PIDS_PER_PROCESS, AttachChannel, DockerEngine
from rewardbox.sandbox.errors import ContainerLost, SandboxError
from rewardbox.sandbox.models import Frozen, Limits, Verdict, _relative_path
from rewardbox.sandbox.protocol import WORK_DIR

if TYPE_CHECKING:
    from types import TracebackType

G_co = TypeVar("G_co", covariant=True)
G = TypeVar("G")

# Container side. Each runs as `python3 -I` (isolated: neither the work dir, where
# the agent writes, nor any PYTHON* variable is on its path) or as `sh`.

# PID 1: ends the container at the lifetime, or `idle` seconds after the last
# call ended. SIGUSR1 says a call started (it may then run `busy` seconds more),
# SIGUSR2 that it ended. It reaps orphans (it is the container's init). SIGHUP
# (from the host, through the engine) kills every other process: the way out
# when a fork bomb holds every pid and no exec can start. The agent can send
# it these signals too: that only keeps its own session alive, never beyond
# the lifetime, or kills its own processes. A warm container (argv[4] > 0,
# made ahead by sandbox/session_warm.py) counts neither limit until it is
# armed (SIGALRM at hand-out, or a first call): it waits unarmed at most
# argv[4] seconds, so that one whose owner died still ends.
WATCHDOG = """\
import os, signal, sys, time
life, idle, busy_max, wait = (float(a) for a in sys.argv[1:5])
now = time.monotonic
state = {"last": now(), "busy": False, "armed": wait <= 0, "end_of_life": now() + (wait if wait > 0 else life)}
def arm(*_):
    if not state["armed"]:
        state.update(armed=True, last=now(), end_of_life=now() + life)
def started(*_):
    arm()
    state.update(last=now(), busy=True)
def ended(*_): state.update(last=now(), busy=False)
def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
def kill_all(*_):
    for attempt in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        reap()
        time.sleep(0.002 * attempt)
signal.signal(signal.SIGUSR1, started)
signal.signal(signal.SIGUSR2, ended)
signal.signal(signal.SIGCHLD, reap)
signal.signal(signal.SIGHUP, kill_all)
signal.signal(signal.SIGALRM, arm)
while True:
    t = now()
    end = state["end_of_life"]
    if state["armed"]:
        end = min(end, state["last"] + idle + (busy_max if state["busy"] else 0.0))
    if t >= end:
        sys.exit(0)
    time.sleep(min(end - t, 1.0))
    reap()
"""

# After every call: SIGKILL every process of the sandbox user but PID 1, itself
# and the sessions named in argv (the background processes'), until none is
# left (a fork bomb forks while it is killed); then print the container's OOM
# kill count (-1 where the cgroup is not visible, as under gVisor) and the
# background sessions still alive, and tell PID 1 the call ended. A session id
# cannot be joined (setsid only makes new ones), and Linux does not reuse a pid
# still naming a session, so no other process can pass for a background one.
# Run by the call's own exec once its program ended (CALL: argv starts with
# `--after MARKER STATUS`), it writes that line to stderr instead, after a
# newline and the marker, with the program's exit status first: the call's end
# (`call_end`), so that a call takes one exec, not two.
CLEANUP = """\
import os, signal, sys, time
args = sys.argv[1:]
after = args[1:3] if args[:1] == ["--after"] else None
keep = {int(a) for a in (args[3:] if after else args)}
me = os.getpid()
alive = set()
for attempt in range(200):
    hit = 0
    alive = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            state, sid = fields[0], int(fields[3])
            if state in "ZX":
                continue
            if sid in keep:
                alive.add(sid)
                continue
            os.kill(int(name), signal.SIGKILL)
            hit += 1
        except (OSError, ValueError, IndexError):
            pass
    if not hit:
        break
    time.sleep(0.002 * attempt)
oom = -1
for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    oom = int(value)
    except (OSError, ValueError):
        pass
try:
    os.kill(1, signal.SIGUSR2)
except OSError:
    pass
if after:
    sys.stderr.write(" ".join(["\\n" + after[0], after[1], str(oom), *map(str, sorted(alive))]) + "\\n")
else:
    print(oom, *sorted(alive))
"""

# A call: tells PID 1 a call started, takes the program's source ($1 bytes,
# when the call gave code: its file's name is added to argv) and its stdin ($2
# bytes) from the exec's stdin into files of /tmp, then runs the rest of argv
# with that stdin. Given a clean-up ($4, with the marker $3 and the background
# sessions $5: under runc), it becomes that clean-up once the program exited,
# so that the call's end comes in the same exec: one exec a call, not two (a
# program killed by a signal leaves the clean-up to the host). Without one
# (under gVisor, where a shell left waiting for a fork bomb took the sandbox
# down at the call's deadline) it becomes the program, and the host cleans up
# with an exec of its own. Python writes no bytecode cache: a module rewritten
# within the second at the same size would run from the stale one. The sizes
# are sent first because not every runtime passes the end of an exec's stdin
# on (gVisor does not): `head -c` reads exactly what was sent.
CALL = """\
kill -USR1 1 2>/dev/null
export PYTHONDONTWRITEBYTECODE=1
c=$1; n=$2; marker=$3; cleanup=$4; keep=$5; shift 5
if [ "$c" -gt 0 ]; then
  p=$(mktemp /tmp/.rbcode.XXXXXX) || exit 125
  head -c "$c" > "$p" || exit 125
  set -- "$@" "$p"
fi
if [ "$n" -gt 0 ]; then
  f=$(mktemp /tmp/.rbstdin.XXXXXX) || exit 125
  head -c "$n" > "$f" || exit 125
  exec 3< "$f"
  rm -f "$f"
else
  exec 3< /dev/null
fi
[ -z "$cleanup" ] && exec "$@" <&3 3<&-
"$@" <&3 3<&-
status=$?
# Killed by a signal: most likely by the host's own clean-up after the call's
# deadline, which this one must not race (each would kill the other).
[ "$status" -gt 128 ] && exit "$status"
exec 3<&-
exec python3 -I -c "$cleanup" --after "$marker" "$status" $keep </dev/null
"""

# Runs the source file named by its last argument as `python3 -c` would (the
# work dir first on sys.path, `__main__`), then without the file (/tmp is the
# agent's too: nothing of the call's is left there).
CODE = (
    "import sys; p = sys.argv.pop(1); src = open(p, 'rb').read(); import os; os.unlink(p); "
    "exec(compile(src, '<code>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})"
)

# A background call: the command in a session of its own (setsid), its output
# to /dev/null, under the rest of argv (the process limit, as a call's); the
# new session's id on stdout once it exists, so that the cleanup after this
# call already spares it.
BACKGROUND = """\
kill -USR1 1 2>/dev/null
export PYTHONDONTWRITEBYTECODE=1
command=$1; shift
setsid "$@" sh -c 'echo $$; exec sh -c "$0" </dev/null >/dev/null 2>&1' "$command" &
"""

# Files under the work dir, walked one name at a time with O_NOFOLLOW, so that
# no symlink the agent made leads out; only regular files (a FIFO would block).
# argv: read|write, the relative path, the size (write: the bytes on stdin;
# read: the most to return). Exit 0 done, 2 refused (why on stderr), 4 missing.
FILES = f"WORK = {WORK_DIR!r}\n" + """\
import os, stat, sys
op, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
def refuse(why, code=2):
    sys.stderr.write(why)
    sys.exit(code)
try:
    fd = os.open(WORK, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    parts = path.split("/")
    for part in parts[:-1]:
        if op == "write":
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
        try:
            seen = os.lstat(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            refuse(f"no such file: {path}", 4)
        except OSError:
            refuse(f"{part!r} in {path!r} is not a directory (a symlink or a file)")
        # gVisor follows a symlink to a directory despite O_NOFOLLOW: what was
        # opened must be the directory the name held, not where a link leads.
        now = os.fstat(inner)
        if not stat.S_ISDIR(seen.st_mode) or (seen.st_dev, seen.st_ino) != (now.st_dev, now.st_ino):
            refuse(f"{part!r} in {path!r} is not a directory (a symlink or a file)")
        os.close(fd)
        fd = inner
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_WRONLY | os.O_CREAT | os.O_TRUNC if op == "write" else os.O_RDONLY)
    try:
        f = os.open(parts[-1], flags, 0o644, dir_fd=fd)
    except FileNotFoundError:
        refuse(f"no such file: {path}", 4)
    except OSError as exc:
        refuse(f"{path!r} is not a regular file ({exc.strerror}: a symlink, a directory or a FIFO)")
    opened, named = os.fstat(f), os.lstat(parts[-1], dir_fd=fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
        refuse(f"{path!r} is not a regular file")
    if op == "write":
        got = 0
        while got < size:
            chunk = os.read(0, min(1 << 16, size - got))
            if not chunk:
                refuse("the data ended early")
            os.write(f, chunk)
            got += len(chunk)
    else:
        if os.fstat(f).st_size > size:
            refuse(f"{path!r} holds {os.fstat(f).st_size} bytes, over the {size} a read returns")
        data = os.read(f, size + 1)
        if len(data) > size:
            refuse(f"{path!r} is over the {size} bytes a read returns")
        sys.stdout.buffer.write(data)
except OSError as exc:
    refuse(f"{path!r}: {exc.strerror}")
"""

# Bytes read beyond a call's output limit before it counts as over it: a read
# file's frames and the helpers' few words.
MARGIN_BYTES = 64 << 10
# The pids limit of a session's container under gVisor, whose own host threads it counts.
GVISOR_HOST_THREADS = 4096
# Cleanup execs tried, PID 1 killing everything between them, before the session counts as ended.
CLEANUP_ATTEMPTS = 6
# How long an exec may take to be marked ended after its output closed.
EXIT_STATUS_WAIT_S = 5.0
# Added to a call's deadline for the container's side (it is enforced by the host).
CALL_GRACE_S = 10.0
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
# How often a call in progress asks the engine whether its exec (and container)
# still exist: a gVisor container that died leaves the exec's stream open.
CALL_POLL_S = 0.5
# Under gVisor the memory cgroup holds the sandbox's kernel (the sentry) beside
# the agent's processes, and an OOM kill there takes the sentry, so the whole
# container. Each process of a call gets an address-space limit this far
# below the container's memory: its allocation fails first (Python's
# MemoryError). Measured: a process of 1 MiB allocations took the container
# down at RLIMIT_AS = memory_mb and lived at memory_mb - 8, at 128 and 512 MB;
# 32 MB leaves room for the sentry's own growth (tasks, page tables).
GVISOR_MEMORY_HEADROOM_MB = 32


class SessionError(SandboxError):
    """Root of the failures of a session."""


class SessionEnded(SessionError):
    """The session's container is gone: closed, past its lifetime or idle
    limit, or ended from inside (its PID 1 killed, its memory run out) or
    outside. Every later call raises it too; open a new session."""


class SessionRefused(SessionError, ValueError):
    """A call the session will not make as given: a path out of the work dir
    (absolute, `..`, through a symlink), data over a size limit, a missing
    file to read, too many background processes."""


class NoSuchFile(SessionRefused):
    """`read_file` of a path that names no file in the work dir."""


class SessionLimits(Frozen):
    """What bounds a session beside its container's `Limits`."""

    lifetime_s: float = Field(3600.0, gt=0, description="the container ends this long after it started, whatever runs")
    idle_s: float = Field(300.0, gt=0, description="the container ends when no call came for this long")
    call_timeout_s: float = Field(30.0, gt=0, description="a call's deadline when the call gives none")
    max_call_timeout_s: float = Field(600.0, gt=0, description="the longest deadline a call may ask for")
    output_bytes: int = Field(1 << 20, ge=1024, description="stdout+stderr of a call before it is stopped")
    file_bytes: int = Field(8 << 20, ge=1024, description="the largest file written or read, and a call's stdin")
    background: int = Field(4, ge=0, description="background processes alive at once")


class CallResult(Frozen):
    """One `run` or `shell` call. `verdict` uses the runs' vocabulary: passed
    (exit status 0), failed, syntax_error (Python's), timeout, out_of_memory,
    output_limit, killed (by a signal not ours)."""

    verdict: Verdict
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    duration_s: float = Field(0.0, description="host wall clock of the call, cleanup included")
    message: str = ""
    background_sid: int | None = Field(None, description="background=True: the started session's id (its pid)")


class Grader(Protocol[G_co]):
    """What grades a session's file: `rewardbox.CodeReward` (its `grade`) or
    anything with that method."""

    def grade(self, completion: str, label: Any, prompt: str | None = None) -> G_co: ...


def call_verdict(exit_code: int | None, *, deadline_hit: bool = False, capped: bool = False, oom: bool = False,
                 stderr: str = "", python: bool = False) -> tuple[Verdict, str]:
    """A call's verdict and message from what the host saw. Limits first: a
    limit the host enforced explains the rest.

    >>> call_verdict(0), call_verdict(1)
    ((<Verdict.PASSED: 'passed'>, ''), (<Verdict.FAILED: 'failed'>, 'exited with status 1'))
    >>> call_verdict(137, deadline_hit=True)[0], call_verdict(137)[1]
    (<Verdict.TIMEOUT: 'timeout'>, 'killed by signal 9')
    >>> call_verdict(1, stderr="  File x\\nSyntaxError: invalid syntax\\n", python=True)[0]
    <Verdict.SYNTAX_ERROR: 'syntax_error'>
    """
    if oom:
        return Verdict.OUT_OF_MEMORY, "memory limit exceeded"
    if deadline_hit:
        return Verdict.TIMEOUT, "deadline exceeded"
    if capped:
        return Verdict.OUTPUT_LIMIT, "output limit exceeded"
    if exit_code is None:
        return Verdict.KILLED, "no exit status"
    if exit_code == 0:
        return Verdict.PASSED, ""
    if exit_code > 128:  # a shell's (and the engine's) way to say "killed by signal N"
        return Verdict.KILLED, f"killed by signal {exit_code - 128}"
    last = stderr.rstrip().rsplit("\n", 1)[-1]
    if python and exit_code == 1:
        if last.startswith(_SYNTAX_ERRORS):
            return Verdict.SYNTAX_ERROR, last[:2000]
        if last.startswith("MemoryError"):
            return Verdict.OUT_OF_MEMORY, "memory limit exceeded (MemoryError)"
    return Verdict.FAILED, f"exited with status {exit_code}"


def gvisor_call_limits(limits: Limits) -> list[str]:
    """The `prlimit` a call runs under in a gVisor session: RLIMIT_NPROC at the
    pids limit (gVisor counts it within the sandbox; a fork bomb at the
    container's pids limit would take the sandbox down) and RLIMIT_AS at
    `GVISOR_MEMORY_HEADROOM_MB` below the memory limit (half of it for a small one).

    >>> gvisor_call_limits(Limits(memory_mb=512, pids=64))
    ['prlimit', '--nproc=64', '--as=503316480']
    >>> gvisor_call_limits(Limits(memory_mb=48))[2] == f"--as={24 << 20}"
    True
    """
    memory_mb = max(limits.memory_mb - GVISOR_MEMORY_HEADROOM_MB, limits.memory_mb // 2)
    return ["prlimit", f"--nproc={limits.pids}", f"--as={memory_mb << 20}"]


def call_end(stderr: bytes, marker: str) -> tuple[int, int, set[int], bytes] | None:
    """The end CALL wrote after its program: (the program's exit status, the
    container's OOM kill count, the background sessions still alive, stderr
    without that line), or None when stderr does not end with it. Only the
    last line counts: the program wrote before its end was written, and it
    and its processes are dead by then, so a line it forged comes earlier.

    >>> call_end(b"oops\\nrbend-x 3 0 17\\n", "rbend-x")
    (3, 0, {17}, b'oops')
    >>> call_end(b"\\nrbend-x 0 0\\n\\nrbend-x 1 2\\n", "rbend-x")
    (1, 2, set(), b'\\nrbend-x 0 0\\n')
    >>> call_end(b"rbend-x 0 0\\n", "rbend-x") is None   # not after a newline of its own
    True
    """
    head, sep, line = stderr.rpartition(b"\n" + marker.encode() + b" ")
    if not sep or not line.endswith(b"\n"):
        return None
    words = line[:-1].split(b" ")
    if len(words) < 2 or not all(w.lstrip(b"-").isdigit() for w in words):
        return None
    status, oom, *alive = (int(w) for w in words)
    return status, oom, set(alive), head


def checked_path(path: str) -> str:
    """A path below the work dir, as `RunRequest`'s files: plain names joined
    by '/', no '..', nothing absolute or hidden; else SessionRefused.

    >>> checked_path("pkg/solution.py")
    'pkg/solution.py'
    >>> checked_path("../etc/passwd")
    Traceback (most recent call last):
    ...
    rewardbox.sandbox.session.SessionRefused: path '../etc/passwd' must be relative, made of plain names like 'data/input.txt'
    """
    if path.startswith("./"):
        path = path[2:]
    try:
        return _relative_path(path)
    except ValueError as exc:
        raise SessionRefused(str(exc)) from None


class Session:
    """A hardened container for one rollout; see the module's docstring.
    Made by `Sandbox.session(...)`; a context manager (closed on exit, on an
    error too). Calls are serialised: one at a time.

    Example (needs an engine and the image, so not a doctest)::

        with Sandbox() as box, box.session(grader=CodeReward(box)) as s:
            s.write_file("solution.py", "def add(a, b): return a - b")
            print(s.run("from solution import add; print(add(1, 2))").stdout)   # -1
            s.write_file("solution.py", "def add(a, b): return a + b")
            s.score({"tests": ["assert add(1, 2) == 3"]}).reward                 # 1.0
    """

    def __init__(self, engine: DockerEngine, image: str, *, limits: Limits | None = None,
                 session_limits: SessionLimits | None = None, runtime: str | None = None, gvisor: bool = False,
                 grader: Grader[Any] | None = None, clock: Callable[[], float] = time.monotonic,
                 warm_wait_s: float = 0.0):
        """`warm_wait_s` > 0: a warm container (sandbox/session_warm.py),
        whose limits count from `arm()`; unarmed, it ends after `warm_wait_s`."""
        self.engine = engine
        self.limits = limits or Limits()
        self.session_limits = session_limits or SessionLimits()
        self.grader = grader
        self._clock = clock
        self._lock = threading.Lock()
        self._closed: str | None = None  # why, once closed
        self._background: set[int] = set()
        # Under gVisor a fork bomb that reaches the pids limit, or a process that
        # reaches the memory limit, takes the whole sandbox down (gVisor's own
        # threads and memory count against them): there each call runs under
        # RLIMIT_NPROC, which gVisor counts within the sandbox, and RLIMIT_AS
        # below the memory limit (gvisor_call_limits). Under runc the kernel
        # counts the uid's processes on the whole host, so the pids limit does
        # it there, and its OOM killer takes only the call's process.
        self._limit = gvisor_call_limits(self.limits) if gvisor else []
        self._gvisor = gvisor
        # And even with tasks so bounded, their churn takes gVisor's host threads over
        # the widened pids limit of a run (a fork bomb's container died at 1,000
        # threads and lived at 2,000): a session's gVisor gets GVISOR_HOST_THREADS.
        made = self.limits
        if gvisor:
            pids = -(-(GVISOR_HOST_THREADS - GVISOR_PIDS_BASE) // GVISOR_PIDS_PER_PROCESS)
            made = made.model_copy(update={"pids": max(made.pids, pids)})
        sl = self.session_limits
        busy_max = sl.max_call_timeout_s + CALL_GRACE_S
        command = ["python3", "-I", "-c", WATCHDOG, f"{sl.lifetime_s:.3f}", f"{sl.idle_s:.3f}", f"{busy_max:.3f}",
                   f"{max(warm_wait_s, 0.0):.3f}"]
        self.container_id = engine.create(image, made, f"rewardbox-session-{uuid.uuid4().hex[:16]}",
                                          runtime=runtime, gvisor=gvisor, command=command,
                                          lifetime_s=sl.lifetime_s + max(warm_wait_s, 0.0), auto_remove=True,
                                          task_limit=False)  # each call's own prlimit bounds its tasks
        # A session dropped unclosed goes when it is collected (or at exit), not at its idle limit.
        self._finalizer = weakref.finalize(self, _remove_quietly, engine, self.container_id)
        self._started = self._last = clock()
        try:
            engine.start(self.container_id)
            self._oom_kills = self._cleanup()
        except BaseException:
            self.close()
            raise

    def arm(self) -> None:
        """Starts a warm container's lifetime and idle limits now (its
        hand-out); the host's clocks too. A no-op for a session made armed."""
        self.engine.kill(self.container_id, signal="SIGALRM")
        self._started = self._last = self._clock()

    # -- the verbs ------------------------------------------------------------

    def run(self, code: str | None = None, *, file: str | None = None, stdin: str | bytes | None = None,
            timeout_s: float | None = None, background: bool = False) -> CallResult:
        """Runs Python: `code` (source text), or the work-dir `file`, as
        `python3` in the work dir, with `stdin`, for at most `timeout_s`."""
        if (code is None) == (file is None):
            raise SessionRefused("run takes either code or file=, not both or neither")
        source = code.encode() if code is not None else b""
        argv = ["python3", checked_path(file)] if file is not None else ["python3", "-c", CODE]
        if background:
            if code is not None:
                raise SessionRefused("a background run takes file=, not code")
            return self._background_call(f"exec python3 '{argv[1]}'")
        argv = [*self._limit, *argv]
        return self._call(argv, source, stdin, timeout_s, python=True)

    def shell(self, command: str, *, stdin: str | bytes | None = None, timeout_s: float | None = None,
              background: bool = False) -> CallResult:
        """Runs `command` with `sh -c` in the work dir."""
        if background:
            return self._background_call(command)
        return self._call([*self._limit, "sh", "-c", command], b"", stdin, timeout_s, python=False)

    def write_file(self, path: str, data: str | bytes) -> None:
        """Writes `data` (text as UTF-8) to `path` under the work dir, making
        its directories; no symlink is followed."""
        raw = data.encode() if isinstance(data, str) else data
        if len(raw) > self.session_limits.file_bytes:
            raise SessionRefused(f"{len(raw)} bytes is over the {self.session_limits.file_bytes} a file may hold")
        self._file("write", checked_path(path), raw)

    def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The content of `path` under the work dir: text (UTF-8, undecodable
        bytes replaced) or, with `text=False`, bytes. NoSuchFile (a
        SessionRefused) for a missing file; SessionRefused for one over
        `file_bytes` or a path out of the work dir."""
        data = self._file("read", checked_path(path), b"")
        if data is None:
            raise NoSuchFile(f"no such file: {path}")
        return data.decode("utf-8", "replace") if text else data

    def score(self, label: Any, file: str = "solution.py", *, grader: Grader[G] | None = None,
              prompt: str | None = None) -> G:
        """The graded reward of the agent's `file` as it is now, exactly as
        the grader grades a completion (`CodeReward.grade`: a fresh single-run
        container, the label's tests written there by the harness after this
        call). Nothing else of the session reaches that run: not its other
        files (a conftest.py, a fake `solution` package), not its processes.
        A missing file is an empty completion."""
        chosen: Grader[Any] | None = grader if grader is not None else self.grader
        if chosen is None:
            raise SessionRefused("score needs a grader: Sandbox.session(grader=CodeReward(sandbox)) "
                                 "or score(label, grader=...)")
        data = self._file("read", checked_path(file), b"")
        completion = (data or b"").decode("utf-8", "replace")
        result: G = chosen.grade(completion, label, prompt)
        return result

    def close(self) -> None:
        """Kills everything in the session and removes its container. Idempotent."""
        if self._closed is None:
            self._closed = "the session was closed"
        self.engine.remove(self.container_id)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: "TracebackType | None") -> None:
        self.close()

    # -- the mechanics ----------------------------------------------------------

    def _alive(self) -> None:
        """Raises SessionEnded for a closed or expired session (and removes it)."""
        now = self._clock()
        sl = self.session_limits
        if self._closed is None and now - self._started >= sl.lifetime_s:
            self._closed = f"the session reached its lifetime ({sl.lifetime_s:g} s)"
        elif self._closed is None and now - self._last >= sl.idle_s:
            self._closed = f"the session was idle for over {sl.idle_s:g} s"
        if self._closed is not None:
            self.engine.remove(self.container_id)
            raise SessionEnded(self._closed)

    def _ended(self, why: str) -> SessionEnded:
        self._closed = f"the session's container ended: {why}"
        self.engine.remove(self.container_id)
        return SessionEnded(self._closed)

    def _exec(self, argv: list[str], payload: bytes, deadline: float, cap: int,
              workdir: str = WORK_DIR) -> tuple[AttachChannel, int | None, bool, bool]:
        """Runs `argv` with `payload` on its stdin: its channel (outputs read),
        exit status, and whether the cap or the deadline stopped it (its
        processes are then still to kill)."""
        try:
            exec_id, channel = self.engine.exec(self.container_id, argv, workdir=workdir)
        except ContainerLost as exc:
            raise self._ended(str(exc)) from None
        try:
            try:
                channel.send(payload)
                channel.end_input()
            except OSError:
                pass  # it ended without reading all: its status says why
            capped = hit = False
            while True:
                try:
                    if not channel.read(min(deadline, time.monotonic() + CALL_POLL_S)):
                        break
                except TimeoutError:
                    if time.monotonic() >= deadline:
                        hit = True
                        break
                    # Quiet for a while: a dead gVisor container leaves the stream open
                    # until the deadline; its exec's going says so at once.
                    self._exit_code(exec_id, wait_s=0.0)
                    continue
                if channel.received > cap:
                    capped = True
                    break
        finally:
            channel.close()
        code = None if capped or hit else self._exit_code(exec_id)
        return channel, code, capped, hit

    def _exit_code(self, exec_id: str, wait_s: float = EXIT_STATUS_WAIT_S) -> int | None:
        """The exec's exit status, waiting `wait_s` for it; SessionEnded when its container is gone."""
        until = time.monotonic() + wait_s
        while True:
            try:
                code = self.engine.exec_exit_code(exec_id)
            except ContainerLost as exc:
                raise self._ended(str(exc)) from None
            if code is not None or time.monotonic() >= until:
                return code
            time.sleep(0.01)

    def _cleanup(self) -> int:
        """Kills the last call's processes (background ones spared); the
        container's OOM kill count."""
        for attempt in range(CLEANUP_ATTEMPTS):
            channel, code, _, _ = self._exec(["python3", "-I", "-c", CLEANUP, *map(str, sorted(self._background))],
                                             b"", time.monotonic() + 30, MARGIN_BYTES, workdir="/")
            words = bytes(channel.stdout).split()
            if code == 0 and words:
                self._background = {int(w) for w in words[1:]}
                return int(words[0])
            # No process could start (every pid taken: status 126), or the cleanup
            # died: PID 1 kills everything, background processes too.
            self.engine.kill(self.container_id, signal="SIGHUP")
            time.sleep(0.05 * (attempt + 1))
        raise self._ended(f"the cleanup after a call failed (status {code}): "
                          f"{bytes(channel.stderr[-500:]).decode('utf-8', 'replace')}")

    def _deadline(self, timeout_s: float | None) -> float:
        sl = self.session_limits
        asked = sl.call_timeout_s if timeout_s is None else timeout_s
        if not 0 < asked <= sl.max_call_timeout_s:
            raise SessionRefused(f"timeout_s must be in (0, {sl.max_call_timeout_s:g}]")
        left = sl.lifetime_s - (self._clock() - self._started)
        return time.monotonic() + min(asked, max(left, 0.0))

    def _stdin(self, stdin: str | bytes | None) -> bytes:
        raw = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        if len(raw) > self.session_limits.file_bytes:
            raise SessionRefused(f"stdin of {len(raw)} bytes is over {self.session_limits.file_bytes}")
        return raw

    def _call(self, argv: list[str], source: bytes, stdin: str | bytes | None, timeout_s: float | None,
              python: bool) -> CallResult:
        data = self._stdin(stdin)
        if len(source) > self.session_limits.file_bytes:
            raise SessionRefused(f"code of {len(source)} bytes is over {self.session_limits.file_bytes}")
        with self._lock:
            self._alive()
            began = time.monotonic()
            deadline = self._deadline(timeout_s)
            try:
                cap = self.session_limits.output_bytes
                marker = f"rbend-{secrets.token_hex(8)}"
                keep = " ".join(map(str, sorted(self._background)))
                channel, code, capped, hit = self._exec(
                    ["sh", "-c", CALL, "rbcall", str(len(source)), str(len(data)), marker,
                     "" if self._gvisor else CLEANUP, keep, *argv], source + data, deadline, cap + MARGIN_BYTES)
                stdout, stderr = bytes(channel.stdout), bytes(channel.stderr)
                oom_before = self._oom_kills
                end = None if self._gvisor or code != 0 or capped or hit else call_end(stderr, marker)
                if end is None:  # gVisor, cut short (deadline, output), or its end never came: clean up apart
                    code = None if capped or hit else code
                    capped = capped or len(stdout) + len(stderr) > cap
                    try:
                        self._oom_kills = self._cleanup()
                    except SessionEnded:
                        # The lifetime that cut this call's deadline ends the container too (its
                        # watchdog's bound), maybe before the cleanup came: the call is that
                        # timeout, and the session is over for the next one.
                        if not (hit and self._clock() - self._started >= self.session_limits.lifetime_s):
                            raise
                else:
                    code, self._oom_kills, alive, stderr = end
                    self._background &= alive  # only those the session started may be spared
                    capped = len(stdout) + len(stderr) > cap
            finally:
                self._last = self._clock()
            if capped:  # the cap counts both streams
                stdout = stdout[:cap]
                stderr = stderr[:max(0, cap - len(stdout))]
            err = stderr.decode("utf-8", "replace")
            verdict, message = call_verdict(code, deadline_hit=hit, capped=capped, oom=self._oom_kills > oom_before,
                                            stderr=err, python=python)
            return CallResult(verdict=verdict, exit_code=code, stdout=stdout.decode("utf-8", "replace"), stderr=err,
                              output_truncated=capped, duration_s=round(time.monotonic() - began, 6),
                              message=message)

    def _background_call(self, command: str) -> CallResult:
        with self._lock:
            self._alive()
            began = time.monotonic()
            if len(self._background) >= self.session_limits.background:
                raise SessionRefused(f"{len(self._background)} background processes are running already, "
                                     f"the most a session holds")
            try:
                channel, code, _, _ = self._exec(["sh", "-c", BACKGROUND, "rbbg", command, *self._limit], b"",
                                                 time.monotonic() + 30, MARGIN_BYTES)
                words = bytes(channel.stdout).split()
                sid = int(words[0]) if code == 0 and words and words[0].isdigit() else None
                if sid is not None:
                    self._background.add(sid)
                self._oom_kills = self._cleanup()
            finally:
                self._last = self._clock()
            if sid is None:
                return CallResult(verdict=Verdict.FAILED, exit_code=code, message="the background process did not "
                                  "start", stderr=bytes(channel.stderr).decode("utf-8", "replace"))
            return CallResult(verdict=Verdict.PASSED, exit_code=None, background_sid=sid,
                              duration_s=round(time.monotonic() - began, 6),
                              message=f"started in the background (session {sid})")

    def _file(self, op: str, path: str, data: bytes) -> bytes | None:
        """Reads or writes one file (see FILES); None: a missing file to read."""
        size = len(data) if op == "write" else self.session_limits.file_bytes
        with self._lock:
            self._alive()
            try:
                channel, code, capped, hit = self._exec(["python3", "-I", "-c", FILES, op, path, str(size)], data,
                                                        time.monotonic() + 60, size + MARGIN_BYTES, workdir="/")
                if capped or hit:
                    self._oom_kills = self._cleanup()
            finally:
                self._last = self._clock()
            why = bytes(channel.stderr[-2000:]).decode("utf-8", "replace")
            if capped:  # the file grew past the limit while it was read
                raise SessionRefused(f"{path!r} is over the {size} bytes a read returns")
            if hit:
                raise SessionError(f"a file {op} of {path!r} took over 60 s")
            if code == 4:
                return None
            if code == 2:
                raise SessionRefused(why)
            if code != 0:
                raise SessionError(f"a file {op} of {path!r} failed (status {code}): {why}")
            return bytes(channel.stdout)


def _remove_quietly(engine: DockerEngine, container_id: str) -> None:
    # At the interpreter's exit the engine's client may be gone: the idle limit and
    # the sweep remain.
    with suppress(Exception):
        engine.remove(container_id)


class AsyncSession:
    """A `Session` for asyncio code: the same verbs, each run in a thread
    (`asyncio.to_thread`); made by `Sandbox.async_session(...)` and used as
    `async with`, which creates the container on entry and removes it on exit."""

    def __init__(self, factory: Callable[[], Session]):
        self._factory = factory
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            raise SessionError("the async session is not open: use `async with` (or `await open()`)")
        return self._session

    async def open(self) -> "AsyncSession":
        if self._session is None:
            self._session = await asyncio.to_thread(self._factory)
        return self

    async def __aenter__(self) -> "AsyncSession":
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: "TracebackType | None") -> None:
        await self.close()

    async def run(self, code: str | None = None, *, file: str | None = None, stdin: str | bytes | None = None,
                  timeout_s: float | None = None, background: bool = False) -> CallResult:
        return await asyncio.to_thread(self.session.run, code, file=file, stdin=stdin, timeout_s=timeout_s,
                                       background=background)

    async def shell(self, command: str, *, stdin: str | bytes | None = None, timeout_s: float | None = None,
                    background: bool = False) -> CallResult:
        return await asyncio.to_thread(self.session.shell, command, stdin=stdin, timeout_s=timeout_s,
                                       background=background)

    async def write_file(self, path: str, data: str | bytes) -> None:
        await asyncio.to_thread(self.session.write_file, path, data)

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        return await asyncio.to_thread(self.session.read_file, path, text=text)

    async def score(self, label: Any, file: str = "solution.py", *, grader: Grader[G] | None = None,
                    prompt: str | None = None) -> G:
        return await asyncio.to_thread(self.session.score, label, file, grader=grader, prompt=prompt)

    async def close(self) -> None:
        if self._session is not None:
            await asyncio.to_thread(self._session.close)
