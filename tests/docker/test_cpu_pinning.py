"""`pin_cpus`: each container pinned to its own CPUs of the set, spread
evenly, kept so through replacements, as many CPUs as its `Limits.cpus`;
a run's processes on those CPUs only, in every mode and from the command
line. Off by default: an unpinned container may run anywhere."""

import collections
import json
import os
import subprocess
import sys

import docker
import pytest

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.modes import make_sandbox
from rewardbox.sandbox.pool import PooledSandbox

# The gVisor pass of `make test` runs the `core` ones too (REWARDBOX_TEST_RUNTIME=runsc), whose
# kernel shows the code its own CPUs, whatever the host's pinning: there the engine's record is the check.
RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
AFFINITY = "import os\nprint(sorted(os.sched_getaffinity(0)))\n"


@pytest.fixture(scope="module")
def api():
    client = docker.APIClient()
    yield client
    client.close()


@pytest.fixture(scope="module")
def engine_cpus(api):
    cpus = api.info()["NCPU"]
    assert cpus >= 2, "these tests spread containers over two CPUs at least"
    return cpus


def affinity(**limits) -> RunRequest:
    return RunRequest(files={"main.py": AFFINITY}, program="main.py", limits=Limits(timeout_s=20, **limits))


def pins(api, container_ids) -> collections.Counter:
    return collections.Counter(api.inspect_container(cid)["HostConfig"]["CpusetCpus"] for cid in container_ids)


@pytest.mark.core
@pytest.mark.parametrize("reuse", [4, 1], ids=["replaced-ahead", "replaced-after"])
def test_pooled_containers_are_spread_over_the_cpus_and_stay_so_through_replacements(api, engine_cpus, reuse):
    """Two containers per CPU; each retired after `reuse` runs: with 4, its
    replacement starts ahead while it still serves, and takes its CPUs (all
    being used equally, the least used would be whichever comes first in
    turn); with 1, it is replaced when it goes, on the CPU it leaves."""
    everyone = {str(cpu): 2 for cpu in range(engine_cpus)}
    with PooledSandbox(max_containers=2 * engine_cpus, reuse=reuse, retry_s=20, runtime=RUNTIME,
                       pin_cpus="all") as box:
        assert box.settle()
        first = set(box.warm_ids())
        assert pins(api, first) == everyone
        stdout = set()
        for n in range(reuse * 2 * engine_cpus + 1):  # every container retired once at least
            result = box.run(affinity())
            assert result.verdict is Verdict.PASSED, (result.verdict, result.message)
            stdout.add(result.stdout)
            assert box.settle()
            assert pins(api, box.warm_ids()) == everyone, f"after run {n + 1}"
        assert not set(box.warm_ids()) & first, "a container was never replaced"
        if RUNTIME is None:
            assert stdout == {f"[{cpu}]\n" for cpu in range(engine_cpus)}


@pytest.mark.core
def test_a_container_of_two_cores_is_pinned_to_two_cpus(api):
    with PooledSandbox(max_containers=1, retry_s=20, runtime=RUNTIME, pin_cpus="0-1", limits=Limits(cpus=2)) as box:
        assert box.settle()
        assert pins(api, box.warm_ids()) == {"0-1": 1}
        result = box.run(affinity(cpus=2))
        assert result.verdict is Verdict.PASSED
        if RUNTIME is None:
            assert result.stdout == "[0, 1]\n"


@pytest.mark.parametrize("mode", ["pooled", "fresh", "cold"])
def test_a_run_in_every_mode_runs_on_the_cpus_of_the_set_only(mode):
    with make_sandbox(mode, max_containers=1, retry_s=20, pin_cpus="1") as box:
        assert [r.stdout for r in box.run_many([affinity(), affinity()])] == ["[1]\n", "[1]\n"]


@pytest.mark.core
@pytest.mark.parametrize("more", [0, 1], ids=["one-container", "more-containers-than-cpus"])
def test_unpinned_containers_may_run_on_every_cpu(api, engine_cpus, more):
    """Not pinned by default, even with more containers than CPUs: a pinned
    container cannot use a core that goes idle, and a long sample sharing its
    core may run into its deadline (docs/modes.md, bench/RESULTS.md)."""
    containers = 1 + more * engine_cpus
    with PooledSandbox(max_containers=containers, retry_s=20, runtime=RUNTIME) as box:
        assert box.settle()
        assert pins(api, box.warm_ids()) == {"": containers}
        if RUNTIME is None:
            assert box.run(affinity()).stdout == f"{list(range(engine_cpus))}\n"


def test_rewardbox_score_pins_its_containers_to_the_set_of_its_flag(tmp_path):
    label = {"pytest": "import os\n\ndef test_where():\n    assert os.sched_getaffinity(0) == {1}\n"}
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"completion": "```python\nx = 1\n```", "label": label}) + "\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("REWARDBOX_")}

    def score(*flags: str) -> float:
        done = subprocess.run([sys.executable, "-m", "rewardbox", "score", str(rollouts), "--no-progress", "-j", "1",
                               *flags], capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["reward"]

    assert (score("--pin-cpus", "1"), score("--pin-cpus", "0")) == (1.0, 0.0)
    done = subprocess.run([sys.executable, "-m", "rewardbox", "score", str(rollouts), "--no-progress", "--pin-cpus",
                           "999"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and "pin_cpus '999': the Docker engine has" in done.stderr, done.stderr
