"""All of HumanEval (vendored: tests/data/HumanEval.jsonl.gz) through the check
format: each canonical solution, which continues its prompt, earns full reward;
a broken variant of every eighth does not. One batch, scored in parallel."""

import ast
import gzip
import json
from pathlib import Path

import pytest

from rewards import RewardOutput, Sample, parse_label

DATA = Path(__file__).resolve().parents[1] / "data" / "HumanEval.jsonl.gz"
with gzip.open(DATA, "rt", encoding="utf-8") as _f:
    PROBLEMS = {p["task_id"]: p for p in map(json.loads, _f)}
BROKEN_EVERY = 8


def label(problem: dict) -> dict:
    return {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}


def broken(problem: dict) -> str:
    """The canonical body with the entry point's last `return` (by line) made
    `return None`: still valid code, no longer right."""
    program = problem["prompt"] + problem["canonical_solution"]
    function = next(n for n in ast.parse(program).body
                    if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"])
    last = max((n for n in ast.walk(function) if isinstance(n, ast.Return)), key=lambda n: n.lineno)
    lines = program.splitlines(keepends=True)
    first = lines[last.lineno - 1]
    lines[last.lineno - 1:last.end_lineno] = [first[:len(first) - len(first.lstrip())] + "return None\n"]
    changed = "".join(lines)
    assert changed.startswith(problem["prompt"]) and changed != program
    return changed[len(problem["prompt"]):]


BROKEN_IDS = list(PROBLEMS)[::BROKEN_EVERY]


@pytest.fixture(scope="module")
def graded(code_reward) -> dict[tuple[str, str], RewardOutput]:
    samples = {("canonical", task): Sample(id=task, completion=p["canonical_solution"], label=label(p))
               for task, p in PROBLEMS.items()}
    samples |= {("broken", task): Sample(id=task, completion=broken(PROBLEMS[task]), label=label(PROBLEMS[task]))
                for task in BROKEN_IDS}
    return dict(zip(samples, code_reward.score_many(list(samples.values())), strict=True))


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

    assert out.metadata["verdict"] == "passed", show(out)
    assert out.reward == 1.0
    assert out.score == 1.0
    total = parse_label(label(PROBLEMS[task])).expected.total
    assert out.metadata["passed"] == out.metadata["total"] == total


@pytest.mark.parametrize("task", BROKEN_IDS)
def test_broken_solution_loses_credit(graded, task):
    out = graded[("broken", task)]

    assert out.metadata["error"] is None
    assert out.metadata["verdict"] == "failed", show(out)
    assert out.reward < 1.0
    assert out.metadata["passed"] < out.metadata["total"]
