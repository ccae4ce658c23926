"""OpenRLHF's `reward_func` as an object: samples in, float32 tensors out, one reward per process.

Part of `rewardbox.adapters.openrlhf` (which re-exports these names and holds
the module-level `reward_func` OpenRLHF loads by path); the agent episode
scores its steps with the same process reward.
"""

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

import torch

from rewardbox.adapters import split_response
from rewardbox.adapters.openrlhf_settings import build_reward, settings_from_env
from rewardbox.rewards.base import Reward, Sample
from rewardbox.rewards.logs import LOG_KEYS, sample_logs, trainer_numbers
from rewardbox.sandbox import SandboxError
from rewardbox.settings import Settings

__all__ = ["OpenRLHFReward", "Scores"]

# The adapter's one logger, whichever of its modules logs: users configure it by that name.
log = logging.getLogger("rewardbox.adapters.openrlhf")


class OpenRLHFReward:
    """OpenRLHF's `reward_func` over one `Reward`. Thread-safe.

    Without a `reward`, the reward is built from the settings (default: the
    environment) on the first call, once per process: the file is imported in
    every Ray actor that scores.
    """

    def __init__(self, reward: Reward | None = None, settings: Settings | None = None):
        self._given = reward
        self._built: tuple[int, Reward] | None = None  # with the pid that built it
        self._settings = settings
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = settings_from_env()  # a race only parses the same environment twice
        return self._settings

    @property
    def reward(self) -> Reward:
        if self._given is not None:
            return self._given
        built = self._built
        # A forked child inherits the parent's reward, whose engine connection
        # and threads do not work there: it builds its own.
        if built is None or built[0] != os.getpid():
            with self._lock:
                built = self._built
                if built is None or built[0] != os.getpid():
                    settings = self.settings
                    try:
                        reward = build_reward(settings)
                    except SandboxError as exc:
                        log.error("rewardbox could not start its reward %r: %s", settings.reward, exc)
                        raise
                    built = self._built = (os.getpid(), reward)
                    log.info("rewardbox scores OpenRLHF samples with %r", reward)
        return built[1]

    def __call__(self, queries: Sequence[str], prompts: Sequence[str | None] | None = None,
                 labels: Sequence[Any] | None = None, **_: Any) -> dict[str, Any]:
        """`{"rewards", "scores", "extra_logs": {name: ...}}`, each a float32
        tensor of shape `(len(queries),)`; scores in [0, 1], a `Scores` (true
        even when it holds 0.0)."""
        n = len(queries)
        prompts = [None] * n if prompts is None else list(prompts)
        labels = [None] * n if labels is None else list(labels)
        if len(prompts) != n or len(labels) != n:
            raise ValueError(f"reward_func got {n} queries, {len(prompts)} prompts and {len(labels)} labels")
        samples = [Sample(id=i, completion=split_response(query, prompt if isinstance(prompt, str) else None),
                          label=label, prompt=prompt if isinstance(prompt, str) else None)
                   for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels))]
        try:
            outputs = self.reward.score_many(samples) if samples else []
        except SandboxError as exc:
            log.error("rewardbox could not score %d sample(s), raising to the trainer: %s", n, exc)
            raise
        numbers = [trainer_numbers(out, f"sample {i} of {n}") for i, out in enumerate(outputs)]
        logs = [sample_logs(out) for out in outputs]
        return {
            "rewards": _tensor([reward for reward, _ in numbers]),
            "scores": _tensor([score for _, score in numbers]).as_subclass(Scores),
            "extra_logs": {key: _tensor([row[key] for row in logs]) for key in LOG_KEYS},
        }

    def reset(self) -> None:
        """Forget the built reward (closing it if it can be closed) and the
        settings; the next call builds them again. A given reward is kept."""
        with self._lock:
            built, self._built, self._settings = self._built, None, None
        if built is not None and built[0] == os.getpid() and callable(getattr(built[1], "close", None)):
            built[1].close()


def _tensor(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


class Scores(torch.Tensor):
    """The `scores` tensor: true whenever it holds a value, even 0.0.

    OpenRLHF 0.9.1 to 0.10.0 keep `rewards_info.get("scores") or
    rewards_info.get("rewards")`, and a one-sample tensor holding 0.0 is false:
    the reward (-1.0 for a syntax error) took the score's place, and dynamic
    filtering dropped groups whose mean score lay inside its range. Anything
    computed from it is a plain tensor (no torch function of ours), and it is
    pickled as one, so a process without rewardbox (Ray's driver) can read it.

    >>> scores = torch.tensor([0.0]).as_subclass(Scores)
    >>> (scores or torch.tensor([-1.0])).tolist(), bool(scores == 0), type(scores * 2).__name__
    ([0.0], True, 'Tensor')
    """

    # torch's own way to turn its function dispatch off; its stub types it as a different callable
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return self.numel() > 0

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.as_subclass(torch.Tensor).__reduce_ex__(protocol)  # type: ignore[no-untyped-call]  # unannotated in torch

    def __deepcopy__(self, memo: dict[int, Any]) -> "Scores":
        return torch.Tensor.clone(self).as_subclass(Scores)


_PROCESS = OpenRLHFReward()
"""This process's reward: the file's `reward_func` and every `CodingEpisode` without a scorer use it."""
