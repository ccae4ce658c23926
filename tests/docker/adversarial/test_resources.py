"""Resource attacks: each meets a limit and gets the verdict that limit
gives, scores no more than an honest wrong answer, and leaves the host as it
was (the `batch` fixture checks it after the module's runs).

Where an attack's progress is worth seeing, `add` returns a status string
instead of the answer, so the failure message shows where the limit stopped it.
"""

import gc
import time

import docker.errors
import pytest
from add_task import LABEL as ADD_LABEL

from adversarial.attacks import FORMATS, GVISOR, POOLED, QUICK, Attack, baselines, messages, show
from rewardbox.rewards import CodeReward
from rewardbox.sandbox import Limits, Sandbox, Verdict

pytestmark = pytest.mark.core

ENGINE_WAIT_S = 30  # Sandbox._run_once waits this long for a killed container to stop
# A fork bomb ends one of these ways, depending on which limit it meets first:
# the pids limit makes fork fail (the tests fail or the run times out), the
# forked pytest copies exhaust memory, or the host's deadline kills it all.
FORK_BOMB_VERDICTS = {Verdict.FAILED, Verdict.TIMEOUT, Verdict.OUT_OF_MEMORY, Verdict.KILLED, Verdict.OUTPUT_LIMIT}
WRITABLE = ("/work", "/tmp", "/dev/shm")

FILL = '''\
import errno
import os

def fill(directory, chunk=b"x" * (1 << 20)):
    written = 0
    try:
        while written < 1024:  # 1 GB, far past every limit; in 8 MB files, under the file size limit
            with open(os.path.join(directory, f"fill{written}"), "wb", buffering=0) as f:
                for _ in range(8):
                    f.write(chunk)
                    written += 1
    except OSError as exc:
        return f"{directory}:{errno.errorcode[exc.errno]}"
    return f"{directory}:filled {written} MB"
'''

INODES = '''\
import errno
import os

def exhaust(directory, cap=100000):
    made = 0
    try:
        os.makedirs(os.path.join(directory, "many"), exist_ok=True)
        while made < cap:
            os.close(os.open(os.path.join(directory, "many", str(made)), os.O_CREAT | os.O_WRONLY, 0o600))
            made += 1
    except OSError as exc:
        return f"{directory}:{errno.errorcode[exc.errno]} after {made} files"
    return f"{directory}:{made} files"
'''

