"""Strategies of the fuzz tier (completions, labels, sandbox answers, request
bodies) and the fake sandbox that answers every verdict."""

import gc
import json
import os
import re
import time
from concurrent.futures import Future

from hypothesis import settings
from hypothesis import strategies as st

from rewardbox.sandbox import (
    ContainerLost,
    EngineUnavailable,
    HarnessError,
    ImageMissing,
    Outcome,
    RunRequest,
    RunResult,
    SandboxError,
    TestResult,
    Verdict,
)
from tests.unit.conftest import FakeSandbox


def examples(default: int) -> settings:
    """`max_examples` for one property: `default`, or REWARDBOX_FUZZ_EXAMPLES."""
    return settings(max_examples=int(os.environ.get("REWARDBOX_FUZZ_EXAMPLES") or default))


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def label_budget_s(raw: object) -> float:
    """Time allowed for parsing a label: a constant plus 20 microseconds per byte of it."""
    if isinstance(raw, (str, bytes)):
        size = len(raw)
    else:
        try:
            size = len(json.dumps(raw))
        except (TypeError, ValueError, RecursionError):
            size = 1_000_000  # deep objects: generous
    return 0.2 + 20e-6 * size


def cpu_budget_s(n_bytes: int) -> float:
    """Time allowed for cleaning, extracting and parsing `n_bytes` of text:
    a constant plus a few microseconds per byte, and under a second up to 1 MB."""
    return min(0.05 + 3e-6 * n_bytes, 1.0) if n_bytes <= 1 << 20 else 0.05 + 1e-6 * n_bytes


class CpuTimer:
    """CPU time of this thread (immune to other processes on a busy machine)."""

    def __enter__(self) -> "CpuTimer":
        # No collection of the test process's heap inside the timed code: it is no cost of
        # that code. (Not a gc.collect() first either: over a whole `make test` session's heap
        # that took a third of a second per example, 150 s of the tier, to gain nothing.)
        gc.disable()
        self.start = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.thread_time() - self.start
        gc.enable()


# --- text pieces -----------------------------------------------------------------

SPECIAL_TOKENS = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<s>", "<eos>", "<bos>", "<pad>",
                  "[INST]", "[/INST]", "<end_of_turn>", "<start_of_turn>model", "<|", "|>", "<|im_end", "<|a b|>"]
THINK = ["<think>", "</think>", "<think>\n", "</think>\n", "<THINK>", "<think", "</think"]
FENCES = ["```", "```python\n", "```py\n", "```python3\n", "```\n", "```bash\n", "``` python\n", "  ```python\n",
          "```Python\n", "~~~\n", "````\n", "```python", "\n```\n", "```c++\n"]
BAD_CODE_POINTS = ["\ud800", "\udfff", "\udc80", "\x00", "\uffff", "\ufffe", "\ufeff", "\u2028", "\x85", "\x1b[2J",
                   "\r", "\r\n", "\t", "\x0c", "\U0010ffff", "\u202e"]
CODE = ["def f(x):\n    return x + 1\n", "import os\n", "from solution import f\n", "class Solution:\n    pass\n",
        "print(input())\n", "x = 1\n", "if __name__ == '__main__':\n    main()\n", "@decorator\n", "async def g(): pass\n",
        "def test_a():\n    assert f(1) == 2\n", "assert f(1) == 2", "return", "(", ")", "[", "]", "{", "}", "\\",
        "'''", '"""', "#", "    ", "lambda: 0", "yield", "global x\n", "def check(candidate):\n    assert candidate(1) == 2\n"]
PROSE = ["Here is the code:\n", "I cannot solve this.", "Hello\nWorld", "The answer is \\boxed{42}.", "#### 72",
         "<answer>7</answer>", "$\\frac{1}{2}$", "\n", " ", "é", "日本", "🙂"]
ALL_PIECES = SPECIAL_TOKENS + THINK + FENCES + BAD_CODE_POINTS + CODE + PROSE


