"""One run, for both supervisors (supervisor.py, single-use; pool_supervisor.py,
pooled): reads the host's request, writes the run's files, runs the tests in a
child process (pytest mode; program mode is rbprogram.py), bounds and signs the
report. The protocol is described in supervisor.py; sandbox/protocol.py is the
host's side of it."""

import base64
import ctypes
import errno
import hashlib
import hmac
import json
import os
import resource
import secrets
import selectors
import signal
import stat
import struct
import subprocess
import sys
import time

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rblibc  # noqa: E402
import rbprotocol  # noqa: E402

WORK_DIR = rbprotocol.WORK_DIR
TESTS_DIR = f"{WORK_DIR}/.tests"  # created here, then made read-only
RUNNER = f"{rbprotocol.HARNESS_DIR}/pytest_runner.py"
KEEP_OUTPUT_BYTES = 16 * 1024  # head kept of each stream, for error messages
# A line on the records pipe longer than this is no record of ours: the test
# process cuts every text it sends (pytest_runner.py), and sends the collected
# list in several records.
MAX_RECORD_BYTES = 64 * 1024
# Failure messages are for people, not for grading: the first ones are kept as
# the test process sent them (up to 2,000 characters each), later ones cut to
# their last SHORT_MESSAGE_CHARS, and past MESSAGES_CHARS in all left out, so
# that 10,000 failing tests make a report of a few MiB.
FULL_MESSAGES_CHARS = 1 << 20
MESSAGES_CHARS = 2 << 20
SHORT_MESSAGE_CHARS = 200
# The report's line is at most this long (sandbox/protocol.py's MAX_REPORT_BYTES,
# which the host reads beyond the output limit). A report over it sheds its
# messages; one still over it is a failure of ours (harness_error), never a verdict.
MAX_REPORT_BYTES = 8 << 20
CHILD_EXIT_GRACE_S = 0.5
EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()
KILL_WAIT_S = 2.0
SYSCALLS = {"x86_64": {"ioprio_get": 252, "sched_getattr": 315},
            "aarch64": {"ioprio_get": 31, "sched_getattr": 275}}
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
SCHED_ATTR_SIZE = 56  # struct sched_attr with the utilisation clamps (Linux 5.3)


def fingerprint(pid):
    """What the code under test (same uid) could change about a process it
    cannot ptrace: limits (prlimit), priority (setpriority), scheduling policy
    and its parameters (sched_setscheduler, sched_setattr: the slice, utilisation
    clamps, reset-on-fork), CPU set (sched_setaffinity) and I/O priority
    (ioprio_set, by pid, group or user); None if the first four cannot be read.
    Its /proc files (oom_score_adj, autogroup, timerslack_ns) are root's, as it
    is non-dumpable. Asked of the kernel, not /proc: gVisor has no
    /proc/<pid>/limits."""
    try:
        limits = [resource.prlimit(pid, getattr(resource, name))
                  for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))]
        return (limits, os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid),
                sorted(os.sched_getaffinity(pid)), sched_attr(pid), ioprio(pid))
    except OSError:
        return None


def _syscall(name, *args):
    """A raw syscall's result, or -errno (ENOSYS where the kernel or gVisor
    lacks it): a constant that keeps the fingerprint comparable."""
    number = SYSCALLS.get(os.uname().machine, {}).get(name)
    if number is None:
        return -errno.ENOSYS
    result = rblibc.LIBC.syscall(number, *args)
    return result if result >= 0 else -ctypes.get_errno()


def sched_attr(pid):
    """sched_getattr(2): policy, flags, nice, priority, runtime (a fair task's
    slice), deadline, period, utilisation clamps; -errno if unsupported."""
    buf = ctypes.create_string_buffer(SCHED_ATTR_SIZE)
    result = _syscall("sched_getattr", pid, buf, SCHED_ATTR_SIZE, 0)
    return result if result < 0 else struct.unpack("<IIQiIQQQII", buf.raw)[1:]


def ioprio(pid):
    """ioprio_get(2) of `pid`, -errno if unreadable (gVisor: EPERM). Class
    "none" (I/O priority from the nice value) reads as 0: older kernels show it
    with level 4 until the process first does block I/O, and no one can set a
    level for it (EINVAL)."""
    value = _syscall("ioprio_get", IOPRIO_WHO_PROCESS, pid)
    return 0 if value >= 0 and value >> IOPRIO_CLASS_SHIFT == 0 else value


