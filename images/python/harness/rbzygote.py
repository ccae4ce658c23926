"""The pooled container's warm process: pytest is imported here once, and each
run's test process is a fork of this one, which saves the interpreter's start
and pytest's import (most of a small run's cost).

argv: SOCKET_FD [--once]   (a SOCK_SEQPACKET socket to the pool supervisor, PID 1;
                           --once: the container serves one run, no warm-up session)

Started by pool_supervisor.py before any request arrives, from a fresh
interpreter, so its memory holds nothing of any run: a fork of it has nothing
of another run to find. It never reads a run's files, key or test data; it only
passes on the fds it is handed. It is non-dumpable, so the code under test
(same uid) can neither ptrace it nor read its memory or fds; what that code can
still do to it (kill or stop it, lower its limits or priority) the supervisor
checks after every run, and recycles the container if anything changed.

Messages (JSON, one per packet):
    <- {"op": "run", "args": [TEST_FILE...], "env": {...}, "solution": "worker" | "in-process"}
                                                  + fds: stdout, stderr, key, records[, data]
    -> {"pid": PID}, later {"exit": WAIT_STATUS}; or {"error": TEXT} if it could not fork
    <- {"op": "sweep"}   -> {"clean": BOOL}   every other process of the uid killed
    <- {"op": "spare"}   (no answer) the next run's test process forked now (Spare)
"""

import atexit
import contextlib
import fcntl
import gc
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import pytest_runner  # noqa: E402
import rbcheck  # noqa: E402
import rblibc  # noqa: E402
import rbprograms  # noqa: E402
import rbprotocol  # noqa: E402
import rbworker  # noqa: E402
import rbrun  # noqa: E402

MAX_FDS = 5
CHILD_FD_BASE = 100  # received fds are moved above the targets before dup2 onto them
LOW_FDS = 8  # held while the session is prepared, so that its files get numbers above a run's
WORK_DIR = rbprotocol.WORK_DIR
PREPARED = None  # pytest's session, configured before any request (prepare_session)


# The warm-up session's tests: one passes, one fails (its statement over two
# lines, which pytest tokenizes), so that what reporting a failure fills on
# first use (inspect's map of every module's file, about 6 ms; tokenize's
# patterns) is filled here once, not in every run that fails.
WARM_TESTS = """\
def test_warm():
    assert [1] == [1]


def test_warm_failure():
    assert [1] == [
        2]
"""


