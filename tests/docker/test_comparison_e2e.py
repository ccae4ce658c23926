"""The comparison rules end to end, in real containers through `CodeReward`:
wrong answers the earlier rule passed (a float spelling of an integer, a
float returned for an exact int) fail under the default, checker-style rule,
a float within the tolerance still passes, and a label's `"compare"` picks
the exact or the earlier lenient rule.

The runs are declared at import time (`run`) and scored in one batch, so they
share the session's containers in parallel; each test then reads its own.
"""

import math

import pytest

from rewardbox.rewards import RewardOutput, Sample

RUNS: dict[str, Sample] = {}


def run(key: str, completion: str, label) -> str:
    assert key not in RUNS, key
    RUNS[key] = Sample(id=key, completion=completion, label=label)
    return key


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[str, RewardOutput]:
    return dict(zip(RUNS, code_reward.score_many(list(RUNS.values())), strict=True))


def show(out: RewardOutput) -> str:
    tests = [(t["outcome"], (t["message"] or "")[-300:]) for t in out.metadata.get("tests", [])]
    return f"{out.reward} {out.metadata.get('verdict')} {tests}"


def lenient(label: dict) -> dict:
    return {**label, "compare": "float"}


# Each: a label, a wrong answer the earlier rule passed, the right answer.
ONE_MORE_THAN_A_MILLION = {"inputs": ["1000000\n"], "outputs": ["1000001\n"]}
TRIANGLE = {"inputs": ["1000000000\n"], "outputs": ["500000000500000000\n"]}  # n (n + 1) / 2
FACTORIAL = {"fn_name": "factorial", "inputs": [[50], [20]], "outputs": [math.factorial(50), math.factorial(20)]}
CASES = {
    "exponent-for-an-integer": (ONE_MORE_THAN_A_MILLION, "n = int(input())\nprint(f'{n + 1:.0e}')\n",
                                "print(int(input()) + 1)\n"),
    "true-division-for-an-integer": (TRIANGLE, "n = int(input())\nprint(n * (n + 1) / 2)\n",
                                     "n = int(input())\nprint(n * (n + 1) // 2)\n"),
    "stirling-for-a-factorial": (FACTORIAL, "import math\n\ndef factorial(n):\n"
                                 "    return math.sqrt(2 * math.pi * n) * (n / math.e) ** n"
                                 " * (1 + 1 / (12 * n) + 1 / (288 * n * n) - 139 / (51840 * n ** 3))\n",
                                 "import math\n\ndef factorial(n):\n    return math.factorial(n)\n"),
    "float-for-an-int": (FACTORIAL, "import math\n\ndef factorial(n):\n    return float(math.factorial(n))\n",
                         "def factorial(n):\n    return 1 if n < 2 else n * factorial(n - 1)\n"),
}
for _name, (_label, _wrong, _right) in CASES.items():
    run(f"{_name}-wrong", _wrong, _label)
    run(f"{_name}-right", _right, _label)
    run(f"{_name}-wrong-lenient", _wrong, lenient(_label))


@pytest.mark.parametrize("name", list(CASES))
def test_wrong_numbers_fail_by_default(graded, name):
    wrong, right = graded[f"{name}-wrong"], graded[f"{name}-right"]

    assert (wrong.reward, wrong.verdict) == (0.0, "failed"), show(wrong)
    assert (right.reward, right.verdict) == (1.0, "passed"), show(right)


@pytest.mark.parametrize("name", list(CASES))
def test_compare_float_restores_the_lenient_rule(graded, name):
    out = graded[f"{name}-wrong-lenient"]

    assert (out.reward, out.verdict) == (1.0, "passed"), show(out)


def test_the_failure_shows_both_spellings(graded):
    stdio = graded["exponent-for-an-integer-wrong"].metadata["tests"][0]["message"]
    call = graded["float-for-an-int-wrong"].metadata["tests"][1]["message"]

    assert "expected: '1000001\\n'" in stdio and "got:      '1e+06\\n'" in stdio
    assert "expected: 2432902008176640000" in call and "got:      2.43290200817664e+18" in call


# Floats within the tolerance pass in every format that compares them.
THIRD = {"inputs": ["3\n"], "outputs": ["0.3333333333\n"]}
TENTHS = {"fn_name": "add", "inputs": [[0.1, 0.2], [1, 2]], "outputs": [0.3, 3.0]}
run("stdio-float-within-tolerance", "print(1 / int(input()))\n", THIRD)
run("stdio-float-beyond-tolerance", "print(round(1 / int(input()), 3))\n", THIRD)
run("call-float-within-tolerance", "def add(a, b):\n    return a + b\n", TENTHS)
run("call-float-beyond-tolerance", "def add(a, b):\n    return round(a + b + 0.001, 3)\n", TENTHS)


@pytest.mark.parametrize("fmt", ["stdio", "call"])
def test_floats_within_the_tolerance_pass(graded, fmt):
    within, beyond = graded[f"{fmt}-float-within-tolerance"], graded[f"{fmt}-float-beyond-tolerance"]

    assert within.reward == 1.0, show(within)
    assert beyond.reward == 0.0, show(beyond)


# "exact": the text as written, only the final newline aside.
SPACED = {"inputs": ["1 2\n"], "outputs": ["1 2\n"]}
SPACED_PROGRAM = "print(input() + ' ')\n"  # a trailing space, which a checker ignores
run("spaced-tokens", SPACED_PROGRAM, SPACED)
run("spaced-exact", SPACED_PROGRAM, {**SPACED, "compare": "exact"})
run("unended-exact", "import sys\nsys.stdout.write(input())\n", {**SPACED, "compare": "exact"})


def test_compare_exact_is_the_text(graded):
    assert graded["spaced-tokens"].reward == 1.0, show(graded["spaced-tokens"])
    assert graded["spaced-exact"].reward == 0.0, show(graded["spaced-exact"])
    assert graded["unended-exact"].reward == 1.0, show(graded["unended-exact"])
