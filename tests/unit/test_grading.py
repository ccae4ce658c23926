"""The grading table of docs/grading.md, through `GradingPolicy` and `rewardbox.rewards.grade`."""

import pydantic
import pytest

from rewardbox.rewards import ExpectedTests, Grade, GradingPolicy, grade, grade_no_code
from rewardbox.rewards.policy import CRASHES
from rewardbox.sandbox import Limits, Outcome, RunRequest, RunResult, TestResult, Verdict

P, F = Outcome.PASSED, Outcome.FAILED
CRASH_VERDICTS = [Verdict.SYNTAX_ERROR, Verdict.COMPILE_ERROR, Verdict.IMPORT_ERROR, Verdict.COLLECTION_ERROR,
                  Verdict.OUT_OF_MEMORY, Verdict.OUTPUT_LIMIT, Verdict.KILLED]
# Four expected tests: test_a, test_b[0..1], TestC::test_d.
FOUR = ExpectedTests(counts={(None, "test_a"): 1, (None, "test_b"): 2, ("TestC", "test_d"): 1})
DEFAULT = GradingPolicy()


# --- the policy's table ---------------------------------------------------

def test_documented_defaults():
    assert (DEFAULT.timeout_reward, DEFAULT.crash_reward, DEFAULT.no_code_reward) == (-0.5, -1.0, -1.0)
    assert DEFAULT.verdict_rewards == {}
    assert DEFAULT.min_reward == -1.0


def test_crash_set_is_exactly_the_crash_verdicts():
    assert frozenset(CRASH_VERDICTS) == CRASHES
    assert len(set(CRASH_VERDICTS)) == 7  # each crash is a distinct verdict


@pytest.mark.parametrize("verdict, passed, total, reward", [
    (Verdict.PASSED, 4, 4, 1.0),
    (Verdict.FAILED, 3, 4, 0.75),
    (Verdict.FAILED, 1, 3, 1 / 3),
    (Verdict.FAILED, 0, 4, 0.0),
    (Verdict.FAILED, 0, 0, 0.0),  # nothing to pass earns nothing, never a ZeroDivisionError
    (Verdict.TIMEOUT, 3, 4, 0.75),  # tests passed before the deadline count
    (Verdict.TIMEOUT, 4, 4, 1.0),
    (Verdict.TIMEOUT, 0, 4, -0.5),  # the timeout penalty only when nothing passed
    (Verdict.TIMEOUT, 0, 0, -0.5),
    (Verdict.NO_CODE, 0, 4, -1.0),
    *[(v, 2, 4, -1.0) for v in CRASH_VERDICTS],
])
def test_default_rewards(verdict, passed, total, reward):
    assert DEFAULT.reward(verdict, passed=passed, total=total) == pytest.approx(reward)


@pytest.mark.parametrize("reward, score", [
    (1.0, 1.0), (0.75, 0.875), (0.5, 0.75), (0.0, 0.5), (-0.5, 0.25), (-1.0, 0.0),
    (2.0, 1.0), (-3.0, 0.0),  # out-of-range rewards are clamped into [0, 1]
])
def test_default_score(reward, score):
    assert DEFAULT.score(reward) == pytest.approx(score)


CUSTOM = GradingPolicy(timeout_reward=-0.25, crash_reward=-2.0, no_code_reward=-3.0)


@pytest.mark.parametrize("verdict, passed, reward, score", [
    (Verdict.TIMEOUT, 0, -0.25, 2.75 / 4),
    (Verdict.TIMEOUT, 2, 0.5, 3.5 / 4),
    (Verdict.KILLED, 4, -2.0, 0.25),
    (Verdict.SYNTAX_ERROR, 4, -2.0, 0.25),
    (Verdict.NO_CODE, 0, -3.0, 0.0),
    (Verdict.PASSED, 4, 1.0, 1.0),
])
def test_custom_policy(verdict, passed, reward, score):
    assert CUSTOM.min_reward == -3.0
    assert CUSTOM.reward(verdict, passed=passed, total=4) == reward
    assert CUSTOM.score(CUSTOM.reward(verdict, passed=passed, total=4)) == pytest.approx(score)


