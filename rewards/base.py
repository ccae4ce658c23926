"""The one shape every reward has: a sample in, a `RewardOutput` out.

A subclass implements `score` (one sample, synchronously) or `submit` (one
sample, returning a future); the base class derives the other and `score_many`.
Rewards that do slow work elsewhere (the sandbox, a math worker) implement
`submit`, so a batch runs in parallel.

Two failure channels: what the model wrote is data (a reward, or `None` with
`metadata["error"]` when the label cannot be used); what we failed at (the
engine is down) raises from `score` or from the future.
"""

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Sample(BaseModel):
    """One rollout to score. `label` is the dataset's label column, raw;
    `columns` holds the dataset's other columns, for rewards that want them."""

    model_config = ConfigDict(frozen=True)

    id: str | int | None = None
    completion: str
    label: Any = None
    prompt: str | None = None
    columns: dict[str, Any] = Field(default_factory=dict)


class RewardOutput(BaseModel):
    """A scored sample. `reward` is the training signal, `score` the same
    outcome mapped onto [0, 1]; both are None when the sample cannot be scored
    through no fault of the model (`metadata["error"]` says why)."""

    model_config = ConfigDict(frozen=True)

    reward: float | None
    score: float | None
    token_rewards: list[float] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def unscorable(cls, error: str, **metadata: Any) -> "RewardOutput":
        return cls(reward=None, score=None, metadata={**metadata, "error": error})


class Reward:
    """Base of every reward. `name` keys the registry and the logs."""

    name: str = "reward"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.score is Reward.score and cls.submit is Reward.submit:
            raise TypeError(f"{cls.__name__} must implement score() or submit()")

    def score(self, sample: Sample) -> RewardOutput:
        return self.submit(sample).result()

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        future: Future[RewardOutput] = Future()
        try:
            future.set_result(self.score(sample))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            future.set_exception(exc)
        return future

    def score_many(self, samples: Iterable[Sample]) -> list[RewardOutput]:
        """Scores in the order given; the samples are all submitted first."""
        futures = [self.submit(s) for s in samples]
        return [f.result() for f in futures]

    def close(self) -> None:
        """Releases what the reward holds (containers, worker processes); the
        default holds nothing."""

    def __enter__(self) -> "Reward":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, completion: str, label: Any = None, prompt: str | None = None, **columns: Any) -> RewardOutput:
        return self.score(Sample(completion=completion, label=label, prompt=prompt, columns=columns))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def done(output: RewardOutput) -> "Future[RewardOutput]":
    """A future that already holds `output`."""
    future: Future[RewardOutput] = Future()
    future.set_result(output)
    return future