ATTACKS = {
    **baselines(["pytest", "stdio"]),
    "fork-bomb": Attack("import os\n\ndef add(a, b):\n    while True:\n        os.fork()\n", limits=Limits(timeout_s=3)),
    "memory-bomb": Attack("def add(a, b):\n    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 20))\n",
                          limits=Limits(timeout_s=30, memory_mb=128)),
    **{f"disk-fill-{d.strip('/').replace('/', '-')}": Attack(FILL + f"\nFILLED = fill({d!r})\n\n"
                                                                    "def add(a, b):\n    return FILLED\n")
       for d in WRITABLE},
    # Every mount it can create a file in, found by trying each mount point, filled at
    # once. /dev/mqueue takes new message queues, but no data.
    "disk-fill-every-writable-mount": Attack(FILL + '''
def writable_mounts():
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            try:
                os.close(os.open(os.path.join(point, ".probe"), os.O_CREAT | os.O_WRONLY, 0o600))
                found.append(point)
            except OSError:
                pass
    return sorted(found)

FILLED = "filled " + ", ".join(fill(d) for d in writable_mounts())

def add(a, b):
    return FILLED
'''),
    **{f"inodes-{d.strip('/').replace('/', '-')}": Attack(INODES + f"\nMADE = exhaust({d!r})\n\n"
                                                                 "def add(a, b):\n    return MADE\n")
       for d in WRITABLE},
    # 1 GB in 1 MiB writes with a pause after each: 1 GB would take over 20 s, the cap far less.
    "stdout-1gb": Attack("import sys, time\n\ndef add(a, b):\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n"
                         "        sys.stdout.write(chunk)\n        sys.stdout.flush()\n        time.sleep(0.02)\n"
                         "    return a + b\n", limits=Limits(timeout_s=30)),
    "stdout-1gb-at-full-speed": Attack("import os\n\ndef add(a, b):\n    chunk = b'x' * (1 << 20)\n"
                                       "    for _ in range(1024):\n        os.write(1, chunk)\n    return a + b\n"),
    "output-10mb-without-newline": Attack("import sys\n\ndef add(a, b):\n    sys.stdout.write('x' * (10 << 20))\n"
                                          "    sys.stdout.flush()\n    return a + b\n"),
    "output-without-newline-then-right-answer": Attack(
        "import sys\n\ndef add(a, b):\n    sys.stdout.write('no newline')\n    sys.stderr.write('none here either')\n"
        "    return a + b\n"),
    # A partial line on the container's own stdout, just before the harness's report
    # (a pool's pid 1 is the non-dumpable harness: its stdout cannot be opened at all).
    "container-stdout-without-newline-then-right-answer": Attack(
        "def add(a, b):\n    try:\n        with open('/proc/1/fd/1', 'w') as out:\n            out.write('partial line')\n"
        "    except PermissionError:\n        pass\n    return a + b\n"),
    "infinite-loop": Attack("def add(a, b):\n    while True:\n        pass\n", limits=QUICK),
    "sleep": Attack("import time\n\ndef add(a, b):\n    time.sleep(10**6)\n", limits=QUICK),
    "blocking-on-stdin": Attack(
        "import os, sys\n\ndef add(a, b):\n    got = [sys.stdin.read(), os.read(0, 10)]\n"
        "    with open('/proc/1/fd/0', 'rb') as f:  # the container's own stdin\n        got.append(f.read())\n"
        "    return 'stdin gave %r' % got\n", limits=QUICK),
    "blocking-on-stdin-program": Attack(
        "import sys\n\ndef add(a, b):\n    return a + b\n\nif __name__ == '__main__':\n    sys.stdin.read()\n"
        "    with open('/proc/1/fd/0') as f:\n        f.read()\n    input()\n", FORMATS["stdio"], limits=QUICK),
    "close-stdout-then-spin": Attack("import os\n\ndef add(a, b):\n    os.close(1)\n    os.close(2)\n"
                                     "    while True:\n        pass\n", limits=QUICK),
    "sigterm-ignored": Attack("import signal\n\nfor sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                              "    signal.signal(sig, signal.SIG_IGN)\n\ndef add(a, b):\n    while True:\n        pass\n",
                              limits=QUICK),
    "many-threads": Attack('''\
import threading
import time

def add(a, b):
    started = 0
    try:
        for _ in range(10000):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            started += 1
    except RuntimeError as exc:
        return f"started {started} threads, then {exc}"
    return f"started {started} threads"
'''),
    # A grandchild in a session of its own, still sleeping when the tests end.
    "background-process-outlives-the-run": Attack(
        "import os, time\n\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(3600)\n"
        "    os._exit(0)\n\ndef add(a, b):\n    return a + b\n"),
}

# case -> verdicts it may get, and text the failure messages must hold (the limit that stopped it)
EXPECTED = {
    "fork-bomb": (FORK_BOMB_VERDICTS, None),
    "memory-bomb": ({Verdict.OUT_OF_MEMORY}, None),
    **{f"disk-fill-{d.strip('/').replace('/', '-')}": ({Verdict.FAILED}, f"{d}:ENOSPC") for d in WRITABLE},
    # /dev/mqueue is absent from the list: no message queue can be made (RLIMIT_MSGQUEUE 0).
    "disk-fill-every-writable-mount": ({Verdict.FAILED}, "filled /dev/shm:ENOSPC, /tmp:ENOSPC, /work:ENOSPC'"),
    # gVisor's tmpfs does not enforce nr_inodes: the files are made, bounded by memory and time.
    **{f"inodes-{d.strip('/').replace('/', '-')}": ({Verdict.FAILED}, None if GVISOR else f"{d}:ENOSPC after")
       for d in WRITABLE},
    "stdout-1gb": ({Verdict.OUTPUT_LIMIT}, None),
    "stdout-1gb-at-full-speed": ({Verdict.OUTPUT_LIMIT}, None),
    "output-10mb-without-newline": ({Verdict.OUTPUT_LIMIT}, None),
    "infinite-loop": ({Verdict.TIMEOUT}, None),
    "sleep": ({Verdict.TIMEOUT}, None),
    # A pool's pid 1 is the non-dumpable harness: the container's stdin cannot be opened,
    # but under gVisor it can, and it stays open: reading it blocks until the deadline.
    "blocking-on-stdin": ({Verdict.TIMEOUT}, None) if POOLED and GVISOR else
    ({Verdict.FAILED}, "PermissionError: [Errno 13] Permission denied" if POOLED else "stdin gave ['', b'', b'']"),
    "blocking-on-stdin-program": ({Verdict.TIMEOUT}, None) if POOLED and GVISOR else
    ({Verdict.FAILED}, "PermissionError: [Errno 13] Permission denied" if POOLED else "EOFError"),
    "close-stdout-then-spin": ({Verdict.TIMEOUT}, None),
    "sigterm-ignored": ({Verdict.TIMEOUT}, None),
    "many-threads": ({Verdict.FAILED}, "can't start new thread"),
}
HONEST = ["output-without-newline-then-right-answer", "container-stdout-without-newline-then-right-answer",
          "background-process-outlives-the-run"]


