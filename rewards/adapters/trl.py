"""TRL: reward functions for `GRPOTrainer(reward_funcs=[...])`.

TRL calls each reward function with keywords only,
`f(prompts=..., completions=..., completion_ids=..., **columns)`, where the
columns are the dataset's other columns (one value per completion) plus
`trainer_state`, `log_extra` and `log_metric`; it returns one reward per
completion, `None` meaning "no reward for this sample".

What the async function has to be, for every TRL since async rewards (0.27.0):
- awaited: TRL 0.27-0.29 test `asyncio.iscoroutinefunction(f)`, 1.0-1.13
  `inspect.iscoroutinefunction(f)` (an object with an `async __call__` fails
  both; Python 3.10 and 3.11 have no `inspect.markcoroutinefunction`), 1.14
  and later unwrap partials and look at `__call__` too;
- named: TRL up to 1.8 logs `f.__name__`, 1.9 and later `get_callable_name(f)`,
  which unwraps `functools.partial` (a name set on a partial is lost);
- picklable: the async GRPO worker pickles it into a spawned child.
So it is a bound method: its function a copy of `_score_async` renamed to the
reward's name (a coroutine function under every check), its `self` a
`_Named` holder that pickles, and that gives the method back by that name
(a bound method pickles as `getattr(self, name)`). The sync reward is a
`TrlReward`, named by its `__name__` under both naming rules.

The label comes from `label_column`; when the dataset has no such column, from
the first column below that it has, as real datasets ship them:

    reward_model              verl-style parquet: {"ground_truth": ...}
    ground_truth              verl exports, many RL datasets
    verification_info         open-r1 (verifiable-coding-problems)
    input_output              APPS, TACO (JSON: inputs, outputs, fn_name)
    test_list                 MBPP, with test_setup_code / test_imports as setup
    test + entry_point        HumanEval (a check(candidate) function)
    test                      KodCode (a pytest module importing `solution`)
    tests                     assert lists
    solution                  MATH, TRL's accuracy_reward datasets (answer in \\boxed{})
    answer                    GSM8K

For the command line: `trl grpo --reward_funcs rewardbox.adapters.trl.correctness_reward`.
"""

import asyncio
import logging
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardbox.adapters import completion_text, default_reward, outcome_stats, prompt_text, score_async
from rewardbox.rewards.base import Reward, RewardOutput, Sample

__all__ = ["TrlReward", "correctness_reward", "correctness_reward_async", "trl_async_reward", "trl_reward"]

log = logging.getLogger(__name__)

# Keywords TRL passes that are not dataset columns; `prompt` is the async GRPO
# worker's single chat prompt for the whole group.
_NOT_COLUMNS = frozenset({"prompt", "prompts", "completions", "completion_ids", "trainer_state",
                          "log_extra", "log_metric", "environments"})
_ID_COLUMNS = ("id", "task_id", "problem_id")

Columns = Mapping[str, Sequence[Any]]


class TrlReward:
    """A TRL reward function over any `Reward`: the batch is scored in parallel
    (`score_many`), an unusable label gives `None`.

    When TRL passes `log_extra` / `log_metric`, each sample's verdict goes to
    the completions table as `<name>/verdict`, and the fractions of solved and
    unscorable samples to the metrics as `<name>/solved_frac` and
    `<name>/unscorable_frac`.
    """

    def __init__(self, reward: Reward | None = None, label_column: str = "label", *, name: str | None = None):
        self.reward = reward  # None: the process's default reward, made on the first call
        self.label_column = label_column
        self.__name__ = name or (reward.name if reward is not None else "correctness")
        self._announced = False

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        samples = self.samples(prompts, completions or [], kwargs)
        if not samples:
            return []
        outputs = (self.reward if self.reward is not None else default_reward()).score_many(samples)
        self.report(outputs, kwargs)
        return [o.reward for o in outputs]

    def samples(self, prompts: Sequence[Any] | None, completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Sample]:
        """The batch as samples: completion and prompt as text, the label from
        its column, the other columns in `Sample.columns`."""
        n = len(completions)
        if n == 0:
            return []
        columns = {k: v for k, v in kwargs.items()
                   if k not in _NOT_COLUMNS and isinstance(v, (list, tuple)) and len(v) == n}
        labels, used = labels_from(columns, self.label_column)
        if not self._announced:
            self._announced = True
            log.info("%s: labels from column(s) %s", self.__name__, ", ".join(sorted(used)))
        prompts = list(prompts) if prompts is not None else [None] * n
        samples = []
        for i, completion in enumerate(completions):
            row = {k: v[i] for k, v in columns.items() if k not in used}
            samples.append(Sample(id=_sample_id(row), completion=completion_text(completion), label=labels[i],
                                  prompt=prompt_text(prompts[i]) if i < len(prompts) else None, columns=row))
        return samples

    def report(self, outputs: Sequence[RewardOutput], kwargs: Mapping[str, Any]) -> None:
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        if callable(log_extra):
            log_extra(f"{self.__name__}/verdict",
                      [o.verdict.value if o.verdict is not None else ("unscorable" if o.reward is None else "")
                       for o in outputs])
        if callable(log_metric) and outputs:
            stats = [outcome_stats(o) for o in outputs]
            log_metric(f"{self.__name__}/solved_frac", sum(s["acc"] for s in stats) / len(stats))
            log_metric(f"{self.__name__}/unscorable_frac", sum(s["unscorable"] for s in stats) / len(stats))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_announced": False}

    def __repr__(self) -> str:
        return f"TrlReward({self.reward!r}, label_column={self.label_column!r}, name={self.__name__!r})"


