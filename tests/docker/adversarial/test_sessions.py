"""Sessions (issue 22) against an agent that attacks its own session: each
case under runc and under gVisor (`runsc`, when the engine lists it), with the
exact outcome asserted, and the session's container gone after it.

An agent's calls may leave daemons, plant files, fill the disk, fork-bomb,
hog memory, loop forever and look for the tests; none of it may change the
score of what it wrote (graded in a fresh single-run container, the tests
written there after its last call), and the session either goes on or ends
with `SessionEnded` at once, never a hang. The sandbox mode of the grading
runs is the docker tier's (`REWARDBOX_TEST_MODE`); the runtime is each case's.
"""

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from session_support import ADD_LABEL, RIGHT, RUNTIMES, WRONG, gone, procs

from rewardbox.rewards import CodeReward
from rewardbox.sandbox import Limits, SessionEnded, SessionLimits, SessionRefused, Verdict
from rewardbox.sandbox.engine import DockerEngine
from rewardbox.sandbox.modes import DEFAULT_MODE, make_sandbox
from rewardbox.sandbox.session import Session

pytestmark = pytest.mark.core

# Grown 1 MiB at a time, each page written: resident as it grows.
HOG = ("import ctypes\nblocks = []\nwhile True:\n    b = bytearray(1 << 20)\n"
       "    ctypes.memset((ctypes.c_char * len(b)).from_buffer(b), 1, len(b))\n    blocks.append(b)\n")
HOLDING_HOG = ("import ctypes, time\nblocks = []\ntry:\n    while True:\n        b = bytearray(1 << 20)\n"
               "        ctypes.memset((ctypes.c_char * len(b)).from_buffer(b), 1, len(b))\n        blocks.append(b)\n"
               "except MemoryError:\n    time.sleep(3600)\n")


@pytest.fixture(scope="module", params=RUNTIMES)
def box(request):
    mode = os.environ.get("REWARDBOX_TEST_MODE") or DEFAULT_MODE
    sandbox = make_sandbox(mode, max_containers=2, retry_s=20, runtime=request.param, sweep=False)
    yield sandbox
    sandbox.close()


def _gvisor(box) -> bool:
    return box.runtime == "runsc"


@contextmanager
def episode(box, docker_client, **options) -> Iterator[Session]:
    """A session graded by the box's CodeReward, whose container must be gone once it is closed."""
    with box.session(grader=CodeReward(box), **options) as s:
        yield s
    assert gone(docker_client, s.container_id, wait_s=5), f"session container {s.container_id[:12]} left"


def _graded(grade) -> tuple:
    return grade.reward, grade.verdict, grade.passed, grade.total


WRONG_GRADE = (0.0, Verdict.FAILED, 0, 2)
RIGHT_GRADE = (1.0, Verdict.PASSED, 2, 2)

# Tampers with whatever a test run could read from the session: conftest.py
# files where pytest would look, and every process running pytest killed.
DAEMON = """\
import os, signal, time
while True:
    for d in ("/work", "/work/.tests", "/tmp"):
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "conftest.py"), "w") as f:
                f.write("def pytest_collection_modifyitems(items):\\n    items.clear()\\n")
        except OSError:
            pass
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and b"pytest" in open(f"/proc/{p}/cmdline", "rb").read():
                os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.01)
"""
# The same daemon escaping its call (double fork, a session of its own), its
# command line marked; the call says whether it runs.
ESCAPING = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "daemon.py", "escaped-6161"])
    os._exit(0)
