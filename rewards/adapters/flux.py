"""flux: a `RewardFunction` for `FluxTrainer(reward_function=...)`.

flux's `RewardFunction(name, scale=1.0, clip=None)` computes
`compute_reward(trajectory) -> RewardOutput(reward, token_rewards, metadata)`;
its `__call__` multiplies the reward by `scale`, then clips it to
`[-clip, clip]`; the coordinator calls the function on one trajectory at a
time and reads `.reward` and `.token_rewards`. `CompositeReward([(fn, w), ...],
normalize=True)` calls each part's `compute_reward` (so the parts' own scale
and clip do not apply inside it) and reads `.reward` and `.name`;
`compute_rewards(trajectories)` scores a batch without scale or clip.

A flux `Trajectory` has `id`, `prompt`, `response` and `metadata`, and no
ground-truth field: the label is `metadata[label_key]`, the rest of the
metadata goes to `Sample.columns`. The stock trainer builds trajectories from
prompt strings alone, leaving `metadata` empty; for it pass
`labels={prompt: label}` and the label is looked up by the trajectory's prompt.

flux needs a float: an unusable label gives reward 0.0, with the error in
`metadata["error"]` and `metadata["unscorable"]` set.
"""

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rewards.adapters import default_reward
from rewards.base import Reward, RewardOutput, Sample

__all__ = ["FluxReward", "RewardBatch"]

log = logging.getLogger(__name__)


class RewardBatch(BaseModel):
    """flux's `RewardBatchOutput`, duck-typed: a batch's rewards, per-token
    rewards, and each sample's metadata under `metadata["samples"]`."""

    model_config = ConfigDict(frozen=True)

    rewards: list[float] = Field(default_factory=list)
    token_rewards: list[list[float]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return len(self.rewards)

    def mean_reward(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0


class FluxReward:
    """Any `Reward` as a flux reward function (default: the process's
    `CorrectnessReward`, made on the first call).

    >>> FluxReward(scale=2.0, clip=1.0).scaled(0.75), FluxReward(scale=-3.0, clip=1.0).scaled(0.5)
    (1.0, -1.0)
    """

    def __init__(self, reward: Reward | None = None, *, name: str | None = None, scale: float = 1.0,
                 clip: float | None = None, label_key: str = "label", labels: Mapping[str, Any] | None = None):
        self.reward = reward
        self.name = name or (reward.name if reward is not None else "correctness")
        self.scale = scale
        self.clip = clip
        self.label_key = label_key
        self.labels = labels

    def compute_reward(self, trajectory: Any) -> RewardOutput:
        """The raw reward of one trajectory (no scale, no clip), always a float."""
        return self._flux_output(self._reward().score(self.sample(trajectory)))

    def compute_rewards(self, trajectories: Sequence[Any]) -> RewardBatch:
        """A batch scored in parallel; raw rewards, like flux's own."""
        outputs = [self._flux_output(o) for o in self._reward().score_many([self.sample(t) for t in trajectories])]
        return RewardBatch(rewards=[o.reward for o in outputs], token_rewards=[o.token_rewards for o in outputs],
                           metadata={"samples": [o.metadata for o in outputs]})

    def __call__(self, trajectory: Any) -> RewardOutput:
        output = self.compute_reward(trajectory)
        return output.model_copy(update={"reward": self.scaled(output.reward)})

    def scaled(self, reward: float) -> float:
        """flux's order: scale first, then clip to [-clip, clip]."""
        reward *= self.scale
        return reward if self.clip is None else max(-self.clip, min(self.clip, reward))

    def sample(self, trajectory: Any) -> Sample:
        metadata = dict(getattr(trajectory, "metadata", None) or {})
        prompt = getattr(trajectory, "prompt", None) or None
        label = metadata.pop(self.label_key, None)
        if label is None and self.labels is not None and prompt is not None:
            label = self.labels.get(prompt)
        return Sample(id=getattr(trajectory, "id", None) or None, completion=getattr(trajectory, "response", "") or "",
                      label=label, prompt=prompt, columns=metadata)

    def _flux_output(self, output: RewardOutput) -> RewardOutput:
        if output.reward is not None:
            return output
        log.warning("flux: reward 0.0 for an unusable label: %s", output.metadata.get("error"))
        return output.model_copy(update={"reward": 0.0, "metadata": {**output.metadata, "unscorable": True}})

    def _reward(self) -> Reward:
        return self.reward if self.reward is not None else default_reward()

    def __repr__(self) -> str:
        return f"FluxReward({self.reward!r}, name={self.name!r}, scale={self.scale}, clip={self.clip})"
