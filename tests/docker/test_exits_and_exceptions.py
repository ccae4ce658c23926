"""Exceptions keep their type, no exit beats its penalty, and a run deadline
counts the cases that passed: in real containers.

A solution's exception reaches a check as the same builtin type with its
message; the harness's own failures (the case's deadline, the solution's
process ending) are not the check's to catch. A solution that ends its process
without answering, at import or in a call, from any thread, is a crash (or a
timeout), never a plain failure that scores above one.

The runs are declared at import time (`run`) and scored in batches, so they
share the session's containers in parallel; each test then reads its own.
"""

import pytest
from add_task import ADD_TESTS

from rewardbox.rewards import CodeReward, GradingPolicy, RewardOutput, Sample
from rewardbox.sandbox import Limits

POLICY = GradingPolicy()  # the session's CodeReward grades with the default policy
CRASH, TIMEOUT = POLICY.crash_reward, POLICY.timeout_reward
RUNS: dict[str, Sample] = {}
# Runs whose deadline is short and given: they end with cases still to go.
DEADLINE_S = 6.0
DEADLINE_RUNS: dict[str, Sample] = {}


def run(key: str, completion: str, label, runs: dict[str, Sample] = RUNS) -> str:
    assert key not in RUNS and key not in DEADLINE_RUNS, key
    runs[key] = Sample(id=key, completion=completion, label=label)
    return key


@pytest.fixture(scope="module")
def graded(code_reward, sandbox) -> dict[str, RewardOutput]:
    short = CodeReward(sandbox, limits=Limits(timeout_s=DEADLINE_S))
    futures = {key: code_reward.submit(sample) for key, sample in RUNS.items()}
    futures |= {key: short.submit(sample) for key, sample in DEADLINE_RUNS.items()}
    return {key: future.result() for key, future in futures.items()}


def show(out: RewardOutput) -> str:
    """The run, for assertion messages."""
    tests = [(t["name"], t["outcome"], t["exc_type"], (t["message"] or "")[-400:])
             for t in out.metadata.get("tests", [])]
    return f"{out.reward} {out.metadata.get('verdict')} {out.metadata.get('message')!r} {tests}"


def check_label(test: str, entry_point: str = "f", **options) -> dict:
    return {"test": test, "entry_point": entry_point, "case_timeout_s": 1, **options}


# -- exceptions keep their type ---------------------------------------------------------------

EXPECTS_VALUE_ERROR = check_label("""\
def check(candidate):
    try:
        candidate(-1)
    except ValueError:
        pass
    else:
        assert False, "no ValueError"
    assert candidate(9) == 3
""")
EXPECTS_VALUE_ERROR_PYTEST_RAISES = check_label("""\
import pytest


def check(candidate):
    with pytest.raises(ValueError, match="^negative: -1$"):
        candidate(-1)
    with pytest.raises(KeyError) as info:
        candidate("k")
    assert str(info.value) == "'k'"
    assert candidate(9) == 3
""")
ROOT = """\
import math


class NegativeError(ValueError):
    pass


def f(x):
    if x == "k":
        raise {}["k"]
    if x < 0:
        raise %s(f"negative: {x}")
    return math.isqrt(x)
"""
for _cls in ("ValueError", "NegativeError"):  # a subclass of ValueError is a ValueError
    run(f"value-error-caught-{_cls}", ROOT % _cls, EXPECTS_VALUE_ERROR)
    run(f"value-error-pytest-raises-{_cls}", ROOT % _cls, EXPECTS_VALUE_ERROR_PYTEST_RAISES)
run("type-error-is-not-a-value-error", ROOT % "TypeError", EXPECTS_VALUE_ERROR)
run("type-error-is-not-a-value-error-pytest-raises", ROOT % "TypeError", EXPECTS_VALUE_ERROR_PYTEST_RAISES)


@pytest.mark.parametrize("key", [f"value-error-{how}-{cls}" for how in ("caught", "pytest-raises")
                                 for cls in ("ValueError", "NegativeError")])
def test_a_check_catches_the_solutions_builtin_exception(graded, key):
    out = graded[key]

    assert (out.verdict, out.reward) == ("passed", 1.0), show(out)


