"""Every label format graded end to end in real containers: a passing, a partly
passing and a failing completion each, with the exact partial credit; the
stdin/stdout comparison rules; per-case time limits; crashes; and completions
that try to beat the generated formats without solving the task.

The runs are declared at import time (`run`) and scored in one batch, so they
share the session's containers in parallel; each test then reads its own.
"""

import json

import pytest
from add_task import ADD_TESTS

from rewardbox.rewards import GradingPolicy, RewardOutput, Sample

POLICY = GradingPolicy()  # the session's CodeReward grades with the default policy
RUNS: dict[str, Sample] = {}


def run(key: str, completion: str, label, prompt: str | None = None) -> str:
    assert key not in RUNS, key
    RUNS[key] = Sample(id=key, completion=completion, label=label, prompt=prompt)
    return key


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[str, RewardOutput]:
    return dict(zip(RUNS, code_reward.score_many(list(RUNS.values())), strict=True))


def outcomes(out: RewardOutput) -> list[tuple[str, str]]:
    return [(t["name"], t["outcome"]) for t in out.metadata["tests"]]


def show(out: RewardOutput) -> str:
    """The run, for assertion messages."""
    tests = [(t["name"], t["outcome"], (t["message"] or "")[-300:]) for t in out.metadata.get("tests", [])]
    return f"{out.reward} {out.metadata.get('verdict')} {out.metadata.get('message')!r} {tests}"


# -- each format: pass, partial, fail ----------------------------------------------------------

ADD_PYTEST = ADD_TESTS
VOWELS_PROMPT = 'def count_vowels(s: str) -> int:\n    """Number of vowels (a, e, i, o, u) in s, in any case."""\n'
VOWELS_TEST = """\
METADATA = {}


def check(candidate):
    assert candidate("hello") == 2
    assert candidate("") == 0
    assert candidate("AEIOU") == 5
    assert candidate("xyz") == 0
    assert candidate("Programming") == 3
"""

