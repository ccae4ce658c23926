"""Fault injection: the engine, a container, the scoring process or the disk
failing under a batch. A failure of ours never becomes a reward: every sample
is still answered correctly after retries, or gets a `SandboxError` that says
how to fix the cause.

Faults that would disturb the shared engine (a restart, a full disk) run on
a private engine of their own (private_engine.py).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from add_task import LABEL

from rewardbox.images import image_tag
from rewardbox.rewards import CodeReward
from rewardbox.rewards.base import Sample
from rewardbox.sandbox import DEFAULT_IMAGE, EngineUnavailable, ImageMissing, Limits, RunRequest, RuntimeMissing, Sandbox, Verdict
from rewardbox.sandbox.engine import DockerEngine
from rewardbox.sandbox.modes import MODES, make_sandbox

RIGHT = "import time\ntime.sleep({pause})\n\ndef add(a, b):\n    return a + b\n"
TESTS = {"test_solution.py": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
WRONG = "import time\ntime.sleep({pause})\n\ndef add(a, b):\n    return a - b\n"  # passes test_zero only


def batch(n: int, pause: float = 1.5) -> tuple[list[Sample], list[float]]:
    """Right and wrong answers in turn, each slow enough to be caught mid-run."""
    samples = [Sample(id=f"s{i}", completion=(RIGHT if i % 2 == 0 else WRONG).format(pause=pause), label=LABEL)
               for i in range(n)]
    return samples, [1.0 if i % 2 == 0 else 1 / 3 for i in range(n)]


def wait_for(condition, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def private_engine(tmp_path_factory):
    from private_engine import PrivateEngine

    with PrivateEngine(tmp_path_factory.mktemp("engine")) as engine:
        engine.copy_image(DEFAULT_IMAGE)
        yield engine


# -- the engine ----------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_engine_restarted_mid_batch_every_sample_still_answered_correctly(private_engine, mode):
    # A stopping engine gives each container 10 s to stop. A pool's harness is pid 1
    # and ignores the SIGTERM, so its runs go on through those 10 s: enough samples
    # that some are still running when the engine goes.
    samples, expected = batch(16 if mode == "cold" else 48)
    engine = DockerEngine(base_url=private_engine.url, retry_s=90)
    with make_sandbox(mode, engine=engine, max_containers=4) as box:
        reward = CodeReward(box)
        futures = [reward.submit(s) for s in samples]
        wait_for(lambda: box.stats().containers_running >= 3, what="runs in flight")
        time.sleep(0.5)  # inside their tests
        private_engine.restart()

        rewards = [f.result(timeout=300).reward for f in futures]

        assert rewards == pytest.approx(expected)
        stats = box.stats()
    if mode == "fresh":
        # Each run's container is started ahead: the runs in flight had theirs and
        # finished within the engine's grace; the later ones waited for containers
        # whose starts were retried until the engine was back.
        assert stats.engine_call_retries >= 3
    else:
        assert stats.run_retries >= 3  # the runs in flight were started again, not judged
    assert stats.containers_running == 0
    assert private_engine.containers() == []


def test_unreachable_engine_at_start_names_the_fix(tmp_path):
    with pytest.raises(EngineUnavailable, match="start a Docker engine"):
        DockerEngine(base_url=f"unix://{tmp_path}/no-engine.sock", retry_s=0.5)


def test_missing_image_names_rewardbox_image_build():
    with pytest.raises(ImageMissing, match="run `rewardbox image build`"):
        Sandbox(image="rewardbox/python:no-such-version", sweep=False)


def test_missing_custom_image_names_the_build_with_packages():
    custom = image_tag("python", ["numpy"], context="0" * 12)  # a harness no engine has an image of
    with pytest.raises(ImageMissing, match="rewardbox image build --packages"):
        Sandbox(image=custom, sweep=False)


# -- a container -----------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_containers_killed_or_removed_from_outside_are_run_again(docker_client, mode):
    """Running ones, and in a pool also waiting ones (a run that takes one must
    not be judged by its death)."""
    samples, expected = batch(8)
    # The engine's owner label is the process's, which the session's sandbox shares: its
    # warm containers, there before this box, are not this box's to kill (on a slow host
    # they were the first found, and the box's own runs went untouched).
    before = {c["Id"] for c in docker_client.api.containers(all=True, filters={"label": "rewardbox"})}
    with make_sandbox(mode, max_containers=4, retry_s=60) as box:
        reward = CodeReward(box)
        futures = [reward.submit(s) for s in samples]
        ours = {"label": f"rewardbox.owner={box.engine.owner}", "status": "running"}

        def busy() -> list[str]:  # containers running a sample (a pool's warm ones wait for one)
            warm = set(getattr(box, "warm_ids", list)())
            return [c["Id"] for c in docker_client.api.containers(filters=ours) if c["Id"] not in warm | before]

        wait_for(lambda: box.stats().containers_running >= 2 and len(busy()) >= 2, what="two running samples")
        time.sleep(0.3)
        first, second = busy()[:2]
        docker_client.api.kill(first)
        docker_client.api.remove_container(second, force=True)
        warm = getattr(box, "warm_ids", list)()
        if warm:  # and a waiting one, which a later sample takes
            docker_client.api.kill(warm[0])

        rewards = [f.result(timeout=120).reward for f in futures]

        assert rewards == pytest.approx(expected)
        assert box.stats().run_retries >= 2


def _zygote_of(docker_client, container_id: str) -> int:
    """The host pid of a pooled container's zygote (runc: the container's
    processes are the host's, a child of its PID 1)."""
    init = docker_client.api.inspect_container(container_id)["State"]["Pid"]
    for child in Path(f"/proc/{init}/task/{init}/children").read_text().split():
        if b"rbzygote" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError(f"no zygote under pid {init}")