def make_non_dumpable():
    """Hide this process's memory and fds from same-uid processes."""
    rblibc.set_dumpable(False)


def safe_name(name):
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise ValueError(f"bad file name {name!r}")
    return name


def safe_path(path):
    """A path below the work dir (the host checked it too; this is the harness's own guard)."""
    for part in path.split("/"):
        safe_name(part)
    return os.path.join(WORK_DIR, path)


def write_files(directory, files, mode):
    digests = {}
    for name, text in files.items():
        path = os.path.join(directory, safe_name(name))
        data = text.encode("utf-8", "surrogatepass")  # lone surrogates reach the file, as the model wrote them
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def write_binary_files(files):
    for path, content in files.items():
        full = safe_path(path)
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(content))


def digest_files(directory, names):
    """Each file's digest, None for one that is no longer a regular file
    reached without a symlink: the code under test may have swapped the tests'
    directory or file for a link to a FIFO or /dev/zero, which must neither
    hang this process nor fill its memory."""
    digests = {}
    for name in names:
        path = os.path.join(directory, name)
        digests[name] = None
        try:
            if os.path.realpath(path) != path:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                digests[name] = hashlib.sha256(f.read()).hexdigest()
    return digests


def syntax_error(files):
    """The first syntax error among the completion's Python files, or None.

    Whatever compile() raises is the code's failure, not ours: CPython bounds
    its parser and compiler by raising RecursionError (a few thousand nested
    unary operators, a `1+1+...` chain, a long elif table) or MemoryError (the
    parser's own stack), which Python refuses as it refuses a syntax error."""
    for name, text in files.items():
        if not name.endswith(".py"):
            continue
        try:
            compile(text.encode("utf-8", "surrogatepass"), name, "exec", dont_inherit=True)
        except Exception as exc:  # noqa: BLE001 - see above
            message = str(exc) or "too deeply nested or too large to compile"
            return {"file": name, "type": type(exc).__name__, "message": message[:2000]}
    return None


class NotStarted(RuntimeError):
    """The run's test process could not be started (a pool's zygote did not
    fork): a failure of ours before the run's code ran, which the host retries
    in a fresh container."""


class Stream:
    """Keeps the head of a child's output stream and counts all of it."""

    def __init__(self, keep=KEEP_OUTPUT_BYTES):
        self.keep = keep
        self.head = bytearray()
        self.total = 0

    def feed(self, chunk):
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]

    def text(self):
        return self.head.decode("utf-8", "replace")


def kill_everything_else(wait_s=KILL_WAIT_S):
    """SIGKILL every process this uid may signal except ourselves and init,
    and wait until they are dead.

    This reaches processes that left the child's session (double fork + setsid).
    Waiting matters: a killed process blocked reading the container's stdout
    (/proc/1/fd/1 opens the pipe's read end) still takes what is in the pipe
    when it wakes, so the report is written only once no one is left to read.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # again each round: a fork may have raced the last one
        except OSError:
            pass
        if not others_alive() or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def others_alive(spare=None):
    """Whether a process other than init, ourselves (and `spare`) is still running (not a zombie)."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, os.getpid(), spare):
            continue
        if process_state(name) not in (None, b"Z", b"X"):  # None: gone while we looked
            return True
    return False