time.sleep(0.5)
print(any(b"6161" in open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()))
"""


def test_a_daemon_left_running_does_not_change_the_final_test_run(box, docker_client):
    with episode(box, docker_client) as s:
        s.write_file("daemon.py", DAEMON)
        assert s.run(file="daemon.py", background=True).background_sid
        assert s.run(ESCAPING).stdout == "True\n"  # running when its call ended
        s.write_file("solution.py", WRONG)
        assert _graded(s.score(ADD_LABEL)) == WRONG_GRADE
        s.write_file("solution.py", RIGHT)
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE
        left = procs(s)
        assert any("daemon.py" in p for p in left)  # the background one ran all along
        assert not any("6161" in p for p in left)  # the escaped one went with its call


# Files an agent could plant beside its solution so that a test run in the
# session's work dir would pass whatever it holds.
PLANTED = {
    # pytest would load these from the work dir.
    "conftest.py": ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                    "    out = yield\n    out.get_result().outcome = 'passed'\n"),
    "pytest.ini": "[pytest]\naddopts = -p no:python --co\n",
    "tox.ini": "[pytest]\naddopts = --co\n",
    # Python would import these at start, from the path.
    "sitecustomize.py": "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n",
    "usercustomize.py": "import os\nos._exit(0)\n",
    "evil.pth": "import os; os._exit(0)\n",
    # A package shadowing the solution module, beside solution.py.
    "solution/__init__.py": "def add(a, b):\n    return a + b\n",
    # Modules named as the harness's: imported instead of its own, were the work dir first on the path.
    **{f"{name}.py": "import os\nos._exit(0)\n"
       for name in ("rbcheck", "rbrun", "rbworker", "rbprotocol", "rbcompare", "rbgenerated", "rbbareitems", "rbsolution",
                    "supervisor", "pytest_runner", "pytest", "_pytest")},
}


def test_planted_files_do_not_change_the_score(box, docker_client):
    with episode(box, docker_client) as s:
        for path, content in PLANTED.items():
            s.write_file(path, content)
        # Hidden names are refused by write_file; the shell plants them.
        s.shell("mkdir -p .tests && printf 'def test_forged():\\n    pass\\n' > .tests/test_solution.py")
        s.write_file("solution.py", WRONG)
        assert _graded(s.score(ADD_LABEL)) == WRONG_GRADE
        s.write_file("solution.py", RIGHT)
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE
        # A named file is graded the same way, beside the fake package too.
        s.write_file("attempt.py", WRONG)
        assert _graded(s.score(ADD_LABEL, file="attempt.py")) == WRONG_GRADE


def test_a_disk_filled_across_calls_fails_its_calls_cleanly_not_the_score(box, docker_client):
    with episode(box, docker_client, limits=Limits(work_mb=2, tmp_mb=2)) as s:
        s.write_file("solution.py", RIGHT)
        began = time.monotonic()
        full = s.shell("head -c 3000000 /dev/zero > fill1")
        assert full.verdict is Verdict.FAILED and "No space left" in full.stderr, full
        full = s.shell("head -c 3000000 /dev/zero > /tmp/fill2")
        assert full.verdict is Verdict.FAILED and "No space left" in full.stderr, full
        # And the inodes, where they are counted (gVisor does not: the call's deadline ends it).
        s.shell("i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done", timeout_s=5)
        with pytest.raises(SessionRefused, match="space|inodes|No"):
            s.write_file("more.txt", "x" * 100_000)
        # A call's code passes through /tmp: with /tmp full the call cannot start, and says why.
        blocked = s.run("print(1)")
        assert (blocked.verdict, blocked.exit_code) == (Verdict.FAILED, 125) and "No space left" in blocked.stderr
        assert time.monotonic() - began < 60  # never a hang
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE  # graded from the image, not from this disk
        s.write_file("solution.py", WRONG)  # a small file still fits
        assert _graded(s.score(ADD_LABEL)) == WRONG_GRADE
        s.shell("rm -f fill1 f* /tmp/fill2")
        s.write_file("more.txt", "x" * 100_000)
        assert s.read_file("more.txt") == "x" * 100_000
        assert s.run("print(1)").stdout == "1\n"


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def test_a_fork_bomb_in_one_call_then_a_correct_score(box, docker_client):
    with episode(box, docker_client) as s:
        s.write_file("solution.py", RIGHT)
        bomb = s.run(FORK_BOMB, timeout_s=3)
        # Its forks fail at the limit (pids under runc, RLIMIT_NPROC under gVisor) and it
        # loops until the deadline.
        assert bomb.verdict is Verdict.TIMEOUT, bomb
        assert procs(s) == set()  # nothing of the bomb is left
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE
        s.write_file("solution.py", WRONG)
        assert _graded(s.score(ADD_LABEL)) == WRONG_GRADE
        assert s.run("print(5)").stdout == "5\n"


# Looks everywhere a call can for a string of the label's tests: every file on a
# writable mount (the image's are read-only: the tests cannot be there), the
# environment, and every process's command line and environment.
SEARCH = """\
import os, sys
needle = (sys.argv[1] + sys.argv[2]).encode()  # split: no command line holds it
found = []
roots = {"/"}
for line in open("/proc/mounts"):
    _, point, fstype, options = line.split()[:4]
    if "rw" in options.split(",") and fstype not in ("proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue"):
        roots.add(point)
for root in sorted(roots):
    if root == "/":
        continue
    for d, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            try:
                if os.path.isfile(path) and os.path.getsize(path) < 16 << 20 and needle in open(path, "rb").read():
                    found.append(path)
            except OSError:
                pass