def trl_reward(reward: Reward | None = None, label_column: str = "label", *, name: str | None = None) -> TrlReward:
    """A TRL reward function (sync) over `reward`; by default the process's
    `default_reward()`, which the settings describe (REWARDBOX_REWARD, _IMAGE,
    _WORKERS, ... or the REWARDBOX_CONFIG file; `rewardbox.settings`).

    >>> f = trl_reward(name="tests_passed")
    >>> f.__name__, callable(f)
    ('tests_passed', True)
    """
    return TrlReward(reward, label_column, name=name)


def trl_async_reward(reward: Reward | None = None, label_column: str = "label", *,
                     name: str | None = None) -> Callable[..., Any]:
    """A TRL reward function TRL awaits: the batch is scored without blocking
    TRL's event loop, alongside the other async reward functions.

    >>> import inspect, pickle
    >>> f = trl_async_reward(name="tests_passed")
    >>> inspect.iscoroutinefunction(f), f.__name__, pickle.loads(pickle.dumps(f)).__name__
    (True, 'tests_passed', 'tests_passed')
    """
    return _Named(TrlReward(reward, label_column, name=name))._rewardbox_method()


class _Named:
    """The `self` of an async reward function (module docstring): holds the
    scorer, and answers the attribute named as the reward with the method."""

    __slots__ = ("_rewardbox_scorer",)

    def __init__(self, scorer: TrlReward):
        if hasattr(type(self), scorer.__name__):
            raise ValueError(f"{scorer.__name__!r} cannot name an async TRL reward: pick another name")
        self._rewardbox_scorer = scorer

    def _rewardbox_method(self) -> Callable[..., Any]:
        name = self._rewardbox_scorer.__name__
        function = types.FunctionType(_score_async.__code__, _score_async.__globals__, name, _score_async.__defaults__)
        function.__qualname__ = name
        return types.MethodType(function, self)

    def __getattr__(self, attr: str) -> Any:
        # Unpickling a method calls getattr(self, name) on the rebuilt holder.
        if attr != "_rewardbox_scorer" and attr == self._rewardbox_scorer.__name__:
            return self._rewardbox_method()
        raise AttributeError(attr)

    def __getstate__(self) -> TrlReward:
        return self._rewardbox_scorer

    def __setstate__(self, scorer: TrlReward) -> None:
        self._rewardbox_scorer = scorer

    def __repr__(self) -> str:
        return repr(self._rewardbox_scorer)


async def _score_async(holder: _Named, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                       completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
    scorer = holder._rewardbox_scorer
    samples = scorer.samples(prompts, completions or [], kwargs)
    if not samples:
        return []
    reward = scorer.reward if scorer.reward is not None else await asyncio.to_thread(default_reward)  # may connect
    outputs = await score_async(reward, samples)
    scorer.report(outputs, kwargs)
    return [o.reward for o in outputs]


def labels_from(columns: Columns, label_column: str = "label") -> tuple[list[Any], set[str]]:
    """Each row's raw label, and the columns it was read from (see the module
    docstring for the order). Raises `ValueError` when no column holds labels:
    that is a wrong configuration, not a bad sample.

    >>> labels, used = labels_from({"test": ["def check(candidate): ..."], "entry_point": ["add"]})
    >>> labels, sorted(used)
    ([{'test': 'def check(candidate): ...', 'entry_point': 'add'}], ['entry_point', 'test'])
    >>> labels_from({"answer": ["42"], "question": ["6*7?"]})[0]
    ['42']
    """
    if label_column in columns:
        return list(columns[label_column]), {label_column}
    if "reward_model" in columns:
        return [rm.get("ground_truth") if isinstance(rm, Mapping) else None for rm in columns["reward_model"]], {"reward_model"}
    for key in ("ground_truth", "verification_info", "input_output"):
        if key in columns:
            return list(columns[key]), {key}
    if "test_list" in columns:
        return _mbpp(columns), {"test_list", "test_setup_code", "test_imports"} & set(columns)
    if "test" in columns and "entry_point" in columns:
        return ([{"test": t, "entry_point": e} for t, e in zip(columns["test"], columns["entry_point"], strict=True)],
                {"test", "entry_point"})
    if "test" in columns:
        return [{"pytest": t} if isinstance(t, str) else t for t in columns["test"]], {"test"}
    if "tests" in columns:
        return [{"tests": list(t)} if isinstance(t, (list, tuple)) else t for t in columns["tests"]], {"tests"}
    for key in ("solution", "answer"):
        if key in columns:
            return list(columns[key]), {key}
    raise ValueError(f"no label column: {label_column!r} is not among the dataset's columns {sorted(columns)}, "
                     "nor any known one (pass label_column=...)")


def _mbpp(columns: Columns) -> list[Any]:
    labels = []
    for i, tests in enumerate(columns["test_list"]):
        imports = columns["test_imports"][i] if "test_imports" in columns else None
        setup_code = columns["test_setup_code"][i] if "test_setup_code" in columns else None
        setup = "\n".join([*(imports or []), setup_code or ""]).strip()
        labels.append({"tests": list(tests), "setup": setup} if setup else {"tests": list(tests)})
    return labels


def _sample_id(row: Mapping[str, Any]) -> str | int | None:
    for key in _ID_COLUMNS:
        value = row.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
    return None


# For `trl grpo --reward_funcs rewardbox.adapters.trl.correctness_reward`: nothing is built until the first call.
correctness_reward = trl_reward()
correctness_reward_async = trl_async_reward()
