"""Sessions (issue 22): one hardened container for one agent rollout, through
the Python API on the real engine.

The adversarial cases run under runc and, when the engine lists it, gVisor
(`runsc`); the rest under the engine's default runtime.
"""

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import docker
import docker.errors
import pytest

from rewardbox.rewards import CodeReward
from rewardbox.sandbox import (
    Limits,
    NoSuchFile,
    Sandbox,
    SessionEnded,
    SessionLimits,
    SessionRefused,
    Verdict,
)
from rewardbox.sandbox.engine import DockerEngine

ADD_LABEL = {"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def _runsc_registered() -> bool:
    client = docker.from_env()
    try:
        return "runsc" in (client.info().get("Runtimes") or {})
    finally:
        client.close()


RUNTIMES = [pytest.param(None, id="runc"),
            pytest.param("runsc", id="gvisor", marks=pytest.mark.skipif(
                not _runsc_registered(), reason="the engine lists no runsc runtime (`make gvisor`)"))]


@pytest.fixture(scope="module")
def gvisor_box():
    box = Sandbox(max_containers=2, retry_s=20, runtime="runsc", sweep=False)
    yield box
    box.close()


def _gone(client: docker.DockerClient, container_id: str, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        if not client.api.containers(all=True, filters={"id": container_id}):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _procs(session) -> set[str]:
    """The command lines of the session's processes but PID 1 and the lister."""
    listing = session.run(textwrap.dedent("""\
        import os
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in (1, os.getpid()):
                try:
                    print(open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode().strip())
                except OSError:
                    pass
    """))
    assert listing.verdict is Verdict.PASSED, listing
    return {line for line in listing.stdout.splitlines() if line}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_multi_turn_episode_wrong_code_the_error_a_fix_the_reward_the_container_gone(runtime, request, docker_client):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(grader=CodeReward(box)) as s:
        s.write_file("solution.py", WRONG)
        first = s.run("from solution import add\nassert add(1, 2) == 3, add(1, 2)")
        assert first.verdict is Verdict.FAILED and first.exit_code == 1
        assert "AssertionError: -1" in first.stderr  # the error the agent reads back
        assert s.read_file("solution.py") == WRONG
        s.write_file("solution.py", RIGHT)
        assert s.run("from solution import add\nprint(add(1, 2))").stdout == "3\n"
        grade = s.score(ADD_LABEL)
        assert (grade.reward, grade.verdict, grade.passed, grade.total) == (1.0, Verdict.PASSED, 2, 2)
        container_id = s.container_id
    assert s.closed
    assert _gone(docker_client, container_id, wait_s=0)  # removed by close, not later
    with pytest.raises(SessionEnded):
        s.run("print(1)")


def test_files_and_the_work_dir_persist_processes_do_not(sandbox):
    with sandbox.session() as s:
        assert s.shell("mkdir -p data && echo kept > data/a.txt && sleep 4321 & echo started").stdout == "started\n"
        assert s.shell("cat data/a.txt; pwd").stdout == "kept\n/work\n"
        assert s.read_file("data/a.txt", text=False) == b"kept\n"
        # A daemon that left the call's session (double fork + setsid) goes as well.
        s.run("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(4322)\n")
        assert not {p for p in _procs(s) if "432" in p}


def test_a_background_process_outlives_its_call_is_bounded_and_is_killed_at_close(sandbox, docker_client):
    limits = SessionLimits(background=2)
    with sandbox.session(session_limits=limits) as s:
        started = s.shell("sleep 5432", background=True)
        assert started.verdict is Verdict.PASSED and started.background_sid
        # A call between, whose own leftover is killed after it, and the background one spared.
        s.shell("sleep 5439 & echo left")
        left = _procs(s)
        assert "sleep 5432" in left and not any("5439" in p for p in left)
        s.write_file("daemon.py", "import time\ntime.sleep(5433)\n")
        s.run(file="daemon.py", background=True)
        with pytest.raises(SessionRefused, match="background"):
            s.shell("sleep 5434", background=True)
        container_id = s.container_id
    assert _gone(docker_client, container_id, wait_s=0)
    # Container processes are visible in the host's /proc (under runc): none is left.
    left = [p for p in os.listdir("/proc") if p.isdigit() and b"543" in _cmdline(p)]
    assert left == []


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_a_call_past_its_deadline_times_out_and_the_session_goes_on(sandbox):
    with sandbox.session() as s:
        began = time.monotonic()
        late = s.shell("echo before; sleep 30", timeout_s=1)
        assert late.verdict is Verdict.TIMEOUT and late.stdout == "before\n"
        assert time.monotonic() - began < 10
        assert not {p for p in _procs(s) if "sleep 30" in p}
        assert s.run("print('still here')").stdout == "still here\n"


def test_output_over_the_cap_stops_the_call(sandbox):
    with sandbox.session(session_limits=SessionLimits(output_bytes=4096)) as s:
        loud = s.run("while True: print('x' * 100)")
        assert loud.verdict is Verdict.OUTPUT_LIMIT and loud.output_truncated
        assert len(loud.stdout) <= 4096
        assert s.shell("echo ok", stdin="ignored").stdout == "ok\n"


def test_stdin_reaches_the_program(sandbox):
    with sandbox.session() as s:
        s.write_file("rev.py", "import sys\nprint(sys.stdin.read()[::-1])")
        assert s.run(file="rev.py", stdin="abc").stdout == "cba\n"
        assert s.shell("wc -c", stdin=b"\0" * 100_000).stdout.strip() == "100000"


def test_memory_run_out_in_a_call_is_out_of_memory(sandbox):
    with sandbox.session(limits=Limits(memory_mb=128)) as s:
        hog = s.run("import ctypes\nblocks = []\nwhile True:\n    b = bytearray(16 << 20)\n"
                    "    ctypes.memset((ctypes.c_char * len(b)).from_buffer(b), 1, len(b))\n    blocks.append(b)\n",
                    timeout_s=20)
        assert hog.verdict is Verdict.OUT_OF_MEMORY, hog
        assert s.run("print(2)").stdout == "2\n"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_fork_bomb_in_one_call_then_a_passing_score(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(grader=CodeReward(box)) as s:
        s.write_file("solution.py", RIGHT)
        bomb = s.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
                     timeout_s=3)
        assert bomb.verdict in {Verdict.TIMEOUT, Verdict.FAILED, Verdict.KILLED, Verdict.OUT_OF_MEMORY}
        assert _procs(s) == set()  # nothing of the bomb is left
        assert s.score(ADD_LABEL).reward == 1.0


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_paths_out_of_the_work_dir_are_refused(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session() as s:
        for path in ("../etc/passwd", "/etc/passwd", "a/../../x", ".hidden", ""):
            with pytest.raises(SessionRefused):
                s.read_file(path)
            with pytest.raises(SessionRefused):
                s.write_file(path, "x")
        s.shell("ln -s /etc etc && ln -s /etc/passwd pw && ln -s /tmp tmp && mkfifo pipe && echo x > /tmp/t")
        for path in ("etc/passwd", "pw", "tmp/t", "pipe"):
            with pytest.raises(SessionRefused, match="not a"):
                s.read_file(path)
        for path in ("tmp/planted", "pw", "pipe"):
            with pytest.raises(SessionRefused, match="not a"):
                s.write_file(path, "x")
        # Nothing was written through a link.
        assert s.shell("cat /tmp/t; test -e /tmp/planted || echo none; head -c 5 pw").stdout == "x\nnone\nroot:"
        with pytest.raises(NoSuchFile, match="no such file"):
            s.read_file("missing.txt")


def test_sizes_are_bounded(sandbox):
    with sandbox.session(session_limits=SessionLimits(file_bytes=4096)) as s:
        with pytest.raises(SessionRefused, match="over"):
            s.write_file("big.bin", b"x" * 4097)
        with pytest.raises(SessionRefused, match="over"):
            s.run("print(1)", stdin="x" * 4097)
        s.shell("head -c 5000 /dev/zero > big.bin")
        with pytest.raises(SessionRefused, match="over"):
            s.read_file("big.bin")
        s.write_file("ok.bin", b"\xff" * 4096)
        assert s.read_file("ok.bin", text=False) == b"\xff" * 4096


PLANTED = {
    # pytest would load these from the work dir, were the tests run there.
    "conftest.py": ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                    "    out = yield\n    out.get_result().outcome = 'passed'\n"),
    "pytest.ini": "[pytest]\naddopts = -p no:python --co\n",
    # Python would import this at start from the path.
    "sitecustomize.py": "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n",
    # A package shadowing the solution module.
    "solution/__init__.py": "def add(a, b):\n    return a + b\n",
    ".tests/test_solution.py": "def test_forged():\n    pass\n",
}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_planted_files_do_not_change_the_score_of_a_wrong_solution(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(grader=CodeReward(box)) as s:
        for path, content in PLANTED.items():
            if path.startswith("."):
                s.shell(f"mkdir -p .tests && printf '%s' '{content}' > {path}")
            else:
                s.write_file(path, content)
        s.write_file("solution.py", WRONG)
        grade = s.score(ADD_LABEL)
        assert grade.verdict is Verdict.FAILED and grade.reward is not None and grade.reward < 1.0, grade
        # A named file is graded the same way.
        s.write_file("attempt.py", RIGHT)
        assert s.score(ADD_LABEL, file="attempt.py").reward == 1.0


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


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_daemon_cannot_touch_the_grading_run(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(grader=CodeReward(box)) as s:
        s.write_file("daemon.py", DAEMON)
        assert s.run(file="daemon.py", background=True).background_sid
        s.write_file("solution.py", WRONG)
        assert s.score(ADD_LABEL).verdict is Verdict.FAILED
        s.write_file("solution.py", RIGHT)
        assert s.score(ADD_LABEL).reward == 1.0
        assert any("daemon.py" in p for p in _procs(s))  # it ran all along


SPY = """\
import os, time
found = set()
while True:
    for root in ("/work", "/tmp", "/dev/shm"):
        for d, _, files in os.walk(root):
            for name in files:
                try:
                    if b"add(-1" + b", 1)" in open(os.path.join(d, name), "rb").read():
                        found.add(os.path.join(d, name))
                except OSError:
                    pass
    with open("/work/found.txt", "w") as f:
        f.write("\\n".join(sorted(found)) + "\\n" if found else "")
    time.sleep(0.01)
"""


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_tests_are_never_where_the_session_could_read_them(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(grader=CodeReward(box)) as s:
        s.write_file("spy.py", SPY)
        s.run(file="spy.py", background=True)
        s.write_file("solution.py", RIGHT)
        assert s.score(ADD_LABEL).reward == 1.0
        s.shell("sleep 0.5")
        assert s.read_file("found.txt") == ""
        s.write_file("bait.txt", "add(-1, 1)")  # the spy does find what is there
        s.shell("sleep 0.5")
        assert s.read_file("found.txt") == "/work/bait.txt\n"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_disk_filled_across_calls_is_the_session_s_problem_only(runtime, request):
    box = request.getfixturevalue("gvisor_box") if runtime else request.getfixturevalue("sandbox")
    with box.session(limits=Limits(work_mb=2, tmp_mb=2), grader=CodeReward(box)) as s:
        s.write_file("solution.py", RIGHT)
        s.shell("head -c 3000000 /dev/zero > fill1")
        s.shell("head -c 3000000 /dev/zero > /tmp/fill2; i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done")
        with pytest.raises(SessionRefused, match="space|inodes|No"):
            s.write_file("more.txt", "x" * 100_000)
        assert s.score(ADD_LABEL).reward == 1.0  # graded from the image, not from this disk
        s.shell("rm -f fill1 f*")
        s.write_file("more.txt", "x" * 100_000)
        assert s.read_file("more.txt") == "x" * 100_000


def test_a_session_that_has_no_grader_says_so(sandbox):
    with sandbox.session() as s, pytest.raises(SessionRefused, match="grader"):
        s.score(ADD_LABEL)


def test_a_session_dropped_unclosed_is_removed(sandbox, docker_client):
    s = sandbox.session()
    container_id = s.container_id
    del s
    gc.collect()
    assert _gone(docker_client, container_id, wait_s=5)


def test_the_idle_limit_ends_the_container_without_the_host(sandbox, docker_client):
    s = sandbox.session(session_limits=SessionLimits(idle_s=2))
    try:
        s.run("print(1)")
        # No call: the container's own PID 1 ends it, and the engine removes it.
        assert _gone(docker_client, s.container_id, wait_s=15)
        with pytest.raises(SessionEnded, match="idle"):
            s.run("print(2)")
    finally:
        s.close()


def test_a_long_call_is_not_idle(sandbox):
    with sandbox.session(session_limits=SessionLimits(idle_s=1)) as s:
        assert s.shell("sleep 3; echo done", timeout_s=10).stdout == "done\n"


def test_the_lifetime_ends_the_container_whatever_the_calls(sandbox, docker_client):
    s = sandbox.session(session_limits=SessionLimits(lifetime_s=3, idle_s=60))
    try:
        began = time.monotonic()
        cut = s.shell("sleep 30", timeout_s=30)  # the deadline is cut to the lifetime
        assert cut.verdict is Verdict.TIMEOUT and time.monotonic() - began < 10
        assert _gone(docker_client, s.container_id, wait_s=15)
        with pytest.raises(SessionEnded):
            s.run("print(1)")
    finally:
        s.close()


def test_a_container_ended_from_inside_or_outside_is_a_clear_error_not_a_hang(sandbox, docker_client):
    with sandbox.session() as s:
        docker_client.api.kill(s.container_id)
        began = time.monotonic()
        with pytest.raises(SessionEnded):
            s.run("print(1)")
        assert time.monotonic() - began < 10
        with pytest.raises(SessionEnded):  # and every call after
            s.read_file("x")


OWNER = """\
import sys, time
from rewardbox.sandbox import Sandbox, SessionLimits
box = Sandbox(sweep=False)
s = box.session(session_limits=SessionLimits(lifetime_s=600, idle_s=600))
print(s.container_id, flush=True)
time.sleep(600)
"""


def test_a_session_whose_owner_is_killed_is_swept(sandbox, docker_client):
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        container_id = owner.stdout.readline().strip()
        assert container_id and not _gone(docker_client, container_id, wait_s=0)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    engine = DockerEngine(retry_s=20)
    try:
        assert engine.sweep() >= 1
    finally:
        engine.close()
    assert _gone(docker_client, container_id, wait_s=5)


def test_the_session_container_is_hardened_as_a_run(sandbox, docker_client):
    with sandbox.session() as s:
        info = docker_client.api.inspect_container(s.container_id)
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"] and host["AutoRemove"]
        assert info["Config"]["User"] == "10001:10001"
        labels = info["Config"]["Labels"]
        assert labels["rewardbox.owner"] == sandbox.engine.owner and float(labels["rewardbox.expires"]) > time.time()
        assert s.shell("id -u; touch /x 2>&1; echo; cat /sys/class/net/*/operstate 2>/dev/null | wc -l").stdout \
            .split("\n")[0] == "10001"


def test_the_async_session(sandbox):
    async def episode() -> tuple[str, float | None]:
        async with sandbox.async_session(grader=CodeReward(sandbox)) as s:
            await s.write_file("solution.py", RIGHT)
            out = await s.run("from solution import add\nprint(add(2, 2))")
            grade = await s.score(ADD_LABEL)
            return out.stdout, grade.reward

    assert asyncio.run(episode()) == ("4\n", 1.0)


def test_nothing_is_left_behind(leftovers):
    # Runs last in this module: every session above is closed or ended.
    assert leftovers()["containers"] == [], json.dumps(leftovers())