# format -> label, prompt, and completions: (completion, tests passed) for pass, partial, fail; total tests.
FORMATS = {
    "pytest": ({"pytest": ADD_PYTEST}, None, 3, [
        ("def add(a, b):\n    return a + b\n", 3),
        ("def add(a, b):\n    return a + b if a and b else -1\n", 2),
        ("def add(a, b):\n    return a * b + 7\n", 0),
    ]),
    "asserts": ({"tests": ["assert add(1, 2) == 3 + OFFSET", "assert add(0, 0) == OFFSET", "assert add(-2, 5) == 3",
                           "assert add(10, 5) == 15"], "setup": "OFFSET = 0"}, None, 4, [
        ("def add(a, b):\n    return a + b\n", 4),
        ("def add(a, b):\n    return a + b if a >= 0 else 0\n", 3),
        ("def add(a, b):\n    return str(a + b)\n", 0),
    ]),
    "mbpp": ({"test_list": ["assert math.isclose(hyp(3, 4), 5.0)", "assert hyp(0, 0) == 0",
                            "assert round(hyp(1, 1), 3) == 1.414"],
              "test_imports": ["import math"], "test_setup_code": ""}, None, 3, [
        ("import math\n\ndef hyp(a, b):\n    return math.hypot(a, b)\n", 3),
        ("import math\n\ndef hyp(a, b):\n    return float(a + b) if a == b else math.hypot(a, b)\n", 2),
        ("def hyp(a, b):\n    return -1.0\n", 0),
    ]),
    "check": ({"test": VOWELS_TEST, "entry_point": "count_vowels", "prompt": VOWELS_PROMPT}, None, 5, [
        ('    return sum(c in "aeiouAEIOU" for c in s)\n', 5),  # continues the prompt, HumanEval style
        ('    return sum(c in "aeiou" for c in s)\n', 4),
        ("    return -1\n", 0),
    ]),
    "check-sample-prompt": ({"test": VOWELS_TEST, "entry_point": "count_vowels"}, VOWELS_PROMPT, 5, [
        ("```python\ndef count_vowels(s):\n    return sum(c.lower() in 'aeiou' for c in s)\n```", 5),
        ('    return sum(c in "aeiou" for c in s)\n', 4),
        ("    return -1\n", 0),
    ]),
    "stdio": ({"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"]}, None, 3, [
        ("print(sum(map(int, input().split())))\n", 3),
        ("a, b = map(int, input().split())\nprint(a + b if a and b else -1)\n", 2),
        ("print('no')\n", 0),
    ]),
    "call": ({"fn_name": "add", "inputs": [[1, 2], [0, 0], [-2, 5]], "outputs": [3, 0, 3]}, None, 3, [
        ("def add(a, b):\n    return a + b\n", 3),
        ("def add(a, b):\n    return a + b if a and b else -1\n", 2),
        ("def add(a, b):\n    return [a, b]\n", 0),
    ]),
    "call-leetcode": ({"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6], [[3, 3], 6]],
                       "outputs": [[0, 1], [1, 2], [0, 1]]}, None, 3, [
        ("from typing import List\n\nclass Solution:\n"
         "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
         "        seen = {}\n"
         "        for i, n in enumerate(nums):\n"
         "            if target - n in seen:\n"
         "                return [seen[target - n], i]\n"
         "            seen[n] = i\n", 3),
        ("class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n", 2),
        ("class Solution:\n    def twoSum(self, nums, target):\n        return []\n", 0),
    ]),
    "open-r1": ({"language": "python", "test_cases": [
        {"input": f"{n}\n", "output": f"{2 * n}\n", "type": "stdin_stdout"} for n in (1, 2, 3, 5)]}, None, 4, [
        ("print(2 * int(input()))\n", 4),
        ("n = int(input())\nprint(2 * n if n == 1 else n + 1)\n", 1),
        ("print(int(input()))\n", 0),
    ]),
    "apps-stdio": ({"input_output": json.dumps({"inputs": ["3\n1 2 3\n", "2\n5 5\n"], "outputs": ["6\n", "10\n"]})},
                   None, 2, [
        ("input()\nprint(sum(map(int, input().split())))\n", 2),
        ("input()\nxs = list(map(int, input().split()))\nprint(sum(xs) if len(xs) == 3 else 0)\n", 1),
        ("print(input())\n", 0),
    ]),
    "apps-call": ({"input_output": json.dumps({"fn_name": "square", "inputs": [[2], [3], [4], [5], [6]],
                                               "outputs": [[4], [9], [16], [25], [36]]})}, None, 5, [
        ("def square(n):\n    return n * n\n", 5),
        ("def square(n):\n    return n * n if n % 2 == 0 else n\n", 3),
        ("def square(n):\n    return -n\n", 0),
    ]),
}
for _fmt, (_label, _prompt, _, _completions) in FORMATS.items():
    for _which, (_completion, _) in zip(("pass", "partial", "fail"), _completions):
        run(f"{_fmt}-{_which}", _completion, _label, _prompt)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("which", ["pass", "partial", "fail"])
def test_each_format_grades_exactly(graded, fmt, which):
    _, _, total, completions = FORMATS[fmt]
    passed = completions[("pass", "partial", "fail").index(which)][1]

    out = graded[f"{fmt}-{which}"]

    assert out.metadata["error"] is None, show(out)
    assert (out.passed, out.total) == (passed, total), show(out)
    assert out.reward == passed / total
    assert out.score == POLICY.score(passed / total) == (passed / total + 1) / 2
    assert out.verdict == ("passed" if passed == total else "failed")
    assert len(out.metadata["tests"]) == total
    assert sum(t["outcome"] == "passed" for t in out.metadata["tests"]) == passed


def test_partial_credit_values(graded):
    # The fractions above, spelled out.
    assert graded["pytest-partial"].reward == pytest.approx(0.6666667)
    assert graded["asserts-partial"].reward == 0.75
    assert graded["check-partial"].reward == 0.8
    assert graded["open-r1-partial"].reward == 0.25
    assert graded["apps-call-partial"].reward == 0.6
    assert graded["pytest-partial"].score == pytest.approx(0.8333333)


def test_which_cases_failed(graded):
    assert outcomes(graded["check-partial"]) == [
        ("test_check_0", "passed"), ("test_check_1", "passed"), ("test_check_2", "failed"),
        ("test_check_3", "passed"), ("test_check_4", "passed")]
    assert outcomes(graded["asserts-partial"]) == [
        ("test_assert_0", "passed"), ("test_assert_1", "passed"), ("test_assert_2", "failed"),
        ("test_assert_3", "passed")]
    assert outcomes(graded["stdio-partial"]) == [("test_case_0", "passed"), ("test_case_1", "failed"),
                                                 ("test_case_2", "passed")]


