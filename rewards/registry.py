"""Rewards by name: a registry, the `@reward` decorator that turns a plain
function into a `Reward`, and composition specs.

    @reward
    def short_answer(completion, answer):      # `answer` is a dataset column
        return 1.0 if len(completion) < 200 and answer in completion else 0.0

    resolve("correctness=0.9,format_think_answer=0.1")   # a CompositeReward

Names are looked up in lower case. A registry holds rewards or factories; a
factory runs once, when its name is first asked for, so a built-in that needs
the sandbox starts nothing until it is used.
"""

import asyncio
import inspect
import math
import numbers
import re
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.composite import CompositeReward
from rewardbox.rewards.format import FormatReward
from rewardbox.rewards.length import LengthReward

if TYPE_CHECKING:
    from rewardbox.rewards.policy import GradingPolicy
    from rewardbox.sandbox import Limits, SandboxBackend

# "=", "," and "#" have meanings in specs and composite names.
_NAME = re.compile(r"[^\s=,#]+")


class UnknownRewardError(KeyError, ValueError):
    """No reward is registered under the name; the message lists those that are."""

    def __str__(self) -> str:
        return str(self.args[0])


class FunctionReward(Reward):
    """A reward computed by a plain function, sync or `async def`.

    The function is called with keyword arguments, only those it names (all
    of them if it has `**kwargs`): `completion`, `prompt`, `label`, `sample`,
    `id` and every column in `sample.columns` (a column never shadows the first
    five). It returns a number, a dict with `"reward"` (and optionally
    `"score"`, `"token_rewards"`; other keys become metadata), a
    `RewardOutput`, or None for "no reward". Without a score from the function,
    the score is the reward clamped into [0, 1].

    An async function runs on an event loop in a background thread owned by
    this reward, started when first needed: `submit` returns at once, so a
    batch of calls runs concurrently, and callers never need a loop of their
    own. An exception raised by the function is a bug in it, not the model's
    fault: it propagates from `score` and from the future.

    >>> def exact(completion, label):
    ...     return completion.strip() == label
    >>> FunctionReward(exact)("42 ", label="42").reward
    1.0
    """

    def __init__(self, func: Callable[..., Any], name: str | None = None):
        self.func = func
        self.name = name or str(getattr(func, "__name__", type(func).__name__))
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))  # noqa: B004 (the method, not callability)
        self._keywords, self._required, self._takes_all = _keywords(func)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def arguments(self, sample: Sample) -> dict[str, Any]:
        """The keyword arguments the function gets for `sample`."""
        available = {**sample.columns, "completion": sample.completion, "prompt": sample.prompt,
                     "label": sample.label, "sample": sample, "id": sample.id}
        if missing := self._required - available.keys():
            raise TypeError(f"reward function {self.name!r} needs {sorted(missing)}, which the sample lacks; "
                            f"it has {sorted(available)}")
        return available if self._takes_all else {k: v for k, v in available.items() if k in self._keywords}

    def score(self, sample: Sample) -> RewardOutput:
        if self.is_async:
            return self.submit(sample).result()
        value = self.func(**self.arguments(sample))
        if inspect.isawaitable(value):  # a sync wrapper around an async function
            value = asyncio.run_coroutine_threadsafe(_wait(value), self._event_loop()).result()
        return to_output(value)

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        if not self.is_async:
            return super().submit(sample)
        return asyncio.run_coroutine_threadsafe(self._run(self.arguments(sample)), self._event_loop())

    async def _run(self, arguments: dict[str, Any]) -> RewardOutput:
        return to_output(await self.func(**arguments))

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=f"reward-{self.name}", daemon=True)
                self._thread.start()
            return self._loop

    def close(self) -> None:
        """Stops the background loop, if one was started; call when no future is pending."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    # Picklable (Ray, multiprocessing) when the function is: the loop is rebuilt on demand.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_loop", "_thread")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _loop=None, _thread=None)


def _keywords(func: Callable[..., Any]) -> tuple[frozenset[str], frozenset[str], bool]:
    """The keywords `func` accepts, those it requires, and whether it takes `**kwargs`."""
    accepted, required, takes_all = set(), set(), False
    for param in inspect.signature(func).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            takes_all = True
        elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            accepted.add(param.name)
            if param.default is param.empty:
                required.add(param.name)
        elif param.kind is param.POSITIONAL_ONLY and param.default is param.empty:
            raise TypeError(f"a reward function is called with keywords only; {param.name!r} is positional-only")
    return frozenset(accepted), frozenset(required), takes_all


async def _wait(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def to_output(value: Any) -> RewardOutput:
    """A reward function's return value as a `RewardOutput`.

    >>> to_output(1).reward, to_output(-0.5).score
    (1.0, 0.0)
    >>> out = to_output({"reward": 0.5, "score": 0.75, "why": "half"})
    >>> out.score, out.metadata
    (0.75, {'why': 'half'})
    >>> to_output(None).reward is None
    True
    """
    if isinstance(value, RewardOutput):
        return value
    if value is None:
        return RewardOutput.unscorable("the reward function returned None")
    if isinstance(value, dict):
        if "reward" not in value:
            raise ValueError(f"a reward function's dict needs a 'reward' key; got keys {sorted(value)}")
        rest = dict(value)
        reward, score, token_rewards = rest.pop("reward"), rest.pop("score", None), rest.pop("token_rewards", [])
        if reward is None:
            return RewardOutput.unscorable(str(rest.pop("error", None) or "the reward function returned no reward"), **rest)
        reward = _number(reward, "reward")
        score = min(1.0, max(0.0, reward)) if score is None else _number(score, "score")
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"a reward function's score must lie in [0, 1], got {score}")
        return RewardOutput(reward=reward, score=score, token_rewards=token_rewards, metadata=rest)
    reward = _number(value, "reward")
    return RewardOutput(reward=reward, score=min(1.0, max(0.0, reward)))


def _number(value: Any, what: str) -> float:
    if not isinstance(value, numbers.Real):
        raise TypeError(f"a reward function's {what} must be a number, a dict, a RewardOutput or None; "
                        f"got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"a reward function's {what} must be finite, got {number}")
    return number


class Registry:
    """Rewards and reward factories by lower-case name. Thread-safe."""

    def __init__(self, fallback: "Registry | None" = None) -> None:
        self._entries: dict[str, Reward | Callable[[], Reward]] = {}
        self._lock = threading.RLock()  # reentrant: a factory may look up other rewards
        self.fallback = fallback  # asked for names this registry lacks

    def register(self, name: str, reward: Reward | Callable[[], Reward], replace: bool = False) -> None:
        """Registers a reward, or a factory (e.g. a Reward class) called on first `get`."""
        key = name.strip().lower()
        if not _NAME.fullmatch(key):
            raise ValueError(f"invalid reward name {name!r}: it must be non-empty, without spaces, '=', ',' or '#'")
        if not (isinstance(reward, Reward) or callable(reward)):
            raise TypeError(f"register a Reward or a factory returning one, not {type(reward).__name__}")
        with self._lock:
            if key in self._entries and not replace:
                raise ValueError(f"a reward named {key!r} is already registered (pass replace=True to replace it)")
            self._entries[key] = reward

    def get(self, name: str) -> Reward:
        key = name.strip().lower()
        with self._lock:
            if key not in self._entries and self.fallback is not None and key in self.fallback:
                return self.fallback.get(key)
            if key not in self._entries:
                raise UnknownRewardError(f"unknown reward {name!r}; known: {', '.join(self.names()) or 'none'}")
            entry = self._entries[key]
            if not isinstance(entry, Reward):
                entry = entry()
                if not isinstance(entry, Reward):
                    raise TypeError(f"the factory of reward {key!r} returned {type(entry).__name__}, not a Reward")
                self._entries[key] = entry
            return entry

    def names(self) -> list[str]:
        with self._lock:
            return sorted(set(self._entries) | set(self.fallback.names() if self.fallback else ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name.strip().lower() in self._entries
                                          or (self.fallback is not None and name in self.fallback))

    def resolve(self, spec: str) -> Reward:
        """A registered name, or a weighted mix `"name=weight,name=weight"` (a
        missing weight is 1; weights are normalised to sum 1).

        >>> registry = Registry()
        >>> register_builtins(registry)
        >>> registry.resolve("format_think_answer=3,Length")
        CompositeReward(format_think_answer=0.75, length=0.25)
        """
        text = spec.strip()
        if "=" not in text and "," not in text:
            return self.get(text)
        pairs = []
        for item in text.split(","):
            name, has_weight, weight = (part.strip() for part in item.partition("="))
            if not name:
                raise ValueError(f"reward spec {spec!r}: no name in {item.strip()!r}")
            try:
                number = float(weight) if has_weight else 1.0
            except ValueError:
                raise ValueError(f"reward spec {spec!r}: the weight of {name!r} is not a number: {weight!r}") from None
            pairs.append((self.get(name), number))
        return CompositeReward(pairs, normalize=True)


def register_builtins(registry: Registry, sandbox: "SandboxBackend | None" = None, policy: "GradingPolicy | None" = None,
                      limits: "Limits | None" = None, language: str = "python") -> None:
    """Registers the built-in rewards, as factories: nothing is built until
    asked for. `code` and `correctness` share one `CodeReward` (one bound on
    containers), made with the given sandbox, policy, limits and default language."""
    registry.register("format_think_answer", FormatReward.think_answer)
    registry.register("format_one_code_block", FormatReward.one_code_block)
    registry.register("length", LengthReward)

    def code() -> Reward:
        from rewardbox.rewards.code import CodeReward

        return CodeReward(sandbox, policy, limits, language)

    def math_reward() -> Reward:
        from rewardbox.rewards.math import MathReward

        return MathReward()

    def correctness() -> Reward:
        from rewardbox.rewards.correctness import CorrectnessReward

        return CorrectnessReward(code=registry.get("code"), math=registry.get("math"))  # type: ignore[arg-type]

    registry.register("code", code)
    registry.register("math", math_reward)
    registry.register("correctness", correctness)


def configured_registry(sandbox: "SandboxBackend | None" = None, policy: "GradingPolicy | None" = None,
                        limits: "Limits | None" = None, language: str = "python") -> Registry:
    """Built-ins made with this sandbox, policy, limits and default language
    (a stdio label's that names none); other names (your `@reward` functions)
    come from the default registry."""
    registry = Registry(fallback=default_registry)
    register_builtins(registry, sandbox, policy, limits, language)
    return registry


default_registry = Registry()
register_builtins(default_registry)


def register(name: str, reward: Reward | Callable[[], Reward], replace: bool = False) -> None:
    """`Registry.register` on the default registry."""
    default_registry.register(name, reward, replace)


def get(name: str) -> Reward:
    """`Registry.get` on the default registry."""
    return default_registry.get(name)


def names() -> list[str]:
    """`Registry.names` of the default registry."""
    return default_registry.names()


def resolve(spec: str) -> Reward:
    """`Registry.resolve` on the default registry."""
    return default_registry.resolve(spec)


def reward(func: Callable[..., Any] | None = None, *, name: str | None = None, registry: Registry | None = None,
           replace: bool = False) -> Any:
    """Wraps a function into a `FunctionReward` and registers it, under `name`
    or the function's name. Usable bare (`@reward`) or with arguments
    (`@reward(name="x")`); the decorated name is then the `FunctionReward`.

    Registering the same definition again (a re-imported module, a re-run
    notebook cell: same module and qualified name) replaces it; another
    function under a taken name is an error unless `replace`.
    """
    def wrap(f: Callable[..., Any]) -> FunctionReward:
        target = default_registry if registry is None else registry
        wrapped = FunctionReward(f, name)
        with target._lock:
            old = target._entries.get(wrapped.name.strip().lower())
            same = isinstance(old, FunctionReward) and _definition(old.func) == _definition(f)
            target.register(wrapped.name, wrapped, replace=replace or same)
        return wrapped

    return wrap if func is None else wrap(func)


def _definition(func: Callable[..., Any]) -> tuple[str | None, str | None]:
    return getattr(func, "__module__", None), getattr(func, "__qualname__", None)