def test_zero_penalties_make_score_equal_reward():
    policy = GradingPolicy(timeout_reward=0, crash_reward=0, no_code_reward=0)

    assert policy.min_reward == 0.0
    assert [policy.score(r) for r in (0.0, 0.25, 1.0)] == [0.0, 0.25, 1.0]
    assert policy.reward(Verdict.KILLED, 0, 4) == 0.0


@pytest.mark.parametrize("overrides, verdict, passed, reward, min_reward", [
    pytest.param({Verdict.OUT_OF_MEMORY: -0.8}, Verdict.OUT_OF_MEMORY, 0, -0.8, -1.0, id="oom-softer"),
    pytest.param({"out_of_memory": -0.8}, Verdict.OUT_OF_MEMORY, 0, -0.8, -1.0, id="string-key"),
    pytest.param({Verdict.OUT_OF_MEMORY: -0.8}, Verdict.KILLED, 0, -1.0, -1.0, id="other-crashes-unchanged"),
    pytest.param({Verdict.KILLED: -4.0}, Verdict.KILLED, 0, -4.0, -4.0, id="harsher-lowers-min"),
    pytest.param({Verdict.TIMEOUT: -0.1}, Verdict.TIMEOUT, 0, -0.1, -1.0, id="timeout"),
    pytest.param({Verdict.TIMEOUT: -0.1}, Verdict.TIMEOUT, 3, 0.75, -1.0, id="timeout-after-passes"),
    pytest.param({Verdict.NO_CODE: -2.0}, Verdict.NO_CODE, 0, -2.0, -2.0, id="no-code"),
    pytest.param({Verdict.FAILED: -0.2}, Verdict.FAILED, 3, -0.2, -1.0, id="failed-replaces-fraction"),
    pytest.param({Verdict.PASSED: 2.0}, Verdict.PASSED, 4, 2.0, -1.0, id="bonus-for-passing"),
])
def test_verdict_overrides(overrides, verdict, passed, reward, min_reward):
    policy = GradingPolicy(verdict_rewards=overrides)

    assert policy.reward(verdict, passed=passed, total=4) == reward
    assert policy.min_reward == min_reward
    assert 0.0 <= policy.score(reward) <= 1.0


def test_override_bonus_is_clamped_into_unit_score():
    policy = GradingPolicy(verdict_rewards={Verdict.PASSED: 2.0})

    assert policy.score(policy.reward(Verdict.PASSED, 4, 4)) == 1.0


@pytest.mark.parametrize("fields", [
    pytest.param({"timeout_reward": 0.5}, id="positive-timeout"),
    pytest.param({"crash_reward": 0.1}, id="positive-crash"),
    pytest.param({"no_code_reward": 1.0}, id="positive-no-code"),
    pytest.param({"crash_penalty": -1.0}, id="unknown-field"),
    pytest.param({"verdict_rewards": {"exploded": -1.0}}, id="unknown-verdict"),
])
def test_invalid_policies_are_rejected(fields):
    with pytest.raises(pydantic.ValidationError):
        GradingPolicy(**fields)


# --- grade(): a run against the expected tests ------------------------------

def run(verdict: Verdict, *specs, **fields) -> RunResult:
    tests = []
    for spec in specs:
        cls, name, outcome = spec if len(spec) == 3 else (None, *spec)
        tests.append(TestResult(nodeid=f"test_solution.py::{name}[{len(tests)}]", name=name, cls=cls,
                                outcome=outcome))
    return RunResult(verdict=verdict, tests=tuple(tests), **fields)


ALL = [("test_a", P), ("test_b", P), ("test_b", P), ("TestC", "test_d", P)]