def test_failure_messages_show_the_case(graded):
    stdio = graded["stdio-partial"].metadata["tests"][1]["message"]
    call = graded["call-partial"].metadata["tests"][1]["message"]
    asserts = graded["asserts-partial"].metadata["tests"][2]["message"]

    assert "wrong output for input '0 0\\n'" in stdio and "expected: '0\\n'" in stdio and "got:      '-1\\n'" in stdio
    assert "add(" in call and "expected: " in call and "got:      " in call and "-1" in call
    assert "failed: 'assert add(-2, 5) == 3'" in asserts


# -- stdin/stdout comparison rules ---------------------------------------------------------------

COMPARED = "1 2\n0.3333333\nYes\n"
VARIANTS = {  # what the program prints -> whether it matches COMPARED
    "exact": ("1 2\n0.3333333\nYes\n", True),
    "trailing-spaces": ("1 2   \n0.3333333 \nYes\t\n", True),
    "no-final-newline": ("1 2\n0.3333333\nYes", True),
    "crlf": ("1 2\r\n0.3333333\r\nYes\r\n", True),
    "float-within-tolerance": ("1 2\n0.33333333333\nYes\n", True),
    "trailing-blank-lines": ("1 2\n0.3333333\nYes\n\n\n", True),
    "lower-case": ("1 2\n0.3333333\nyes\n", False),
    "upper-case": ("1 2\n0.3333333\nYES\n", False),
    "float-beyond-tolerance": ("1 2\n0.3334\nYes\n", False),
    "missing-line": ("1 2\n0.3333333\n", False),
    "extra-token": ("1 2 3\n0.3333333\nYes\n", False),
}
VARIANT_PROGRAM = f"import sys\nVARIANTS = {({k: v for k, (v, _) in VARIANTS.items()})!r}\nsys.stdout.write(VARIANTS[input()])\n"
run("compare", VARIANT_PROGRAM, {"inputs": [f"{name}\n" for name in VARIANTS], "outputs": [COMPARED] * len(VARIANTS)})


def test_stdout_comparison_rules(graded):
    out = graded["compare"]

    expected = [(f"test_case_{i}", "passed" if matches else "failed") for i, (_, matches) in enumerate(VARIANTS.values())]
    assert outcomes(out) == expected, show(out)
    matching = sum(matches for _, matches in VARIANTS.values())
    assert out.reward == matching / len(VARIANTS)


run("off-by-one-big-ints", "import sys\nprint(1000001 if sys.stdin.read() == '\\n' else 0)\n",
    {"inputs": ["\n"], "outputs": ["1000000\n"]})
run("off-by-999-mod-answer", "print(999999000)\n", {"inputs": ["\n"], "outputs": ["999999999\n"]})


@pytest.mark.parametrize("key", ["off-by-one-big-ints", "off-by-999-mod-answer"])
def test_wrong_big_integers_fail(graded, key):
    assert graded[key].reward == 0.0, show(graded[key])


# -- per-case time limits ---------------------------------------------------------------------

FAST = {"case_timeout_s": 1}
SLOW_ON_ZERO = "import time\n\ndef add(a, b):\n    if a == 0:\n        time.sleep(30)\n    return a + b\n"
LOOP = "def add(a, b):\n    while True:\n        pass\n"
TIMED = {
    "asserts": {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-2, 5) == 3"], **FAST},
    "check": {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
                      "    assert candidate(-2, 5) == 3\n", "entry_point": "add", **FAST},
    "call": {"fn_name": "add", "inputs": [[1, 2], [0, 0], [-2, 5]], "outputs": [3, 0, 3], **FAST},
    "stdio": {"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"], **FAST},
}
STDIO_SLOW_ON_ZERO = "import time\na, b = map(int, input().split())\nif a == 0:\n    time.sleep(30)\nprint(a + b)\n"
for _fmt, _label in TIMED.items():
    run(f"slow-{_fmt}", STDIO_SLOW_ON_ZERO if _fmt == "stdio" else SLOW_ON_ZERO, _label)
