"""Scale without false verdicts, in real containers: labels of 10,000 tests,
failure messages that are long, and slow but correct programs are graded as
small ones are. Our own records, messages and reports never count against
the solution (no collection_error, output_limit or timeout it did not earn).

The runs are scored in one batch, so they share the session's containers in
parallel; each test then reads its own. The pure rules: tests/unit/test_scale.py.
"""

import pytest

from rewardbox.rewards import RewardOutput, Sample

CASES = 10_000
MANY_FAILURES = 2_000  # 12 MB of failure text: over the report's budget for messages, several times
SOLUTION = "def f(x):\n    return x + 1\n"
WRONG = "def f(x):\n    return x\n"
LONG_MESSAGE = "'f(x) should be x + 1; ' + 'here is why, at length. ' * 250"  # 6,000 characters per failure

ASSERTS = {"tests": [f"assert f({i}) == {i + 1}" for i in range(CASES)]}
PYTEST = {"pytest": "import pytest\n\nfrom solution import f\n\n\n"
                    f"@pytest.mark.parametrize('i', {list(range(CASES))!r})\n"
                    "def test_f(i):\n    assert f(i) == i + 1\n"}
LONG_ASSERTS = {"tests": [f"assert f({i}) == {i + 1}, {LONG_MESSAGE}" for i in range(250)]}
LONG_PYTEST = {"pytest": "import pytest\n\nfrom solution import f\n\n\n"
                         f"@pytest.mark.parametrize('i', {list(range(250))!r})\n"
                         f"def test_f(i):\n    assert f(i) == i + 1, {LONG_MESSAGE}\n"}
MANY_LONG_ASSERTS = {"tests": [f"assert f({i}) == {i + 1}, {LONG_MESSAGE}" for i in range(MANY_FAILURES)]}
# 60 cases of 0.2 s each: 12 s of honest work, past the fixed 10 s deadline there was.
SLOW = "import time\n\ntime.sleep(0.2)\nprint(int(input()) + 1)\n"
SLOW_LABEL = {"inputs": [f"{i}\n" for i in range(60)], "outputs": [f"{i + 1}\n" for i in range(60)]}

RUNS = {
    "asserts-10000-correct": (SOLUTION, ASSERTS),
    "pytest-10000-correct": (SOLUTION, PYTEST),
    "asserts-250-long-messages-wrong": (WRONG, LONG_ASSERTS),
    "pytest-250-long-messages-wrong": (WRONG, LONG_PYTEST),
    "asserts-2000-long-messages-wrong": (WRONG, MANY_LONG_ASSERTS),
    "stdio-60-slow-correct": (SLOW, SLOW_LABEL),
}


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[str, RewardOutput]:
    samples = [Sample(id=key, completion=completion, label=label) for key, (completion, label) in RUNS.items()]
    return dict(zip(RUNS, code_reward.score_many(samples), strict=True))


def show(out: RewardOutput) -> str:
    m = out.metadata
    return f"{out.reward} {m.get('verdict')} {m.get('passed')}/{m.get('total')} {m.get('message')!r}"


@pytest.mark.parametrize("key", ["asserts-10000-correct", "pytest-10000-correct"])
def test_ten_thousand_tests_correct_is_a_full_pass(graded, key):
    out = graded[key]
    assert (out.reward, out.verdict, out.passed, out.total) == \
        (1.0, "passed", CASES, CASES), show(out)
    assert len(out.metadata["tests"]) == CASES and not out.metadata.get("tampered")


@pytest.mark.parametrize("key", ["asserts-250-long-messages-wrong", "pytest-250-long-messages-wrong"])
def test_long_failure_messages_are_a_plain_failure_not_an_output_limit(graded, key):
    out = graded[key]
    assert (out.reward, out.verdict, out.passed, out.total) == \
        (0.0, "failed", 0, 250), show(out)
    messages = [t["message"] for t in out.metadata["tests"]]
    assert len(messages) == 250 and all("here is why, at length." in m for m in messages)


def test_thousands_of_long_failures_are_graded_exactly(graded):
    """The report keeps every test's outcome and sheds what does not fit of
    the failure messages, which are for people."""
    out = graded["asserts-2000-long-messages-wrong"]
    assert (out.reward, out.verdict, out.passed, out.total) == \
        (0.0, "failed", 0, MANY_FAILURES), show(out)
    tests = out.metadata["tests"]
    assert len(tests) == MANY_FAILURES and {t["outcome"] for t in tests} == {"failed"}
    assert "here is why, at length." in tests[0]["message"]


def test_slow_correct_program_is_not_cut_short_by_the_default_deadline(graded):
    out = graded["stdio-60-slow-correct"]
    assert (out.reward, out.verdict, out.passed) == (1.0, "passed", 60), show(out)
