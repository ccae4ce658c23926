"""Real contest problems in every compiled (or checked) language, graded
exactly through `CodeReward`, the user's path.

The fixtures (tests/data/languages/, ours) hold stdio problems
(problems.json) and, per language, solutions a model writes: an accepted one,
a wrong one that passes some cases, and the commonest compile error (C++'s
missing semicolon, Java's wrong type, Go's unused variable or import, Rust's
mismatched types, JavaScript's syntax error caught by `node --check`), plus
the languages' edge cases (C++'s `#ifndef ONLINE_JUDGE freopen`, a recursive
DFS 1e5 frames deep in C++ and Java and 1e6 deep in C++, past the default
8 MB stack as a contest judge allows, Java's `Scanner` over 2e5 numbers and
`public class Solution`). Each is graded to its exact verdict, passed count
and reward; a compile error keeps the compiler's message. A language whose
image is missing fails here: its samples are unscorable, never skipped.
"""

import json
from concurrent.futures import Future
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rewardbox.rewards import CodeReward, GradingPolicy, Sample
from rewardbox.rewards.grade import Grade
from rewardbox.sandbox import Verdict
from rewardbox.sandbox.languages import default_image
from rewardbox.sandbox.modes import make_sandbox

DATA = Path(__file__).resolve().parents[1] / "data" / "languages"
LANGUAGES = ("cpp", "cpp20", "java", "javascript", "go", "rust")
# The fence tag a model writes: C++20 code is fenced as cpp like any C++.
FENCES = {"cpp": "cpp", "cpp20": "cpp", "java": "java", "javascript": "javascript", "go": "go", "rust": "rust"}
POLICY = GradingPolicy()  # the session's CodeReward grades with the default policy


def large_sum_case(n: int) -> dict[str, str]:
    """The generated case of large-sum (problems.json): n values of both signs
    up to 1e9, whose sum passes 2^31."""
    values = [(i * 1000003) % 2000000001 - 1000000000 for i in range(1, n + 1)]
    return {"input": f"{n}\n{' '.join(map(str, values))}\n", "output": f"{sum(values)}\n"}


@cache
def problems() -> dict[str, Any]:
    found = json.loads((DATA / "problems.json").read_text())
    for problem in found.values():
        problem["cases"] = [large_sum_case(**c["generated"]) if "generated" in c else c for c in problem["cases"]]
    return found


@cache
def solutions(lang: str) -> list[dict[str, Any]]:
    data = json.loads((DATA / f"{lang}.json").read_text())
    assert data["language"] == lang
    return data["solutions"]


