"""A weighted sum of rewards, e.g. correctness plus a little format.

Every component gets the sample before any result is awaited, so slow
components (the sandbox) run side by side. The sum is taken when the last
component is done, on the thread that finished it; no thread waits for it.

A component that cannot score the sample (reward None: its label is unusable)
makes the whole sample unscorable. Otherwise a dataset error in the main reward
would turn into a low total, a penalty the model did not earn.
"""

import math
import threading
from collections.abc import Iterable
from concurrent.futures import Future

from rewardbox.rewards.base import Reward, RewardOutput, Sample


class CompositeReward(Reward):
    """`reward = Σ wᵢ·rewardᵢ`, `score = Σ wᵢ·scoreᵢ`.

    With `normalize` (the default) the weights are scaled to sum to 1, so the
    score, a convex mix of scores in [0, 1], stays in [0, 1]. Without it the
    weights are used as given and the score is clipped into [0, 1]; the reward
    is not clipped.

    Components are named by their `name`; a repeated name gets a suffix
    (`format`, `format#2`). The output's `components` holds each component's
    output by name, its `verdict` is the first component's (so the pass and
    timeout rates of the main reward can be logged from the composite), and
    `metadata["weights"]` the weights used. Token rewards are not combined.

    >>> from rewards.format import FormatReward
    >>> mix = CompositeReward([(FormatReward.think_answer(), 3), (FormatReward.one_code_block(), 1)])
    >>> out = mix("<think>?</think><answer>42</answer>")
    >>> out.reward, out.metadata["weights"], out.verdict.value, out.components["format_one_code_block"].reward
    (0.75, {'format_think_answer': 0.75, 'format_one_code_block': 0.25}, 'passed', 0.0)
    """

    def __init__(self, components: Iterable[tuple[Reward, float]], normalize: bool = True, *, name: str = "composite"):
        pairs = list(components)
        if not pairs:
            raise ValueError("a composite reward needs at least one component")
        for reward, weight in pairs:
            if not isinstance(reward, Reward):
                raise TypeError(f"not a Reward: {reward!r}")
            if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight >= 0):
                raise ValueError(f"weight of {reward.name!r} must be a finite number >= 0, got {weight!r}")
        total = sum(weight for _, weight in pairs)
        if total <= 0:
            raise ValueError("the weights must not all be 0")
        if not math.isfinite(total):  # each finite, their sum not: every normalised weight would be 0
            raise ValueError(f"the weights sum to {total}; use smaller weights (only their ratios matter)")
        self.name = name
        self.normalize = normalize
        self.components: list[tuple[str, Reward, float]] = [
            (key, reward, weight / total if normalize else float(weight))
            for key, (reward, weight) in zip(_unique_names(r.name for r, _ in pairs), pairs)
        ]

    def close(self) -> None:
        for _, reward, _ in self.components:
            reward.close()

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        futures = [reward.submit(sample) for _, reward, _ in self.components]
        combined: Future[RewardOutput] = Future()
        pending = [len(futures)]
        lock = threading.Lock()

        def on_done(_: Future[RewardOutput]) -> None:
            with lock:
                pending[0] -= 1
                if pending[0]:
                    return
            try:
                combined.set_result(self.combine([f.result() for f in futures]))
            except BaseException as exc:  # noqa: BLE001 - a component's failure of ours, handed to the waiter
                combined.set_exception(exc)

        for future in futures:
            future.add_done_callback(on_done)
        return combined

    def combine(self, outputs: list[RewardOutput]) -> RewardOutput:
        """The weighted sum of the components' outputs, in component order."""
        parts = {key: out for (key, _, _), out in zip(self.components, outputs)}
        weights = {key: weight for key, _, weight in self.components}
        verdict = outputs[0].verdict  # the first component's: the one that judged the code
        rewards: list[float] = []
        scores: list[float] = []
        for (key, _, weight), out in zip(self.components, outputs):
            if out.reward is None or out.score is None:
                error = out.metadata.get("error") or "no reward"
                return RewardOutput(reward=None, score=None, verdict=verdict, components=parts,
                                    metadata={"weights": weights, "error": f"{key}: {error}"})
            rewards.append(weight * out.reward)
            scores.append(weight * out.score)
        reward, score = sum(rewards), sum(scores)  # in component order, as before
        return RewardOutput(reward=reward, score=min(1.0, max(0.0, score)), verdict=verdict, components=parts,
                            metadata={"weights": weights})

    def __repr__(self) -> str:
        parts = ", ".join(f"{key}={weight:g}" for key, _, weight in self.components)
        return f"CompositeReward({parts})"


def _unique_names(names: Iterable[str]) -> list[str]:
    unique: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in unique:
            n += 1
            candidate = f"{name}#{n}"
        unique.append(candidate)
    return unique