def warm_up(session=True):
    """Import what a test run imports before it reaches the completion (pytest,
    its built-in plugins, the harness's check module), and with `session` run
    one throwaway session, which fills pytest's and pluggy's caches (what a
    run does after its session is prepared: collection, the test protocol).
    The session pays off over many runs, not for a container's only one."""
    import _pytest.config
    import pytest

    for name in _pytest.config.default_plugins:
        importlib.import_module(f"_pytest.{name}")
    for name in ("_pytest.assertion.rewrite", "_pytest.python_api", "rbcheck", "rbgenerated", "rbbareitems", "rbwire", "rbhandle",
                 "rbsolution"):
        importlib.import_module(name)
    if not session:
        return
    directory = tempfile.mkdtemp(prefix="rbwarm-")
    try:
        path = os.path.join(directory, "test_warm.py")
        with open(path, "w") as f:
            f.write(WARM_TESTS)
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            pytest.main(pytest_runner.pytest_args([path], rootdir=directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for name in [n for n in sys.modules if n.endswith("test_warm")]:
        del sys.modules[name]


def prepare_session():
    """pytest's session for the runs to come (pytest_runner.PreparedSession),
    built in the work dir as a run's would be. The files it opens get numbers
    above a run's fds (1-5), which a test process moves onto those numbers."""
    os.chdir(WORK_DIR)
    low = [os.open(os.devnull, os.O_RDONLY) for _ in range(LOW_FDS)]
    try:
        return pytest_runner.PreparedSession()
    finally:
        for fd in low:
            os.close(fd)


class Seed:
    """A fork of the test process made before it reads its key or test data,
    waiting to become the solution's worker (rbworker.py) without a new
    interpreter: it holds nothing the solution may not see. Shaped like
    subprocess.Popen for rbcheck.Worker once started."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            become_worker(theirs)
        theirs.close()
        self.sock = ours
        self.returncode = None

    def start(self, requests_fd, replies_fd):
        socket.send_fds(self.sock, [b"worker"], [requests_fd, replies_fd])
        self.sock.close()
        return self

    def start_programs(self):
        """The seed serves the run's programs instead (rbprograms): one fork per input."""
        self.sock.send(b"programs")
        return rbprograms.Programs(self.sock)

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def become_worker(sock):
    """In the seed: waits for the worker's pipes, then runs rbworker as
    `python -I -B rbworker.py REQUESTS REPLIES` would, or for the word to
    serve the run's programs (rbprograms.serve); never returns."""
    try:
        # Nothing of the test process's but its output pipes: not its key, records or data. First
        # thing: the test process goes on meanwhile, and under gVisor a same-user process can open
        # a non-dumpable one's /proc/<pid>/fd: a program the tests start must find none of them here.
        os.closerange(3, sock.fileno())
        os.closerange(sock.fileno() + 1, 65536)
        os.setsid()
        forget_prepared_session()
        data, fds, _, _ = socket.recv_fds(sock, 64, 2)
        os.chdir(WORK_DIR)
        os.environ.clear()
        os.environ.update(rbcheck.ENV)
        if data == b"programs" and not fds:
            rbprograms.serve(sock)  # non-dumpable, as the test process: the programs cannot reach into it
        sock.close()
        if data != b"worker" or len(fds) != 2:
            os._exit(0)  # the test process ended without needing a worker
        rblibc.set_dumpable(True)  # as after an exec
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, CHILD_FD_BASE) for fd in fds]
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(high[0], 3)
        os.dup2(high[1], 4)
        os.closerange(5, 65536)
        sys.argv = [rbworker.__file__, "3", "4"]
        rbworker.main()
        sys.stdout.flush()
    finally:
        os._exit(0)  # as rbworker's own __main__: no interpreter teardown


def forget_prepared_session():
    """In the seed: nothing reachable of pytest's prepared session, as in the
    interpreter a worker was before sessions were prepared. It holds no key
    and no fd, but the solution has no business finding a records plugin, a
    config or our hooks; the objects themselves stay frozen, out of gc's lists."""
    import pdb

    import _pytest.debugging
    import _pytest.mark.structures

    global PREPARED
    PREPARED = None
    # What pytest 8.4's configure hangs on modules (the adversarial suite's
    # hacks that look for the config or the plugin walk from sys.modules).
    _pytest.mark.structures.MARK_GEN._config = None
    debugger = _pytest.debugging.pytestPDB
    if debugger._saved:
        pdb.set_trace = debugger._saved[-1][0]
    debugger._pluginmanager = debugger._config = None
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("_pytest")]
    sys.unraisablehook = sys.__unraisablehook__
    threading.excepthook = threading.__excepthook__


def send(sock, message):
    sock.send(json.dumps(message).encode())


class Spare:
    """The next run's test process, forked ahead of its request (op "spare",
    sent once the last run was swept and checked clean): the fork, the
    interpreter's after-fork work and become_test_process are done while the
    host reads the last report, not while the next sample waits. Like a fork
    made for the run, it holds nothing of any run, and no process of a run
    exists while it waits: any sweep kills it (kill(-1)), and a run then gets a
    fork made for it."""

    def __init__(self, zygote_sock):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            zygote_sock.close()
            ours.close()
            wait_for_run(theirs)
        theirs.close()
        self.sock = ours

    def hand(self, data, fds):
        """Gives it its run (the message as received, with its fds); False if it is gone."""
        try:
            socket.send_fds(self.sock, [data], fds)
            return True
        except OSError:
            return False
        finally:
            self.sock.close()

    def reap(self):
        """After a sweep killed it (or when it cannot be handed its run): gone, and reaped."""
        self.sock.close()  # a spare no sweep reached ends at EOF
        os.waitpid(self.pid, 0)


