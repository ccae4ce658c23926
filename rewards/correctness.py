"""The reward a label calls for: code labels run in the sandbox, math answers
go to the math checker. One reward for a mixed dataset."""

from concurrent.futures import Future

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.code import CodeReward
from rewardbox.rewards.label_formats import MathLabel
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.sandbox import Limits, SandboxBackend


class CorrectnessReward(Reward):
    """Dispatches each sample by its label: `CodeReward` or `MathReward`.
    Both are created on first use, so a math-only run needs no Docker engine."""

    name = "correctness"

    def __init__(self, sandbox: SandboxBackend | None = None, policy: GradingPolicy | None = None,
                 limits: Limits | None = None, code: CodeReward | None = None, math: Reward | None = None):
        self.code = code or CodeReward(sandbox, policy, limits)
        self._math = math

    @property
    def math(self) -> Reward:
        if self._math is None:
            from rewardbox.rewards.math import MathReward

            self._math = MathReward()
        return self._math

    def close(self) -> None:
        self.code.close()
        if self._math is not None:
            self._math.close()

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        try:
            label = parse_label(sample.label)
        except Exception:  # noqa: BLE001 - LabelError or worse: the code reward logs and answers it the one way
            return self.code.submit(sample)
        if isinstance(label, MathLabel):
            return self.math.submit(sample)
        return self.code.submit(sample)

