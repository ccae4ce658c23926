"""`rewards.CodeReward` end to end against the fake sandbox (see conftest.py)."""

import json
import logging

import pytest

from rewardbox.rewards import CodeReward, GradingPolicy, Sample
from rewardbox.sandbox import EngineUnavailable, Limits, Outcome, Verdict

P, F = Outcome.PASSED, Outcome.FAILED
TESTS = ("from solution import add\n\n"
         "def test_small():\n    assert add(1, 2) == 3\n\n"
         "def test_zero():\n    assert add(0, 0) == 0\n\n"
         "def test_negative():\n    assert add(-1, 1) == 0\n\n"
         "def test_big():\n    assert add(10**20, 1) == 10**20 + 1\n")
LABEL = {"pytest": TESTS}
CODE = "def add(a, b):\n    return a + b\n"
COMPLETION = f"Here:\n```python\n{CODE}```<|im_end|>"


def four(*outcomes: Outcome) -> list[tuple[str, Outcome]]:
    return list(zip(["test_small", "test_zero", "test_negative", "test_big"], outcomes))


def test_passing_run(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.PASSED, *four(P, P, P, P), duration_s=0.4))
    limits = Limits(timeout_s=2.0)

    g = CodeReward(sandbox=box, limits=limits)(COMPLETION, LABEL)

    assert (g.verdict, g.reward, g.score, g.passed, g.total) == (Verdict.PASSED, 1.0, 1.0, 4, 4)
    assert g.duration_s == 0.4
    [request] = box.requests
    assert request.files == {"solution.py": CODE}  # the extracted code, not the raw completion
    assert request.tests == {"test_solution.py": TESTS}
    assert request.limits == limits


def test_partial_credit(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.FAILED, *four(P, F, Outcome.SKIPPED, P)))

    g = CodeReward(sandbox=box)(COMPLETION, json.dumps(LABEL))

    assert (g.verdict, g.reward, g.score, g.passed, g.total) == (Verdict.FAILED, 0.5, 0.75, 2, 4)


def test_tests_the_run_never_reported_count_as_failed(fake_sandbox, result):
    # e.g. the completion called os._exit(0) during the second test
    box = fake_sandbox(result(Verdict.PASSED, *four(P)))

    g = CodeReward(sandbox=box)(COMPLETION, LABEL)

    assert (g.verdict, g.reward, g.passed, g.total) == (Verdict.FAILED, 0.25, 1, 4)


@pytest.mark.parametrize("passes, reward, passed", [
    pytest.param((F, F), -0.5, 0, id="nothing-passed"),
    pytest.param((P, P), 0.5, 2, id="passes-before-the-deadline-count"),
])
def test_timeout(fake_sandbox, result, passes, reward, passed):
    box = fake_sandbox(result(Verdict.TIMEOUT, *four(*passes), message="deadline exceeded"))

    g = CodeReward(sandbox=box)(COMPLETION, LABEL)

    assert (g.verdict, g.reward, g.passed, g.total) == (Verdict.TIMEOUT, reward, passed, 4)


@pytest.mark.parametrize("verdict, reward", [
    (Verdict.SYNTAX_ERROR, -1.0),
    (Verdict.IMPORT_ERROR, -1.0),
    (Verdict.COLLECTION_ERROR, -1.0),
    (Verdict.OUT_OF_MEMORY, -1.0),
    (Verdict.OUTPUT_LIMIT, -1.0),
    (Verdict.KILLED, -1.0),
])
def test_penalties(fake_sandbox, result, verdict, reward):
    box = fake_sandbox(result(verdict, *four(P, P), message="what happened"))

    g = CodeReward(sandbox=box)(COMPLETION, LABEL)

    assert (g.verdict, g.reward, g.passed, g.total, g.metadata["message"]) == (verdict, reward, 0, 4, "what happened")
    assert len(box.requests) == 1


