"""Fixtures of the adversarial suite: a module's attacks graded in one batch,
and the host checked after it.

A test module lists its attacks in `ATTACKS` (key -> `Attack`) and its tests
take the keys they read as parameters. The module's `batch` grades the attacks
of the selected tests only (so `-m core` runs only the core's containers) on
the session's sandbox, the honest baselines first, then the attacks all at
once, with a secret in this process's environment;
then it looks at the host: containers and harness processes left behind
(`leftovers`), the canary file, files an escaping write would have left, and
the secret in anything that came back.
"""

import hashlib
import os
import re
import shutil
import subprocess
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

from adversarial.attacks import ESCAPE_NAME, SECRET_NAME, TOKEN, Attack
from rewardbox.rewards import CodeReward, Sample
from rewardbox.rewards.grade import Grade

CANARY_DIR = Path(f"/tmp/rewardbox-canary-{TOKEN}")
CANARY = CANARY_DIR / "canary.txt"
# Where a write that escaped the container could land on this host.
ESCAPE_DIRS = ["/", "/tmp", "/var/tmp", "/dev/shm", "/root", "/etc", "/opt", "/work", str(Path.cwd()), str(CANARY_DIR)]


@dataclass
class Batch:
    grades: dict[str, Grade]
    host_problems: list[str]
    secret: str

    def __getitem__(self, key: str) -> Grade:
        grade = self.grades[key]
        # Checked with every case: the host is as it was, and nothing that came
        # back holds this process's secret.
        assert self.host_problems == [], self.host_problems
        assert self.secret not in grade.model_dump_json(), f"{key}: the secret reached the completion"
        return grade


def _canary_state() -> tuple[str, float, list[str]]:
    return (hashlib.sha256(CANARY.read_bytes()).hexdigest(), CANARY.stat().st_mtime,
            sorted(os.listdir(CANARY_DIR)))


def _escaped_files() -> list[str]:
    found = []
    for directory in ESCAPE_DIRS:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        found += [os.path.join(directory, n) for n in names if ESCAPE_NAME in n]
    return found


def _under_another_engine(process: str, client: docker.DockerClient) -> bool:
    """Whether a harness process (`leftovers`' "pid: cmdline") runs in a
    container that the session's engine does not know: another engine on this
    host (a test of engine faults runs its own), whose containers are not ours."""
    pid = process.split(":", 1)[0]
    try:
        ids = re.findall(r"[0-9a-f]{64}", Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return False  # exited while we looked: leftovers() waits for those
    if not ids:
        return False
    try:
        client.api.inspect_container(ids[-1])
    except docker.errors.NotFound:
        return True
    return False


@pytest.fixture(scope="session")
def canary():
    CANARY_DIR.mkdir(mode=0o755)
    CANARY.write_text(f"host canary {TOKEN}\n")
    yield CANARY
    shutil.rmtree(CANARY_DIR)


@pytest.fixture(scope="module")
def batch(request, sandbox, docker_client, leftovers, canary) -> Batch:
    attacks: dict[str, Attack] = request.module.ATTACKS
    # The attacks named by the selected tests' parameters (doctest items have no module).
    wanted = {value for item in request.session.items if getattr(item, "module", None) is request.module
              for value in getattr(getattr(item, "callspec", None), "params", {}).values()
              if isinstance(value, str) and value in attacks}
    wanted |= {k for k in attacks if k.startswith("honest-")}  # baselines of the same labels
    canary_before = _canary_state()
    secret = "s3cret-" + TOKEN
    rewards: dict = {}
    futures: dict[str, Future] = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SECRET_NAME, secret)
        # The honest baselines first, on their own: each shows its label is graded
        # right, which the attacks' load (fork bombs under gVisor on a loaded
        # host) could otherwise push past a case deadline. Then the attacks, all at once,
        # and the fork bombs last. Under gVisor (ptrace platform) a bomb killed at its
        # deadline can leave host threads that make the sentry panic (exit code 2, no
        # report) at the next run in its pooled container. The pool then makes that run
        # again elsewhere (tests/docker/test_gvisor.py); here each attack's verdict is
        # judged on its first run.
        baselines = sorted(k for k in wanted if k.startswith("honest-"))
        bombs = sorted(k for k in wanted if k.endswith("fork-bomb"))
        for keys in (baselines, sorted(wanted - set(baselines) - set(bombs)), bombs):
            for key in keys:
                attack = attacks[key]
                reward = rewards.setdefault(attack.limits, CodeReward(sandbox, limits=attack.limits))
                futures[key] = reward.submit_grade(Sample(id=key, completion=attack.completion, label=attack.label))
            for key in keys:
                futures[key].result()
        grades = {key: future.result() for key, future in futures.items()}
    problems = []
    left = leftovers()
    left["processes"] = [p for p in left["processes"] if not _under_another_engine(p, docker_client)]
    if left != {"containers": [], "processes": []}:
        problems.append(f"left behind: {left}")
    if _canary_state() != canary_before:
        problems.append("the host's canary file changed")
    if escaped := _escaped_files():
        problems.append(f"files written outside the container: {escaped}")
    if subprocess.run(["true"], timeout=10).returncode != 0:
        problems.append("the host cannot start a process")
    return Batch(grades, problems, secret)