@pytest.mark.parametrize("result, verdict, passed, reward, score", [
    pytest.param(run(Verdict.PASSED, *ALL), Verdict.PASSED, 4, 1.0, 1.0, id="all-passed"),
    pytest.param(run(Verdict.FAILED, ("test_a", P), ("test_b", P), ("test_b", F), ("TestC", "test_d", P)),
                 Verdict.FAILED, 3, 0.75, 0.875, id="3-of-4"),
    pytest.param(run(Verdict.FAILED, ("test_a", P), ("test_b", Outcome.SKIPPED), ("test_b", Outcome.XFAILED),
                     ("TestC", "test_d", Outcome.ERROR)), Verdict.FAILED, 1, 0.25, 0.625,
                 id="skipped-xfailed-error-count-as-failed"),
    pytest.param(run(Verdict.PASSED, ("test_a", P), ("test_b", P)), Verdict.FAILED, 2, 0.5, 0.75,
                 id="missing-tests-count-as-failed"),
    pytest.param(run(Verdict.PASSED), Verdict.FAILED, 0, 0.0, 0.5, id="nothing-reported"),
    pytest.param(run(Verdict.PASSED, ("test_a", P), ("test_a", P), ("test_a", P), ("test_a", P), ("test_x", P)),
                 Verdict.FAILED, 1, 0.25, 0.625, id="duplicates-and-extras-gain-nothing"),
    pytest.param(run(Verdict.FAILED, *ALL, ("test_extra", F)), Verdict.PASSED, 4, 1.0, 1.0,
                 id="passing-is-decided-by-the-grader"),
    pytest.param(run(Verdict.FAILED, ("test_a", F), ("test_b", F), ("test_b", F), ("TestC", "test_d", F),
                     tampered=True), Verdict.FAILED, 0, 0.0, 0.5, id="tampered"),
    pytest.param(run(Verdict.TIMEOUT), Verdict.TIMEOUT, 0, -0.5, 0.25, id="timeout"),
    pytest.param(run(Verdict.TIMEOUT, ("test_a", F), ("test_b", Outcome.ERROR)), Verdict.TIMEOUT, 0, -0.5, 0.25,
                 id="timeout-nothing-passed"),
    # A run deadline that stops the run with tests still to go: the tests that passed count.
    pytest.param(run(Verdict.TIMEOUT, ("test_a", P), ("test_b", P), ("test_b", F)), Verdict.TIMEOUT, 2, 0.5, 0.75,
                 id="timeout-after-passes"),
    pytest.param(run(Verdict.TIMEOUT, *ALL), Verdict.TIMEOUT, 4, 1.0, 1.0, id="timeout-after-all-passed"),
    *[pytest.param(run(v, *ALL), v, 0, -1.0, 0.0, id=v.value) for v in CRASH_VERDICTS],
])
def test_grade(result, verdict, passed, reward, score):
    g = grade(result, FOUR, DEFAULT)

    assert (g.verdict, g.passed, g.total) == (verdict, passed, 4)
    assert g.reward == pytest.approx(reward)
    assert g.score == pytest.approx(score)
    assert g.error is None


def test_nothing_expected_is_never_a_pass():
    g = grade(run(Verdict.PASSED, ("test_a", P)), ExpectedTests(counts={}), DEFAULT)

    assert (g.verdict, g.passed, g.total, g.reward) == (Verdict.FAILED, 0, 0, 0.0)


def test_grade_keeps_run_details():
    result = run(Verdict.FAILED, ("test_a", P), duration_s=1.25, message="1 failed")

    g = grade(result, FOUR, DEFAULT)

    assert g.duration_s == 1.25
    assert g.message == "1 failed"
    assert g.tests == result.tests


def test_grade_uses_the_policy():
    policy = GradingPolicy(timeout_reward=-0.2, crash_reward=-0.6, verdict_rewards={Verdict.IMPORT_ERROR: -0.9})

    graded = {v: grade(run(v), FOUR, policy) for v in (Verdict.TIMEOUT, Verdict.KILLED, Verdict.IMPORT_ERROR)}

    assert {v: g.reward for v, g in graded.items()} == {
        Verdict.TIMEOUT: -0.2, Verdict.KILLED: -0.6, Verdict.IMPORT_ERROR: -0.9}
    # The lowest reward is still the default no-code -1.0, so score = (reward + 1) / 2.
    assert graded[Verdict.IMPORT_ERROR].score == pytest.approx(0.05)
    assert graded[Verdict.TIMEOUT].score == pytest.approx(0.4)


def test_grade_with_uncounted_parametrization():
    expected = ExpectedTests(counts={(None, "test_a"): None, (None, "test_b"): 1})

    mixed = grade(run(Verdict.FAILED, ("test_a", P), ("test_a", F), ("test_b", P)), expected, DEFAULT)
    clean = grade(run(Verdict.PASSED, ("test_a", P), ("test_a", P), ("test_a", P), ("test_b", P)), expected, DEFAULT)

    assert (mixed.verdict, mixed.passed, mixed.total, mixed.reward) == (Verdict.FAILED, 1, 2, 0.5)
    assert (clean.verdict, clean.passed, clean.total, clean.reward) == (Verdict.PASSED, 2, 2, 1.0)