@pytest.mark.parametrize("completion", ["I cannot do this.", "", "```bash\nls\n```", "<think>hmm, maybe def add"])
def test_no_code_starts_no_run(fake_sandbox, completion):
    box = fake_sandbox()  # any request would fail the test

    g = CodeReward(sandbox=box)(completion, LABEL)

    assert box.requests == []
    assert (g.verdict, g.reward, g.score, g.passed, g.total) == (Verdict.NO_CODE, -1.0, 0.0, 0, 4)


@pytest.mark.parametrize("label", [None, "not json", 42, {"kind": "nope"}, {"pytest": "def helper(): pass"},
                                   {"pytest": "def test_a(:"}])
def test_unusable_label_gives_no_reward(fake_sandbox, caplog, label):
    box = fake_sandbox()

    with caplog.at_level(logging.ERROR, logger="rewardbox.rewards.code"):
        future = CodeReward(sandbox=box).submit(Sample(id="s-1", completion=COMPLETION, label=label))

    g = future.result(timeout=0)
    assert box.requests == []
    assert (g.reward, g.score, g.verdict) == (None, None, None)
    assert g.metadata["error"]
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert "sample s-1: unusable label" in caplog.records[0].getMessage()


def test_label_with_unhashable_kind_gives_no_reward(fake_sandbox):
    box = fake_sandbox()

    g = CodeReward(sandbox=box)(COMPLETION, {"kind": ["pytest"], "pytest": TESTS})

    assert (g.reward, g.verdict) == (None, None)
    assert box.requests == []


def test_custom_policy_is_used(fake_sandbox, result):
    policy = GradingPolicy(timeout_reward=-0.1, no_code_reward=-0.3)
    reward = CodeReward(sandbox=fake_sandbox(result(Verdict.TIMEOUT)), policy=policy)

    assert reward(COMPLETION, LABEL).reward == -0.1
    assert reward("no code here", LABEL).reward == -0.3


def test_prompt_is_stripped_before_extraction(fake_sandbox, result):
    prompt = "<|im_start|>user\nExample:\n```python\ndef add(a, b): pass\n```<|im_end|>\n<|im_start|>assistant\n"
    box = fake_sandbox(result(Verdict.PASSED, *four(P, P, P, P)))

    CodeReward(sandbox=box)(prompt + COMPLETION, LABEL, prompt=prompt)

    assert box.requests[0].files == {"solution.py": CODE}


def test_score_many_keeps_sample_order(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.FAILED, *four(P)), result(Verdict.TIMEOUT),
                       result(Verdict.PASSED, *four(P, P, P, P)))
    samples = [
        Sample(id=0, completion=COMPLETION, label=LABEL),
        Sample(id=1, completion="nothing", label=LABEL),
        Sample(id=2, completion=COMPLETION, label="{}"),
        Sample(id=3, completion=COMPLETION, label=LABEL),
        Sample(id=4, completion=COMPLETION, label=LABEL),
    ]

    grades = CodeReward(sandbox=box).score_many(samples)

    assert [g.reward for g in grades] == [0.25, -1.0, None, -0.5, 1.0]
    assert len(box.requests) == 3


def test_grade_waits_for_the_run(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.PASSED, *four(P, P, P, P)), defer=True)

    future = CodeReward(sandbox=box).submit(Sample(completion=COMPLETION, label=LABEL))

    assert not future.done()
    box.finish()
    assert future.result(timeout=0).reward == 1.0


def test_our_failures_raise_instead_of_rewarding(fake_sandbox):
    box = fake_sandbox(EngineUnavailable("the Docker engine does not answer"), defer=True)
    future = CodeReward(sandbox=box).submit(Sample(completion=COMPLETION, label=LABEL))
    box.finish()

    with pytest.raises(EngineUnavailable, match="does not answer"):
        future.result(timeout=0)


def test_samples_are_frozen():
    sample = Sample(completion="x", label={})

    with pytest.raises(ValueError, match="frozen"):
        sample.completion = "y"
    assert sample.completion == "x"