if needle in repr(dict(os.environ)).encode():
    found.append("environ")
for p in os.listdir("/proc"):
    for part in ("cmdline", "environ"):
        try:
            if p.isdigit() and needle in open(f"/proc/{p}/{part}", "rb").read():
                found.append(f"/proc/{p}/{part}")
        except OSError:
            pass
print(sorted(set(found)), sorted(roots))
"""
# The same search, over and over in the background, while the score runs.
SPY = """\
import subprocess, sys, time
seen = set()
while True:
    out = subprocess.run([sys.executable, "search.py", *sys.argv[1:3]], capture_output=True, text=True).stdout
    if out and not out.startswith("[]"):
        seen.add(out.split("] ")[0] + "]")
    with open("/work/spied.txt", "w") as f:
        f.write("\\n".join(sorted(seen)))
    time.sleep(0.05)
"""


def test_the_tests_cannot_be_read_from_inside_the_session(box, docker_client):
    head, tail = "rbsecret", secrets.token_hex(6)
    token = head + tail
    label = {"tests": [f"assert add(1, 2) == 3, '{token}'", "assert add(-1, 1) == 0"]}
    with episode(box, docker_client) as s:
        s.write_file("search.py", SEARCH)
        s.write_file("spy.py", SPY)
        s.write_file("solution.py", RIGHT)
        search = f"python3 search.py {head} {tail}"
        before = s.shell(search, timeout_s=60)
        assert before.verdict is Verdict.PASSED and before.stdout.startswith("[] ['/"), before
        assert "/work" in before.stdout and "/tmp" in before.stdout  # it did look where the agent writes
        s.shell(f"python3 spy.py {head} {tail}", background=True)
        assert _graded(s.score(label)) == RIGHT_GRADE
        after = s.shell(search, timeout_s=60)
        assert after.verdict is Verdict.PASSED and after.stdout.startswith("[] "), after
        s.shell("sleep 1")
        assert s.read_file("spied.txt") == ""
        # The search does find the token where it is.
        s.write_file("bait.txt", token)
        assert s.shell(search, timeout_s=60).stdout.startswith("['/work/bait.txt'] ")


def test_a_process_that_outlives_its_call_is_gone_at_the_next_call(box, docker_client):
    with episode(box, docker_client) as s:
        started = s.shell("sleep 7101 & nohup sleep 7102 >/dev/null 2>&1 & setsid sleep 7103 & "
                          "(trap '' HUP TERM; exec sleep 7104) & echo started")
        assert started.stdout == "started\n"
        s.run("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              "        time.sleep(7105)\n")
        assert {p for p in procs(s) if "710" in p} == set()


def test_a_memory_hog_ends_only_its_call(box, docker_client):
    with episode(box, docker_client, limits=Limits(memory_mb=128)) as s:
        s.write_file("solution.py", RIGHT)
        began = time.monotonic()
        hog = s.run(HOG, timeout_s=60)
        assert hog.verdict is Verdict.OUT_OF_MEMORY, hog
        assert time.monotonic() - began < 40
        hog = s.shell(f"python3 -c {shlex.quote(HOG)}", timeout_s=30)  # a shell's program too
        if _gvisor(box):  # its allocation fails: the program's own exit, as it reports it
            assert (hog.verdict, hog.exit_code, hog.stderr.rstrip().rsplit("\n", 1)[-1]) == \
                (Verdict.FAILED, 1, "MemoryError"), hog
        else:  # the kernel's OOM killer takes it
            assert hog.verdict is Verdict.OUT_OF_MEMORY, hog
        assert s.run("print(2)").stdout == "2\n"
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE


def test_memory_hogs_in_parallel_end_the_call_or_the_session_at_once(box, docker_client):
    # Each process is bounded under gVisor, not their sum: two hogs together go past the
    # container's limit, which under gVisor takes the sandbox's kernel down with them.
    with episode(box, docker_client, limits=Limits(memory_mb=128)) as s:
        # Each holds what it got (a loaded host may start the second after the first ended).
        two = f"python3 -c {shlex.quote(HOLDING_HOG)} & python3 -c {shlex.quote(HOLDING_HOG)}; wait"
        began = time.monotonic()
        if not _gvisor(box):  # the OOM killer takes them (no RLIMIT_AS under runc), the session goes on
            assert s.shell(two, timeout_s=10).verdict is Verdict.OUT_OF_MEMORY
            assert s.run("print(2)").stdout == "2\n"
            return
        with pytest.raises(SessionEnded):
            s.shell(two, timeout_s=120)
        assert time.monotonic() - began < 40  # not the call's deadline (seconds, on a loaded host)
        began = time.monotonic()
        with pytest.raises(SessionEnded):
            s.run("print(2)")
        assert time.monotonic() - began < 5  # at once: no call reaches the container


def test_a_full_disk_then_a_memory_hog_ends_the_call_or_the_session_at_once(box, docker_client):
    # The tmpfs work dirs are memory too (the cgroup's under runc, the sentry's under
    # gVisor): filled, they leave the next call's hog less than its limit.
    with episode(box, docker_client, limits=Limits(memory_mb=128, work_mb=48, tmp_mb=48)) as s:
        # /work full, /tmp nearly (a call's code goes through /tmp).
        full = s.shell("head -c 40000000 /dev/zero > /tmp/fill && head -c 60000000 /dev/zero > fill")
        assert full.verdict is Verdict.FAILED and "No space left" in full.stderr, full
        began = time.monotonic()
        if not _gvisor(box):
            assert s.run(HOG, timeout_s=30).verdict is Verdict.OUT_OF_MEMORY
            s.shell("rm fill /tmp/fill")
            assert s.run("print(2)").stdout == "2\n"
            return
        with pytest.raises(SessionEnded):
            s.run(HOG, timeout_s=120)
        assert time.monotonic() - began < 40  # not the call's deadline (seconds, on a loaded host)
        with pytest.raises(SessionEnded):
            s.run("print(2)")


# Writes the end line the call's clean-up writes (its marker read from the
# shell that runs it), claiming success, no OOM kill and its own daemon as a
# background session, then fails.
FORGED_END = """\
import os, subprocess, sys
try:  # under gVisor the call's exec is its own root (no shell above it)
    args = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
