"""All of HumanEval (vendored: tests/data/HumanEval.jsonl.gz) through the check
format: each canonical solution, which continues its prompt, earns full reward
whether the prompt comes with the label or from the trainer, split or run whole;
a full rewrite with a chat prompt does too, except where the check needs the
prompt's helpers (then the label is unusable, never graded with the solution's
helper). Wrong solutions (the last `return` broken; returning None) on every
eighth problem fail each split test exactly where the whole check, run
statement by statement on this host, fails that statement; solutions that
redefine the prompt's helper (HumanEval/32, 38, 50) fail. One batch, scored in
parallel.

The same problems as a dataset's pytest modules (`pytest_module`: one test
function per test of the split check), run with the completion in its own
process behind the stand-in `solution`: every canonical solution passes, and
every wrong one passes exactly the tests it passes as a check label."""

import ast
import copy
import gzip
import json
from pathlib import Path

import pytest

from rewardbox.rewards import RewardOutput, Sample, parse_label
from tests.humaneval_variants import broken_program

DATA = Path(__file__).resolve().parents[1] / "data" / "HumanEval.jsonl.gz"
with gzip.open(DATA, "rt", encoding="utf-8") as _f:
    PROBLEMS = {p["task_id"]: p for p in map(json.loads, _f)}
BROKEN_EVERY = 8


def label(problem: dict) -> dict:
    return {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}


def bare_label(problem: dict) -> dict:
    """The label as a dataset with only test and entry point gives it."""
    return {"test": problem["test"], "entry_point": problem["entry_point"]}


def whole_label(problem: dict) -> dict:
    """The same check as one statement: never split, the reference run."""
    test = problem["test"].replace("def check(", "def _whole_check(", 1)
    return {**label(problem), "test": test + "\n\ndef check(candidate):\n    _whole_check(candidate)\n"}


CHAT = "Complete the task below.\n"
NEEDS_PROMPT = ["HumanEval/32", "HumanEval/38", "HumanEval/50"]  # checks calling a helper of the prompt
HELPER_HACKS = {
    "HumanEval/32": "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
}


def broken(problem: dict) -> str:
    """The body of `broken_program`, for a completion that continues the prompt."""
    return broken_program(problem)[len(problem["prompt"]):]


def returns_none(problem: dict) -> str:
    return "    return None\n"


def pytest_module(problem: dict) -> str:
    """The problem's check as a dataset's pytest module: the solution's names
    imported from `solution`, the label's setup (the test, the prompt's
    helpers), then one test function per test of the split check, its
    statements the same (parse_label's plan)."""
    plan = parse_label(label(problem))._plan
    modules = set(plan.modules)
    solution_names = sorted({name for alias, name in plan.proxies.items() if alias not in modules})
    lines = [f"from solution import {', '.join(solution_names)}"]
    lines += [f"try:\n    import {m}\nexcept ImportError:\n    pass" for m in sorted(modules)]
    lines += [plan.setup, ""]
    lines += [f"{alias} = {name}" for alias, name in plan.proxies.items() if alias not in modules and alias != name]
    for i, source in enumerate(plan.cases):
        body = "".join("    " + line + "\n" for line in source.splitlines()) or "    pass\n"
        lines += ["", f"def test_check_{i}():", body]
    return "\n".join(lines)


BROKEN_IDS = list(PROBLEMS)[::BROKEN_EVERY]
CHAT_IDS = list(dict.fromkeys(BROKEN_IDS + NEEDS_PROMPT))
WRONG = {"broken": broken, "none": returns_none}


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[tuple[str, str], RewardOutput]:
    samples = {}
    for task, p in PROBLEMS.items():
        samples[("canonical", task)] = Sample(id=task, completion=p["canonical_solution"], label=label(p))
        samples[("whole", task)] = Sample(id=task, completion=p["canonical_solution"], label=whole_label(p))
        samples[("sample-prompt", task)] = Sample(id=task, completion=p["canonical_solution"], label=bare_label(p),
                                                  prompt=p["prompt"])
    for task in CHAT_IDS:
        p = PROBLEMS[task]
        samples[("chat", task)] = Sample(id=task, completion=p["prompt"] + p["canonical_solution"],
                                         label=bare_label(p), prompt=CHAT)
    for task in BROKEN_IDS:
        p = PROBLEMS[task]
        for name, wrong in WRONG.items():
            samples[(name, task)] = Sample(id=task, completion=wrong(p), label=label(p))
            samples[(name + "-whole", task)] = Sample(id=task, completion=wrong(p), label=whole_label(p))
    for task, p in PROBLEMS.items():
        samples[("pytest", task)] = Sample(id=task, completion=p["prompt"] + p["canonical_solution"],
                                           label={"pytest": pytest_module(p)})
    for task in BROKEN_IDS:
        p = PROBLEMS[task]
        for name, wrong in WRONG.items():
            samples[("pytest-" + name, task)] = Sample(id=task, completion=p["prompt"] + wrong(p),
                                                       label={"pytest": pytest_module(p)})
    for task, hack in HELPER_HACKS.items():
        p = PROBLEMS[task]
        samples[("hack", task)] = Sample(id=task, completion=hack, label=label(p))
        samples[("hack-sample-prompt", task)] = Sample(id=task, completion=hack, label=bare_label(p),
                                                       prompt=p["prompt"])
    return dict(zip(samples, code_reward.score_many(list(samples.values())), strict=True))


