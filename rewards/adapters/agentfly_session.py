"""AgentFly: a rollout-scoped resource backed by a rewardbox session, and a reward that scores from it.

AgentFly's stateful tools and rewards get a resource from the rollout's
`Context`: `await context.acquire_resource(spec=..., scope="rollout",
backend="local")`, the same resource for every call of one rollout (its
`rollout_id`), ended by `context.end_resource(scope="rollout")` when the
chain is finalised, after the reward ran. With `backend="local"`, a spec of
category `"local_env"` names a class by its dotted path (`env_cls_path`); the
runner imports it, builds it with `init_kwargs`, wraps it in its
`LocalEnvResource` (which forwards `start`, `reset`, `end`/`close` to the
env's `start`, `reset`, `aclose`, and any other attribute to the env) and
awaits `start()`. This is the protocol of AgentFly's commit
1256586b1109ba8e0dc0f179f8515b4567d09df4 (github Agent-One-Lab/AgentFly,
2026-05-06: `src/agentfly/core/context.py`, `resources/engine.py`,
`resources/runner.py`, `resources/local_env_resource.py`, `envs/env_base.py`,
`agents/chain/chain_base.py`'s `_finalize_chain`). AgentFly is not on PyPI
(the PyPI name `agentfly` is an unrelated project) and needs Python 3.12, so
nothing here imports it unless it is there.

- `SessionEnv` is the env: `start()` opens a session (a container of its own,
  `rewardbox.sandbox.session`, from the process's sandbox), `step(code)`
  writes the code to the session's `solution.py`, runs it and answers its
  verdict, exit status, stdout and stderr as text, `reset()` starts over in a
  new container, `aclose()` removes it; `score(label)` grades the session's
  `solution.py` as `CodeReward` grades a completion.
- `session_spec()` is the spec to acquire it with (AgentFly's
  `LocalEnvResourceSpec` when AgentFly is installed, else a dataclass with
  its fields).
- `agentfly_session_reward(...)` is a reward function in AgentFly's keyword
  shape (`final_response`, `trajectory`, `id`, `context`, the dataset's
  columns) that acquires the rollout's session from `context` and scores its
  `solution.py` against the label: `{"reward", "acc", "pass_rate",
  "unscorable"}`, as `agentfly_async_reward`'s.
- `run_code(code, context)` is the tool: the rollout's session's `step`.

    from agentfly.rewards import reward
    from agentfly.tools import tool
    from rewardbox.adapters.agentfly_session import agentfly_session_reward, run_code

    code_tool = tool(name="run_code", description="...")(run_code)
    code_reward = reward(name="rewardbox_session")(agentfly_session_reward(label_column="label"))

The session's container ends with the rollout (`end_resource`), or when it
is collected, or at its idle limit.
"""

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from rewardbox.adapters.agentfly import _Spec
from rewardbox.adapters.session_tools import call_text, process_sandbox
from rewardbox.rewards.code import CodeReward, output
from rewardbox.rewards.grade import Grade
from rewardbox.sandbox import AsyncSession, SessionEnded, SessionError, SessionLimits, SessionRefused

__all__ = ["SESSION_ENV_PATH", "LocalEnvSpec", "SessionEnv", "agentfly_session_reward", "run_code", "session_spec"]

log = logging.getLogger(__name__)

SESSION_ENV_PATH = "rewardbox.adapters.agentfly_session.SessionEnv"
SOLUTION_FILE = "solution.py"
_REWARD_KEYWORDS = ("final_response", "prediction", "trajectory", "id", "context")


@dataclass(kw_only=True)
class LocalEnvSpec:
    """AgentFly's `LocalEnvResourceSpec`, field for field, for use without AgentFly."""

    max_global_num: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    category: str = "local_env"
    env_cls_path: str = SESSION_ENV_PATH
    init_kwargs: dict[str, Any] = field(default_factory=dict)


def session_spec(*, max_global_num: int | None = None, lifetime_s: float | None = None,
                 idle_s: float | None = None, call_timeout_s: float | None = None) -> Any:
    """The spec `context.acquire_resource(spec=..., scope="rollout",
    backend="local")` builds a `SessionEnv` from. `max_global_num` bounds the
    sessions AgentFly holds at once (it waits for one to end); the others
    are the session's limits (`SessionLimits`)."""
    limits = {key: value for key, value in (("lifetime_s", lifetime_s), ("idle_s", idle_s),
                                            ("call_timeout_s", call_timeout_s)) if value is not None}
    SessionLimits.model_validate(limits)  # a bad limit fails here, not in the rollout
    try:
        spec_class: Any = importlib.import_module("agentfly.resources.types").LocalEnvResourceSpec
    except ImportError:
        spec_class = LocalEnvSpec
    return spec_class(max_global_num=max_global_num, env_cls_path=SESSION_ENV_PATH, init_kwargs=limits)