def _deep(kind: str, n: int) -> str:
    """Python nested `n` deep, in one of many ways."""
    if kind == "unary":
        return "-" * n + "1"
    if kind == "unary_spaced":
        return "- " * n + "1"
    if kind == "not":
        return "not " * n + "x"
    if kind == "plus":
        return "1" + "+1" * n
    if kind == "parens":
        return "(" * n + "1" + ")" * n
    if kind == "brackets":
        return "[" * n + "]" * n
    if kind == "unclosed":
        return "x = " + "[{(" * n
    if kind == "elif":
        return "if x == 0:\n    pass\n" + "".join(f"elif x == {i}:\n    pass\n" for i in range(1, n)) + "else:\n    pass\n"
    if kind == "indent":
        return "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass\n"
    if kind == "calls":
        return "f(" * n + ")" * n
    if kind == "attr":
        return "x" + ".a" * n
    if kind == "lambda":
        return "lambda: " * n + "0"
    if kind == "fstring":
        return "f'{" * min(n, 50) + "1" + "}'" * min(n, 50)
    if kind == "strings":
        return "'a' " * n
    raise AssertionError(kind)


DEEP_KINDS = ["unary", "unary_spaced", "not", "plus", "parens", "brackets", "unclosed", "elif", "indent", "calls", "attr",
              "lambda", "fstring", "strings"]
depths = st.one_of(st.integers(1, 200), st.sampled_from([1_000, 3_000, 10_000, 30_000, 100_000]))
deep_code = st.builds(lambda kind, n: _deep(kind, min(n, 20_000) if kind in ("elif", "indent") else n),
                      st.sampled_from(DEEP_KINDS), depths)


def _repeat_to(piece: str, size: int) -> str:
    return (piece * (size // max(len(piece), 1) + 1))[:size] if piece else ""


pieces = st.one_of(st.sampled_from(ALL_PIECES), st.text(max_size=20))
small_text = st.lists(pieces, max_size=12).map("".join)
nonempty_text = st.lists(st.sampled_from(ALL_PIECES), min_size=1, max_size=4).map("".join)
# Fragments repeated many times (a wall of </s>, of unclosed fences, of <think>).
repeated = st.builds(lambda p, n: p * n, nonempty_text, st.one_of(st.integers(2, 100), st.sampled_from([1_000, 10_000, 50_000])))
# A few examples up to ~1 MB.
huge = st.builds(_repeat_to, nonempty_text, st.sampled_from([1 << 16, 1 << 18, 1 << 20]))
# Code that passes when the fake sandbox says so, in the shapes models write it.
solutions = st.sampled_from(["def f(x):\n    return x + 1\n", "class Solution:\n    def f(self, x):\n        return x + 1\n",
                             "print(int(input()) + 1)\n", "    return x + 1\n", "42"])
good_completions = st.builds(lambda before, code, tag, after: (f"{before}```{tag}\n{code}```{after}" if tag is not None
                                                               else before + code + after),
                             small_text, solutions, st.none() | st.sampled_from(["python", "", "py"]), small_text)
mixed = st.lists(st.one_of(small_text, pieces, deep_code, repeated, good_completions), max_size=6).map("".join)
completions = st.one_of(mixed, mixed, mixed, good_completions, good_completions, huge)  # one in six up to 1 MB
prompts = st.none() | st.sampled_from(["", "def f(x):\n", "<|im_start|>user\nWrite f.<|im_end|>\n<|im_start|>assistant\n",
                                       "<think>", "```python\n"]) | small_text


# --- labels ------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30) | \
    st.sampled_from([2 ** 64, -(2 ** 63) - 1, -0.0, float("nan"), float("inf"), "\ud800", "\x00", ""])
json_values = st.recursive(json_scalars,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                           max_leaves=20)
test_sources = st.one_of(st.sampled_from(CODE), small_text, deep_code)


def _nested_list(n: int) -> object:
    value: object = []
    for _ in range(n):
        value = [value]
    return value


def _nested_dict(n: int) -> object:
    value: object = {}
    for _ in range(n):
        value = {"a": value}
    return value


deep_objects = st.builds(lambda f, n: f(n), st.sampled_from([_nested_list, _nested_dict]),
                         st.sampled_from([50, 199, 200, 201, 1_000, 5_000, 50_000]))
deep_json_text = st.builds(lambda o, n: o * n + "1" + {"[": "]", '{"a":': "}"}[o] * n,
                           st.sampled_from(["[", '{"a":']), st.sampled_from([199, 200, 201, 1_000, 100_000]))
cases_io = st.lists(st.one_of(st.text(max_size=10), st.lists(st.text(max_size=5), max_size=3), json_scalars), max_size=4)

pytest_labels = st.fixed_dictionaries({"pytest": test_sources | json_values})
assert_labels = st.fixed_dictionaries({"tests": st.lists(test_sources, max_size=5) | json_values},
                                      optional={"setup": test_sources | json_values})
mbpp_labels = st.fixed_dictionaries({"test_list": st.lists(test_sources, max_size=4) | json_values},
                                    optional={"test_imports": st.lists(st.sampled_from(["import math", "import re"]))
                                              | json_values,
                                              "test_setup_code": test_sources | json_values})
check_labels = st.fixed_dictionaries({"test": test_sources | json_values,
                                      "entry_point": st.sampled_from(["f", "g", "Solution().f", ""]) | json_values},
                                     optional={"prompt": prompts | json_values})
stdio_labels = st.fixed_dictionaries({"inputs": cases_io | json_values, "outputs": cases_io | json_values})
call_labels = st.fixed_dictionaries({"fn_name": st.sampled_from(["add", "f", ""]) | json_values,
                                     "inputs": st.lists(st.lists(json_values, max_size=3), max_size=3) | json_values,
                                     "outputs": st.lists(json_values, max_size=3) | json_values})
open_r1_labels = st.fixed_dictionaries({"test_cases": st.lists(st.fixed_dictionaries(
    {"input": st.text(max_size=10) | json_values, "output": st.text(max_size=10) | json_values},
    optional={"type": st.sampled_from(["stdin_stdout", "function_call"]) | json_values}), max_size=3) | json_values},
    optional={"language": st.sampled_from(["python", "Python3", "cpp"]) | json_values})
apps_labels = st.builds(lambda inner, as_text: {"input_output": json.dumps(inner) if as_text else inner},
                        stdio_labels | call_labels | json_values, st.booleans())
math_labels = st.one_of(st.sampled_from(["42", "\\frac{1}{2}", "Janet has 3.\n#### 72", "####", " ", "x" * 1001]),
                        st.integers(), st.floats(), st.fixed_dictionaries({"answer": json_values}))
kind_labels = st.builds(lambda label, kind: {**label, "kind": kind} if isinstance(label, dict) else label,
                        st.one_of(pytest_labels, assert_labels, check_labels, stdio_labels, call_labels),
                        st.sampled_from(["pytest", "asserts", "check", "stdio", "call", "math", "nope", ""]) | json_values)
good_labels = st.sampled_from([
    {"pytest": "from solution import f\n\ndef test_a():\n    assert f(1) == 2\n\ndef test_b():\n    assert f(2) == 3\n"},
    {"tests": ["assert f(1) == 2", "assert f(2) == 3"], "setup": "import math"},
    {"test_list": ["assert f(1) == 2"], "test_imports": ["import math"], "test_setup_code": ""},
    {"test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n", "entry_point": "f",
     "prompt": "def f(x):\n"},
    {"inputs": ["1\n", "2\n"], "outputs": ["2\n", "3\n"]},
    {"fn_name": "f", "inputs": [[1], [2]], "outputs": [2, 3]},
    {"language": "python", "test_cases": [{"input": "1\n", "output": "2\n", "type": "stdin_stdout"}]},
    {"input_output": json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})},
    {"input_output": json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [2]})},
    {"kind": "pytest", "pytest": "def test_a():\n    pass\n"},
    "42", 42, {"answer": "\\frac{1}{2}"}, "Natalia sold 48 clips.\n#### 72",
])
label_objects = st.one_of(pytest_labels, assert_labels, mbpp_labels, check_labels, stdio_labels, call_labels, open_r1_labels,
                          apps_labels, math_labels, kind_labels, json_values, deep_objects)


