"""In-container supervisor: writes the run's files, runs pytest in a child
process, and reports one signed line to the host.

It never imports the completion. Protocol (see sandbox/protocol.py on the host):

    stdin  <- one JSON object {"nonce", "files", "tests", "test_data",
              "timeout_s", "output_limit_bytes"}, then EOF
    stdout -> "RBREPORT <hmac-sha256(nonce, body)> <body>\n", body a JSON object

The nonce is read before any completion code runs and stays in this process,
which makes itself non-dumpable, so code under test (same uid) can neither read
it from /proc nor ptrace it: it cannot forge the report. Per-test records come
from the pytest child over a pipe, each signed with a key the child's plugin
reads before the completion is imported; unsigned or mis-signed records are
counted as tampering (see pytest_runner.py for what this does not stop).
"""

import ctypes
import hashlib
import hmac
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import time

WORK_DIR = "/work"
TESTS_DIR = "/work/.tests"  # created here, then made read-only
RUNNER = "/opt/rewardbox/pytest_runner.py"
PR_SET_DUMPABLE = 4
KEEP_OUTPUT_BYTES = 16 * 1024  # head kept of each stream, for error messages
MAX_RECORD_BYTES = 64 * 1024
CHILD_EXIT_GRACE_S = 0.5


def make_non_dumpable():
    """Hide this process's memory and fds from same-uid processes."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except OSError:
        pass


def safe_name(name):
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise ValueError(f"bad file name {name!r}")
    return name


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


def digest_files(directory, names):
    digests = {}
    for name in names:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                digests[name] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            digests[name] = None
    return digests


def syntax_error(files):
    """The first syntax error among the completion's Python files, or None."""
    for name, text in files.items():
        if not name.endswith(".py"):
            continue
        try:
            compile(text.encode("utf-8", "surrogatepass"), name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return {"file": name, "type": type(exc).__name__, "message": str(exc)[:2000]}
    return None


class Stream:
    """Keeps the head of a child's output stream and counts all of it."""

    def __init__(self):
        self.head = bytearray()
        self.total = 0

    def feed(self, chunk):
        self.total += len(chunk)
        room = KEEP_OUTPUT_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]

    def text(self):
        return self.head.decode("utf-8", "replace")


def kill_everything_else():
    """SIGKILL every process this uid may signal except ourselves and init.

    This reaches processes that left the child's session (double fork + setsid).
    """
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


def memory_file(data):
    """An fd holding `data` that exists in no directory: the completion cannot
    open it by path, and /proc/<pid>/fd of a non-dumpable process is closed to it."""
    fd = os.memfd_create("rewardbox-test-data", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def run_pytest(test_names, test_data, timeout_s, output_limit_bytes):
    key = secrets.token_bytes(32)
    records_r, records_w = os.pipe()
    key_r, key_w = os.pipe()
    os.write(key_w, key)
    os.close(key_w)
    data_fd = memory_file(test_data.encode("utf-8", "surrogatepass")) if test_data is not None else -1
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": WORK_DIR,
        "TMPDIR": "/tmp",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "LANG": "C.UTF-8",
    }
    argv = [sys.executable, "-I", "-B", RUNNER, str(key_r), str(records_w), str(data_fd)]
    argv += [os.path.join(TESTS_DIR, n) for n in test_names]
    started = time.monotonic()
    child = subprocess.Popen(
        argv, cwd=WORK_DIR, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(key_r, records_w) + ((data_fd,) if data_fd >= 0 else ()), start_new_session=True,
    )
    os.close(key_r)
    os.close(records_w)
    if data_fd >= 0:
        os.close(data_fd)

    streams = {"stdout": Stream(), "stderr": Stream()}
    records, rejected = [], 0
    pending = bytearray()
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ, "stdout")
    sel.register(child.stderr, selectors.EVENT_READ, "stderr")
    records_file = os.fdopen(records_r, "rb", buffering=0)
    sel.register(records_file, selectors.EVENT_READ, "records")
    timed_out = output_exceeded = False
    deadline = started + timeout_s
    exited_at = None
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        # A detached grandchild can hold the pipes open after pytest exits: once
        # pytest is gone, read what is buffered for a moment, then stop waiting.
        if exited_at is None and child.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > CHILD_EXIT_GRACE_S:
            break
        for key_event, _ in sel.select(timeout=min(deadline - now, 0.1)):
            chunk = os.read(key_event.fd, 65536)
            if not chunk:
                sel.unregister(key_event.fileobj)
                continue
            if key_event.data == "records":
                pending += chunk
                while b"\n" in pending:
                    line, _, rest = bytes(pending).partition(b"\n")
                    pending = bytearray(rest)
                    record = verify_record(key, line)
                    if record is None:
                        rejected += 1
                    else:
                        records.append(record)
                if len(pending) > MAX_RECORD_BYTES:
                    rejected += 1
                    pending.clear()
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
    returncode = child.wait()
    duration = time.monotonic() - started
    kill_everything_else()
    return {
        "returncode": returncode,
        "timed_out": timed_out,
        "output_exceeded": output_exceeded,
        "duration_s": round(duration, 6),
        "stdout": streams["stdout"].text(),
        "stderr": streams["stderr"].text(),
        "output_bytes": sum(s.total for s in streams.values()),
        "records": records,
        "rejected_records": rejected,
    }


def verify_record(key, line):
    mac, _, body = line.partition(b" ")
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def main():
    make_non_dumpable()
    request = json.loads(sys.stdin.buffer.read())
    nonce = request["nonce"].encode()
    report = {"version": 1}
    try:
        write_files(WORK_DIR, request["files"], 0o644)
        os.mkdir(TESTS_DIR, 0o755)
        test_digests = write_files(TESTS_DIR, request["tests"], 0o444)
        os.chmod(TESTS_DIR, 0o555)
        error = syntax_error(request["files"])
        if error is not None:
            report.update(phase="syntax", syntax_error=error)
        else:
            report.update(phase="pytest", **run_pytest(
                sorted(request["tests"]), request.get("test_data"), request["timeout_s"],
                request["output_limit_bytes"]))
            report["tests_modified"] = digest_files(TESTS_DIR, test_digests) != test_digests
    except Exception as exc:  # a broken request or harness: the host reports it as ours
        report.update(phase="harness_error", message=f"{type(exc).__name__}: {exc}"[:2000])
    body = json.dumps(report, separators=(",", ":")).encode()
    mac = hmac.new(nonce, body, hashlib.sha256).hexdigest().encode()
    out = sys.stdout.buffer
    out.write(b"RBREPORT " + mac + b" " + body + b"\n")
    out.flush()


if __name__ == "__main__":
    main()
