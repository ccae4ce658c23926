"""twinkle: a `Reward` for twinkle's GRPO loop, and its group advantage.

twinkle calls a reward as `reward(trajectories, ground_truths)` and wants one
float per trajectory. A trajectory is a dict: `messages` (the last assistant
message is the completion; twinkle's sampler appends it), `user_data` (the
row's fields as `(key, value)` pairs), optionally `prompt`. Its own rewards
read the ground truth two ways: the newer ones from `user_data["ground_truth"]`
(the cookbook passes no ground truths), `MathReward` from `ground_truths[i]`, a
trajectory holding the answer under `user_data["solution"]` or else in its last
message. So the label is `ground_truths[i]` when there is one, else
`user_data[label_key]` (by default `ground_truth`, else `solution`: the keys
twinkle-kit 0.5.1's processors fill).

How twinkle-kit 0.5.1 stores a `user_data` value: its processors store it raw
(`('solution', '[2, 3]')`, `('ground_truth', '1800')`; `CountdownProcessor` a
dict entry `{'target': 6, 'nums': [...]}`) and its rewards read it raw, while
its `pack_value` and the `Trajectory` type's comment JSON-encode it. The two
spellings differ only for strings, objects and none, so a string is read raw
unless it is a JSON string literal (`pack_value` of a string), a JSON object
(a label object, encoded) or `null`; `[2, 3]` and `42` read the same either
way: as text. A text label is a math answer (`{"answer": text}`), never JSON
to decode.

twinkle needs a float (it builds a tensor from the list): an unusable label
gives 0.0 and a logged warning. Under group advantages that is no penalty:
the whole group shares the label, so its advantages are all zero.
"""

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rewardbox.adapters import default_reward, message_text, prompt_text
from rewardbox.rewards.base import Reward, Sample

__all__ = ["TwinkleReward", "as_label", "grpo_advantage", "stored_value", "user_data"]

log = logging.getLogger(__name__)


class TwinkleReward:
    """Any `Reward` as a twinkle reward (default: the process's
    `CorrectnessReward`, made on the first call); the batch is scored in
    parallel. `label_key` names the `user_data` key of the label (default:
    `ground_truth`, else `solution`)."""

    def __init__(self, reward: Reward | None = None, *, label_key: str | None = None):
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
        key = self._key(fields)
        label = as_label(fields.pop(key)) if key is not None else None
        if ground_truth is not None:
            label = self._answer(ground_truth)
        messages = list(trajectory.get("messages") or [])
        end = next((i for i in reversed(range(len(messages)))
                    if isinstance(messages[i], Mapping) and messages[i].get("role") == "assistant"), None)
        completion = message_text(messages[end]) if end is not None else ""  # twinkle's rewards: no answer, ""
        prompt = trajectory.get("prompt") or prompt_text(messages[:end] if end is not None else messages)
        return Sample(completion=completion, label=label, prompt=prompt, columns=fields)

    def _key(self, fields: Mapping[str, Any]) -> str | None:
        keys = (self.label_key,) if self.label_key is not None else _LABEL_KEYS
        return next((k for k in keys if k in fields), None)

    def _answer(self, ground_truth: Any) -> Any:
        """A ground truth as a label. A ground-truth trajectory (twinkle's
        `MathReward` style) holds it in its `user_data`, else in its last message."""
        if isinstance(ground_truth, Mapping):
            fields = user_data(ground_truth.get("user_data"))
            if (key := self._key(fields)) is not None:
                return as_label(fields[key])
            messages = ground_truth.get("messages")
        else:
            messages = getattr(ground_truth, "messages", None)
        if isinstance(messages, Sequence) and not isinstance(messages, str) and messages:
            last = messages[-1]
            return as_label(message_text(last if isinstance(last, Mapping) else getattr(last, "content", last)))
        return as_label(stored_value(ground_truth))


_LABEL_KEYS = ("ground_truth", "solution")  # twinkle-kit 0.5.1: GSM8K, CLEVR, OlympiadBench; CompetitionMath


def user_data(items: Any) -> dict[str, Any]:
    """twinkle's `user_data` as a dict, each value read as twinkle stores it
    (`stored_value`); the first of a key wins. An entry is a `(key, value)`
    pair (a list once `datasets` has stored it) or a dict of fields.

    >>> user_data([("solution", "[2, 3]"), ["level", "3"], ("note", '"raw"'), {"nums": [1, 2], "level": 9}])
    {'solution': '[2, 3]', 'level': '3', 'note': 'raw', 'nums': [1, 2]}
    """
    fields: dict[str, Any] = {}
    for entry in items or []:
        if isinstance(entry, Mapping):
            pairs = list(entry.items())
        elif isinstance(entry, (list, tuple)) and len(entry) == 2:
            pairs = [(entry[0], entry[1])]
        else:
            continue
        for key, value in pairs:
            if isinstance(key, str) and key not in fields:
                fields[key] = stored_value(value)
    return fields


def stored_value(value: Any) -> Any:
    """A `user_data` value as twinkle meant it: a string raw, unless it is a
    JSON string literal, a JSON object or `null` (encoded by `pack_value`);
    anything else as it is.

    >>> stored_value("[2, 3]"), stored_value("42"), stored_value('"[2, 3]"'), stored_value('{"tests": ["assert 1"]}')
    ('[2, 3]', '42', '[2, 3]', {'tests': ['assert 1']})
    >>> stored_value("{1, 2}"), stored_value(7)
    ('{1, 2}', 7)
    """
    if isinstance(value, str) and (value.lstrip()[:1] in ('"', "{") or value.strip() == "null"):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if decoded is None or isinstance(decoded, (str, dict)):
            return decoded
    return value


def as_label(value: Any) -> Any:
    """A value read from twinkle as a rewardbox label: text is a math answer
    (`{"answer": text}`, so that `[2, 3]` stays an interval rather than a JSON
    list), unless it is a JSON object, a label object; others as they are.

    >>> as_label("[2, 3]"), as_label('{"tests": ["assert 1"]}'), as_label(42)
    ({'answer': '[2, 3]'}, {'tests': ['assert 1']}, 42)
    """
    if isinstance(value, str):
        decoded = stored_value(value)
        return decoded if isinstance(decoded, dict) else {"answer": value}
    return value


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
    advantages: list[float] = []
    for group in groups:
        mean = sum(group) / len(group)
        divisor = {"group": _std(group) + 1e-8, "batch": batch_std + 1e-8}.get(scale, 1.0)
        advantages.extend((r - mean) / divisor for r in group)
    return advantages


def _std(values: Sequence[float]) -> float:
    """Unbiased (n - 1) standard deviation, as torch's `Tensor.std()`."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
