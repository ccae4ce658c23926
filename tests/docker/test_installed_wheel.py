"""The packaging check: what a pip user gets.

The wheel is built from this checkout and installed into a fresh virtualenv
outside it, beside an unrelated `rewards` distribution from PyPI (it installs a
top-level `rewards/`), and everything runs from a working directory holding a
training script's own `rewards.py`. From there, with only what the wheel
carries: `rewardbox image build` (the layers `make sandbox-image` made are
reused), `rewardbox doctor`, `rewardbox score` on examples/rollouts.jsonl,
`rewardbox serve`, and the TRL, verl and OpenRLHF adapters called the way
those trainers call them.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import requests
from server import free_port

ROOT = Path(__file__).resolve().parents[2]
# The rollouts' rewards by id (examples/rollouts.jsonl: each id names what its completion does).
EXPECTED = {
    "palindrome-pass": 1.0, "palindrome-partial": 0.5, "palindrome-think": 1.0,
    "fizzbuzz-pass": 1.0, "fizzbuzz-off-by-one": 0.25, "fizzbuzz-syntax-error": -1.0,
    "intervals-pass": 1.0, "intervals-loops-forever": -0.5, "intervals-memory-hog": -1.0, "intervals-no-code": -1.0,
}
# The unrelated distribution that owns the top-level name `rewards` on PyPI. Its
# own dependencies (torch, pygame, lightning) are not needed to occupy the name.
UNRELATED_REWARDS = "rewards==0.1.1"
# A training script's own module beside train.py, which `python train.py` puts first on sys.path.
LOCAL_REWARDS = "# the training script's own rewards, shadowing any top-level `rewards` package\nLOCAL = True\n"
PYTEST_LABEL = {"pytest": "from solution import add\n\ndef test_one():\n    assert add(1, 2) == 3\n\n"
                          "def test_two():\n    assert add(2, 2) == 4\n"}
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return 3\n```"


def _run(args: list, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the tracked files (setuptools leaves build/ in the tree it builds)."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, source], cwd=source)
    (built,) = dist.glob("rewardbox-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv outside the checkout: the wheel (with torch, for the OpenRLHF adapter) and PyPI's `rewards`."""
    home = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", home], cwd=home.parent)
    pip = [home / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-c", ROOT / "constraints.txt", f"{wheel}[torch]"], cwd=home.parent, timeout=900)
    _run([*pip, "--no-deps", UNRELATED_REWARDS], cwd=home.parent)
    return home


@pytest.fixture(scope="module")
def workdir(venv, tmp_path_factory) -> Path:
    """A training script's directory: its own rewards.py, and the example rollouts copied in."""
    work = tmp_path_factory.mktemp("train")
    (work / "rewards.py").write_text(LOCAL_REWARDS)
    shutil.copy(ROOT / "examples" / "rollouts.jsonl", work / "rollouts.jsonl")
    return work


def _python(venv: Path, workdir: Path, code: str, timeout: float = 300) -> str:
    """`code` run as a training script (train.py) from `workdir`, with the virtualenv's Python."""
    (workdir / "train.py").write_text(code)
    return _run([venv / "bin" / "python", "train.py"], cwd=workdir, timeout=timeout).stdout


def test_the_wheel_installs_one_top_level_package_with_its_image_context(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"rewardbox"}
    for needed in ("rewardbox/py.typed", "rewardbox/images/python/Dockerfile", "rewardbox/images/python/requirements.txt",
                   "rewardbox/images/python/harness/supervisor.py", "rewardbox/images/python/harness/pytest.ini",
                   "rewardbox/adapters/openrlhf.py", "rewardbox/sandbox/engine.py", "rewardbox/rewards/labels.py"):
        assert needed in names, needed
    assert "rewardbox/sandbox/ray_backend.py" in names
    # Test-only code stays in the checkout: the Ray tier's local cluster is tests/ray/local_cluster.py.
    assert [name for name in names if "ray_local" in name or "local_cluster" in name] == []
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), "the wheel carries no LICENSE"