except OSError:
    args = []
marker = next((a.decode() for a in args if a.startswith(b"rbend-")), "rbend-none")
daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
sys.stderr.write(f"\\n{marker} 0 0 {daemon.pid}\\n")
sys.exit(7)
"""


def test_a_forged_end_of_call_changes_nothing(box, docker_client):
    with episode(box, docker_client) as s:
        forged = s.run(FORGED_END)
        assert (forged.verdict, forged.exit_code) == (Verdict.FAILED, 7), forged
        assert "rbend-" in forged.stderr  # what it wrote is its own output
        assert forged.background_sid is None
        assert procs(s) == set()  # its daemon went with the call


def test_an_infinite_loop_past_its_deadline_times_out_and_the_session_goes_on(box, docker_client):
    with episode(box, docker_client) as s:
        s.write_file("solution.py", RIGHT)
        began = time.monotonic()
        loop = s.run("print('before', flush=True)\nwhile True:\n    pass\n", timeout_s=5)
        assert (loop.verdict, loop.exit_code, loop.stdout) == (Verdict.TIMEOUT, None, "before\n"), loop
        assert time.monotonic() - began < 30  # the deadline, the cleanup, some room for a loaded host
        assert procs(s) == set()
        assert s.run("print('still here')").stdout == "still here\n"
        assert _graded(s.score(ADD_LABEL)) == RIGHT_GRADE


OWNER = """\
import sys, time
from rewardbox.sandbox import Sandbox, SessionLimits
box = Sandbox(sweep=False, runtime=sys.argv[1] or None)
s = box.session(session_limits=SessionLimits(lifetime_s=600, idle_s=600))
print(s.container_id, flush=True)
time.sleep(600)
"""


def test_no_container_is_left_after_kill_9_of_the_owner(box, docker_client):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, box.runtime or ""], stdout=subprocess.PIPE, text=True)
    try:
        container_id = owner.stdout.readline().strip()
        assert container_id and not gone(docker_client, container_id, wait_s=0)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    engine = DockerEngine(retry_s=20)
    try:
        assert engine.sweep() >= 1
    finally:
        engine.close()
    assert gone(docker_client, container_id, wait_s=5)


def test_no_container_is_left_after_idle_expiry(box, docker_client):
    s = box.session(session_limits=SessionLimits(idle_s=2))
    try:
        s.run("print(1)")
        # No call: the container's own PID 1 ends it, and the engine removes it.
        assert gone(docker_client, s.container_id, wait_s=15)
        began = time.monotonic()
        with pytest.raises(SessionEnded, match="idle"):
            s.run("print(2)")
        assert time.monotonic() - began < 5  # at once: no call reaches the container
    finally:
        s.close()