run("loop-call", LOOP, TIMED["call"])
run("loop-stdio", "while True:\n    pass\n", TIMED["stdio"])
run("loop-asserts", LOOP, TIMED["asserts"])


@pytest.mark.parametrize("fmt", list(TIMED))
def test_one_slow_case_costs_only_that_case(graded, fmt):
    out = graded[f"slow-{fmt}"]

    assert out.verdict == "failed", show(out)
    assert out.reward == 2 / 3
    assert [t["outcome"] for t in out.metadata["tests"]] == ["passed", "failed", "passed"]
    slow = out.metadata["tests"][1]
    assert slow["exc_type"].endswith("CaseTimeout"), show(out)
    assert "ran past 1.0 s" in slow["message"]
    # The case was stopped at its own limit, well before the run's deadline.
    assert out.duration_s < 8


@pytest.mark.parametrize("key", ["loop-call", "loop-stdio", "loop-asserts"])
def test_every_case_looping_is_a_timeout(graded, key):
    out = graded[key]

    assert out.verdict == "timeout", show(out)
    assert out.reward == POLICY.timeout_reward == -0.5
    assert out.score == 0.25
    assert (out.passed, out.total) == (0, 3)
    assert all(t["exc_type"].endswith("CaseTimeout") for t in out.metadata["tests"])


# -- crashes in the completion ---------------------------------------------------------------------

run("exit-nonzero", "import sys\nprint(sum(map(int, input().split())))\nsys.exit(3)\n", TIMED["stdio"])
run("program-raises", "a, b = map(int, input().split())\nraise RuntimeError('boom %d' % a)\n", TIMED["stdio"])
run("function-raises", "def add(a, b):\n    raise ValueError('no adding today')\n", TIMED["call"])
run("assert-function-raises", "def add(a, b):\n    raise ValueError('no adding today')\n", TIMED["asserts"])
run("import-error-call", "import numpy_does_not_exist\n\ndef add(a, b):\n    return a + b\n", TIMED["call"])
run("import-error-asserts", "import numpy_does_not_exist\n\ndef add(a, b):\n    return a + b\n", TIMED["asserts"])
run("syntax-error-call", "def add(a, b)\n    return a + b\n", TIMED["call"])


def test_program_exiting_non_zero_fails_its_cases(graded):
    out = graded["exit-nonzero"]

    # The output was right; the exit status was not.
    assert out.reward == 0.0, show(out)
    assert out.verdict == "failed"
    assert all("exited with status 3" in t["message"] for t in out.metadata["tests"])


def test_program_raising_shows_its_stderr(graded):
    out = graded["program-raises"]

    assert out.reward == 0.0, show(out)
    assert all("exited with status 1" in t["message"] for t in out.metadata["tests"])
    assert "boom 1" in out.metadata["tests"][0]["message"]


@pytest.mark.parametrize("key", ["function-raises", "assert-function-raises"])
def test_function_raising_fails_its_cases(graded, key):
    out = graded[key]

    assert out.reward == 0.0, show(out)
    assert out.verdict == "failed"
    assert all("add() raised ValueError: no adding today" in t["message"] for t in out.metadata["tests"])


def test_syntax_error_is_a_crash(graded):
    out = graded["syntax-error-call"]

    assert out.verdict == "syntax_error", show(out)
    assert out.reward == -1.0


@pytest.mark.parametrize("key", ["import-error-call", "import-error-asserts"])
def test_import_error_is_a_crash_in_generated_formats(graded, key):
    out = graded[key]

    assert "numpy_does_not_exist" in out.metadata["tests"][0]["message"]
    assert (out.verdict, out.reward) == ("import_error", -1.0), show(out)


# -- completions that try to beat the generated formats ----------------------------------------------
# Each runs against the same labels as an honest wrong answer (7, whatever the case), which earns 0.0:
# no attempt may earn more, nor pass a single case.

HONEST_WRONG = {
    "asserts": "def add(a, b):\n    return 7\n",
    "check": "def add(a, b):\n    return 7\n",
    "call": "def add(a, b):\n    return 7\n",
    "stdio": "print(7)\n",
}
HACK_LABELS = {fmt: TIMED[fmt] for fmt in HONEST_WRONG}
for _fmt, _completion in HONEST_WRONG.items():
    run(f"honest-wrong-{_fmt}", _completion, HACK_LABELS[_fmt])