def _as_json_text(label: object) -> object:
    try:
        return json.dumps(label)
    except (ValueError, RecursionError):
        return label


# Huge labels: many tests, long sources.
huge_labels = st.builds(lambda src, n, fmt: [{"tests": [src] * n}, {"inputs": ["1\n"] * n, "outputs": ["1\n"] * n},
                                             {"pytest": "def test_a():\n    pass\n" * n},
                                             {"test": "def check(candidate):\n" + f"    assert candidate({src!r})\n" * n,
                                              "entry_point": "f"}][fmt],
                        st.sampled_from(["assert f(1) == 2", "assert True"]), st.sampled_from([100, 1_000, 3_000]),
                        st.integers(0, 3)).map(lambda label: _cap_check(label))


def _cap_check(label: dict) -> dict:
    """A check function of 500 asserts is plenty (the time bound is per byte)."""
    if "test" in label and label["test"].count("\n") > 501:
        label = {**label, "test": "\n".join(label["test"].split("\n")[:501]) + "\n"}
    return label
# Numbers past int's string-conversion limit (4300 digits) only as JSON text: Python's repr of them fails.
huge_number_text = st.sampled_from(["9" * 5000, '{"answer": ' + "9" * 5000 + "}",
                                    '{"fn_name": "f", "inputs": [[1]], "outputs": [' + "9" * 5000 + "]}",
                                    "1e999", '{"answer": 1e999}', "NaN", '{"answer": -Infinity}'])
