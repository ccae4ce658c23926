"""A pooled container's PID 1: serves runs one after another, each from a
clean slate, and says when the container must not be used again.

    stdin  <- one request per line (supervisor.py's JSON object)
    stdout -> "RBREADY" once warm; then per request its signed report line,
              with "recycle": null or the reason

A run goes as in a single-use container (rbrun.handle), except that the
test process is a fork of the warm zygote (rbzygote.py). Between runs:
- every other process of the sandbox user is killed (by the zygote, which
  kill(-1) does not reach when it is the caller) and zombies are reaped;
- the work dir, /tmp and /dev/shm are emptied and their modes restored;
- the container is given up ("recycle") if anything of the run could outlive
  it: a process that would not die, a file that would not go, a System V IPC
  object or POSIX message queue (as gVisor lists no queue, a seccomp filter
  refuses mq_open: refuse_message_queues), a changed limit, priority,
  scheduling, CPU set or I/O priority of PID 1 or the zygote
  (rbrun.fingerprint), or a dead or stopped zygote.

Being PID 1 protects this process: the kernel delivers no signal to a
namespace's init from inside it unless init handles that signal, so the code
under test can neither kill nor stop it; it is non-dumpable, so that code
cannot ptrace it or open its fds (the container's stdin and stdout) either.
"""

import ctypes
import errno
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbprotocol  # noqa: E402
import rblibc  # noqa: E402
import rbrun  # noqa: E402
from rbcgroup import oom_kills  # noqa: E402

ZYGOTE = "/opt/rewardbox/rbzygote.py"
CLEAN_DIRS = (rbrun.WORK_DIR, "/tmp", "/dev/shm")
ZYGOTE_ANSWER_S = 5.0
STOPPED_LOOK_S = 0.05  # while waiting for the zygote, between looks at whether it was stopped
READY = rbprotocol.READY
SHM_INFO, SEM_INFO, MSG_INFO = 14, 19, 12  # <sys/ipc.h>, Linux
# Seccomp, for POSIX message queues: mq_open's number and the audit arch of this ABI.
MQ_OPEN = {"x86_64": (240, 0xC000003E), "aarch64": (180, 0xC00000B7)}
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, X32_SYSCALL_BIT = 0x7FFF0000, 0x00050000, 0x40000000
MQUEUE_DIR = "/dev/mqueue"


class ZygoteChild:
    """A test process forked by the zygote, shaped like subprocess.Popen for
    rbrun.pump: its exit status comes from the zygote, its parent."""

    def __init__(self, zygote, pid, stdout, stderr):
        self.zygote = zygote
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = None

    def poll(self):
        if self.returncode is None and self.zygote.readable(0):
            self._take_exit()
        return self.returncode

    def wait(self):
        if self.returncode is None:
            if not self.zygote.readable(ZYGOTE_ANSWER_S):
                self.zygote.lose()
            self._take_exit()
        for stream in (self.stdout, self.stderr):
            stream.close()
        return self.returncode

    def _take_exit(self):
        answer = self.zygote.receive()
        # A zygote killed by the code under test cannot tell: the run ends as
        # it would with its single-use harness killed.
        self.returncode = -signal.SIGKILL if answer is None else os.waitstatus_to_exitcode(answer["exit"])