FUNCTION_HACKS = {
    # 100 million items once expanded: refused as it is met (rbwire.Budget), not built whole first,
    # which outlasted each case's second or ran the worker out of memory.
    "value-too-big-to-cross": "def add(a, b):\n    row = [0] * 1000\n    return [row] * 100_000\n",
    "always-equal": "class Anything:\n    def __eq__(self, other):\n        return True\n\n"
                    "    def __ne__(self, other):\n        return False\n\n    __hash__ = object.__hash__\n\n"
                    "def add(a, b):\n    return Anything()\n",
    "int-subclass-always-equal": "class Int(int):\n    def __eq__(self, other):\n        return True\n\n"
                                 "    __hash__ = int.__hash__\n\ndef add(a, b):\n    return Int(7)\n",
    "sys-exit-at-import": "import sys\nsys.exit(0)\n\ndef add(a, b):\n    return 7\n",
    "os-exit-at-import": "import os\nos._exit(0)\n\ndef add(a, b):\n    return 7\n",
    "sys-exit-in-function": "import sys\n\ndef add(a, b):\n    sys.exit(0)\n",
    "os-exit-in-function": "import os\n\ndef add(a, b):\n    os._exit(0)\n",
    "raise-system-exit": "def add(a, b):\n    raise SystemExit\n",
    "keyboard-interrupt-in-function": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "keyboard-interrupt-at-import": "raise KeyboardInterrupt\n\ndef add(a, b):\n    return 7\n",
    "sigint-to-the-test-process": "import os\nimport signal\n\ndef add(a, b):\n"
                                  "    os.kill(os.getppid(), signal.SIGINT)\n    return 7\n",
    "fake-pytest-summary": "import sys\nprint('=' * 20 + ' 3 passed in 0.01s ' + '=' * 20)\n\ndef add(a, b):\n"
                           "    print('PASSED')\n    print('=' * 20 + ' 3 passed in 0.01s ' + '=' * 20)\n"
                           "    sys.stdout.flush()\n    return 7\n",
    # Builtins the tests use; not those the worker's own protocol needs (type, isinstance, list,
    # len, min): a dead worker would prove nothing.
    "overriding-builtins": "import builtins\n\n"
                           "builtins.AssertionError = type('Nothing', (Exception,), {})\n"
                           "for name in ('abs', 'round', 'sorted', 'sum', 'repr', 'all', 'any', 'print'):\n"
                           "    builtins.__dict__[name] = lambda *args, **kwargs: 3\n\n"
                           "def add(a, b):\n    return 'builtins overridden'\n",
    "patching-the-workers-wire": "import sys\n\ndef add(a, b):\n    wire = sys.modules['rbwire']\n"
                                 "    wire.encode = lambda value: {'$': 'anything', 'v': 3}\n    return 7\n",
}
PROGRAM_HACKS = {
    "sys-exit-at-import": "import sys\nsys.exit(0)\n",
    "os-exit-at-import": "import os\nos._exit(0)\n",
    "keyboard-interrupt-at-import": "raise KeyboardInterrupt\n",
    "fake-pytest-summary": "print('=' * 20 + ' 3 passed in 0.01s ' + '=' * 20)\n",
    "sigint-to-the-test-process": "import os\nimport signal\nos.kill(os.getppid(), signal.SIGINT)\nprint(7)\n",
}
HACKS = [(fmt, name) for fmt in ("asserts", "check", "call") for name in FUNCTION_HACKS]
HACKS += [("stdio", name) for name in PROGRAM_HACKS]
for _fmt, _name in HACKS:
    run(f"hack-{_fmt}-{_name}", (PROGRAM_HACKS if _fmt == "stdio" else FUNCTION_HACKS)[_name], HACK_LABELS[_fmt])


def assert_no_better_than_honest(graded, fmt: str, key: str) -> RewardOutput:
    honest, out = graded[f"honest-wrong-{fmt}"], graded[key]
    assert (honest.reward, honest.verdict) == (0.0, "failed"), show(honest)
    assert out.reward is not None, show(out)
    assert out.reward <= honest.reward, show(out)
    assert out.passed == 0, show(out)
    assert out.verdict != "passed"
    assert not any(t["outcome"] == "passed" for t in out.metadata["tests"]), show(out)
    return out