def test_the_public_names_import_beside_an_unrelated_rewards_package_and_a_local_rewards_py(venv, workdir):
    out = _python(venv, workdir, """
import json, rewards, rewardbox
from rewardbox import CorrectnessReward, Sandbox, Limits, Sample
import rewardbox.adapters.trl, rewardbox.adapters.verl, rewardbox.adapters.openrlhf, rewardbox.sandbox, rewardbox.rewards
missing = [name for name in rewardbox.__all__ if not hasattr(rewardbox, name)]
print(json.dumps({"local": getattr(rewards, "LOCAL", False), "missing": missing, "version": rewardbox.__version__,
                  "files": [m.__file__ for m in (rewardbox, rewardbox.sandbox, rewardbox.rewards, rewardbox.adapters.trl)]}))
""")
    seen = json.loads(out)
    assert seen["local"] is True and seen["missing"] == []
    site = str(venv / "lib")
    assert all(path.startswith(site) for path in seen["files"]), seen["files"]
    version = _run([venv / "bin" / "rewardbox", "--version"], cwd=workdir).stdout
    assert seen["version"] in version


def test_the_installed_cli_builds_the_image_checks_the_machine_and_scores_the_example(venv, workdir):
    rewardbox = venv / "bin" / "rewardbox"
    _run([rewardbox, "image", "build"], cwd=workdir, timeout=1200)
    doctor = _run([rewardbox, "doctor"], cwd=workdir, timeout=300)
    assert "fail" not in doctor.stdout.lower(), doctor.stdout
    _run([rewardbox, "score", "rollouts.jsonl", "-o", "results.jsonl", "--no-progress", "-j", "2"], cwd=workdir)
    rewards = {row["id"]: row["reward"] for row in map(json.loads, (workdir / "results.jsonl").read_text().splitlines())}
    assert rewards == EXPECTED


def test_the_installed_service_answers_openrlhf_and_verl(venv, workdir):
    port = free_port()
    log = (workdir / "serve.log").open("w")
    server = subprocess.Popen([venv / "bin" / "rewardbox", "serve", "--port", str(port), "-j", "2"], cwd=workdir,
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None, (workdir / "serve.log").read_text()
            time.sleep(0.5)
        body = {"query": ["q" + RIGHT, "q" + HALF], "prompts": ["q", "q"], "labels": [json.dumps(PYTEST_LABEL)] * 2}
        answer = requests.post(f"{url}/get_reward", json=body, timeout=120).json()
        assert answer["rewards"] == [1.0, 0.5]
        run = requests.post(f"{url}/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=120).json()
        assert run["status"] == "Success" and run["run_result"]["stdout"] == "42\n"
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def test_the_installed_adapters_score_as_the_trainers_call_them(venv, workdir):
    out = _python(venv, workdir, f"""
import importlib.util, json
import rewardbox.adapters.openrlhf
from rewardbox.adapters.trl import trl_reward
from rewardbox.adapters.verl import compute_score

label = {json.dumps(PYTEST_LABEL)!r}
right, half = {RIGHT!r}, {HALF!r}
# TRL: GRPOTrainer._calculate_rewards calls reward_func(prompts=, completions=, completion_ids=, **columns).
trl = trl_reward(name="correctness")(prompts=["q", "q"], completions=[right, half], completion_ids=[[1], [2]],
                                     label=[json.loads(label)] * 2, trainer_state=None)
# verl: the reward manager calls compute_score(data_source, solution_str, ground_truth, extra_info).
verl = compute_score("kodcode", half, label, {{}})
# OpenRLHF imports the reward file by path (--remote_rm_url FILE) and calls reward_func(queries, prompts, labels).
spec = importlib.util.spec_from_file_location("reward_func", rewardbox.adapters.openrlhf.__file__)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
openrlhf = module.reward_func(["q" + right, "q" + half], ["q", "q"], [label, label])
print(json.dumps({{"trl": trl, "verl": verl["score"], "openrlhf": openrlhf["rewards"].tolist()}}))
""")
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {"trl": [1.0, 0.5], "verl": 0.5, "openrlhf": [1.0, 0.5]}
