"""The one shape every reward has: a sample in, a `RewardOutput` out.

A subclass implements `score` (one sample, synchronously) or `submit` (one
sample, returning a future); the base class derives the other and `score_many`.
Rewards that do slow work elsewhere (the sandbox, a math worker) implement
`submit`, so a batch runs in parallel.

Two failure channels: what the model wrote is data (a reward, or `None` with
`metadata["error"]` when the label cannot be used); what we failed at (the
engine is down) raises from `score` or from the future.
"""

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from rewardbox.sandbox import Verdict


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
    through no fault of the model (`metadata["error"]` says why).

    What every consumer reads is typed: `verdict` (None when the reward
    judged nothing), the tests `passed` of `total` and the run's `duration_s`
    (None when the reward has no such figure), and a composite's `components`
    (its parts' outputs, by name). `metadata` holds the rest, free-form.
    Outputs built the older way, with these keys in `metadata`, are read the
    same: a value of the right type moves to its field.

    >>> out = RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed", "passed": 2, "total": 2, "why": "ok"})
    >>> out.verdict, out.passed, out.total, out.metadata
    (<Verdict.PASSED: 'passed'>, 2, 2, {'why': 'ok'})
    >>> out.details()
    {'verdict': 'passed', 'passed': 2, 'total': 2, 'why': 'ok'}
    """

    model_config = ConfigDict(frozen=True)

    reward: float | None
    score: float | None
    token_rewards: list[float] = Field(default_factory=list)
    verdict: Verdict | None = None
    passed: int | None = None
    total: int | None = None
    duration_s: float | None = None
    components: dict[str, "RewardOutput"] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _typed_from_metadata(cls, data: Any) -> Any:
        """Moves the typed keys a reward put in `metadata` to their fields;
        a value of another type (a reward function's own "verdict" word)
        stays in `metadata`, free-form."""
        if not isinstance(data, Mapping) or not isinstance(data.get("metadata"), Mapping):
            return data
        metadata = dict(data["metadata"])
        fields = {key: metadata.pop(key) for key in list(metadata)
                  if key in _TYPED and key not in data and _typed(key, metadata[key])}
        return {**data, **fields, "metadata": metadata} if fields else data

    @classmethod
    def unscorable(cls, error: str, **metadata: Any) -> "RewardOutput":
        return cls(reward=None, score=None, metadata={**metadata, "error": error})

    def details(self) -> dict[str, Any]:
        """The output as one flat dict, the shape the CLI's lines, the
        service's answers and the adapters' logs show: the typed fields that
        are set (the verdict as its word), a composite's components as
        `{"reward", "score", "metadata"}` each, then `metadata`."""
        typed: dict[str, Any] = {
            "verdict": self.verdict.value if self.verdict is not None else None,
            "passed": self.passed, "total": self.total, "duration_s": self.duration_s,
        }
        flat = {key: value for key, value in typed.items() if value is not None}
        if self.components:
            flat["components"] = {key: {"reward": part.reward, "score": part.score, "metadata": part.details()}
                                  for key, part in self.components.items()}
        return {**flat, **self.metadata}

    @overload
    def first(self, field: Literal["verdict"]) -> Verdict | None: ...
    @overload
    def first(self, field: Literal["passed", "total"]) -> int | None: ...
    @overload
    def first(self, field: Literal["duration_s"]) -> float | None: ...

    def first(self, field: Literal["verdict", "passed", "total", "duration_s"]) -> Verdict | int | float | None:
        """This output's typed `field` or, when it is None, the first
        composite component's (depth first, in component order) that is set:
        what a composite's verdict, test counts or duration are for logs.

        >>> part = RewardOutput(reward=1.0, score=1.0, passed=3, total=3)
        >>> RewardOutput(reward=1.0, score=1.0, components={"code": part}).first("passed")
        3
        """
        value: Verdict | int | float | None = getattr(self, field)
        if value is not None:
            return value
        for part in self.components.values():
            if (found := part.first(field)) is not None:
                return found
        return None

    def first_metadata(self, key: str) -> Any:
        """`metadata[key]` or, when it is None, the first composite
        component's (depth first) that is set."""
        if self.metadata.get(key) is not None:
            return self.metadata[key]
        for part in self.components.values():
            if (found := part.first_metadata(key)) is not None:
                return found
        return None


_TYPED = ("verdict", "passed", "total", "duration_s", "components")


def _typed(key: str, value: Any) -> bool:
    """Whether `value` is what the typed field `key` holds (None included)."""
    if value is None:
        return True
    if key == "verdict":
        return isinstance(value, Verdict) or (isinstance(value, str) and value in _VERDICTS)
    if key in ("passed", "total"):
        return isinstance(value, int) and not isinstance(value, bool)
    if key == "duration_s":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    try:
        _COMPONENTS.validate_python(value)
    except ValidationError:
        return False
    return True


_VERDICTS = frozenset(v.value for v in Verdict)


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


_COMPONENTS: "TypeAdapter[dict[str, RewardOutput]]" = TypeAdapter(dict[str, RewardOutput])