@pytest.mark.parametrize("fmt, name", HACKS)
def test_hacks_do_not_beat_an_honest_wrong_answer(graded, fmt, name):
    assert_no_better_than_honest(graded, fmt, f"hack-{fmt}-{name}")


def test_values_that_are_not_plain_data_are_refused_or_reduced(graded):
    # An object of the solution's own class cannot cross at all.
    messages = [t["message"] for t in graded["hack-call-always-equal"].metadata["tests"]]
    assert all("cannot cross the sandbox boundary" in m for m in messages), messages
    # An int subclass crosses as the plain int it holds: its __eq__ stays behind.
    messages = [t["message"] for t in graded["hack-asserts-int-subclass-always-equal"].metadata["tests"]]
    assert messages and all(m.startswith("AssertionError: failed: 'assert") or "failed: 'assert" in m
                            for m in messages), messages


def test_a_value_over_the_frame_limit_fails_each_case_at_once(graded):
    for fmt in ("asserts", "check", "call"):
        out = graded[f"hack-{fmt}-value-too-big-to-cross"]
        messages = [t["message"] for t in out.metadata["tests"]]
        assert out.verdict == "failed" and len(messages) == 3, show(out)
        assert all("over the frame limit of 67108864 bytes" in m for m in messages), show(out)


def test_overridden_builtins_stay_in_the_solutions_process(graded):
    for fmt in ("asserts", "check", "call"):
        out = graded[f"hack-{fmt}-overriding-builtins"]
        assert all("builtins overridden" in t["message"] or "failed: 'assert" in t["message"]
                   for t in out.metadata["tests"]), show(out)
    assert "got:      'builtins overridden'" in graded["hack-call-overriding-builtins"].metadata["tests"][0]["message"]


def test_exits_are_reported_as_such(graded):
    assert "importing the solution failed: SystemExit: 0" in graded["hack-call-sys-exit-at-import"].metadata["tests"][0][
        "message"]
    assert "add() raised SystemExit" in graded["hack-check-sys-exit-in-function"].metadata["tests"][0]["message"]
    assert "ended" in graded["hack-asserts-os-exit-in-function"].metadata["tests"][0]["message"]


# Reading the tests: the test file holds the case numbers only, the expected values live
# in the test process's memory, and that process is closed to the completion's.
READ_TEST_FILE = '''\
import re

def add(a, b):
    with open("/work/.tests/test_solution.py") as f:
        text = f.read()
    found = re.findall(r"==\\s*(-?\\d+)", text)
    return int(found[0]) if found else "read %d chars, no expected values" % len(text)
'''
PEEK = '''\
import os

def peek():
    seen = []
    for what in ("mem", "environ", "fd", "maps"):
        path = "/proc/%d/%s" % (os.getppid(), what)
        try:
            if what == "fd":
                os.listdir(path)
            else:
                with open(path, "rb") as f:
                    f.read(64)
            seen.append(what + ": read")
        except OSError as exc:
            seen.append(what + ": " + type(exc).__name__)
    return "; ".join(seen)
'''
run("hack-call-read-test-file", READ_TEST_FILE, HACK_LABELS["call"])
run("hack-asserts-read-test-file", READ_TEST_FILE, HACK_LABELS["asserts"])
run("hack-stdio-read-test-file", "print(open('/work/.tests/test_solution.py').read())\n", HACK_LABELS["stdio"])
run("hack-call-proc-of-test-process", PEEK + "\ndef add(a, b):\n    return peek()\n", HACK_LABELS["call"])
run("hack-stdio-proc-of-test-process", PEEK + "\nprint(peek())\n", HACK_LABELS["stdio"])


@pytest.mark.parametrize("fmt", ["call", "asserts", "stdio"])
def test_the_test_file_gives_nothing_away(graded, fmt):
    out = assert_no_better_than_honest(graded, fmt, f"hack-{fmt}-read-test-file")

    if fmt == "call":  # the failure message shows what the completion found
        assert "no expected values" in out.metadata["tests"][0]["message"]


