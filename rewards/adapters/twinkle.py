"""twinkle: a `Reward` for twinkle's GRPO loop, and its group advantage.

twinkle calls a reward as `reward(trajectories, ground_truths)` and wants one
float per trajectory. A trajectory is a dict: `messages` (the last assistant
message is the completion), `user_data` (the row's fields as `(key,
json.dumps(value))` pairs), optionally `prompt`. Its own rewards read the
ground truth two ways: the newer ones from `user_data["ground_truth"]` (the
cookbook passes `ground_truths=[]`), `MathReward` from `ground_truths[i]`, a
trajectory holding the answer in its `user_data` or else in its last message.
So the label is `ground_truths[i]` when there is one, else
`user_data[label_key]`.

twinkle needs a float (it builds a tensor from the list): an unusable label
gives 0.0 and a logged warning. Under group advantages that is no penalty:
the whole group shares the label, so its advantages are all zero.
"""

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rewards.adapters import default_reward, message_text, prompt_text
from rewards.base import Reward, Sample

__all__ = ["TwinkleReward", "grpo_advantage", "user_data"]

log = logging.getLogger(__name__)


class TwinkleReward:
    """Any `Reward` as a twinkle reward (default: the process's
    `CorrectnessReward`, made on the first call); the batch is scored in
    parallel."""

    def __init__(self, reward: Reward | None = None, *, label_key: str = "ground_truth"):
        self.reward = reward
        self.label_key = label_key

    def __call__(self, trajectories: Sequence[Mapping[str, Any]], ground_truths: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float]:
        samples = [self.sample(t, ground_truths[i] if ground_truths is not None and i < len(ground_truths) else None)
                   for i, t in enumerate(trajectories)]
        if not samples:
            return []
        outputs = (self.reward if self.reward is not None else default_reward()).score_many(samples)
        for o in outputs:
            if o.reward is None:
                log.warning("twinkle: reward 0.0 for an unusable label: %s", o.metadata.get("error"))
        return [float(o.reward) if o.reward is not None else 0.0 for o in outputs]

    def sample(self, trajectory: Mapping[str, Any], ground_truth: Any = None) -> Sample:
        fields = user_data(trajectory.get("user_data"))
        label = fields.pop(self.label_key, None)
        if ground_truth is not None:
            label = self._answer(ground_truth)
        messages = list(trajectory.get("messages") or [])
        end = next((i for i in reversed(range(len(messages)))
                    if isinstance(messages[i], Mapping) and messages[i].get("role") == "assistant"), None)
        completion = message_text(messages[end]) if end is not None else ""  # twinkle's rewards: no answer, ""
        prompt = trajectory.get("prompt") or prompt_text(messages[:end] if end is not None else messages)
        return Sample(completion=completion, label=label, prompt=prompt, columns=fields)

    def _answer(self, ground_truth: Any) -> Any:
        """A ground truth as a label. A ground-truth trajectory (twinkle's
        `MathReward` style) holds it in its `user_data`, else in its last message."""
        if isinstance(ground_truth, Mapping):
            fields = user_data(ground_truth.get("user_data"))
            if self.label_key in fields:
                return fields[self.label_key]
            messages = ground_truth.get("messages")
        else:
            messages = getattr(ground_truth, "messages", None)
        if isinstance(messages, Sequence) and not isinstance(messages, str) and messages:
            last = messages[-1]
            return message_text(last if isinstance(last, Mapping) else getattr(last, "content", last))
        return ground_truth


def user_data(items: Any) -> dict[str, Any]:
    """twinkle's packed `user_data` as a dict, each value decoded from JSON
    (a value that is not JSON is kept as it is); the first of a key wins.

    >>> user_data([("ground_truth", '"42"'), ("level", "3"), ("note", "not json")])
    {'ground_truth': '42', 'level': 3, 'note': 'not json'}
    """
    fields: dict[str, Any] = {}
    for entry in items or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str) and entry[0] not in fields:
            value = entry[1]
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            fields[entry[0]] = value
    return fields


def grpo_advantage(rewards: Sequence[float], num_generations: int,
                   scale: Literal["group", "batch", "none"] = "group") -> list[float]:
    """twinkle's `GRPOAdvantage()(rewards, num_generations, scale)` without
    torch: each reward minus its group's mean (groups are contiguous runs of
    `num_generations`), divided by the group's unbiased std + 1e-8 (`"group"`),
    the batch's (`"batch"`), or not at all (`"none"`).

    >>> [round(a, 4) for a in grpo_advantage([0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0], num_generations=4)]
    [-0.866, 0.866, -0.866, 0.866, 0.0, 0.0, 0.0, 0.0]
    >>> grpo_advantage([0.0, 1.0, 1.0, 1.0], num_generations=2, scale="none")
    [-0.5, 0.5, 0.0, 0.0]
    """
    rewards = [float(r) for r in rewards]
    if num_generations <= 0 or len(rewards) % num_generations:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {num_generations}")
    if num_generations == 1:  # no groups: twinkle centres on the batch, or leaves the rewards as they are
        if scale == "group":
            return rewards
        mean = sum(rewards) / len(rewards)
        std = _std(rewards) if scale == "batch" and len(rewards) > 1 else 1.0
        return [(r - mean) / (std + 1e-8) if scale == "batch" else r - mean for r in rewards]
    groups = [rewards[i:i + num_generations] for i in range(0, len(rewards), num_generations)]
    batch_std = _std(rewards)
    advantages = []
    for group in groups:
        mean = sum(group) / len(group)
        divisor = {"group": _std(group) + 1e-8, "batch": batch_std + 1e-8}.get(scale, 1.0)
        advantages.extend((r - mean) / divisor for r in group)
    return advantages


def _std(values: Sequence[float]) -> float:
    """Unbiased (n - 1) standard deviation, as torch's `Tensor.std()`."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