def test_no_code():
    g = grade_no_code(total=4, policy=DEFAULT)

    assert (g.verdict, g.reward, g.score, g.passed, g.total) == (Verdict.NO_CODE, -1.0, 0.0, 0, 4)
    assert g.message == "no code found in the completion"
    assert g.error is None


def test_no_code_uses_the_policy():
    g = grade_no_code(total=2, policy=GradingPolicy(no_code_reward=-0.5))

    assert (g.reward, g.score) == (-0.5, 0.25)  # crashes (-1.0) stay the floor of the score


# --- frozen models ------------------------------------------------------------

@pytest.mark.parametrize("model, field, value", [
    pytest.param(DEFAULT, "crash_reward", 0.0, id="GradingPolicy"),
    pytest.param(grade_no_code(1, DEFAULT), "reward", 1.0, id="Grade"),
    pytest.param(run(Verdict.FAILED), "verdict", Verdict.PASSED, id="RunResult"),
    pytest.param(TestResult(nodeid="t::a", outcome=F), "outcome", P, id="TestResult"),
    pytest.param(Limits(), "timeout_s", 1e9, id="Limits"),
    pytest.param(RunRequest(files={}, tests={"test_a.py": ""}), "files", {"x.py": ""}, id="RunRequest"),
])
def test_models_are_frozen(model, field, value):
    before = getattr(model, field)

    with pytest.raises(pydantic.ValidationError, match="frozen"):
        setattr(model, field, value)
    assert getattr(model, field) == before


@pytest.mark.parametrize("model, fields", [
    pytest.param(RunResult, {"verdict": "passed", "score": 1.0}, id="RunResult-extra"),
    pytest.param(Limits, {"timeout_s": 0}, id="Limits-zero-timeout"),
    pytest.param(Limits, {"memory_mb": 8}, id="Limits-tiny-memory"),
    pytest.param(RunRequest, {"files": {}, "tests": {}}, id="RunRequest-no-tests"),
    pytest.param(RunRequest, {"files": {"../etc/passwd": ""}, "tests": {"test_a.py": ""}}, id="path-traversal"),
    pytest.param(RunRequest, {"files": {"sub/solution.py": ""}, "tests": {"test_a.py": ""}}, id="subdirectory"),
    pytest.param(RunRequest, {"files": {}, "tests": {".hidden.py": ""}}, id="hidden-test"),
    pytest.param(RunRequest, {"files": {"x" * 129: ""}, "tests": {"test_a.py": ""}}, id="long-name"),
    pytest.param(RunRequest, {"files": {"Ж" * 128: ""}, "tests": {"test_a.py": ""}}, id="over-name-max-in-utf-8"),
    pytest.param(RunRequest, {"files": {}, "tests": {"test_a.py\n": ""}}, id="trailing-newline"),
    pytest.param(RunRequest, {"files": {"-rf": ""}, "tests": {"test_a.py": ""}}, id="option-like"),
    pytest.param(RunRequest, {"files": {"a\u202ey.py": ""}, "tests": {"test_a.py": ""}}, id="bidi-override"),
    pytest.param(RunRequest, {"files": {}, "tests": {"test_a.py": ""}, "binary_files": {"d/x\n": ""}},
                 id="binary-path-trailing-newline"),
])
def test_invalid_models_are_rejected(model, fields):
    with pytest.raises(pydantic.ValidationError):
        model(**fields)


@pytest.mark.parametrize("name", ["Foo$Bar.java", "Решение.java", "données.txt", "_9.py", "a-b.c"])
def test_names_of_any_script_and_dollar_are_plain(name):
    # Java names its file after its public class: any Java identifier.
    assert name in RunRequest(files={name: ""}, tests={"test_a.py": ""}).files


def test_grade_is_a_plain_record():
    g = Grade(reward=0.5, score=0.75, verdict=Verdict.FAILED, passed=1, total=2)

    assert g.model_dump(mode="json") == {
        "reward": 0.5, "score": 0.75, "verdict": "failed", "passed": 1, "total": 2, "duration_s": 0.0,
        "message": "", "error": None, "tests": [], "kind": None}
