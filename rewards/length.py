"""A length reward: long responses earn less.

Measured in characters of the cleaned response (`strip_completion`: no prompt,
chat tokens or `<think>` reasoning), so it needs no tokenizer.

    reward
    1.0 |--------\\
        |         \\
    min |          \\__________
        +--------+----+------- length_chars
            target_chars  max_chars
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.extract import strip_completion


class LengthSpec(BaseModel):
    """1.0 up to `target_chars`, falling linearly to `min_reward` at
    `max_chars`, `min_reward` beyond.

    >>> spec = LengthSpec(target_chars=100, max_chars=200, min_reward=-1.0)
    >>> spec.reward(50), spec.reward(150), spec.reward(1000)
    (1.0, 0.0, -1.0)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_chars: int = Field(4000, ge=0, description="longest response that earns the full reward (~1000 tokens)")
    max_chars: int = Field(16000, gt=0, description="length from which on the reward is min_reward (~4000 tokens)")
    min_reward: float = Field(0.0, lt=1.0, description="reward at and beyond max_chars")

    @model_validator(mode="after")
    def _ordered(self) -> "LengthSpec":
        if self.max_chars <= self.target_chars:
            raise ValueError(f"max_chars ({self.max_chars}) must exceed target_chars ({self.target_chars})")
        return self

    def reward(self, length_chars: int) -> float:
        over = min(max(length_chars - self.target_chars, 0), self.max_chars - self.target_chars)
        return 1.0 - (1.0 - self.min_reward) * over / (self.max_chars - self.target_chars)

    def score(self, reward: float) -> float:
        """The reward mapped from [min_reward, 1] onto [0, 1]."""
        return (reward - self.min_reward) / (1.0 - self.min_reward)


class LengthReward(Reward):
    """Scores the cleaned response's length with a `LengthSpec`; the label is
    not used. Metadata: `length_chars`.

    >>> LengthReward(target_chars=5, max_chars=15)("<think>long reasoning</think>0123456789").reward
    0.5
    """

    def __init__(self, spec: LengthSpec | None = None, *, name: str = "length", **fields: Any):
        self.spec = LengthSpec(**{**(spec.model_dump() if spec else {}), **fields})
        self.name = name

    def score(self, sample: Sample) -> RewardOutput:
        length = len(strip_completion(sample.completion, sample.prompt).strip())
        reward = self.spec.reward(length)
        return RewardOutput(reward=reward, score=self.spec.score(reward), metadata={"length_chars": length})