def process_state(pid):
    """The state letter of a process (b"S" sleeping, b"T" stopped, b"Z" a
    zombie...), from /proc/<pid>/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def memory_file(data):
    """An fd holding `data` that exists in no directory: the completion cannot
    open it by path, and /proc/<pid>/fd of a non-dumpable process is closed to it."""
    fd = os.memfd_create("rewardbox-test-data", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def run_pytest(test_names, test_data, timeout_s, output_limit_bytes, zygote=None, solution="worker"):
    """Runs the tests in a child: a fresh interpreter (`python -I -B pytest_runner.py`),
    or in a pooled container a fork of the warm zygote (pool_supervisor.py), which has
    pytest imported already. Either way the child sees the same argv, fds,
    environment and working directory. `solution`: "worker" or "in-process"
    (pytest_runner.py)."""
    key = secrets.token_bytes(32)
    records_r, records_w = os.pipe()
    key_r, key_w = os.pipe()
    os.write(key_w, key)
    os.close(key_w)
    data_fd = memory_file(test_data.encode("utf-8", "surrogatepass")) if test_data is not None else -1
    env = child_env()
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    paths = [os.path.join(TESTS_DIR, n) for n in test_names]
    fds = (key_r, records_w) + ((data_fd,) if data_fd >= 0 else ())
    started = time.monotonic()
    if zygote is not None:
        child = zygote.spawn(paths, env, fds, solution)
    else:
        child = subprocess.Popen(
            [sys.executable, "-I", "-B", RUNNER, str(key_r), str(records_w), str(data_fd), solution] + paths,
            cwd=WORK_DIR, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=fds, start_new_session=True,
        )
    for fd in fds:
        os.close(fd)

    streams = {"stdout": Stream(), "stderr": Stream()}
    records = Records(key)
    returncode, timed_out, output_exceeded = pump(
        child, streams, started + timeout_s, output_limit_bytes,
        extra={"records": (os.fdopen(records_r, "rb", buffering=0), records.feed)})
    duration = time.monotonic() - started
    if zygote is None:
        kill_everything_else()
    else:
        zygote.sweep()
    return PytestRun(returncode, timed_out, output_exceeded, duration, streams["stdout"].text(),
                     streams["stderr"].text(), sum(s.total for s in streams.values()), records)


class PytestRun:
    """How the test process ended: its exit status, whether the deadline or the
    output limit ended it, its duration, what it printed (and how much), and
    the records it sent."""

    def __init__(self, returncode, timed_out, output_exceeded, duration_s, stdout, stderr, output_bytes, records):
        self.returncode, self.timed_out, self.output_exceeded = returncode, timed_out, output_exceeded
        self.duration_s, self.stdout, self.stderr, self.output_bytes = duration_s, stdout, stderr, output_bytes
        self.records = records


def pytest_report(run, tests_modified):
    """The report's pytest phase (the host's sandbox/protocol.py Report reads
    these keys): how the test process ended, the records, and whether the tests
    were changed."""
    return {
        "phase": rbprotocol.PHASE_PYTEST,
        "returncode": run.returncode,
        "timed_out": run.timed_out,
        "output_exceeded": run.output_exceeded,
        "duration_s": round(run.duration_s, 6),
        # What the tests printed, then the tail of pytest's own report (which pytest_runner
        # keeps off the counted stream), so that its last line still says how the session ended.
        "stdout": run.stdout[:KEEP_OUTPUT_BYTES - len(run.records.terminal)] + run.records.terminal,
        "stderr": run.stderr,
        "output_bytes": run.output_bytes,
        "records": run.records.records,
        "rejected_records": run.records.rejected,
        "tests_modified": tests_modified,
    }


def child_env():
    # One thread per numerical library (numpy's OpenBLAS would start one per host
    # CPU, and the pids limit counts threads); the image's ENV does not reach here.
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORK_DIR, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pump(child, streams, deadline, output_limit_bytes, extra=None):
    """Drains the child's stdout and stderr (and `extra` pipes, each to its own
    callback) until they close, the deadline passes or the output limit is
    exceeded; then kills the child's session if it is still at work.

    Returns (returncode, timed_out, output_exceeded).
    """
    callbacks = {}
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ, "stdout")
    sel.register(child.stderr, selectors.EVENT_READ, "stderr")
    for label, (fileobj, callback) in (extra or {}).items():
        sel.register(fileobj, selectors.EVENT_READ, label)
        callbacks[label] = callback
    timed_out = output_exceeded = False
    exited_at = None
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        # A detached grandchild can hold the pipes open after the child exits:
        # once the child is gone, read what is buffered for a moment, then stop waiting.
        if exited_at is None and child.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > CHILD_EXIT_GRACE_S:
            break
        for key_event, _ in sel.select(timeout=min(deadline - now, 0.1)):
            chunk = os.read(key_event.fd, 65536)
            if not chunk:
                sel.unregister(key_event.fileobj)
                continue
            if key_event.data in callbacks:
                callbacks[key_event.data](chunk)
            else:
                streams[key_event.data].feed(chunk)
        if sum(s.total for s in streams.values()) > output_limit_bytes:
            output_exceeded = True
            break
    if timed_out or output_exceeded:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
    return child.wait(), timed_out, output_exceeded


def run_bounded(argv, env, stdin, timeout_s, keep_bytes, limit_bytes, sweep=None, preexec_fn=None):
    """Runs `argv` in the work dir, in a session of its own, with `stdin` (a
    file descriptor or subprocess.DEVNULL) until it ends, `timeout_s` passes or
    its output passes `limit_bytes`; then everything it left is killed (`sweep`,
    else kill_everything_else). Its output's heads: both streams together
    within `keep_bytes`. Returns a Bounded."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=WORK_DIR, env=env, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec_fn)
    streams = {"stdout": Stream(keep_bytes), "stderr": Stream(keep_bytes)}
    returncode, timed_out, output_exceeded = pump(child, streams, started + timeout_s, limit_bytes)
    duration = time.monotonic() - started
    (sweep or kill_everything_else)()
    stdout = bytes(streams["stdout"].head[:keep_bytes])
    stderr = bytes(streams["stderr"].head[:max(0, keep_bytes - len(stdout))])
    return Bounded(returncode, timed_out, output_exceeded, duration, stdout, stderr,
                   sum(s.total for s in streams.values()))


