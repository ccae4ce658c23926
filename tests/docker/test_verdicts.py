"""One test per verdict of an ordinary completion, graded end to end:
completion + label -> container -> `Grade`."""

import pytest
from add_task import ADD_TESTS, LABEL, NAMES, outcomes

from rewardbox.sandbox import Outcome, Verdict


def test_all_pass(code_reward):
    grade = code_reward.grade("def add(a, b):\n    return a + b\n", LABEL)

    assert grade.verdict is Verdict.PASSED
    assert grade.reward == 1.0
    assert grade.score == 1.0
    assert (grade.passed, grade.total) == (3, 3)
    assert outcomes(grade) == [(n, Outcome.PASSED) for n in NAMES]


def test_partial_pass_is_graded(code_reward):
    # Right unless an argument is zero: test_zero fails, the other two pass.
    completion = "def add(a, b):\n    return a + b if a and b else -1\n"

    grade = code_reward.grade(completion, LABEL)

    assert grade.verdict is Verdict.FAILED
    assert round(grade.reward, 4) == 0.6667
    assert grade.reward == pytest.approx(2 / 3)
    assert grade.score == pytest.approx((2 / 3 + 1) / 2)
    assert (grade.passed, grade.total) == (2, 3)
    assert outcomes(grade) == [("test_small", Outcome.PASSED), ("test_zero", Outcome.FAILED),
                               ("test_negative", Outcome.PASSED)]


def test_all_fail(code_reward):
    grade = code_reward.grade("def add(a, b):\n    return a * b + 7\n", LABEL)

    assert grade.verdict is Verdict.FAILED
    assert grade.reward == 0.0
    assert (grade.passed, grade.total) == (0, 3)
    assert outcomes(grade) == [(n, Outcome.FAILED) for n in NAMES]
    assert "assert 9 == 3" in grade.tests[0].message


def test_syntax_error(code_reward):
    grade = code_reward.grade("def add(a, b)\n    return a + b\n", LABEL)

    assert grade.verdict is Verdict.SYNTAX_ERROR
    assert grade.reward == -1.0
    assert grade.score == 0.0
    assert (grade.passed, grade.total) == (0, 3)
    assert grade.tests == ()
    assert grade.message.startswith("SyntaxError:")
    assert "solution.py, line 1" in grade.message


def test_import_error(code_reward):
    completion = "import numpy_does_not_exist\n\ndef add(a, b):\n    return a + b\n"

    grade = code_reward.grade(completion, LABEL)

    assert grade.verdict is Verdict.IMPORT_ERROR
    assert grade.reward == -1.0
    assert (grade.passed, grade.total) == (0, 3)
    assert grade.tests == ()
    assert "numpy_does_not_exist" in grade.message


def test_markdown_fence_with_prose(code_reward):
    completion = (
        "Sure! We just add the two numbers:\n\n"
        "```python\n"
        "def add(a, b):\n"
        "    return a + b\n"
        "```\n\n"
        "This runs in O(1). Let me know if you need anything else!"
    )

    grade = code_reward.grade(completion, LABEL)

    assert grade.verdict is Verdict.PASSED
    assert grade.reward == 1.0
    assert outcomes(grade) == [(n, Outcome.PASSED) for n in NAMES]


@pytest.fixture
def no_containers(sandbox, monkeypatch):
    """Fails the test if anything reaches the sandbox."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a container was requested")

    monkeypatch.setattr(sandbox, "submit", refuse)
    monkeypatch.setattr(sandbox.engine, "create", refuse)
    return calls


def test_no_code_starts_no_container(code_reward, no_containers):
    grade = code_reward.grade("I'm sorry, I can't solve this problem.", LABEL)

    assert grade.verdict is Verdict.NO_CODE
    assert grade.reward == -1.0
    assert grade.score == 0.0
    assert (grade.passed, grade.total) == (0, 3)
    assert no_containers == []


@pytest.mark.parametrize("label", [
    pytest.param({"tests": ADD_TESTS}, id="unknown-keys"),
    pytest.param("{not json", id="not-json"),
    pytest.param(["pytest", ADD_TESTS], id="not-an-object"),
    pytest.param({"pytest": "from solution import add\n"}, id="no-tests"),
    pytest.param({"kind": "stdin", "pytest": ADD_TESTS}, id="unknown-kind"),
])
def test_unusable_label_gives_no_reward(code_reward, no_containers, label):
    grade = code_reward.grade("def add(a, b):\n    return a + b\n", label)

    assert grade.reward is None
    assert grade.score is None
    assert grade.verdict is None
    assert grade.error
    assert no_containers == []
