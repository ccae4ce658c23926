"""gVisor: `Sandbox(runtime="runsc")` really runs the code on gVisor's kernel,
and grades exactly as the default runtime does.

Needs the runtime registered (`make gvisor`, run by `make test`); without it
the runs fail with the engine's error, never a skip.
"""

import time
from pathlib import Path

import pytest
from add_task import LABEL as ADD_LABEL
from test_label_formats_e2e import FORMATS

from rewardbox.rewards import CodeReward, Sample
from rewardbox.sandbox import Limits, RunRequest, Sandbox, Verdict
from rewardbox.sandbox.pool import PooledSandbox

RUNTIMES = {"default": None, "gvisor": "runsc"}

# What the kernel says about itself: its version, how the root filesystem is
# mounted, and whether it lets the sandbox user read its log (syslog(2)
# READ_ALL, refused by Docker's seccomp profile, which --oci-seccomp applies inside gVisor too).
KERNEL_PROBE = """\
import ctypes

print(open("/proc/version").read().strip())
print("root:", next(line for line in open("/proc/mounts") if line.split()[1] == "/").strip())
buf = ctypes.create_string_buffer(4096)
n = ctypes.CDLL(None, use_errno=True).klogctl(3, buf, len(buf))
print("log:", buf.raw[:n].decode(errors="replace") if n >= 0 else f"refused (errno {ctypes.get_errno()})")
"""


@pytest.fixture(scope="module")
def boxes():
    made = {name: Sandbox(max_containers=4, retry_s=20, runtime=runtime, sweep=False)
            for name, runtime in RUNTIMES.items()}
    yield made
    for box in made.values():
        box.close()


@pytest.fixture(scope="module")
def kernels(boxes) -> dict[str, str]:
    request = RunRequest(files={"probe.py": KERNEL_PROBE}, program="probe.py")
    futures = {name: box.submit(request) for name, box in boxes.items()}
    results = {name: f.result() for name, f in futures.items()}
    for name, result in results.items():
        assert result.exit_code == 0, (name, result)
    return {name: result.stdout for name, result in results.items()}


def test_gvisor_runs_the_code_on_its_own_kernel(kernels):
    version, root, log = kernels["gvisor"].splitlines()
    host_version = Path("/proc/version").read_text().strip()

    assert version != host_version
    # The root filesystem reaches gVisor's kernel from its file proxy (the gofer), over 9P on a socket.
    assert root.split()[2:4] == ["/", "9p"] and "trans=fd" in root, root
    assert log == "log: refused (errno 1)"  # Docker's seccomp profile holds inside gVisor too


def test_the_default_runtime_runs_it_on_the_host_kernel(kernels):
    version, root, log = kernels["default"].splitlines()

    assert version == Path("/proc/version").read_text().strip()
    assert root.split()[2:4] == ["/", "overlay"], root
    assert log == "log: refused (errno 1)"


# Every label format's partly passing completion (exact pass counts), and whole
# passes and fails of a module-level and a program-level format: one batch per runtime, both at once.
PICKED = {(fmt, "partial") for fmt in FORMATS} | {(fmt, which) for fmt in ("pytest", "stdio") for which in ("pass", "fail")}
PARITY = {f"{fmt}-{which}": (Sample(id=f"{fmt}-{which}", completion=completion, label=label, prompt=prompt), passed, total)
          for fmt, (label, prompt, total, completions) in FORMATS.items()
          for which, (completion, passed) in zip(("pass", "partial", "fail"), completions)
          if (fmt, which) in PICKED}

PARITY_LIMITS = Limits()  # the defaults, under both runtimes


def test_verdicts_and_rewards_match_the_default_runtime(boxes):
    rewards = {name: CodeReward(box, limits=PARITY_LIMITS) for name, box in boxes.items()}
    futures = {name: [reward.submit(sample) for sample, _, _ in PARITY.values()] for name, reward in rewards.items()}
    outputs = {name: dict(zip(PARITY, (f.result() for f in fs), strict=True)) for name, fs in futures.items()}

    def seen(out):
        return out.verdict, out.reward, out.passed, out.total

    for key, (_, passed, total) in PARITY.items():
        expected = ("passed" if passed == total else "failed", passed / total, passed, total)
        assert seen(outputs["default"][key]) == expected, (key, outputs["default"][key])
        assert seen(outputs["gvisor"][key]) == expected, (key, outputs["gvisor"][key])


# gVisor's own threads count against the host's pids limit (gVisor issue #2490);
# the engine widens the limit under gVisor so that code can still start processes.
def test_gvisor_runs_a_few_processes_within_the_default_limits(boxes):
    # sleep, not an interpreter each, and a deadline far past the run's: what is tested is how many
    # processes may live at once (a refused fork fails a test, it does not time out). Quiet, the run takes
    # 6.2 s under gVisor with its container; CI's loaded machine took the 10 s with sleep too.
    completion = (
        "import subprocess\n\n"
        "def add(a, b):\n"
        "    children = [subprocess.Popen(['sleep', '0.5']) for _ in range(8)]\n"
        "    return a + b if all(child.wait() == 0 for child in children) else None\n"
    )
    reward = CodeReward(boxes["gvisor"], limits=Limits(timeout_s=30))

    grade = reward.grade(completion, ADD_LABEL)

    assert grade.verdict is Verdict.PASSED, grade.message
    assert grade.reward == 1.0


