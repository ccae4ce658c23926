"""A task whose tests import numpy (issue 19): 1.0 for a correct solution on
the scientific image; on the lean image unscorable, numpy named with the fix,
never the model's import_error. Through `rewardbox score` and the Python API.
And numpy at work inside a pooled container, under the default limits."""

import json
import subprocess
import sys

import pytest

from rewardbox.images import image_tag
from rewardbox.rewards import CorrectnessReward
from rewardbox.sandbox import Limits, SandboxError
from rewardbox.sandbox.modes import DEFAULT_MODE, make_sandbox

SCIENTIFIC = image_tag("scientific")
LEAN = image_tag("python")

NUMPY_TESTS = {"pytest": (
    "import numpy\n"
    "import solution\n\n"
    "def test_mean():\n"
    "    assert solution.mean([1, 2, 3]) == numpy.mean([1, 2, 3])\n\n"
    "def test_mean_of_floats():\n"
    "    assert solution.mean([0.5, 1.5]) == pytest_approx(numpy.mean([0.5, 1.5]))\n\n"
    "def pytest_approx(x):\n"
    "    import pytest\n"
    "    return pytest.approx(x)\n")}
PLAIN_TESTS = {"pytest": "from solution import mean\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"}
CORRECT = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n```"
WRONG = "```python\ndef mean(xs):\n    return 0\n```"
IMPORTS_NUMPY = "```python\nimport numpy\n\ndef mean(xs):\n    return float(numpy.mean(xs))\n```"

# id -> (completion, label)
SAMPLES = {
    "correct": (CORRECT, NUMPY_TESTS),
    "wrong": (WRONG, NUMPY_TESTS),
    "solution-imports-numpy": (IMPORTS_NUMPY, PLAIN_TESTS),
}


@pytest.fixture(scope="module")
def scientific():
    try:
        box = make_sandbox(DEFAULT_MODE, image=SCIENTIFIC, max_containers=2, retry_s=20)
    except SandboxError as exc:  # build it: rewardbox image build --variant scientific
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    yield box
    box.close()


def assert_numpy_named_with_the_fix(error: str, image: str) -> None:
    assert error.startswith(f"the label's tests import numpy, which the sandbox image {image} does not hold "
                            "(the dataset's need, not the model's fault)"), error
    assert "REWARDBOX_IMAGE=scientific" in error
    assert "`rewardbox image build --variant scientific`" in error
    assert "`rewardbox image build --packages numpy`" in error


def test_numpy_tests_through_the_python_api(scientific, sandbox):
    on_scientific = CorrectnessReward(sandbox=scientific)
    on_lean = CorrectnessReward(sandbox=sandbox)

    correct = on_scientific(CORRECT, NUMPY_TESTS)
    assert (correct.reward, correct.verdict, correct.passed) == (1.0, "passed", 2), correct
    wrong = on_scientific(WRONG, NUMPY_TESTS)
    assert (wrong.reward, wrong.verdict) == (0.0, "failed"), wrong  # the model's, as ever

    for completion in (CORRECT, WRONG):  # the label cannot be graded here, whatever the completion
        out = on_lean(completion, NUMPY_TESTS)
        assert (out.reward, out.score, out.verdict) == (None, None, None), out
        assert out.metadata["kind"] == "pytest"
        assert_numpy_named_with_the_fix(out.metadata["error"], sandbox.image)


def test_a_solution_importing_what_the_image_lacks_is_still_the_models_import_error(sandbox):
    out = CorrectnessReward(sandbox=sandbox)(IMPORTS_NUMPY, PLAIN_TESTS)

    assert (out.reward, out.verdict) == (-1.0, "import_error"), out
    assert "numpy" in out.metadata["message"]


def score(image: str, tmp_path) -> tuple[dict[str, dict], str]:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps({"id": i, "completion": c, "label": label}) + "\n"
                                for i, (c, label) in SAMPLES.items()))
    done = subprocess.run([sys.executable, "-m", "rewardbox.cli", "score", str(rollouts), "--no-progress",
                           "--image", image, "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}, done.stderr


def test_numpy_tests_through_rewardbox_score(tmp_path):
    records, summary = score(SCIENTIFIC, tmp_path)
    assert {i: (r["reward"], r["verdict"]) for i, r in records.items()} == {
        "correct": (1.0, "passed"), "wrong": (0.0, "failed"), "solution-imports-numpy": (1.0, "passed")}

    records, summary = score(LEAN, tmp_path)
    assert {i: (r["reward"], r["verdict"]) for i, r in records.items()} == {
        "correct": (None, None), "wrong": (None, None), "solution-imports-numpy": (-1.0, "import_error")}
    assert_numpy_named_with_the_fix(records["correct"]["error"], LEAN)
    assert "verdicts     import_error 1, unscorable 2" in summary
    assert "unusable label: the label's tests import numpy" in summary  # the log names it on stderr too


NUMERIC_TESTS = {"pytest": (
    "import os\n"
    "import numpy as np\n"
    "import threading\n"
    "import scipy.linalg\n"
    "from solution import solve, threads\n\n"
    "def test_a_linear_system():\n"
    "    rng = np.random.default_rng(0)\n"
    "    a = rng.random((300, 300)) + 300 * np.eye(300)\n"
    "    b = rng.random(300)\n"
    "    assert np.allclose(a @ solve(a.tolist(), b.tolist()), b)\n"
    "    assert np.allclose(scipy.linalg.solve(a, b), np.linalg.solve(a, b))\n\n"
    "def test_blas_runs_on_the_calling_thread():\n"
    "    # The pids limit counts threads: a BLAS pool sized by the host's CPUs would take them. Every thread\n"
    "    # of each process, the tests' and the solution's, is a Python thread: none is a native pool's.\n"
    "    np.ones((400, 400)) @ np.ones((400, 400))\n"
    "    assert len(os.listdir('/proc/self/task')) == threading.active_count()\n"
    "    assert os.environ.get('OPENBLAS_NUM_THREADS') == '1'\n"
    "    tasks, python_threads, blas = threads()\n"
    "    assert (tasks, blas) == (python_threads, '1')\n\n"
    "def test_memory_within_the_limit():\n"
    "    assert np.zeros(25_000_000).sum() == 0.0  # 200 MB of the 512\n")}
SOLVE = ("```python\nimport os\nimport threading\n\nimport numpy as np\n\n"
         "def solve(a, b):\n"
         "    return np.linalg.solve(np.array(a), np.array(b)).tolist()\n\n"
         "def threads():\n"
         "    np.ones((400, 400)) @ np.ones((400, 400))\n"
         "    return (len(os.listdir('/proc/self/task')), threading.active_count(),\n"
         "            os.environ.get('OPENBLAS_NUM_THREADS'))\n```")


def test_numpy_works_under_the_pooled_limits(scientific):
    limits = Limits()
    assert (limits.memory_mb, limits.pids) == (512, 64)  # the defaults this test is about

    for _ in range(2):  # a fresh run and a reused container
        out = CorrectnessReward(sandbox=scientific, limits=limits)(SOLVE, NUMERIC_TESTS)
        assert (out.reward, out.verdict) == (1.0, "passed"), [
            (t["name"], t["outcome"], t["message"]) for t in out.metadata["tests"]]
