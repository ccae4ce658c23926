"""AgentFly: reward functions for `@reward(name=...)` and `BaseReward(func=...)`.

AgentFly calls a reward with keywords only when a chain ends: the final
response (`prediction=` in released versions, `final_response=` in the newer
reward functions), `trajectory` (the chat messages), `id` (the chain), and
the dataset row's fields. It passes a keyword only when the function's
signature names it (`inspect.signature(func).parameters`; a `**kwargs`
parameter receives nothing), and awaits the function when
`inspect.iscoroutinefunction` holds. The result must be a float (an int is
rejected) or a dict with `"reward"`, its other values floats.

So the functions made here declare their keywords in `__signature__`: the
response under both names, `trajectory`, `id`, the label column and any
`columns` to keep. Use the async one: AgentFly awaits the reward inside its
rollout loop, where a sync call would stall every chain while the sandbox
runs. Register it with AgentFly's decorator:

    from agentfly.rewards import reward
    code_reward = reward(name="rewardbox_code")(agentfly_async_reward(label_column="tests"))

The result: `{"reward", "acc", "pass_rate", "unscorable"}`, all floats. An
unusable label gives reward 0.0 with `unscorable` 1.0 (AgentFly needs a float).
"""

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from rewardbox.adapters import completion_text, default_reward, message_text, outcome_stats, score_async
from rewardbox.rewards.base import Reward, RewardOutput, Sample

__all__ = ["agentfly_async_reward", "agentfly_reward"]

log = logging.getLogger(__name__)

_CALLER_KEYWORDS = ("final_response", "prediction", "trajectory", "id")


class _Spec:
    """What the made functions share: the keywords they declare and how a
    call becomes a sample and a result."""

    def __init__(self, reward: Reward | None, name: str | None, label_column: str, columns: Iterable[str],
                 keywords: tuple[str, ...] = _CALLER_KEYWORDS):
        self.reward = reward
        self.name = name or (reward.name if reward is not None else "correctness")
        self.label_column = label_column
        self.columns = tuple(c for c in columns if c != label_column)
        names = [*keywords, label_column, *self.columns]
        bad = [n for n in names if not n.isidentifier()]
        if bad or len(set(names)) != len(names):
            raise ValueError(f"column names must be distinct identifiers other than {keywords}: "
                             f"{label_column!r}, {self.columns}")
        self.signature = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names])

    def sample(self, kwargs: Mapping[str, Any]) -> Sample:
        response = kwargs.get("final_response")
        if response is None:
            response = kwargs.get("prediction")
        if response is None:  # the chain's last assistant turn
            text = completion_text(kwargs.get("trajectory") or [])
        else:
            text = response if isinstance(response, str) else message_text(response)
        chain = kwargs.get("id")
        return Sample(id=chain if isinstance(chain, (str, int)) and not isinstance(chain, bool) else None,
                      completion=text, label=kwargs.get(self.label_column),
                      columns={c: kwargs.get(c) for c in self.columns})

    def result(self, output: RewardOutput) -> dict[str, float]:
        if output.reward is None:
            log.warning("agentfly: reward 0.0 for an unusable label: %s", output.metadata.get("error"))
        return {"reward": float(output.reward) if output.reward is not None else 0.0, **outcome_stats(output)}

    def shape(self, function: Callable[..., Any]) -> Callable[..., Any]:
        function.__name__ = function.__qualname__ = self.name
        function.__signature__ = self.signature  # type: ignore[attr-defined]  # what AgentFly filters keywords by
        return function


def agentfly_reward(reward: Reward | None = None, *, name: str | None = None, label_column: str = "label",
                    columns: Iterable[str] = ()) -> Callable[..., dict[str, float]]:
    """An AgentFly reward function over `reward` (default `CorrectnessReward()`)
    that blocks while it scores.

    >>> import inspect
    >>> f = agentfly_reward(name="code", label_column="tests", columns=["entry_point"])
    >>> f.__name__, list(inspect.signature(f).parameters)
    ('code', ['final_response', 'prediction', 'trajectory', 'id', 'tests', 'entry_point'])
    """
    spec = _Spec(reward, name, label_column, columns)

    def score(**kwargs: Any) -> dict[str, float]:
        reward_ = spec.reward if spec.reward is not None else default_reward()
        return spec.result(reward_.score(spec.sample(kwargs)))

    return spec.shape(score)


def agentfly_async_reward(reward: Reward | None = None, *, name: str | None = None, label_column: str = "label",
                          columns: Iterable[str] = ()) -> Callable[..., Awaitable[dict[str, float]]]:
    """An AgentFly reward function that AgentFly awaits; the event loop keeps
    running other chains while the sample is scored.

    >>> import inspect
    >>> inspect.iscoroutinefunction(agentfly_async_reward())
    True
    """
    spec = _Spec(reward, name, label_column, columns)

    async def score(**kwargs: Any) -> dict[str, float]:
        reward_ = spec.reward if spec.reward is not None else await asyncio.to_thread(default_reward)
        (output,) = await score_async(reward_, [spec.sample(kwargs)])
        return spec.result(output)

    return spec.shape(score)