class Bounded:
    """What run_bounded saw of a child: its status, whether the deadline or
    the cap stopped it, its time, its output's heads and how much it wrote."""

    def __init__(self, returncode, timed_out, output_exceeded, duration_s, stdout, stderr, output_bytes):
        self.returncode, self.timed_out, self.output_exceeded = returncode, timed_out, output_exceeded
        self.duration_s, self.stdout, self.stderr, self.output_bytes = duration_s, stdout, stderr, output_bytes

    def record(self):
        """The fields a compile step's and a program run's reports share (rbprotocol)."""
        return {
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "output_exceeded": self.output_exceeded,
            "duration_s": round(self.duration_s, 6),
            "stdout_b64": base64.b64encode(self.stdout).decode(),
            "stderr_b64": base64.b64encode(self.stderr).decode(),
        }


class Records:
    """Signed per-test records from the pytest child, one per line.

    The collected list arrives in parts (`more` on all but the last) and is
    kept as one record, as the host reads it; its `more` stays true if the
    list was cut short. pytest's terminal tail is kept apart (`terminal`).
    Failure messages are kept within the report's budget (MESSAGES_CHARS)."""

    def __init__(self, key):
        self.key = key
        self.records = []
        self.rejected = 0
        self.pending = bytearray()
        self.collected = None
        self.terminal = ""
        self.message_chars = 0

    def feed(self, chunk):
        self.pending += chunk
        start = 0
        while True:
            end = self.pending.find(b"\n", start)
            if end < 0:
                break
            self.take(verify_record(self.key, bytes(self.pending[start:end])))
            start = end + 1
        del self.pending[:start]  # once per chunk: a long run of records costs no quadratic copying
        if len(self.pending) > MAX_RECORD_BYTES:
            self.rejected += 1
            self.pending.clear()

    def take(self, record):
        if record is None:
            self.rejected += 1
        elif record.get("event") == "terminal":
            self.terminal = record["text"][-KEEP_OUTPUT_BYTES // 4:] if isinstance(record.get("text"), str) else ""
        elif record.get("event") == "collected" and self.collected is not None:
            if isinstance(record.get("nodeids"), list) and isinstance(self.collected.get("nodeids"), list):
                self.collected["nodeids"].extend(record["nodeids"])
            self.collected["more"] = record.get("more")
        else:
            if record.get("event") == "collected":
                self.collected = record
            if isinstance(record.get("message"), str):
                record["message"] = self.budget(record["message"])
            self.records.append(record)

    def budget(self, message):
        if self.message_chars >= MESSAGES_CHARS:
            return None
        if self.message_chars >= FULL_MESSAGES_CHARS and len(message) > SHORT_MESSAGE_CHARS:
            message = "..." + message[-SHORT_MESSAGE_CHARS:]
        self.message_chars += len(message)
        return message


def verify_record(key, line):
    mac, _, body = line.partition(b" ")
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        record = json.loads(body)
    except (ValueError, RecursionError):  # a forged record may nest deeper than the parser goes
        return None
    return record if isinstance(record, dict) else None


def handle(request, zygote=None):
    """One run's report (the caller signs and writes it)."""
    report = {"version": rbprotocol.PROTOCOL_VERSION}
    try:
        write_files(WORK_DIR, request["files"], 0o644)
        write_binary_files(request.get("binary_files") or {})
        sweep = zygote.sweep if zygote is not None else None
        language = request.get("language")  # another language than Python's (sent only for one)
        if zygote is not None and (request.get("program") is not None or (language or {}).get("compile") is not None):
            zygote.drop_spare()  # its processes are not the zygote's forks
        if language is not None and language.get("compile") is not None:
            import rbcompile  # imported when a compiled language's run comes

            report["compile"] = step = rbcompile.compile_step(language, sweep)
            if not step["ok"]:
                report["phase"] = rbprotocol.PHASE_COMPILE
                return report
        if request.get("program") is not None:
            name = safe_name(request["program"])
            import rbprogram  # program mode builds on this module: imported when a program run comes

            report.update(phase=rbprotocol.PHASE_PROGRAM, **rbprogram.run_program(
                name, request["files"][name], request.get("stdin"), request["timeout_s"],
                request["output_limit_bytes"], request.get("fetch_files") or [], sweep=sweep, language=language))
        else:
            run_tests(request, report, zygote)
    except Exception as exc:  # a broken request or harness: the host reports it as ours
        report.update(phase=rbprotocol.PHASE_HARNESS_ERROR, message=f"{type(exc).__name__}: {exc}"[:2000])
        if isinstance(exc, NotStarted):
            report["not_started"] = True
    return report


def report_body(report):
    """The report as JSON, at most MAX_REPORT_BYTES long: over it, without the
    tests' failure messages; still over it (tens of thousands of tests), a
    harness error, which the host raises as ours and never grades."""
    body = json.dumps(report, separators=(",", ":")).encode()
    if len(body) <= MAX_REPORT_BYTES:
        return body
    records = report.get("records") if isinstance(report.get("records"), list) else []
    for record in records:
        if isinstance(record, dict) and record.get("message") is not None:
            record["message"] = None
    body = json.dumps(report, separators=(",", ":")).encode()
    if len(body) <= MAX_REPORT_BYTES:
        return body
    kept = {k: report[k] for k in ("version", "recycle", "serve_s", "oom_killed") if k in report}
    return json.dumps({**kept, "phase": rbprotocol.PHASE_HARNESS_ERROR, "message": (
        f"the report of {len(records)} test records is over {MAX_REPORT_BYTES} bytes")}, separators=(",", ":")).encode()


def write_report(nonce, report):
    body = report_body(report)
    mac = hmac.new(nonce, body, hashlib.sha256).hexdigest().encode()
    out = sys.stdout.buffer
    # On a line of its own even if the code under test left a partial line on
    # the container's stdout (/proc/1/fd/1).
    out.write(b"\n" + rbprotocol.REPORT_PREFIX + mac + b" " + body + b"\n")
    out.flush()


def read_request(data):
    """The host's request (sandbox/protocol.py WireRequest: its fields are the
    keys read here), one JSON object."""
    return json.loads(data)


def run_tests(request, report, zygote=None):
    os.mkdir(TESTS_DIR, 0o755)
    test_digests = write_files(TESTS_DIR, request["tests"], 0o444)
    os.chmod(TESTS_DIR, 0o555)
    # Python's own syntax check; another language's compile step has run already (handle).
    error = syntax_error(request["files"]) if request.get("language") is None else None
    if error is not None:
        report.update(phase=rbprotocol.PHASE_SYNTAX, syntax_error=error)
    else:
        run = run_pytest(
            sorted(request["tests"]), request.get("test_data"), request["timeout_s"],
            request["output_limit_bytes"], zygote,
            "in-process" if request.get("solution_in_process") is True else "worker")
        after = digest_files(TESTS_DIR, test_digests)
        # A test module emptied is the stand-in's doing (rbsolution.hide_test_sources), after
        # pytest read it: it changes no test. Any other change is tampering.
        report.update(pytest_report(run, any(after[n] not in (d, EMPTY_DIGEST) for n, d in test_digests.items())))