@pytest.mark.parametrize("case", list(EXPECTED))
def test_attack_meets_its_limit(batch, case):
    grade = batch[case]
    verdicts, text = EXPECTED[case]
    fmt = "stdio" if case.endswith("-program") else "pytest"
    assert batch[f"honest-right-{fmt}"].reward == 1.0, show(batch[f"honest-right-{fmt}"])

    assert grade.verdict in verdicts, show(grade)
    assert grade.reward <= batch[f"honest-wrong-{fmt}"].reward, show(grade)
    assert grade.passed == 0 and grade.total == 3, show(grade)
    if text is not None:
        assert text in messages(grade), show(grade)


@pytest.mark.parametrize("case", HONEST)
def test_right_answer_survives_odd_output_and_a_detached_process(batch, case):
    grade = batch[case]
    assert (grade.verdict, grade.reward, grade.passed) == (Verdict.PASSED, 1.0, 3), show(grade)


@pytest.mark.parametrize("case", ["fork-bomb"])
def test_fork_bomb_ends_within_the_hosts_deadline(batch, case):
    limits = ATTACKS[case].limits
    assert batch[case].duration_s < limits.timeout_s + limits.startup_grace_s + ENGINE_WAIT_S


@pytest.mark.parametrize("case", ["stdout-1gb"])
def test_output_is_stopped_at_the_cap_not_after_1_gb(batch, case):
    # 1 GB at this pace takes over 20 s; the run ended long before, at the cap.
    assert batch[case].duration_s < 15, show(batch[case])


@pytest.mark.parametrize("case", ["many-threads"])
def test_threads_are_bounded_by_the_pids_limit(batch, case):
    started = int(messages(batch[case]).split("started ", 1)[1].split()[0])
    assert started < Limits().pids


def test_1_gb_to_container_stdout_bypassing_the_harness_hits_output_limit(sandbox, docker_client, leftovers):
    # docker-init (pid 1) runs as the sandbox user, so the code under test can
    # write to the container's stdout directly; only the host's cap stops it.
    box = Sandbox(max_containers=1, retry_s=2, sweep=False, runtime=sandbox.runtime)
    box.engine._api.timeout = 5  # the bug hangs each engine call for this long (default 60 s)
    # The deadline leaves room for a cold container's pytest under gVisor on a
    # loaded machine (over 3 s in CI); the cap (1 MB) ends the run long before.
    reward = CodeReward(box, limits=Limits(timeout_s=10))
    completion = (
        "def add(a, b):\n"
        "    chunk = b'x' * (1 << 20)\n"
        "    with open('/proc/1/fd/1', 'wb', buffering=0) as out:\n"
        "        for _ in range(1024):\n"
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

    assert grade.verdict is Verdict.OUTPUT_LIMIT, show(grade)
    assert grade.reward == -1.0
    assert grade.duration_s < 10 + 5  # stopped at the cap, within the host's deadline
    assert leftovers() == {"containers": [], "processes": []}


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
