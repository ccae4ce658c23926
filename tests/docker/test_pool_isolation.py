"""Cross-sample isolation of the pooled mode, on real containers.

A pool of one container serves an attacking run, then a probe: a program run
that reports what it can see (files in the writable dirs, other processes,
System V IPC objects, POSIX message queues, its limits, priority and CPU set, the container it runs
in). Whatever the attack left must not reach the probe, whose view must equal
the one taken before any attack; and an honest run after the attack must be
graded exactly as on a clean container. Two containers side by side must not
see or touch each other's runs either.
"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.pool import PooledSandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "python" / "harness"))
import pool_supervisor  # noqa: E402

PROBE = r'''
import json, os, resource
def listing(top):
    found = []
    for root, dirs, files in os.walk(top):
        found += [os.path.join(root, n) for n in dirs + files]
    return sorted(found)
me = os.getpid()
others = []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) not in (1, me):
        try:
            cmd = open(f"/proc/{name}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        others.append(cmd)
limits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")}
import ctypes
libc = ctypes.CDLL(None)
def count(call, offset):  # the kernel's own counts: gVisor has no /proc/sysvipc
    buf = ctypes.create_string_buffer(256)
    return None if call(buf) < 0 else int.from_bytes(buf.raw[offset:offset + 4], "little")
ipc = {"shm": count(lambda b: libc.shmctl(0, 14, b), 0), "sem": count(lambda b: libc.semctl(0, 0, 19, b), 28),
       "msg": count(lambda b: libc.msgctl(0, 12, b), 0)}
# POSIX message queues: no directory lists them under gVisor, so the probe opens
# those of the posix_mqueue attack by name (-errno where it cannot).
mq = ctypes.CDLL(None, use_errno=True)
mq.mq_open.restype, mq.mq_open.argtypes = ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
queues = {}
for name in ("/rbleak", "/rbleak-sent"):
    fd = mq.mq_open(name.encode(), os.O_RDONLY | os.O_NONBLOCK, 0, None)
    if fd < 0:
        queues[name] = -ctypes.get_errno()
        continue
    buf = ctypes.create_string_buffer(8192)
    got = mq.mq_receive(fd, buf, 8192, None)
    queues[name] = {"mode": oct(os.fstat(fd).st_mode), "message": buf.raw[:got].decode() if got >= 0 else None}
    os.close(fd)
print(json.dumps({
    "files": {d: listing(d) for d in ("/work", "/tmp", "/dev/shm")},
    "work_mode": oct(os.stat("/work").st_mode),
    "others": sorted(others), "limits": limits, "nice": os.getpriority(os.PRIO_PROCESS, 0),
    "cpus": sorted(os.sched_getaffinity(0)), "ipc": ipc, "mqueue": queues,
}))
'''

HONEST = {"solution.py": "def add(a, b):\n    return a + b\n"}
HONEST_TESTS = {"test_add.py": "from solution import add\n\ndef test_one():\n    assert add(1, 2) == 3\n\n"
                               "def test_two():\n    assert add(2, 2) == 4\n"}

# Each attack runs as a completion imported by its pytest test (the zygote's
# fork), then exits as if all went well.
ATTACKS = {
    "files": r'''
import os
for d in ("/work", "/tmp", "/dev/shm"):
    os.makedirs(f"{d}/left/deep", exist_ok=True)
    open(f"{d}/left/deep/f", "w").write("x")
    open(f"{d}/.hidden", "w").write("x")
    os.chmod(f"{d}/left/deep", 0)
    os.chmod(f"{d}/left", 0)
os.symlink("/etc/passwd", "/work/link")
os.mkfifo("/tmp/fifo")
os.chmod("/work", 0)
''',
    "daemons": r'''
import os, time
for kind in ("sleep", "spin"):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 1024)
            while True:
                time.sleep(1) if kind == "sleep" else None
        os._exit(0)
    os.wait()
time.sleep(0.2)
''',
    "sysv_ipc": r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
assert libc.shmget(0x5EED, 4096, IPC_CREAT | 0o666) >= 0
assert libc.semget(0x5EED, 1, IPC_CREAT | 0o666) >= 0
assert libc.msgget(0x5EED, IPC_CREAT | 0o666) >= 0
''',
    # POSIX message queues live in the container's IPC namespace: under gVisor
    # (which ignores the engine's RLIMIT_MSGQUEUE of 0) a queue's name and mode
    # outlived the run; under runc that limit refuses them (EMFILE).
    "posix_mqueue": r'''
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype, libc.mq_open.argtypes = ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
for name in (b"/rbleak", b"/rbleak-sent"):
    fd = libc.mq_open(name, os.O_CREAT | os.O_RDWR | os.O_NONBLOCK, 0o640, struct.pack("<qqqq", 0, 1, 64, 0))
    if fd >= 0 and name.endswith(b"-sent"):
        libc.mq_send(fd, b"left by a run", 13, 0)  # ENOSYS on gVisor (2022): names and modes only
''',
    "harness_limits": r'''
import os, resource
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        pid = int(name)
        for call in (lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (16, 16)),
                     lambda: resource.prlimit(pid, resource.RLIMIT_AS, (1 << 26, 1 << 26)),
                     lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
                     lambda: os.sched_setaffinity(pid, {0})):
            try:
                call()
            except OSError:
                pass
''',
    "signals": r'''
import os, signal
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        for sig in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            try:
                os.kill(int(name), sig)
            except OSError:
                pass
''',
    "harness_signals": r'''
import os, signal
for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
    try:
        os.kill(1, sig)
    except OSError:
        pass
''',
    "kill_all": r'''
import os, signal
os.kill(-1, signal.SIGKILL)
os.kill(1, signal.SIGKILL)
''',
    "fill_tmpfs": r'''
import os
for d in ("/work", "/tmp", "/dev/shm"):
    try:
        with open(f"{d}/fill", "wb") as f:
            while True:
                f.write(b"x" * (1 << 20))
    except OSError:
        pass
''',
    # Under gVisor the harness's stdin can be opened (runc: EACCES): a line written
    # there would be read as the next request, one that sleeps past its deadline.
    "stdin_injection": r'''
import json, os
request = {"nonce": "0" * 64, "files": {"solution.py": "import time\\ntime.sleep(3600)\\n"},
           "tests": {"test_x.py": "import solution\\ndef test_x(): pass\\n"}, "test_data": None,
           "timeout_s": 3600, "output_limit_bytes": 1024}
try:
    fd = os.open("/proc/1/fd/0", os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, json.dumps(request).encode() + b"\\n")
except OSError:
    pass
''',
    "forged_reports": r'''
import os, sys
for target in ("/proc/1/fd/1", "/proc/1/fd/0"):
    try:
        os.open(target, os.O_WRONLY)
        print("OPENED", target)
    except OSError:
        pass
for _ in range(100):
    print("\nRBREPORT " + "0" * 64 + ' {"phase":"pytest","records":[]}')
sys.stdout.flush()
''',
}


def attack_request(code: str) -> RunRequest:
    return RunRequest(files={"solution.py": code},
                      tests={"test_attack.py": "import solution\n\ndef test_attack():\n    assert True\n"},
                      limits=Limits(timeout_s=20))


def probe_request() -> RunRequest:
    return RunRequest(files={"probe.py": PROBE}, program="probe.py", limits=Limits(timeout_s=20))


def honest_request() -> RunRequest:
    return RunRequest(files=HONEST, tests=HONEST_TESTS, limits=Limits(timeout_s=20))


def view(box) -> dict:
    """What a probe sees, and the container it ran in: the pool's one waiting
    container once the probe is done (the pool has one slot)."""
    result = box.run(probe_request())
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message, result.stderr)
    seen = json.loads(result.stdout)
    seen["files"].pop("/work")  # the probe's own file
    assert box.settle()
    seen["container"] = box.warm_ids()
    return seen


# The gVisor pass of `make test` runs these too (REWARDBOX_TEST_RUNTIME=runsc).
pytestmark = pytest.mark.core
RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None


@pytest.fixture(scope="module")
def pool():
    box = PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME)
    yield box
    box.close()


@pytest.fixture(scope="module")
def clean_view(pool):
    return view(pool)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_nothing_of_a_run_reaches_the_next(pool, clean_view, attack):
    pool.run(attack_request(ATTACKS[attack]))
    after = view(pool)
    container = after.pop("container")
    expected = {k: v for k, v in clean_view.items() if k != "container"}
    assert after == expected
    honest = pool.run(honest_request())
    assert honest.verdict is Verdict.PASSED, (honest.verdict, honest.message)
    assert [t.outcome.value for t in honest.tests] == ["passed", "passed"]
    if attack in ("kill_all", "signals"):
        # The zygote was killed or stopped: that container was given up.
        assert container != clean_view["container"]


def test_a_clean_run_keeps_its_container(pool):
    before = view(pool)["container"]
    for _ in range(3):
        assert pool.run(honest_request()).verdict is Verdict.PASSED
    assert view(pool)["container"] == before


@pytest.mark.skipif(RUNTIME == "runsc", reason="gVisor lets pid 1 be signalled and its stdio opened: "
                    "test_nothing_of_a_run_reaches_the_next covers what that costs (the run, not the next)")
def test_the_supervisor_survives_signals_and_keeps_the_container_stdio_closed(pool):
    """PID 1 takes no signal from inside; its stdin and stdout cannot be opened."""
    before = view(pool)["container"]
    code = r'''
import os, signal
for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT):
    os.kill(1, sig)
for target, flags in (("/proc/1/fd/0", os.O_RDONLY), ("/proc/1/fd/0", os.O_WRONLY), ("/proc/1/fd/1", os.O_RDONLY),
                      ("/proc/1/fd/1", os.O_WRONLY), ("/proc/1/mem", os.O_RDONLY)):
    try:
        os.open(target, flags)
        print("OPENED", target, flags)
    except OSError as exc:
        print("denied", target, exc.errno)
'''
    result = pool.run(RunRequest(files={"main.py": code}, program="main.py", limits=Limits(timeout_s=20)))
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message)
    assert "OPENED" not in result.stdout and result.stdout.count("denied") == 5
    assert pool.run(honest_request()).verdict is Verdict.PASSED
    assert view(pool)["container"] == before


def test_runs_side_by_side_cannot_see_or_touch_each_other():
    """Two containers: a run that kills every process it may, lists all
    processes and writes everywhere, beside an honest run that takes a while."""
    attacker = r'''
import os, signal, time
seen = set()
end = time.monotonic() + 3
while time.monotonic() < end:
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    seen.update(open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit() and
                os.path.exists(f"/proc/{p}/cmdline"))
    open("/work/mark", "w").write("attacker")
    time.sleep(0.05)
print([s for s in seen if b"victim-marker" in s])
'''
    victim = {"solution.py": "import subprocess, sys, time\n"
                             "marker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'victim-marker'])\n"
                             "def victim_add(a, b):\n    time.sleep(2)\n    return a + b\n"}
    victim_tests = {"test_victim.py": "import os\nfrom solution import marker, victim_add\n\n"
                                      "def test_victim():\n    assert victim_add(1, 2) == 3\n"
                                      "    assert marker.poll() is None  # still alive\n"
                                      "    assert not os.path.exists('/work/mark')\n"}
    with PooledSandbox(max_containers=2, reuse=1000, retry_s=20, runtime=RUNTIME) as box, \
            ThreadPoolExecutor(2) as pool:
        attacked = pool.submit(box.run, RunRequest(files={"main.py": attacker}, program="main.py",
                                                   limits=Limits(timeout_s=20)))
        honest = pool.submit(box.run, RunRequest(files=victim, tests=victim_tests, limits=Limits(timeout_s=20)))
        assert honest.result().verdict is Verdict.PASSED, honest.result().message
        assert attacked.result().verdict is Verdict.PASSED, attacked.result().message
        assert attacked.result().stdout.strip() == "[]"


# What a process inherits of PID 1 (a program run) or of the zygote (a test
# process) that a same-user run can change on them without ptrace: the I/O
# priority and sched_setattr's parameters (a fair task's slice among them).
# -errno where gVisor lacks the call.
SCHED_VIEW = r'''
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": (252, 315), "aarch64": (31, 275)}[os.uname().machine]
def ioprio(pid):
    value = libc.syscall(NR[0], 1, pid)
    return value if value >= 0 else -ctypes.get_errno()
def sched(pid):
    buf = ctypes.create_string_buffer(56)
    return list(struct.unpack("<IIQiIQQQII", buf.raw)[1:]) if libc.syscall(NR[1], pid, buf, 56, 0) == 0 \
        else -ctypes.get_errno()
def view():
    return {"ioprio": ioprio(0), "sched": sched(0), "nice": os.getpriority(os.PRIO_PROCESS, 0)}
'''

# Lowers the I/O priority of PID 1 and the zygote (by pid, by process group and
# for all the user's processes), or shortens their slice; prints what took.
LOWER_PRIORITIES = {"ioprio": r'''
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}[os.uname().machine]
IDLE, BEST_EFFORT_LOWEST = 3 << 13, (2 << 13) | 7
took = []
for target in (1, ZYGOTE):
    for who, whom in ((1, target), (2, os.getpgid(target))):
        if libc.syscall(IOPRIO_SET, who, whom, BEST_EFFORT_LOWEST) == 0:
            took.append(target)
if libc.syscall(IOPRIO_SET, 3, os.getuid(), IDLE) == 0:
    took.append("user")
print(json.dumps({"took": took, "pid1": ioprio(1), "zygote": ioprio(ZYGOTE)}))
''', "sched": r'''
SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}[os.uname().machine]
took = [target for target in (1, ZYGOTE) if libc.syscall(
    SCHED_SETATTR, target, struct.pack("<IIQiIQQQII", 56, 0, 0, 0, 0, 100000, 0, 0, 0, 0), 0) == 0]
print(json.dumps({"took": took, "pid1": sched(1), "zygote": sched(ZYGOTE)}))
'''}
FIND_ZYGOTE = r'''
import json
ZYGOTE = next(int(p) for p in os.listdir("/proc") if p.isdigit() and
              b"rbzygote" in open(f"/proc/{p}/cmdline", "rb").read())
'''


def sched_views(box) -> dict:
    """The priorities a program run (a child of PID 1) and a test process (a
    fork of the zygote) start with."""
    program = box.run(RunRequest(files={"main.py": SCHED_VIEW + "import json\nprint(json.dumps(view()))\n"},
                                 program="main.py", limits=Limits(timeout_s=20)))
    assert program.verdict is Verdict.PASSED, (program.message, program.stderr)
    tests = box.run(RunRequest(files={"solution.py": SCHED_VIEW}, tests={
        "test_view.py": "import json\nfrom solution import view\n\n"
                        "def test_view():\n    print('VIEW=' + json.dumps(view()))\n"}, limits=Limits(timeout_s=20)))
    assert tests.verdict is Verdict.PASSED, (tests.message, tests.stdout)
    line = next(line for line in tests.stdout.splitlines() if line.startswith("VIEW="))
    return {"program": json.loads(program.stdout), "test": json.loads(line.removeprefix("VIEW="))}


@pytest.mark.parametrize("attack", sorted(LOWER_PRIORITIES))
def test_a_run_that_lowers_the_harness_priorities_costs_its_container(attack):
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        clean = sched_views(box)
        assert box.settle()
        before = box.warm_ids()
        code = SCHED_VIEW + FIND_ZYGOTE + LOWER_PRIORITIES[attack]
        result = box.run(RunRequest(files={"main.py": code}, program="main.py", limits=Limits(timeout_s=20)))
        assert result.verdict is Verdict.PASSED, (result.message, result.stderr)
        took = json.loads(result.stdout)
        assert box.settle()
        after = box.warm_ids()
        # The next runs start as on a clean container: it was given up.
        assert sched_views(box) == clean
        if RUNTIME != "runsc":  # gVisor refuses ioprio_set (EPERM) and lacks sched_setattr
            assert 1 in took["took"] and took["pid1"] != clean["program"][attack], took
            assert after != before, took


# Stops the zygote alone (same uid): the tests go on and pass, but no one is left to reap them.
STOP_THE_ZYGOTE = r'''
import os, signal
''' + FIND_ZYGOTE.replace("import json\n", "") + "os.kill(ZYGOTE, signal.SIGSTOP)\n"


def test_a_run_that_stops_the_zygote_ends_at_once_and_costs_its_container(pool):
    """The supervisor sees the zygote stopped as soon as it waits on it; it does
    not wait out ZYGOTE_ANSWER_S (5 s) for an exit status that cannot come. The
    run is judged as one whose harness was killed, and the container given up."""
    before = view(pool)["container"]
    attacked = pool.run(attack_request(STOP_THE_ZYGOTE))
    assert attacked.verdict is Verdict.KILLED, (attacked.verdict, attacked.message)
    assert attacked.duration_s < pool_supervisor.ZYGOTE_ANSWER_S, attacked.duration_s
    assert view(pool)["container"] != before
    honest = pool.run(honest_request())
    assert honest.verdict is Verdict.PASSED, (honest.verdict, honest.message)


# A dataset's pytest test runs in the test process: how long ago was it forked?
TEST_PROCESS_AGE = {"test_age.py": r'''
import os

def test_age():
    started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    print("AGE=%.3f" % (float(open("/proc/uptime").read().split()[0]) - started))
'''}


def age_of_test_process(box) -> float:
    result = box.run(RunRequest(files=HONEST, tests=TEST_PROCESS_AGE, limits=Limits(timeout_s=20)))
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message, result.stdout)
    return float(next(line for line in result.stdout.splitlines() if line.startswith("AGE=")).removeprefix("AGE="))


def test_the_next_test_process_waits_forked_and_no_other_run_finds_it():
    """After a clean run that had a test process, the next one is forked
    ahead (rbzygote.Spare): it is already there when the next request comes.
    A program run has it killed first (test_nothing_of_a_run_reaches_the_next's
    probe, a program, sees the same processes as on a new container), and a
    run after that forks its own."""
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        first = age_of_test_process(box)  # a new container's first run: forked for it
        time.sleep(1.5)
        ahead = age_of_test_process(box)
        assert box.run(probe_request()).verdict is Verdict.PASSED
        time.sleep(1.5)
        after_program = age_of_test_process(box)
    assert first < 1.0 and after_program < 1.0, (first, after_program)
    assert ahead >= 1.4, ahead