class Zygote:
    """The supervisor's handle on rbzygote.py."""

    def __init__(self, once=False):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-B", ZYGOTE, str(theirs.fileno())] + (["--once"] if once else []),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/")
        theirs.close()
        self.sock = ours
        self.pid = self.process.pid
        self.alive = True
        self.lost_why = None
        self.forked = False  # a test process forked since the last spare was asked for
        self.spare = False  # a spare asked for and not yet taken or killed
        if (self.receive(timeout_s=60) or {}).get("ready") is not True:
            raise RuntimeError("the zygote did not start")

    def readable(self, timeout_s):
        """Whether an answer is there within `timeout_s`; False at once if the
        zygote is stopped (SIGSTOP from the code under test), which would
        otherwise hold the run for the whole wait and answer nothing."""
        # poll, not select: gVisor refuses select(2) with EPERM.
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while not poller.poll(max(0.0, min(STOPPED_LOOK_S, deadline - time.monotonic())) * 1000):
            if time.monotonic() >= deadline or self.stopped():
                return False
        return True

    def stopped(self):
        return rbrun.process_state(self.pid) in (b"T", b"t")

    def receive(self, timeout_s=ZYGOTE_ANSWER_S):
        if not self.alive:
            return None
        if not self.readable(timeout_s):
            self.lose("it was stopped" if self.stopped() else f"no answer in {timeout_s:g} s")
            return None
        try:
            data = self.sock.recv(1 << 16)
        except OSError as exc:  # ECONNRESET: it died with our message unread
            data, why = b"", f"it is gone: {exc}"
        else:
            why = "it is gone"
        if not data:
            self.lose(why)
            return None
        return json.loads(data)

    def lose(self, why="lost"):
        """The zygote is dead or stuck (stopped by the code under test): kill
        everything, it included, and give the container up."""
        if self.alive:
            self.alive = False
            self.lost_why = why
            rbrun.kill_everything_else()

    def spawn(self, test_paths, env, fds, solution="worker"):
        if not self.alive:
            raise rbrun.NotStarted("the zygote is gone")
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        message = {"op": "run", "args": test_paths, "env": env, "solution": solution}
        self.forked, self.spare = True, False  # the zygote hands the run its spare, if any
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode()],
                            [stdout_w, stderr_w, *fds])
        except OSError as exc:  # it died while the container waited
            self.lose(f"it is gone: {exc}")
        os.close(stdout_w)
        os.close(stderr_w)
        answer = self.receive()
        if answer is None or "pid" not in answer:
            why = (answer or {}).get("error") or self.lost_why or "it is gone"
            raise rbrun.NotStarted(f"the zygote did not fork ({why})")
        return ZygoteChild(self, answer["pid"], os.fdopen(stdout_r, "rb", buffering=0),
                           os.fdopen(stderr_r, "rb", buffering=0))

    def fork_ahead(self):
        """After a run that had a test process, checked clean: the next run's
        is forked now (rbzygote.Spare), while the host reads the report. A
        run of another kind has none waiting (drop_spare)."""
        if self.alive and self.forked:
            self.forked = False
            try:
                self.sock.send(json.dumps({"op": "spare"}).encode())
                self.spare = True
            except OSError:
                self.lose()

    def drop_spare(self):
        """Before a run's first process that is not its test process (a
        program, a compile step): the spare is killed, so that no process of
        a run ever finds one (a sweep: nothing else of the uid is left)."""
        if self.spare:
            self.sweep()

    def sweep(self):
        """Every other process of the uid killed, but the zygote and us (a spare too)."""
        self.spare = False
        if not self.alive:
            rbrun.kill_everything_else()
            return
        try:
            self.sock.send(json.dumps({"op": "sweep"}).encode())
        except OSError:
            self.lose()
            return
        answer = self.receive()
        if answer is None or not answer.get("clean"):
            self.lose()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def empty(directory, mode):
    """Removes everything in `directory` and restores its mode; True if that worked."""
    def writable_again(_function, path, _exc):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass

    try:
        if os.stat(directory).st_uid == os.getuid():  # the work dir; /tmp and /dev/shm are root's, sticky
            os.chmod(directory, 0o700)
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, onerror=writable_again)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    writable_again(None, entry.path, None)
        if os.stat(directory).st_mode & 0o7777 != mode:
            os.chmod(directory, mode)
        return not os.listdir(directory)
    except OSError:
        return False


