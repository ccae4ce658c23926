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

import bisect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rewardbox.adapters import default_reward
from rewardbox.rewards.base import Reward, RewardOutput, Sample

__all__ = ["FLUX_MAX_PROMPT_CHARS", "FluxReward", "PromptLabels", "RewardBatch", "flux_prompt"]

log = logging.getLogger(__name__)

FLUX_MAX_PROMPT_CHARS = 32768  # FluxTrainer._prepare_prompts' max_prompt_length, left at its default by fit()


def flux_prompt(prompt: str, max_chars: int = FLUX_MAX_PROMPT_CHARS) -> str:
    """The prompt `FluxTrainer.fit()` hands on for `prompt`: cut to
    `max_chars`, then stripped (in that order).

    >>> flux_prompt("  Write add(a, b).\\n"), flux_prompt("  abcdef", max_chars=5)
    ('Write add(a, b).', 'abc')
    """
    return prompt[:max_chars].strip()


class PromptLabels:
    """Labels by prompt as flux passes it: the prompt as given, else its
    `flux_prompt` form, else (a prompt cut shorter) the labels of the prompts
    it begins; a label only when those agree.

    >>> labels = PromptLabels({" 6 * 7? ": "42", "Sum 1..n, n = 3": "6", "Sum 1..n, n = 4": "10"})
    >>> labels.get("6 * 7?"), labels.get("Sum 1..n, n = 3"), labels.get("Sum 1..n"), labels.get("nope")
    ('42', '6', None, None)
    """

    def __init__(self, labels: Mapping[str, Any]):
        self.labels = labels
        self._by_flux: dict[str, list[Any]] = {}
        for prompt, label in labels.items():
            self._by_flux.setdefault(flux_prompt(prompt), []).append(label)
        self._sorted = sorted(self._by_flux)

    def get(self, prompt: str) -> Any:
        if prompt in self.labels:
            return self.labels[prompt]
        if prompt in self._by_flux:
            return self._one(self._by_flux[prompt], prompt)
        found: list[Any] = []
        for key in self._sorted[bisect.bisect_left(self._sorted, prompt):]:
            if not key.startswith(prompt):
                break
            found += self._by_flux[key]
        return self._one(found, prompt) if found else None

    @staticmethod
    def _one(labels: list[Any], prompt: str) -> Any:
        if all(label == labels[0] for label in labels[1:]):
            return labels[0]
        log.warning("flux: %d labels for the prompt %r as flux passes it; none used", len(labels), prompt[:80])
        return None


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
        self._prompt_labels = PromptLabels(labels) if labels is not None else None

    def compute_reward(self, trajectory: Any) -> RewardOutput:
        """The raw reward of one trajectory (no scale, no clip), always a float."""
        return self._flux_output(self._reward().score(self.sample(trajectory)))

    def compute_rewards(self, trajectories: Sequence[Any]) -> RewardBatch:
        """A batch scored in parallel; raw rewards, like flux's own."""
        outputs = [self._flux_output(o) for o in self._reward().score_many([self.sample(t) for t in trajectories])]
        return RewardBatch(rewards=[_raw(o) for o in outputs], token_rewards=[o.token_rewards for o in outputs],
                           metadata={"samples": [o.metadata for o in outputs]})

    def __call__(self, trajectory: Any) -> RewardOutput:
        output = self.compute_reward(trajectory)
        return output.model_copy(update={"reward": self.scaled(_raw(output))})

    def scaled(self, reward: float) -> float:
        """flux's order: scale first, then clip to [-clip, clip]."""
        reward *= self.scale
        return reward if self.clip is None else max(-self.clip, min(self.clip, reward))

    def sample(self, trajectory: Any) -> Sample:
        metadata = dict(getattr(trajectory, "metadata", None) or {})
        prompt = getattr(trajectory, "prompt", None) or None
        label = metadata.pop(self.label_key, None)
        if label is None and self._prompt_labels is not None and prompt is not None:
            label = self._prompt_labels.get(prompt)
        return Sample(id=getattr(trajectory, "id", None) or None, completion=getattr(trajectory, "response", "") or "",
                      label=label, prompt=prompt, columns=metadata)

    def _flux_output(self, output: RewardOutput) -> RewardOutput:
        """flux reads `reward`, `token_rewards` and `metadata`: the metadata
        it gets is the flat view (verdict, test counts, duration included)."""
        flat = output.details()
        if output.reward is not None:
            return output.model_copy(update={"metadata": flat})
        log.warning("flux: reward 0.0 for an unusable label: %s", output.metadata.get("error"))
        return output.model_copy(update={"reward": 0.0, "metadata": {**flat, "unscorable": True}})

    def _reward(self) -> Reward:
        return self.reward if self.reward is not None else default_reward()

    def __repr__(self) -> str:
        return f"FluxReward({self.reward!r}, name={self.name!r}, scale={self.scale}, clip={self.clip})"


def _raw(output: RewardOutput) -> float:
    """The reward of an output `_flux_output` made: never None there (an unscorable sample is 0.0)."""
    assert output.reward is not None
    return output.reward