def statement_outcomes(problem: dict, completion: str) -> list[bool]:
    """The whole check run on this host as HumanEval's own harness runs it
    (prompt, solution and test in one namespace; arguments and results copied,
    as our wire copies them), one statement of its body after another, a
    failing one not stopping the rest: whether each statement that calls the
    solution passes."""
    namespace: dict = {"__name__": "humaneval"}
    exec(compile(problem["prompt"] + completion + "\n" + problem["test"], "humaneval", "exec"), namespace)
    entry = problem["entry_point"]
    function = namespace[entry]
    namespace[entry] = lambda *a, **k: copy.deepcopy(function(*copy.deepcopy(a), **copy.deepcopy(k)))
    check = next(n for n in ast.parse(problem["test"]).body if isinstance(n, ast.FunctionDef) and n.name == "check")
    param = check.args.args[0].arg
    namespace[param] = namespace[entry]
    outcomes = []
    for statement in check.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # docstring
        calls = {param, entry} & {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
        try:
            exec(compile(ast.Module(body=[statement], type_ignores=[]), "check", "exec"), namespace)
            passed = True
        except Exception:  # noqa: BLE001 - a failing statement, whatever it raised
            passed = False
        if calls:
            outcomes.append(passed)
    return outcomes


def outcomes(out: RewardOutput) -> list[bool]:
    tests = sorted(out.metadata["tests"], key=lambda t: int(t["nodeid"].rsplit("_", 1)[1]))
    return [t["outcome"] == "passed" for t in tests]


def show(out: RewardOutput) -> str:
    failed = [(t["name"], (t["message"] or "")[-400:]) for t in out.metadata["tests"] if t["outcome"] != "passed"]
    return f"{out.reward} {out.metadata['verdict']} {out.metadata['message']!r} {failed}"


def test_the_vendored_data_is_all_of_humaneval():
    assert len(PROBLEMS) == 164
    assert list(PROBLEMS)[0] == "HumanEval/0" and list(PROBLEMS)[-1] == "HumanEval/163"
    assert len(BROKEN_IDS) == 21


@pytest.mark.parametrize("task", list(PROBLEMS))
def test_canonical_solution_passes(graded, task):
    out = graded[("canonical", task)]

    assert out.verdict == "passed", show(out)
    assert out.reward == 1.0
    assert out.score == 1.0
    total = parse_label(label(PROBLEMS[task])).expected.total
    assert out.passed == out.total == total


@pytest.mark.parametrize("task", BROKEN_IDS)
def test_broken_solution_loses_credit(graded, task):
    out = graded[("broken", task)]

    assert out.metadata["error"] is None
    assert out.verdict == "failed", show(out)
    assert out.reward < 1.0
    assert out.passed < out.total


@pytest.mark.parametrize("task", list(PROBLEMS))
def test_canonical_solution_passes_whole_and_with_the_trainers_code_prompt(graded, task):
    for form in ("whole", "sample-prompt"):
        out = graded[(form, task)]

        assert out.verdict == "passed", (form, show(out))
        assert out.reward == 1.0
    assert graded[("whole", task)].total == 1
    assert graded[("sample-prompt", task)].total == graded[("canonical", task)].total


@pytest.mark.parametrize("task", CHAT_IDS)
def test_a_rewrite_under_a_chat_prompt_passes_unless_the_check_needs_the_prompt(graded, task):
    out = graded[("chat", task)]

    if task in NEEDS_PROMPT:  # nothing trusted defines the helper: no reward, never the solution's helper
        assert out.reward is None, show(out)
        assert "give the label the task's prompt" in out.metadata["error"]
    else:
        assert out.reward == 1.0, show(out)


@pytest.mark.parametrize("wrong", list(WRONG))
@pytest.mark.parametrize("task", BROKEN_IDS)
def test_a_wrong_solution_fails_split_exactly_where_the_whole_check_fails(graded, task, wrong):
    split, whole = graded[(wrong, task)], graded[(wrong + "-whole", task)]
    completion = WRONG[wrong](PROBLEMS[task])

    assert whole.verdict in ("passed", "failed"), show(whole)
    assert (split.reward == 1.0) == (whole.reward == 1.0), (show(split), show(whole))
    if split.total > 1:
        assert outcomes(split) == statement_outcomes(PROBLEMS[task], completion), show(split)


@pytest.mark.parametrize("form", ["hack", "hack-sample-prompt"])
@pytest.mark.parametrize("task", list(HELPER_HACKS))
def test_redefining_the_prompts_helper_does_not_pass(graded, task, form):
    out = graded[(form, task)]

    assert out.verdict == "failed", show(out)
    assert out.reward == 0.0


@pytest.mark.parametrize("task", list(PROBLEMS))
def test_canonical_solution_passes_as_a_pytest_module(graded, task):
    out, check = graded[("pytest", task)], graded[("canonical", task)]

    assert out.verdict == "passed" and out.reward == 1.0, show(out)
    assert out.total == check.total


@pytest.mark.parametrize("wrong", list(WRONG))
@pytest.mark.parametrize("task", BROKEN_IDS)
def test_a_wrong_solution_passes_the_same_tests_as_a_pytest_module(graded, task, wrong):
    out, check = graded[("pytest-" + wrong, task)], graded[(wrong, task)]

    assert out.verdict == check.verdict, (show(out), show(check))
    assert (out.passed, out.total) == (check.passed, check.total)
    assert outcomes(out) == outcomes(check), (show(out), show(check))