# Threads start under both runtimes (under gVisor, a seccomp profile it can apply: runsc turns Docker's
# ENOSYS for clone3 into EPERM, and glibc then starts none); namespaces stay refused under both.
THREADS_AND_NAMESPACES = """\
import ctypes, threading
seen = []
threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None, use_errno=True)
print("threads:", sorted(seen))
print("unshare(CLONE_NEWUSER):", libc.unshare(0x10000000), ctypes.get_errno())
print("clone(CLONE_NEWUSER):", libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())
print("keyctl:", libc.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno())
"""


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_threads_start_and_namespaces_are_refused(boxes, runtime):
    result = boxes[runtime].run(RunRequest(files={"probe.py": THREADS_AND_NAMESPACES}, program="probe.py"))

    assert (result.verdict, result.stdout.splitlines()) == (Verdict.PASSED, [
        "threads: [0, 1, 2, 3]", "unshare(CLONE_NEWUSER): -1 1", "clone(CLONE_NEWUSER): -1 1", "keyctl: -1 1"]), result


def _pids_max(container_id: str) -> Path:
    """The pids limit file of a container's cgroup (v1, or v2 under cgroupfs or systemd)."""
    for path in (f"/sys/fs/cgroup/pids/docker/{container_id}", f"/sys/fs/cgroup/docker/{container_id}",
                 f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope"):
        if (Path(path) / "pids.max").exists():
            return Path(path) / "pids.max"
    raise AssertionError(f"no pids cgroup found for container {container_id[:12]}")


# An honest `add` that starts a process 4 s in: the tests below lower its container's
# pids limit before then, so that gVisor's sentry panics at that start.
STARTS_A_PROCESS_LATE = ("import subprocess, time\n\ndef add(a, b):\n    time.sleep(4)\n    subprocess.run(['true'])\n"
                         "    return a + b\n")


def test_a_pooled_sandbox_that_crashes_after_earlier_runs_gets_the_run_made_again():
    """gVisor's sentry can panic (exit code 2, no report) under a run because of
    what an earlier run left in the container: a fork bomb's killed processes
    still holding host threads (traced in stop 37). Such a run is the
    container's loss, not the code's: it is made again in another container and
    graded on its own. The panic is brought about here the same way: the
    container's pids limit is lowered under the run, which then starts a process."""
    box = PooledSandbox(max_containers=1, warm=1, retry_s=20, runtime="runsc", sweep=False)
    try:
        reward = CodeReward(box, limits=Limits(timeout_s=30))
        first = reward.grade("def add(a, b):\n    return a + b\n", ADD_LABEL)
        assert first.verdict is Verdict.PASSED, first.message
        used = [c.id for c in box._idle]  # the one container, which has served a run
        assert len(used) == 1
        slow = reward.submit_grade(Sample(completion=STARTS_A_PROCESS_LATE, label=ADD_LABEL))
        time.sleep(2)  # the run has started (a warm container forks its test process at once)
        # What a fork bomb's leftovers do: the host refuses the sentry a new thread for the next process.
        # (runsc has no `update`: the container's cgroup is written to, as the engine would.)
        _pids_max(used.pop()).write_text("1")

        grade = slow.result(timeout=120)

        assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), (grade.verdict, grade.message)
        assert box.stats().run_retries == 1
    finally:
        box.close()


def test_the_run_made_again_goes_to_a_container_that_has_served_no_run():
    """Two containers have served runs and both hold an earlier run's leftovers (their
    pids limit lowered, as above): the run that crashes in one is made again in a
    container that has served no run, not in the other used one, where it would crash
    a second time and be graded `killed` for what it never did."""
    box = PooledSandbox(max_containers=2, warm=2, retry_s=20, runtime="runsc", sweep=False)
    try:
        reward = CodeReward(box, limits=Limits(timeout_s=30))
        assert box.settle()  # both warm: the two runs below take one each
        honest = [reward.submit_grade(Sample(completion="import time\n\ndef add(a, b):\n    time.sleep(1)\n"
                                                        "    return a + b\n", label=ADD_LABEL)) for _ in range(2)]
        assert [f.result(timeout=120).verdict for f in honest] == [Verdict.PASSED] * 2
        used = [c.id for c in box._idle]
        assert len(used) == 2 and all(c.runs == 1 for c in box._idle)  # both served one run each
        slow = reward.submit_grade(Sample(completion=STARTS_A_PROCESS_LATE, label=ADD_LABEL))
        time.sleep(2)  # the run has started in one of them
        for container_id in used:
            _pids_max(container_id).write_text("1")

        grade = slow.result(timeout=120)

        assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), (grade.verdict, grade.message)
        assert box.stats().run_retries == 1
    finally:
        box.close()
