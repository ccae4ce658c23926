"""The CLI's pure helpers: reading rollout lines, writing result records, the summary.

`rewards.cli.main` builds a real `Sandbox`, so it belongs to the docker tier.
"""

import json
from concurrent.futures import Future

import pytest

from rewards import GradingPolicy, RewardOutput, Sample, grade, grade_no_code
from rewards.cli import _answer, _record, _sample, _summary
from rewards.code import output
from rewards.expected import ExpectedTests
from sandbox import EngineUnavailable, Outcome, RunResult, TestResult, Verdict

EXPECTED = ExpectedTests(counts={(None, "test_a"): 1, (None, "test_b"): 1})
POLICY = GradingPolicy()


def graded(verdict: Verdict, *outcomes: Outcome, **fields):
    tests = tuple(TestResult(nodeid=f"test_solution.py::{name}", name=name, outcome=o, duration_s=0.125)
                  for name, o in zip(["test_a", "test_b"], outcomes))
    g = grade(RunResult(verdict=verdict, tests=tests, **fields), EXPECTED, POLICY)
    return output(g.model_copy(update={"kind": "pytest"}))


def ungradable(error):
    return RewardOutput.unscorable(error, verdict=None)


# --- _sample ------------------------------------------------------------------

@pytest.mark.parametrize("line, expected", [
    pytest.param('{"id": 7, "completion": "x = 1", "label": {"pytest": "def test_a(): pass"}}\n',
                 Sample(id=7, completion="x = 1", label={"pytest": "def test_a(): pass"}), id="int-id"),
    pytest.param('{"id": "q-1", "completion": "c", "label": "{\\"pytest\\": \\"t\\"}", "prompt": "p"}',
                 Sample(id="q-1", completion="c", label='{"pytest": "t"}', prompt="p"), id="string-id-json-label"),
    pytest.param('{"completion": "c", "label": null}', Sample(completion="c", label=None), id="no-id-null-label"),
    pytest.param('{"id": 1, "completion": "c", "label": 3, "extra": [1, 2]}', Sample(id=1, completion="c", label=3),
                 id="extra-keys-ignored"),
    pytest.param('{"id": 2, "completion": [{"role": "assistant", "content": "x = 1"}], "label": 3}',
                 Sample(id=2, completion="x = 1", label=3), id="chat-completion"),
])
def test_rollout_lines_become_samples(line, expected):
    assert _sample(line, 1) == expected


@pytest.mark.parametrize("line, sample_id, error", [
    pytest.param('{"id": 5, "completion": "x", "label": ', None, "line 3: not JSON: Expecting value",
                 id="truncated-json"),
    pytest.param("not json at all", None, "line 3: not JSON: Expecting value", id="not-json"),
    pytest.param('{"id": 5, "label": {}}', 5, "line 3: not a rollout record: completion: Field required",
                 id="missing-completion-keeps-id"),
    pytest.param('{"id": "abc", "completion": 12, "label": {}}', "abc",
                 "line 3: not a rollout record: completion: Input should be a valid string", id="bad-completion-keeps-id"),
    pytest.param('{"id": "abc", "completion": [{"role": "user", "content": "x"}], "label": {}}', "abc",
                 "line 3: not a rollout record: completion: Input should be a valid string",
                 id="chat-completion-without-assistant-keeps-id"),
    pytest.param('{"id": {"nested": 1}, "completion": "x", "label": {}}', {"nested": 1},
                 "line 3: not a rollout record: id.str: Input should be a valid string", id="bad-id-kept-as-is"),
    pytest.param("[1, 2, 3]", None, "line 3: not a rollout record: ", id="array"),
    pytest.param('"a string"', None, "line 3: not a rollout record: ", id="string"),
    pytest.param("null", None, "line 3: not a rollout record: ", id="null"),
])
def test_unreadable_lines_become_answered_errors(line, sample_id, error):
    done = _sample(line, 3)

    assert isinstance(done, Future)
    assert done.done()
    g = done.result(timeout=0)
    assert (g.reward, g.score, g.metadata["verdict"]) == (None, None, None)
    assert g.metadata["error"].startswith(error)
    assert "\n" not in g.metadata["error"]  # one line, naming the field
    assert _record(done, g)["id"] == sample_id


# --- _record ------------------------------------------------------------------

def test_record_of_a_graded_sample():
    sample = Sample(id="q-9", completion="c", label={})
    g = graded(Verdict.FAILED, Outcome.PASSED, Outcome.FAILED, duration_s=1.234567, message="m" * 600)

    record = _record(sample, g)

    assert record == {
        "id": "q-9",
        "reward": 0.5,
        "score": 0.75,
        "verdict": "failed",
        "passed": 1,
        "total": 2,
        "duration_s": 1.2346,
        "message": "m" * 500,
        "error": None,
        "kind": "pytest",
        "tests": [
            {"nodeid": "test_solution.py::test_a", "outcome": "passed", "duration_s": 0.125},
            {"nodeid": "test_solution.py::test_b", "outcome": "failed", "duration_s": 0.125},
        ],
    }
    assert json.loads(json.dumps(record)) == record


def test_record_of_an_ungradable_sample():
    record = _record(Sample(id=3, completion="c", label=None), ungradable("label must be a JSON object"))

    assert record == {"id": 3, "reward": None, "score": None, "verdict": None, "error": "label must be a JSON object"}


def test_record_of_a_future_without_an_id():
    future: Future = Future()
    g = ungradable("broken")
    future.set_result(g)

    assert _record(future, g)["id"] is None


# --- _summary -----------------------------------------------------------------

def test_summary():
    grades = [
        graded(Verdict.PASSED, Outcome.PASSED, Outcome.PASSED),  # 1.0
        graded(Verdict.FAILED, Outcome.PASSED, Outcome.FAILED),  # 0.5
        graded(Verdict.TIMEOUT),  # -0.5
        output(grade_no_code(2, POLICY).model_copy(update={"kind": "pytest"})),  # -1.0
        ungradable("bad label"),  # not in the mean
    ]

    summary = _summary(grades, elapsed_s=2.0)

    assert summary.splitlines() == [
        "samples      5",
        "mean reward  0.000",
        "pass rate    0.200",
        "verdicts     failed 1, no_code 1, passed 1, timeout 1, unscorable 1",
        "throughput   2.50 samples/s (2.0 s)",
    ]


def test_summary_of_nothing():
    assert _summary([], elapsed_s=0.0).splitlines() == [
        "samples      0",
        "mean reward  0.000",
        "pass rate    0.000",
        "verdicts     ",
        "throughput   0.00 samples/s (0.0 s)",
    ]


def test_summary_when_nothing_was_gradable():
    lines = _summary([ungradable("a"), ungradable("b")], elapsed_s=1.0).splitlines()

    assert lines[1:4] == ["mean reward  0.000", "pass rate    0.000", "verdicts     unscorable 2"]


def test_a_sample_the_sandbox_failed_is_answered_unscored_not_penalised():
    failed: Future = Future()
    failed.set_exception(EngineUnavailable("the Docker engine is out of disk space (...)"))

    out = _answer(failed)

    assert (out.reward, out.score) == (None, None)
    assert out.metadata["sandbox_error"] is True
    assert out.metadata["error"] == "sandbox error: the Docker engine is out of disk space (...)"
