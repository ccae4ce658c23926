"""The grading policy: which reward each outcome earns. One frozen object."""

from pydantic import BaseModel, ConfigDict, Field

from rewardbox.sandbox import Verdict

CRASHES = frozenset({
    Verdict.SYNTAX_ERROR, Verdict.COMPILE_ERROR, Verdict.IMPORT_ERROR, Verdict.COLLECTION_ERROR,
    Verdict.OUT_OF_MEMORY, Verdict.OUTPUT_LIMIT, Verdict.KILLED,
})


class GradingPolicy(BaseModel):
    """Rewards per outcome (docs/grading.md).

    Tests passed earn `passed / expected`; every other verdict earns a fixed
    penalty, except a timeout: a run that its deadline stopped with cases still
    to go earns the tests that passed before it, and the timeout penalty only
    when none did (a slow but correct program is not scored below a fast wrong
    one). `score` maps rewards onto [0, 1].

    >>> policy = GradingPolicy()
    >>> policy.reward(Verdict.FAILED, passed=3, total=4)
    0.75
    >>> policy.reward(Verdict.TIMEOUT, passed=0, total=4)
    -0.5
    >>> policy.reward(Verdict.TIMEOUT, passed=3, total=4)
    0.75
    >>> policy.score(-1.0), policy.score(1.0)
    (0.0, 1.0)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_reward: float = Field(-0.5, le=0, description="the wall-clock deadline was hit before any test passed")
    crash_reward: float = Field(-1.0, le=0, description=(
        "syntax, compile, import or collection error, out of memory, output limit, killed"))
    no_code_reward: float = Field(-1.0, le=0, description="no code found in the completion; no container is started")
    verdict_rewards: dict[Verdict, float] = Field(
        default_factory=dict, description=(
            "overrides for single verdicts, e.g. {'out_of_memory': -0.8}; one for 'timeout' replaces the "
            "timeout penalty, which tests passed before the deadline still replace"))

    def reward(self, verdict: Verdict, passed: int, total: int) -> float:
        if verdict is Verdict.TIMEOUT and passed > 0 and total:
            return passed / total
        if verdict in self.verdict_rewards:
            return self.verdict_rewards[verdict]
        if verdict in (Verdict.PASSED, Verdict.FAILED):
            return passed / total if total else 0.0
        if verdict is Verdict.TIMEOUT:
            return self.timeout_reward
        if verdict is Verdict.NO_CODE:
            return self.no_code_reward
        return self.crash_reward

    @property
    def min_reward(self) -> float:
        return min(0.0, self.timeout_reward, self.crash_reward, self.no_code_reward, *self.verdict_rewards.values())

    def score(self, reward: float) -> float:
        """`(reward - min_reward) / (1 - min_reward)`, in [0, 1]."""
        low = self.min_reward
        return 1.0 if low == 1.0 else min(1.0, max(0.0, (reward - low) / (1.0 - low)))