def wait_for_run(sock):
    """In a spare: becomes a test process, then waits for its run; never returns."""
    try:
        become_test_process()
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
        sock.close()
        if data:
            run_child(json.loads(data), fds)
    finally:
        os._exit(0)  # no run came: the zygote discarded it


def become_test_process():
    """What a test process is before its run: a session of its own, first in
    line for the OOM killer, non-dumpable."""
    os.setsid()
    # Raise our OOM score (allowed unprivileged only while dumpable), so that
    # the kernel's OOM killer takes the code under test before the harness.
    rblibc.set_dumpable(True)
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    rblibc.set_dumpable(False)


def run_child(message, fds):
    """In a test process (become_test_process): becomes what `python -I -B
    pytest_runner.py` would be and runs the tests; never returns."""
    code = 70
    try:
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, CHILD_FD_BASE) for fd in fds]
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        for target, fd in enumerate(high, start=1):
            os.dup2(fd, target)
        keep = sorted(PREPARED.fds)
        for low, high_end in zip([len(high) + 1] + [fd + 1 for fd in keep], keep + [65536]):
            os.closerange(low, high_end)
        data_fd = "5" if len(high) == 5 else "-1"
        solution = "in-process" if message.get("solution") == "in-process" else "worker"
        if len(high) == 5 or solution == "worker":  # the solution runs in a worker
            rbcheck.SEED = Seed()
        os.chdir(WORK_DIR)
        os.environ.clear()
        os.environ.update(message["env"])
        sys.argv = [pytest_runner.__file__, "3", "4", data_fd, solution, *message["args"]]
        try:
            pytest_runner.main(PREPARED)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        # As an interpreter's exit would: wait for the code's threads, run atexit.
        threading._shutdown()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the code under test may have closed or replaced it
                pass
    finally:
        os._exit(code & 0xFF)


def serve(sock):
    spare = None
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
        except OSError:
            return
        if not data:
            return
        message = json.loads(data)
        if message["op"] == "sweep":
            rbrun.kill_everything_else()  # the spare too, if any
            if spare is not None:
                spare.reap()
                spare = None
            send(sock, {"clean": not rbrun.others_alive()})
            continue
        if message["op"] == "spare":
            if spare is None:
                try:
                    spare = Spare(sock)
                except OSError:  # the pids limit: a run forks its own, as without spares
                    pass
            continue
        pid = None
        if spare is not None:
            if spare.hand(data, fds):
                pid = spare.pid
            else:
                spare.reap()
            spare = None
        if pid is None:
            pid = fork_test_process(sock, message, fds)
            if pid is None:
                continue
        for fd in fds:
            os.close(fd)
        send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        send(sock, {"exit": status})


def fork_test_process(sock, message, fds):
    """A test process forked for this run: its pid, or None (the error sent) if it could not be."""
    try:
        pid = os.fork()
    except OSError as exc:  # EAGAIN at the pids limit, ENOMEM: the run never started
        for fd in fds:
            os.close(fd)
        send(sock, {"error": f"fork: {exc}"})
        return None
    if pid == 0:
        try:
            sock.close()
            become_test_process()
            run_child(message, fds)
        finally:
            os._exit(70)
    return pid


def main():
    rblibc.set_dumpable(False)
    global PREPARED
    sock = socket.socket(fileno=int(sys.argv[1]))
    warm_up(session="--once" not in sys.argv[2:])
    PREPARED = prepare_session()
    # What exists now is the same in every run: out of the garbage collector's
    # sight, a child's collections need not walk it, nor copy its pages.
    gc.collect()
    gc.freeze()
    send(sock, {"ready": True})
    serve(sock)


if __name__ == "__main__":
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    main()
    os._exit(0)