@pytest.mark.parametrize("fmt", ["call", "stdio"])
def test_the_test_process_is_closed_to_the_completion(graded, fmt):
    out = assert_no_better_than_honest(graded, fmt, f"hack-{fmt}-proc-of-test-process")

    message = out.metadata["tests"][0]["message"]
    for what in ("mem", "environ", "fd", "maps"):
        assert f"{what}: PermissionError" in message, message


# The test process puts the tests' directory first on sys.path (pytest's prepend import
# mode), and that directory belongs to the sandbox user, so the completion can make it
# writable and plant modules there. A module the test process imports after the
# completion ran then runs inside the test process.
PLANT = '''\
import os

PAYLOAD = """
import importlib.machinery
import importlib.util
import sys

import rbcheck

rbcheck.check = lambda index: None  # every later test passes
_spec = importlib.machinery.PathFinder.find_spec(__name__, [p for p in sys.path if p != "/work/.tests"])
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
sys.modules[__name__] = _real
"""
try:
    os.chmod("/work/.tests", 0o755)
    for name in ("fractions", "statistics", "cmath", "decimal", "numbers"):
        with open("/work/.tests/%s.py" % name, "w") as f:
            f.write(PAYLOAD)
except OSError:
    pass

def add(a, b):
    return 0
'''
# A helper that imports lazily, as check functions sometimes do.
LAZY_IMPORT = {"test": "def check(candidate):\n    def equal(got, want):\n        import fractions\n"
                       "        assert fractions.Fraction(got) == fractions.Fraction(want)\n"
                       "    equal(candidate(1, 2), 3)\n    equal(candidate(0.5, 0), 0.5)\n    equal(candidate(-2, 5), 3)\n",
               "entry_point": "add"}
run("honest-wrong-lazy-import", "def add(a, b):\n    return 0\n", LAZY_IMPORT)
run("right-lazy-import", "def add(a, b):\n    return a + b\n", LAZY_IMPORT)
run("hack-check-plant-module", PLANT, LAZY_IMPORT)


def test_lazy_import_label_grades_honest_answers(graded):
    assert graded["right-lazy-import"].reward == 1.0, show(graded["right-lazy-import"])
    assert graded["honest-wrong-lazy-import"].reward == 0.0, show(graded["honest-wrong-lazy-import"])


def test_planted_modules_do_not_reach_the_test_process(graded):
    out = graded["hack-check-plant-module"]

    assert out.reward <= graded["honest-wrong-lazy-import"].reward, show(out)


# -- honest answers that the generated formats refuse ---------------------------------------------------

run("counter-call", "from collections import Counter\n\ndef count(s):\n    return Counter(s)\n",
    {"fn_name": "count", "inputs": [["aab"]], "outputs": [{"a": 2, "b": 1}]})
run("defaultdict-asserts", "from collections import defaultdict\n\ndef count(s):\n    d = defaultdict(int)\n"
                           "    for c in s:\n        d[c] += 1\n    return d\n",
    {"tests": ["assert count('aab') == {'a': 2, 'b': 1}"]})
run("solution-class-in-asserts", "class Solution:\n    def add(self, a, b):\n        return a + b\n",
    {"tests": ["assert Solution().add(1, 2) == 3"]})
run("module-used-by-tests", "import math\n\ndef area(r):\n    return math.pi * r * r\n",
    {"tests": ["assert math.isclose(area(1), 3.14159, rel_tol=1e-3)"]})


@pytest.mark.parametrize("key", ["counter-call", "defaultdict-asserts"])
def test_dict_subclasses_are_compared_as_dicts(graded, key):
    assert graded[key].reward == 1.0, show(graded[key])


@pytest.mark.parametrize("key", [
    pytest.param("solution-class-in-asserts", marks=pytest.mark.xfail(strict=True, reason=(
        "a free name in asserts is a proxy whose calls must return plain data: `Solution().add(...)` builds an "
        "instance, which cannot cross; LeetCode-style tasks belong in call labels (fn_name) or check labels "
        "with entry_point 'Solution().add'"))),
    "module-used-by-tests",
])
def test_asserts_may_use_the_solutions_classes_and_modules(graded, key):
    assert graded[key].reward == 1.0, show(graded[key])