@pytest.mark.parametrize("key", ["type-error-is-not-a-value-error", "type-error-is-not-a-value-error-pytest-raises"])
def test_another_exception_type_is_not_caught(graded, key):
    out = graded[key]

    # (The check may run as one test or as one per statement: either way the first one fails.)
    assert out.verdict == "failed" and out.reward < 1.0, show(out)
    assert (out.metadata["tests"][0]["outcome"], out.metadata["tests"][0]["exc_type"]) == ("failed", "TypeError"), \
        show(out)
    assert "f() raised TypeError: negative: -1" in out.metadata["tests"][0]["message"], show(out)


# -- the harness's own failures are not the check's to catch -----------------------------------

EXPECTS_ASSERT = {
    "except-assertion-error": "    try:\n        candidate(-1)\n    except AssertionError:\n        pass\n"
                              "    else:\n        assert False, 'no assert'\n",
    "except-exception": "    try:\n        candidate(-1)\n    except Exception:\n        pass\n"
                        "    else:\n        assert False, 'no exception'\n",
    "bare-except": "    try:\n        candidate(-1)\n    except:\n        pass\n"
                   "    else:\n        assert False, 'no exception'\n",
    "pytest-raises-base-exception": "    with pytest.raises(BaseException):\n        candidate(-1)\n",
}
SOLUTIONS = {
    "honest": ("def f(x):\n    assert x >= 0, 'negative'\n    return x\n", "passed", 1.0),
    "os-exit": ("import os\n\n\ndef f(x):\n    os._exit(0)\n", "killed", CRASH),
    "sys-exit": ("import sys\n\n\ndef f(x):\n    sys.exit(0)\n", "killed", CRASH),
    "kill-itself": ("import os\nimport signal\n\n\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n", "killed",
                    CRASH),
    "loop": ("def f(x):\n    while True:\n        pass\n", "timeout", TIMEOUT),
    # Python would raise KeyboardInterrupt in the tests' process, where a bare `except:` swallows it.
    "sigint-to-the-tests": ("import os\nimport signal\nimport time\n\n\ndef f(x):\n"
                            "    os.kill(os.getppid(), signal.SIGINT)\n    time.sleep(0.5)\n    return x\n",
                            "killed", CRASH),
}
for _check, _body in EXPECTS_ASSERT.items():
    for _name, (_solution, _, _) in SOLUTIONS.items():
        run(f"expects-assert-{_check}-{_name}", _solution,
            check_label(f"import pytest\n\n\ndef check(candidate):\n{_body}"))


@pytest.mark.parametrize("check", list(EXPECTS_ASSERT))
@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_an_exit_or_a_timeout_never_satisfies_a_check_that_expects_an_exception(graded, check, name):
    out = graded[f"expects-assert-{check}-{name}"]
    _, verdict, reward = SOLUTIONS[name]

    assert (out.verdict, out.reward) == (verdict, reward), show(out)


# -- no exit beats its penalty ------------------------------------------------------------------