def test_a_pooled_container_whose_zygote_died_while_waiting_runs_the_sample_again(docker_client):
    """The zygote of a waiting container is gone (the OOM killer, a fork that
    failed): the run it is handed never starts. That is ours, never a verdict
    nor an error for the caller: the sample runs again in a fresh container."""
    with make_sandbox("pooled", max_containers=1, retry_s=60) as box:
        reward = CodeReward(box)
        assert reward.grade(RIGHT.format(pause=0), LABEL).reward == 1.0
        assert box.settle()
        (waiting,) = box.warm_ids()
        os.kill(_zygote_of(docker_client, waiting), signal.SIGKILL)

        grade = reward.grade(WRONG.format(pause=0), LABEL)

        assert (grade.verdict.value, grade.reward) == ("failed", pytest.approx(1 / 3))
        assert box.stats().run_retries == 1
        assert waiting not in box.warm_ids()


def test_a_completion_that_kills_its_own_harness_is_judged_not_run_again(sandbox, code_reward):
    retries_before = sandbox.stats().run_retries
    grade = code_reward.grade("import os, signal\nos.kill(-1, signal.SIGKILL)\n\ndef add(a, b):\n    return a + b\n",
                              LABEL)

    assert grade.verdict.value == "killed"
    assert grade.reward == -1.0
    assert sandbox.stats().run_retries == retries_before  # the engine recorded no kill: the code did it


# -- the scoring process ----------------------------------------------------------

def test_scoring_process_killed_mid_batch_then_restarted(tmp_path, docker_client, code_reward):
    samples, expected = batch(8, pause=4)
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(s.model_dump_json() + "\n" for s in samples))
    command = [sys.executable, "-m", "rewardbox.cli", "score", str(rollouts), "--no-progress", "-j", "4"]
    # A bystander: another scoring process's run on the same engine, in flight throughout.
    bystander = code_reward.submit(Sample(completion=RIGHT.format(pause=8), label=LABEL))

    first = subprocess.Popen(command + ["-o", str(tmp_path / "first.jsonl")], stderr=subprocess.PIPE)
    owner = {"label": "rewardbox"}
    prefix = f"{socket.gethostname()}:{first.pid}:"

    def orphans() -> list[dict]:
        return [c for c in docker_client.api.containers(all=True, filters=owner)
                if c["Labels"].get("rewardbox.owner", "").startswith(prefix)]

    wait_for(lambda: len(orphans()) >= 4, what="the first process's containers")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert len(orphans()) >= 4  # left behind: nobody removed them

    second = subprocess.run(command + ["-o", str(tmp_path / "second.jsonl")], capture_output=True, text=True,
                            timeout=300)

    assert second.returncode == 0, second.stderr
    records = [json.loads(line) for line in (tmp_path / "second.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [s.id for s in samples]
    assert [r["reward"] for r in records] == pytest.approx(expected)
    assert "left behind by an earlier process" in second.stderr  # the restart swept them
    assert orphans() == []
    assert bystander.result(timeout=60).reward == 1.0  # the live process's run was not touched


# -- the disk ---------------------------------------------------------------------

def test_engine_disk_nearly_full_then_full(private_engine):
    samples, expected = batch(8, pause=0)
    try:
        private_engine.fill_disk(leave_mb=16)
        with Sandbox(engine=DockerEngine(base_url=private_engine.url, retry_s=60), max_containers=4) as box:
            reward = CodeReward(box)
            assert [o.reward for o in reward.score_many(samples)] == pytest.approx(expected)

            private_engine.fill_disk(leave_mb=0)
            # Full: a sample given up on says what is wrong and what to do.
            with (Sandbox(engine=DockerEngine(base_url=private_engine.url, retry_s=2), max_containers=1) as impatient,
                  pytest.raises(EngineUnavailable, match="out of disk space.*free space")):
                CodeReward(impatient).score(samples[0])

            # Full, then freed while the retries last: nothing lost, nothing penalised.
            futures = [reward.submit(s) for s in samples]
            time.sleep(3)
            private_engine.free_disk()
            assert [f.result(timeout=120).reward for f in futures] == pytest.approx(expected)
    finally:
        private_engine.free_disk()
    assert private_engine.containers() == []


def test_a_runtime_the_engine_does_not_know_names_make_gvisor():
    with pytest.raises(RuntimeMissing, match="no runtime 'runsc-missing'"):
        Sandbox(runtime="runsc-missing", sweep=False)


def test_an_earlier_runs_memory_is_not_charged_to_the_next_run(docker_client):
    """A pooled container outlives a run's OOM kill, and the engine's events keep
    that "oom". A later run whose container goes down under it (its init killed
    from the host here) is run again on another container: it did not run out
    of memory, the earlier run did."""
    limits = Limits(timeout_s=20, memory_mb=128)
    with make_sandbox("pooled", max_containers=1, retry_s=60) as box:
        bomb = box.run(RunRequest(files={"solution.py": "chunks = [bytearray(2**20) for _ in range(10**4)]\n"},
                                  tests=TESTS, limits=limits))
        assert bomb.verdict is Verdict.OUT_OF_MEMORY
        (survivor,) = box.warm_ids()  # the same container, kept: an OOM kill is no reason to give it up
        init = docker_client.api.inspect_container(survivor)["State"]["Pid"]
        killer = threading.Timer(1.0, os.kill, (init, signal.SIGKILL))
        killer.start()
        slow = box.run(RunRequest(files={"solution.py": RIGHT.format(pause=3)}, tests=TESTS, limits=limits))
        killer.join()
        assert slow.verdict is Verdict.PASSED, slow
        assert box.stats().run_retries >= 1