def label(lang: str, problem: str) -> dict[str, Any]:
    found = problems()[problem]
    cases = found["cases"]
    limit = {"case_timeout_s": found["case_timeout_s"]} if "case_timeout_s" in found else {}
    return {"language": lang, "inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases], **limit}


def completion(lang: str, code: list[str]) -> str:
    body = "\n".join(code)
    return f"Read the input, then print the answer.\n\n```{FENCES[lang]}\n{body}\n```\n\nThis runs in O(n).\n"


SOLUTIONS = [(lang, s["problem"], s["name"]) for lang in LANGUAGES for s in solutions(lang)]
def solution(lang: str, problem: str, name: str) -> dict[str, Any]:
    return next(s for s in solutions(lang) if (s["problem"], s["name"]) == (problem, name))


def show(grade: Grade) -> str:
    tests = [(t.name, t.outcome.value, (t.message or "")[-300:]) for t in grade.tests]
    return f"{grade.reward} {grade.verdict} {grade.passed}/{grade.total} {grade.message!r} {grade.error!r} {tests}"


def check(grade: Grade, lang: str, expected: dict[str, Any]) -> None:
    total = len(problems()[expected["problem"]]["cases"])
    # Unscorable (reward None, the image's build command in `error`) when the language's image is missing.
    assert grade.error is None and grade.reward is not None, show(grade)
    assert grade.verdict is Verdict(expected["verdict"]), show(grade)
    assert grade.total == total, show(grade)
    if grade.verdict is Verdict.COMPILE_ERROR:
        assert grade.reward == POLICY.crash_reward == -1.0, show(grade)
        assert grade.passed == 0 and grade.tests == (), show(grade)
        assert expected["message"] in grade.message.replace("‘", "'").replace("’", "'"), show(grade)
        return
    passed = expected["passed"]
    assert grade.passed == passed, show(grade)
    assert grade.reward == POLICY.reward(grade.verdict, passed, total), show(grade)
    if grade.verdict is Verdict.PASSED:
        assert passed == total and grade.reward == 1.0, show(grade)
    else:
        assert 0 < passed < total, "a wrong solution here passes some cases: partial credit"
        assert grade.message == "", show(grade)  # wrong answers, not a crash of the run
        # Each case that did not pass ran to its end and printed another answer.
        assert sum(t.outcome.value == "failed" for t in grade.tests) == total - passed, show(grade)


@pytest.fixture(scope="module")
def graded(code_reward: CodeReward) -> dict[tuple[str, str, str], Grade]:
    """Every fixture graded at once on the session's sandbox (pooled by default)."""
    futures: dict[tuple[str, str, str], Future[Grade]] = {}
    for key in SOLUTIONS:
        lang, problem, _ = key
        futures[key] = code_reward.submit_grade(Sample(
            id="/".join(key), completion=completion(lang, solution(*key)["code"]), label=label(lang, problem)))
    return {key: future.result() for key, future in futures.items()}


def test_fixtures_cover_every_language() -> None:
    """Two problems per language with an accepted, a wrong and a compile error each."""
    for lang in LANGUAGES:
        by_problem: dict[str, set[str]] = {}
        for s in solutions(lang):
            by_problem.setdefault(s["problem"], set()).add(s["verdict"])
        complete = [p for p, verdicts in by_problem.items() if {"passed", "failed", "compile_error"} <= verdicts]
        assert len(complete) >= 2, (lang, by_problem)
    assert len(problems()["large-sum"]["cases"][-1]["input"].split()) == 200001


def test_large_sum_case_passes_int32() -> None:
    """The generated case is what the wrong solutions must fail: its sum and
    partial sums leave the 32-bit range."""
    case = large_sum_case(200000)
    assert abs(int(case["output"])) > 2**31


def test_images_exist(sandbox) -> None:
    """Every language's image is on the engine (`rewardbox image build --language <lang>`): a missing one fails."""
    missing = []
    for lang in LANGUAGES:
        try:
            sandbox.engine.require_image(default_image(lang))
        except Exception as exc:  # noqa: BLE001 - reported, whatever the engine raised
            missing.append(f"{lang}: {exc}")
    assert missing == []


@pytest.mark.parametrize(("lang", "problem", "name"), SOLUTIONS, ids=["/".join(k) for k in SOLUTIONS])
def test_graded_exactly(graded, lang: str, problem: str, name: str) -> None:
    check(graded[lang, problem, name], lang, solution(lang, problem, name))


def test_cold_sandbox() -> None:
    """The same grades in the cold mode's `Sandbox` (a fresh container a run):
    each language's accepted Theatre Square and one compile error."""
    chosen = [(lang, "theatre-square", s["name"]) for lang in LANGUAGES for s in solutions(lang)
              if s["problem"] == "theatre-square" and s["verdict"] == "passed"]
    chosen.append(("go", "theatre-square", "unused-variable"))
    box = make_sandbox("cold", max_containers=2, retry_s=20)
    try:
        reward = CodeReward(box)
        futures = {key: reward.submit_grade(Sample(id="/".join(key), completion=completion(key[0], solution(*key)["code"]),
                                                   label=label(key[0], key[1]))) for key in chosen}
        for key, future in futures.items():
            check(future.result(), key[0], solution(*key))
    finally:
        box.close()