ADD = {
    "asserts": {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-2, 5) == 3"],
                "case_timeout_s": 1},
    "check": check_label("def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n",
                         "add"),
    "call": {"fn_name": "add", "inputs": [[1, 2], [0, 0], [-2, 5]], "outputs": [3, 0, 3], "case_timeout_s": 1},
}
GENERATED_EXITS = {
    # The dataset's module is missing here: the exit hides the import error (-1.0) as a wrong answer (0.0).
    "os-exit-guarding-a-failing-import": "try:\n    import numpy_nowhere_to_be_found\nexcept ImportError:\n"
                                         "    import os\n    os._exit(0)\n\n\ndef add(a, b):\n    return a + b\n",
    "os-exit-1-at-import": "import os\nos._exit(1)\n\n\ndef add(a, b):\n    return a + b\n",
    "sigkill-at-import": "import os\nimport signal\nos.kill(os.getpid(), signal.SIGKILL)\n\n\n"
                         "def add(a, b):\n    return a + b\n",
    # A loop that would time out (-0.5), cut short by a thread that exits before the case's deadline.
    "watchdog-thread": "import os\nimport threading\nimport time\n\n\ndef add(a, b):\n"
                       "    threading.Thread(target=lambda: (time.sleep(0.7), os._exit(0)), daemon=True).start()\n"
                       "    while True:\n        pass\n",
    "watchdog-thread-from-import": "import os\nimport threading\nimport time\n\n"
                                   "threading.Thread(target=lambda: (time.sleep(0.5), os._exit(0)), daemon=True).start()\n"
                                   "\n\ndef add(a, b):\n    while True:\n        pass\n",
    "raise-system-exit": "def add(a, b):\n    raise SystemExit(0)\n",
    # The worker imports the solution while the tests' process still sets pytest up (rbcheck.start_worker):
    # a SIGINT then must end that process as in a case, not raise a KeyboardInterrupt that stops the session.
    "sigint-to-the-tests-at-import": "import os\nimport signal\nimport time\nos.kill(os.getppid(), signal.SIGINT)\n"
                                     "time.sleep(0.5)\n\n\ndef add(a, b):\n    return a + b\n",
}
HONEST_WRONG = "def add(a, b):\n    return 7\n"
for _fmt, _label in ADD.items():
    run(f"honest-wrong-{_fmt}", HONEST_WRONG, _label)
    for _name, _solution in GENERATED_EXITS.items():
        run(f"exit-{_fmt}-{_name}", _solution, _label)


@pytest.mark.parametrize("fmt", list(ADD))
@pytest.mark.parametrize("name", list(GENERATED_EXITS))
def test_an_exit_in_a_generated_format_is_a_crash(graded, fmt, name):
    out, honest = graded[f"exit-{fmt}-{name}"], graded[f"honest-wrong-{fmt}"]

    assert (honest.verdict, honest.reward) == ("failed", 0.0), show(honest)
    # A watchdog that fires late is caught by the case's deadline first: a timeout, still a penalty.
    allowed = {("killed", CRASH), ("timeout", TIMEOUT)} if "watchdog" in name else {("killed", CRASH)}
    assert (out.verdict, out.reward) in allowed, show(out)
    assert out.passed == 0, show(out)


STDIO = {"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"], "case_timeout_s": 1}
STDIO_EXITS = {
    "honest-wrong": "print(7)\n",
    "os-exit-0": "import os\nos._exit(0)\n",
    "watchdog-thread": "import os\nimport threading\nimport time\n\n"
                       "threading.Thread(target=lambda: (time.sleep(0.7), os._exit(0)), daemon=True).start()\n"
                       "while True:\n    pass\n",
    "kill-the-tests": "import os\nimport signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "sigint-to-the-tests": "import os\nimport signal\nimport time\nos.kill(os.getppid(), signal.SIGINT)\n"
                           "time.sleep(0.5)\nprint(7)\n",
}
for _name, _program in STDIO_EXITS.items():
    run(f"stdio-{_name}", _program, STDIO)


@pytest.mark.parametrize("name", [n for n in STDIO_EXITS if n != "honest-wrong"])
def test_no_exit_of_a_program_scores_above_an_honest_wrong_answer(graded, name):
    # Contest-style: a program's early exit fails its case, as a wrong answer does.
    out, honest = graded[f"stdio-{name}"], graded["stdio-honest-wrong"]

    assert (honest.verdict, honest.reward) == ("failed", 0.0), show(honest)
    assert out.reward <= honest.reward and out.passed == 0, show(out)


PYTEST_EXITS = {
    # test_small passes, then the solution's process ends in test_zero.
    "os-exit-in-the-second-test": "import os\n\n\ndef add(a, b):\n    if a == 0:\n        os._exit(0)\n"
                                  "    return a + b\n",
    # Every test would loop until the run's deadline (-0.5); a thread ends the solution's process first.
    "watchdog-thread": "import os\nimport threading\nimport time\n\n"
                       "threading.Thread(target=lambda: (time.sleep(1.5), os._exit(0)), daemon=True).start()\n"
                       "\n\ndef add(a, b):\n    while True:\n        pass\n",
}
for _name, _solution in PYTEST_EXITS.items():
    run(f"pytest-{_name}", _solution, {"pytest": ADD_TESTS}, DEADLINE_RUNS)
    run(f"pytest-{_name}-in-process", _solution, {"pytest": ADD_TESTS, "in_process": True}, DEADLINE_RUNS)