labels = st.one_of(good_labels, good_labels.map(_as_json_text), label_objects, label_objects.map(_as_json_text), deep_json_text,
                   huge_labels, huge_number_text, st.binary(max_size=40),
                   st.sampled_from([set(), object(), b"\xff\xfe", bytearray(b"{}"), ...]))


# --- the fake sandbox's answers ----------------------------------------------------

adversarial_text = st.one_of(st.text(max_size=40), st.sampled_from(BAD_CODE_POINTS), huge.map(lambda s: s[:1 << 18]),
                             st.lists(st.sampled_from(BAD_CODE_POINTS + ["x", "::", "[", "]"]), max_size=20).map("".join))
test_names = st.one_of(st.sampled_from(["test_a", "test_case_0", "test_assert_0", "test_check_0", "check", ""]), adversarial_text)
test_results = st.builds(
    lambda nodeid, name, cls, outcome, duration, message, exc: TestResult(
        nodeid=nodeid, name=name, cls=cls, outcome=outcome, duration_s=duration, message=message, exc_type=exc),
    adversarial_text, st.none() | test_names, st.none() | test_names, st.sampled_from(list(Outcome)),
    st.floats(allow_nan=True, allow_infinity=True), st.none() | adversarial_text,
    st.none() | st.sampled_from(["rbcheck.CaseTimeout", "rbcheck.SolutionImportError", "AssertionError"]) | adversarial_text)
run_results = st.builds(
    lambda verdict, tests, duration, test_duration, exit_code, stdout, stderr, truncated, tampered, message, files: RunResult(
        verdict=verdict, tests=tuple(tests), duration_s=duration, test_duration_s=test_duration, exit_code=exit_code,
        stdout=stdout, stderr=stderr, output_truncated=truncated, tampered=tampered, message=message, files=files),
    st.sampled_from(list(Verdict)), st.lists(test_results, max_size=4), st.floats(), st.floats(),
    st.none() | st.integers(-(1 << 70), 1 << 70), adversarial_text, adversarial_text, st.booleans(), st.booleans(),
    adversarial_text, st.dictionaries(adversarial_text, adversarial_text, max_size=2))
sandbox_errors = st.sampled_from([SandboxError("engine down \ud800"), EngineUnavailable("no engine"), ImageMissing("no image"),
                                  ContainerLost("lost"), HarnessError("bad report \x00")])
_DEF_TEST = re.compile(r"^\s*def (test\w*)\(", re.MULTILINE)


def _echo_tests(outcomes: list[Outcome], verdict: Verdict, message: str):
    """An answer naming the tests the request holds, with drawn outcomes (so that passes count)."""
    def answer(request: RunRequest) -> RunResult:
        names = [n for module in request.tests.values() for n in _DEF_TEST.findall(module)]
        tests = tuple(TestResult(nodeid=f"test_solution.py::{n}", name=n, outcome=outcomes[i % len(outcomes)])
                      for i, n in enumerate(names))
        return RunResult(verdict=verdict, tests=tests, message=message, stdout=message)
    return answer


answers = st.one_of(run_results, sandbox_errors,
                    st.builds(_echo_tests, st.lists(st.sampled_from(list(Outcome)), min_size=1, max_size=3),
                              st.sampled_from([Verdict.PASSED, Verdict.FAILED]), adversarial_text))


class FuzzSandbox(FakeSandbox):
    """A `FakeSandbox` that never runs out: it answers every request, cycling
    through the answers drawn for the example; closable like a real one."""

    def __init__(self, *answers):
        super().__init__(*answers)
        self._cycle = list(answers)

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        if not self.answers:
            self.answers = list(self._cycle)
        return super().submit(request)

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


class SwitchSandbox:
    """One sandbox object for a long-lived registry or service; each example
    plugs in its own `FuzzSandbox`."""

    def __init__(self) -> None:
        self.current: FuzzSandbox = FuzzSandbox(RunResult(verdict=Verdict.PASSED))

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        return self.current.submit(request)

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


def jsonable(value) -> bool:
    """Whether `value` can be written as JSON (a label a JSON request or line can carry)."""
    try:
        json.dumps(value)
        return True
    except (ValueError, TypeError, RecursionError):
        return False
