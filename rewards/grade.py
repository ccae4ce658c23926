"""From a run's result to a reward: a pure function of the result, the tests
the grader expected and the policy."""

from pydantic import BaseModel, ConfigDict, Field

from rewardbox.rewards.expected import ExpectedTests
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.sandbox import RunResult, TestResult, Verdict


class Grade(BaseModel):
    """The graded outcome of one sample. `reward` and `score` are None when the
    sample could not be graded through no fault of the model (`error` says why)."""

    model_config = ConfigDict(frozen=True)

    reward: float | None
    score: float | None
    verdict: Verdict | None
    passed: int = 0
    total: int = 0
    duration_s: float = 0.0
    message: str = ""
    error: str | None = None
    kind: str | None = Field(None, description="the label's format")
    tests: tuple[TestResult, ...] = ()


def grade(result: RunResult, expected: ExpectedTests, policy: GradingPolicy) -> Grade:
    """Grade a run against the tests counted before it.

    Passing is decided here, not by the run: every expected test must appear
    as passed; a run that reports fewer tests, or extra ones, gains nothing.
    """
    total = expected.total
    # A run stopped by its deadline keeps the tests that passed before it (the policy decides what they earn).
    counted = result.verdict in (Verdict.PASSED, Verdict.FAILED, Verdict.TIMEOUT)
    passed = expected.passed(result.tests) if counted else 0
    verdict = result.verdict
    if verdict in (Verdict.PASSED, Verdict.FAILED):
        verdict = Verdict.PASSED if total and passed == total else Verdict.FAILED
    if verdict is Verdict.FAILED and passed == 0 and result.tests:
        if all(_failed_with(t, "SolutionImportError") for t in result.tests):
            verdict = Verdict.IMPORT_ERROR  # generated tests: the solution's module would not import
        elif any(_failed_with(t, "CaseTimeout") for t in result.tests):
            verdict = Verdict.TIMEOUT  # nothing passed and cases ran out of time: a loop, not a wrong answer
    reward = policy.reward(verdict, passed, total)
    return Grade(reward=reward, score=policy.score(reward), verdict=verdict, passed=passed, total=total,
                 duration_s=result.duration_s, message=result.message, tests=result.tests)


def grade_no_code(total: int, policy: GradingPolicy) -> Grade:
    reward = policy.reward(Verdict.NO_CODE, 0, total)
    return Grade(reward=reward, score=policy.score(reward), verdict=Verdict.NO_CODE, total=total,
                 message="no code found in the completion")


def _failed_with(test: TestResult, exception: str) -> bool:
    """A generated test stopped by one of rbcheck's exceptions (CaseTimeout,
    SolutionImportError), named in the record as `rbcheck.<name>`."""
    return (test.exc_type or "").endswith(exception)