# pytest.exit raised in the solution's own process is an exception like another there: that test fails.
run("pytest-pytest-exit", "import pytest\n\n\ndef add(a, b):\n    if a == 0:\n        pytest.exit('done', "
                          "returncode=0)\n    return a + b\n", {"pytest": ADD_TESTS}, DEADLINE_RUNS)


@pytest.mark.parametrize("name", list(PYTEST_EXITS))
def test_an_exit_of_the_solutions_process_is_a_crash(graded, name):
    out = graded[f"pytest-{name}"]

    assert (out.verdict, out.reward) == ("killed", CRASH), show(out)
    assert "the solution's process ended" in out.metadata["message"], show(out)


@pytest.mark.parametrize("name", list(PYTEST_EXITS))
def test_an_exit_before_every_pytest_test_reported_is_a_crash(graded, name):
    out = graded[f"pytest-{name}-in-process"]  # the completion in the tests' process: it ends them

    assert (out.verdict, out.reward) == ("killed", CRASH), show(out)
    assert "never reported" in out.metadata["message"], show(out)


def test_pytest_exit_in_the_solution_fails_that_test(graded):
    out = graded["pytest-pytest-exit"]

    assert (out.verdict, out.passed) == ("failed", 2), show(out)
    assert [t["outcome"] for t in out.metadata["tests"]] == ["passed", "failed", "passed"], show(out)


# -- a run deadline counts the cases that passed -------------------------------------------------

# Cases with a == 0 loop; the case limit is longer than the run's, so the run's deadline ends it.
LOOPS_ON_ZERO = "def add(a, b):\n    while a == 0:\n        pass\n    return a + b\n"
run("deadline-call", LOOPS_ON_ZERO,
    {"fn_name": "add", "inputs": [[1, 2], [3, 4], [0, 0], [5, 6]], "outputs": [3, 7, 0, 11], "case_timeout_s": 60},
    DEADLINE_RUNS)
run("deadline-asserts", LOOPS_ON_ZERO,
    {"tests": ["assert add(1, 2) == 3", "assert add(3, 4) == 7", "assert add(0, 0) == 0", "assert add(5, 6) == 11"],
     "case_timeout_s": 60}, DEADLINE_RUNS)
run("deadline-stdio", "a, b = map(int, input().split())\nwhile a == 0:\n    pass\nprint(a + b)\n",
    {"inputs": ["1 2\n", "3 4\n", "0 0\n", "5 6\n"], "outputs": ["3\n", "7\n", "0\n", "11\n"], "case_timeout_s": 60},
    DEADLINE_RUNS)
ZERO_LAST = ADD_TESTS.replace("def test_zero():\n    assert add(0, 0) == 0\n\n", "") + \
    "\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
run("deadline-pytest", LOOPS_ON_ZERO, {"pytest": ZERO_LAST}, DEADLINE_RUNS)
run("deadline-nothing-passed", "def add(a, b):\n    while True:\n        pass\n",
    {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7], "case_timeout_s": 60}, DEADLINE_RUNS)


@pytest.mark.parametrize("key, passed, total", [
    ("deadline-call", 2, 4), ("deadline-asserts", 2, 4), ("deadline-stdio", 2, 4),
    ("deadline-pytest", 2, 3),  # test_small and test_negative, then test_zero loops
])
def test_a_run_deadline_counts_the_cases_that_passed(graded, key, passed, total):
    out = graded[key]

    assert out.verdict == "timeout", show(out)
    assert (out.passed, out.total) == (passed, total), show(out)
    assert out.reward == passed / total, show(out)
    # The records sent before the deadline reached the host.
    assert [t["outcome"] for t in out.metadata["tests"]] == ["passed"] * passed, show(out)


def test_a_run_deadline_with_nothing_passed_is_the_timeout_penalty(graded):
    out = graded["deadline-nothing-passed"]

    assert (out.verdict, out.reward, out.passed) == ("timeout", TIMEOUT, 0), show(out)


def test_no_container_is_left_behind(graded, leftovers):
    assert leftovers() == {"containers": [], "processes": []}
