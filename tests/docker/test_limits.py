"""Limits and isolation: deadlines, memory, processes, output, network,
filesystem, user. Isolation is shown from inside the container, by test
modules that assert it; traffic goes only to loopback addresses."""

import gc
import socket
import subprocess
import time

import docker.errors
import pytest
from add_task import LABEL as ADD_LABEL
from add_task import NAMES, outcomes

from rewards import CodeReward
from sandbox import Limits, Outcome, Sandbox, Verdict

ENGINE_WAIT_S = 30  # Sandbox._run_once waits this long for a killed container to stop


@pytest.fixture(scope="module")
def quick(sandbox):
    return CodeReward(sandbox, limits=Limits(timeout_s=2))


def test_infinite_loop_times_out(quick):
    grade = quick.grade("def add(a, b):\n    while True:\n        pass\n", ADD_LABEL)

    assert grade.verdict is Verdict.TIMEOUT
    assert grade.reward == -0.5
    assert grade.score == pytest.approx(0.25)
    assert (grade.passed, grade.total) == (0, 3)


def test_sleep_forever_times_out(quick):
    grade = quick.grade("import time\n\ndef add(a, b):\n    time.sleep(10**6)\n", ADD_LABEL)

    assert grade.verdict is Verdict.TIMEOUT
    assert grade.reward == -0.5
    assert (grade.passed, grade.total) == (0, 3)


def test_memory_bomb_is_out_of_memory(sandbox):
    reward = CodeReward(sandbox, limits=Limits(timeout_s=5, memory_mb=128))
    completion = (
        "def add(a, b):\n"
        "    hoard = []\n"
        "    while True:\n"
        "        hoard.append(bytearray(1 << 20))\n"
    )

    grade = reward.grade(completion, ADD_LABEL)

    assert grade.verdict is Verdict.OUT_OF_MEMORY
    assert grade.reward == -1.0
    assert (grade.passed, grade.total) == (0, 3)


# A fork bomb ends one of these ways, depending on which limit it meets first:
# the pids limit makes fork fail (the tests fail or the run times out), the
# forked pytest copies exhaust memory, or the host's deadline kills it all.
FORK_BOMB_VERDICTS = {Verdict.FAILED, Verdict.TIMEOUT, Verdict.OUT_OF_MEMORY, Verdict.KILLED, Verdict.OUTPUT_LIMIT}


def test_fork_bomb_is_contained(sandbox, leftovers):
    limits = Limits(timeout_s=3)
    reward = CodeReward(sandbox, limits=limits)
    completion = (
        "import os\n\n"
        "def add(a, b):\n"
        "    while True:\n"
        "        os.fork()\n"
    )

    grade = reward.grade(completion, ADD_LABEL)

    assert grade.verdict in FORK_BOMB_VERDICTS
    assert grade.verdict is not Verdict.PASSED
    assert grade.reward <= 0
    assert grade.passed == 0
    # It finished within the host's own deadline (plus the engine's wait), and
    # left nothing running on the host, which can still start processes.
    assert grade.duration_s < limits.timeout_s + limits.startup_grace_s + ENGINE_WAIT_S
    assert leftovers() == {"containers": [], "processes": []}
    assert subprocess.run(["true"], timeout=10).returncode == 0


def test_100_mb_to_stdout_hits_output_limit(quick):
    completion = (
        "import sys\n\n"
        "def add(a, b):\n"
        "    chunk = 'x' * (1 << 20)\n"
        "    for _ in range(100):\n"
        "        sys.stdout.write(chunk)\n"
        "    sys.stdout.flush()\n"
        "    return a + b\n"
    )

    grade = quick.grade(completion, ADD_LABEL)

    assert grade.verdict is Verdict.OUTPUT_LIMIT
    assert grade.reward == -1.0
    assert (grade.passed, grade.total) == (0, 3)


def test_100_mb_to_container_stdout_bypassing_the_harness_hits_output_limit(sandbox, docker_client):
    # docker-init (pid 1) runs as the sandbox user, so the code under test can
    # write to the container's stdout directly; only the host's cap stops it.
    box = Sandbox(max_containers=1, retry_s=2, sweep=False)
    box.engine._api.timeout = 5  # the bug hangs each engine call for this long (default 60 s)
    reward = CodeReward(box, limits=Limits(timeout_s=3))
    completion = (
        "def add(a, b):\n"
        "    chunk = b'x' * (1 << 20)\n"
        "    with open('/proc/1/fd/1', 'wb', buffering=0) as out:\n"
        "        for _ in range(100):\n"
        "            out.write(chunk)\n"
        "    return a + b\n"
    )
    # The attach socket's fd really closes only when the garbage collector frees
    # docker-py's response cycle; whether that happens before the kill is luck.
    # Without the collector the outcome is deterministic.
    gc.disable()
    try:
        grade = reward.grade(completion, ADD_LABEL)
    finally:
        gc.enable()
        gc.collect()  # with the bug: closes the attach connection, so the engine can finish
        _remove_containers_of(docker_client, box.engine.owner)
        box.close()

    assert grade.verdict is Verdict.OUTPUT_LIMIT
    assert grade.reward == -1.0