def written_to_stdin():
    """Whether anything waits on our stdin: the host sends nothing while a run
    goes on, so it came from the run. Under gVisor, /proc/1/fd/0 of this
    non-dumpable process can be opened by the same user; what the run wrote
    would be read as the next request."""
    poller = select.poll()
    poller.register(sys.stdin.buffer.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def ipc_objects():
    """System V shared memory segments, semaphore sets and message queues in
    the container's IPC namespace, counted by the kernel (shmctl SHM_INFO,
    semctl SEM_INFO, msgctl MSG_INFO: gVisor has no /proc/sysvipc); an unknown
    count counts as one."""
    libc = rblibc.LIBC
    total = 0
    for call, offset in ((lambda b: libc.shmctl(0, SHM_INFO, b), 0),  # shm_info.used_ids
                         (lambda b: libc.semctl(0, 0, SEM_INFO, b), 28),  # seminfo.semusz
                         (lambda b: libc.msgctl(0, MSG_INFO, b), 0)):  # msginfo.msgpool
        buf = ctypes.create_string_buffer(256)
        total += 1 if call(buf) < 0 else int.from_bytes(buf.raw[offset:offset + 4], "little")
    return total


def refuse_message_queues():
    """Make mq_open fail (ENOSYS, as on a kernel without POSIX message queues)
    for this process and all it starts: the zygote, every run. A queue lives in
    the container's IPC namespace, not in a directory we empty, and no call
    lists them where /dev/mqueue is not mounted (gVisor), which also ignores
    the engine's RLIMIT_MSGQUEUE of 0: a queue's name and mode would reach the
    next run. A seccomp filter (no_new_privs is set: Docker's no-new-privileges);
    the other ABIs of the machine (x32, i386, arm32) are refused whole, their
    mq_open having another number. False if it could not be installed."""
    nr, arch = MQ_OPEN.get(os.uname().machine, (None, None))
    if nr is None:
        return False

    def op(code, k, jt=0, jf=0):
        return struct.pack("<HBBI", code, jt, jf, k)
    refuse = op(0x06, SECCOMP_RET_ERRNO | errno.ENOSYS)  # ret
    program = b"".join([
        op(0x20, 4),  # ld seccomp_data.arch
        op(0x15, arch, jt=1),  # jeq: on to the number
        refuse,
        op(0x20, 0),  # ld seccomp_data.nr
        op(0x35, X32_SYSCALL_BIT, jt=2),  # jge: x32
        op(0x15, nr, jt=1),  # jeq mq_open
        op(0x06, SECCOMP_RET_ALLOW),
        refuse,
    ])
    instructions = ctypes.create_string_buffer(program, len(program))
    fprog = ctypes.create_string_buffer(struct.pack("<HxxxxxxQ", len(program) // 8, ctypes.addressof(instructions)))
    libc = rblibc.LIBC
    return libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 and \
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) == 0


def message_queues():
    """The POSIX message queues /dev/mqueue lists (runc mounts it; gVisor
    does not: refuse_message_queues keeps them from being made); an unreadable
    listing counts as one."""
    try:
        return len(os.listdir(MQUEUE_DIR))
    except FileNotFoundError:
        return 0
    except OSError:
        return 1


def recycle_reason(report, zygote, baseline, modes, oom_before):
    """Why this container must serve no further run, or None. A run that hit
    a limit (time, output, memory) is no reason by itself: what it left is
    checked like any run's, and recycling costs a container start."""
    if oom_before is not None and (oom_kills() or 0) > oom_before:
        report["oom_killed"] = True
    if report.get("phase") == rbprotocol.PHASE_HARNESS_ERROR:
        return "the harness failed"
    # Every step of a run that starts processes ends by sweeping them (run_pytest,
    # run_bounded), so none is left to kill here, only a spare no step took; a
    # process that outlived all that is counted below, and costs the container.
    zygote.drop_spare()
    reap()
    if not zygote.alive:
        return "the zygote was killed or stopped"
    if rbrun.others_alive(spare=zygote.pid):
        return "a process outlived the run"
    for directory, mode in modes.items():
        if not empty(directory, mode):
            return f"files in {directory} outlived the run"
    if ipc_objects():
        return "System V IPC objects outlived the run"
    if message_queues():
        return "POSIX message queues outlived the run"
    if written_to_stdin():
        return "the run wrote to the harness's stdin"
    if [rbrun.fingerprint(1), rbrun.fingerprint(zygote.pid)] != baseline:
        return "the run changed a limit or the scheduling of the harness"
    return None


def serve():
    rbrun.make_non_dumpable()
    # Python handles SIGINT; with no handler at all, the kernel drops it for init.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    once = "--once" in sys.argv[1:]  # one run, then the container goes (the fresh mode)
    if not refuse_message_queues() and not os.path.ismount(MQUEUE_DIR):
        raise RuntimeError("cannot refuse POSIX message queues nor list them: a pool could not check its runs")
    zygote = Zygote(once)
    baseline = [rbrun.fingerprint(1), rbrun.fingerprint(zygote.pid)]
    if None in baseline:
        raise RuntimeError("cannot read the harness's limits and scheduling: a pool could not check its runs")
    modes = {directory: os.stat(directory).st_mode & 0o7777 for directory in CLEAN_DIRS}
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line.strip():
            return
        request = rbrun.read_request(line)
        oom_before = oom_kills()
        started = time.monotonic()
        report = rbrun.handle(request, zygote)
        try:
            reason = recycle_reason(report, zygote, baseline, modes, oom_before)
        except Exception as exc:  # noqa: BLE001 - most likely the run lowered our limits; never ours to hide
            reason = f"the clean-up failed: {type(exc).__name__}: {exc}"[:500]
        if report.get("phase") == rbprotocol.PHASE_HARNESS_ERROR and \
                [rbrun.fingerprint(1), rbrun.fingerprint(zygote.pid)] != baseline:
            report["harness_attacked"] = True  # the run lowered our limits (prlimit): its doing, not ours
        if reason is not None:
            rbrun.kill_everything_else()  # the zygote too: nothing runs after the report
        report.update(recycle=reason, serve_s=round(time.monotonic() - started, 6))
        rbrun.write_report(request["nonce"].encode(), report)
        if reason is not None or once:
            return
        zygote.fork_ahead()


if __name__ == "__main__":
    serve()