class SessionEnv:
    """AgentFly's env protocol (`start`, `reset`, `step`, `aclose`, `close`,
    `acquire`) over one rewardbox session. Made by AgentFly's local runner
    from `session_spec()`; or directly: `env = SessionEnv(); await env.start()`."""

    def __init__(self, **limits: float):
        self.limits = SessionLimits.model_validate(limits)
        self._session: AsyncSession | None = None
        self._lock = asyncio.Lock()
        self._ended: str | None = None  # why the last session ended under a step, until a step opens another

    @property
    def container_id(self) -> str | None:
        """The session's container, while one is open."""
        return self._session.session.container_id if self._session is not None else None

    async def start(self) -> None:
        """Opens the session (a container of its own), unless one is open."""
        async with self._lock:
            if self._session is None:

                box, _ = await asyncio.to_thread(process_sandbox)
                self._session = await box.async_session(session_limits=self.limits).open()
                self._ended = None

    async def reset(self, *args: Any, **kwargs: Any) -> str:
        """Starts over in a new container (no file of the old one left); the observation is empty."""
        await self.aclose()
        await self.start()
        return ""

    async def step(self, action: str) -> str:
        """Writes `action` (Python source) to solution.py and runs it; the
        result as the model reads it. A refused call or an ended session is an
        answer too (the next step opens a new session)."""

        await self.start()
        session = self._session
        assert session is not None
        try:
            await session.write_file(SOLUTION_FILE, str(action))
            return call_text(await session.run(file=SOLUTION_FILE))
        except SessionRefused as exc:
            return f"error: {exc}"
        except SessionEnded as exc:
            await self.aclose()
            self._ended = str(exc)
            return f"error: your workspace ended ({exc}); the next call starts a new, empty one"

    async def score(self, label: Any, *, grader: CodeReward | None = None, file: str = SOLUTION_FILE,
                    prompt: str | None = None) -> Grade:
        """The grade of the session's `file` as it is now (a missing file is
        an empty completion), by `grader` (default: the process's
        `CodeReward`): its tests run in a fresh single-run container.
        SessionEnded if the session's container is gone, or ended under a
        step with no step since: no reward is made up for a file we lost."""
        if self._session is None:
            raise SessionEnded(self._ended or "the session is not open (never started, or closed)")
        if grader is None:

            _, grader = await asyncio.to_thread(process_sandbox)
        return await self._session.score(label, file, grader=grader, prompt=prompt)

    async def aclose(self) -> None:
        """Removes the session's container. Idempotent."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def close(self) -> None:
        """`aclose` for synchronous callers."""
        session, self._session = self._session, None
        if session is not None:
            with suppress(SessionError):  # never opened
                session.session.close()

    @staticmethod
    async def acquire() -> "SessionEnv":
        """A new env, started."""
        env = SessionEnv()
        await env.start()
        return env


async def _rollout_env(context: Any, spec: Any) -> Any:
    return await context.acquire_resource(spec=spec, scope="rollout", backend="local")


async def run_code(code: str, context: Any) -> str:
    """Run Python code in your workspace: it is saved as solution.py (graded at
    the end) and run with python3. Returns the exit status, stdout and stderr.

    Args:
        code: the complete Python source of solution.py.
    """
    env = await _rollout_env(context, session_spec())
    return str(await env.step(code))


def agentfly_session_reward(grader: CodeReward | None = None, *, name: str = "rewardbox_session",
                            label_column: str = "label", columns: Iterable[str] = (),
                            spec: Any = None) -> Callable[..., Awaitable[dict[str, float]]]:
    """An AgentFly reward function (AgentFly awaits it with `context=` when
    the chain ends, before ending the rollout's resources) that scores the
    rollout session's `solution.py` against the row's `label_column` with
    `grader` (default: the process's `CodeReward`). A rollout that never ran
    code gets a session here, with no file: an empty completion. A session
    whose container ended (its idle or lifetime limit, removed from outside)
    raises SessionEnded, as a failure of ours: its file is not the model's
    answer, and no reward is made up.

    >>> import inspect
    >>> list(inspect.signature(agentfly_session_reward()).parameters)
    ['final_response', 'prediction', 'trajectory', 'id', 'context', 'label']
    """
    shape = _Spec(None, name, label_column, columns, keywords=_REWARD_KEYWORDS)
    resource_spec = spec if spec is not None else session_spec()

    async def score(**kwargs: Any) -> dict[str, float]:
        context = kwargs.get("context")
        if context is None:
            raise TypeError(f"{name} needs AgentFly's context= (the rollout's resources)")
        env = await _rollout_env(context, resource_spec)
        grade = await env.score(kwargs.get(label_column), grader=grader)
        return shape.result(output(grade))

    return shape.shape(score)