def _remove_containers_of(client, owner: str, timeout_s: float = 60) -> None:
    """Remove, and wait out, every container of `owner`. Tests run one at a
    time: no run of the session's sandbox is in flight here."""
    deadline = time.monotonic() + timeout_s
    while containers := client.containers.list(all=True, filters={"label": f"rewardbox.owner={owner}"}):
        assert time.monotonic() < deadline, f"containers not removed: {[c.name for c in containers]}"
        for container in containers:
            try:
                container.remove(force=True)
            except docker.errors.APIError as exc:
                if exc.status_code not in (404, 409):  # gone, or removal under way
                    raise
        time.sleep(0.1)


def test_detached_background_process_does_not_turn_a_pass_into_a_timeout(sandbox, leftovers):
    reward = CodeReward(sandbox, limits=Limits(timeout_s=3))
    completion = (
        "import os, time\n\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(3600)\n"
        "    os._exit(0)\n\n"
        "def add(a, b):\n"
        "    return a + b\n"
    )

    grade = reward.grade(completion, ADD_LABEL)

    assert leftovers() == {"containers": [], "processes": []}  # holds either way: the container is gone
    assert outcomes(grade) == [(name, Outcome.PASSED) for name in NAMES]
    assert grade.verdict is Verdict.PASSED
    assert grade.reward == 1.0


@pytest.fixture
def host_listener():
    """A TCP port listening on the host's loopback, for the container to fail to reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def test_no_network(code_reward, host_listener):
    port = host_listener.getsockname()[1]
    # The port really listens: a connection from the host itself gets through.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    deadline = time.monotonic() + 5
    while True:
        try:
            host_listener.accept()[0].close()
            break
        except BlockingIOError:
            assert time.monotonic() < deadline, "the host's own connection never arrived"
            time.sleep(0.01)
    tests = f"""\
import socket

import solution

def test_only_loopback_interface():
    assert [name for _, name in socket.if_nameindex()] == ["lo"]

def test_proc_net_dev_lists_only_loopback():
    with open("/proc/net/dev") as f:
        devices = [line.split(":")[0].strip() for line in f.read().splitlines()[2:]]
    assert devices == ["lo"]

def test_host_port_unreachable():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", {port}))
    except OSError:
        pass
    else:
        raise AssertionError("connected to the host's port {port}")
    finally:
        s.close()

def test_solution_imported():
    assert solution.READY
"""

    grade = code_reward.grade("READY = True\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, grade.tests
    assert grade.reward == 1.0
    assert [(t.name, t.outcome) for t in grade.tests] == [
        ("test_only_loopback_interface", Outcome.PASSED),
        ("test_proc_net_dev_lists_only_loopback", Outcome.PASSED),
        ("test_host_port_unreachable", Outcome.PASSED),
        ("test_solution_imported", Outcome.PASSED),
    ]
    with pytest.raises(BlockingIOError):
        host_listener.accept()  # nothing from the container reached the host


def test_root_filesystem_is_read_only(code_reward):
    tests = """\
import errno
import os

import solution

def test_write_to_etc_fails():
    try:
        open("/etc/x", "w")
    except OSError as exc:
        assert exc.errno == errno.EROFS, exc
    else:
        raise AssertionError("wrote /etc/x")

def test_write_to_world_writable_dir_on_root_fails():
    # /var/tmp is mode 1777: only the read-only mount can refuse this.
    try:
        open("/var/tmp/x", "w")
    except OSError as exc:
        assert exc.errno == errno.EROFS, exc
    else:
        raise AssertionError("wrote /var/tmp/x")

def test_root_mounted_read_only():
    assert os.statvfs("/").f_flag & os.ST_RDONLY

def test_work_dir_is_writable():
    with open("/work/scratch.txt", "w") as f:
        f.write(solution.TEXT)
    with open("/work/scratch.txt") as f:
        assert f.read() == "hello"
"""

    grade = code_reward.grade("TEXT = 'hello'\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, grade.tests
    assert grade.reward == 1.0
    assert [t.outcome for t in grade.tests] == [Outcome.PASSED] * 4


def test_runs_as_non_root_without_capabilities(code_reward):
    tests = """\
import os

import solution

def test_not_root():
    assert os.getuid() != 0
    assert os.geteuid() != 0
    assert os.getgid() != 0
    assert solution.uid() == os.getuid()

def test_no_capabilities_and_no_new_privileges():
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines())
    assert int(status["CapEff"], 16) == 0
    assert int(status["CapPrm"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"
"""

    grade = code_reward.grade("import os\n\ndef uid():\n    return os.getuid()\n", {"pytest": tests})

    assert grade.verdict is Verdict.PASSED, grade.tests
    assert grade.reward == 1.0
    assert [(t.name, t.outcome) for t in grade.tests] == [
        ("test_not_root", Outcome.PASSED),
        ("test_no_capabilities_and_no_new_privileges", Outcome.PASSED),
    ]
