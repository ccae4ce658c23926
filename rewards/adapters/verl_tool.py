"""verl: multi-turn tools over a rewardbox session (`tools_config_file`).

verl's multi-turn rollouts call tools in `BaseTool`'s shape:
`create(instance_id, ...)` -> `(instance_id, ToolResponse)`,
`execute(instance_id, parameters, ...)` -> `(ToolResponse, step_reward,
metrics)`, `calc_reward(instance_id)` -> float, `release(instance_id)`. A
tool config YAML names each class (`class_name`), its `config` (with
`type: native`) and, optionally, its OpenAI function schema
(`examples/verl/tool_config.yaml`). Two tools share one session per rollout:

- `RunCodeTool` ("run_code"): saves the model's `code` to a file of the
  session (default `solution.py`) and runs it; the answer is the verdict, the
  exit status, stdout and stderr, as text;
- `RunTestsTool` ("run_tests"): grades the session's `solution.py` against
  the rollout's label exactly as `CodeReward` grades a completion (a fresh
  single-run container, the tests written after the agent's last call); the
  answer is the tests passed and the failing ones' errors; the step reward is
  what the reward gained over the best reached before (so however often the
  model calls it, a rollout's step rewards add up to its best reward, never
  more); `calc_reward` is the reward of the file as it is now.

The label comes with `create`: `create_kwargs={"ground_truth": label}` (as
verl's dataset `tools_kwargs` carry it; `"label"` is read too), or
`ground_truth=` as a keyword.

Two lifecycles are served:

- the `BaseTool` contract: the caller names the rollout (`instance_id`,
  the same for both tools), creates, executes, calls `calc_reward`, then
  releases; the session opens at `create` and closes at the first
  `release`;
- verl 0.9.1's `ToolAgentLoop`, which creates, executes and releases a new
  instance around *every* call, passing the rollout's `AgentData` to
  `execute`: the session is then the rollout's, kept across the calls and
  closed when the rollout's `AgentData` is collected (the rollout ended),
  else by the session's idle limit. That loop never calls `calc_reward`: the
  run_tests step rewards it collects (`tool_rewards`, in the reward
  function's `extra_info`) add up to the best reward the model reached.

What the model did is always an answer: a wrong call (no code, a path out of
the work dir, a file too large, a session its code ended) is text for it,
with no penalty. So is a failure of ours in `execute` (the engine down),
logged at ERROR; `calc_reward` raises it instead, as a reward is never made
up (nor for a session whose container ended: `SessionEnded`). The blocking session calls run in threads, off the event loop.

The sandbox is the settings' (`rewardbox.settings`: REWARDBOX_* variables and
the REWARDBOX_CONFIG file: image, runtime, limits, grading policy), made on
first use, one per process. Without verl installed the module still imports;
the classes then stand on their own.
"""

import asyncio
import importlib
import logging
import threading
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rewardbox.adapters.session_tools import (
    MAX_OUTPUT_CHARS,
    SOLUTION_FILE,
    call_text,
    configure,
    grade_text,
    process_sandbox,
)
from rewardbox.rewards.grade import Grade
from rewardbox.sandbox import SandboxError, Session, SessionEnded, SessionLimits, SessionRefused

__all__ = ["RUN_CODE_SCHEMA", "RUN_TESTS_SCHEMA", "RunCodeTool", "RunTestsTool", "SessionTool", "configure"]

log = logging.getLogger(__name__)


RUN_CODE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_code",
        "description": "Save Python code to a file of your workspace (solution.py unless you name another) and "
                       "run it with python3. Returns the exit status, stdout and stderr. Files stay between calls; "
                       "solution.py is what is graded at the end.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "the complete Python source of the file"},
                "file": {"type": "string", "description": "the file to save it to (default: solution.py)"},
                "stdin": {"type": "string", "description": "the program's standard input (default: empty)"},
            },
            "required": ["code"],
        },
    },
}
RUN_TESTS_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_tests",
        "description": "Run the task's tests against solution.py as it is now. Returns how many passed and the "
                       "errors of the failing ones.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


class _StandaloneResponse(BaseModel):
    """verl's `ToolResponse` fields, for use without verl."""

    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None


class _StandaloneTool:
    """verl's `BaseTool.__init__` and schema, for use without verl."""

    def __init__(self, config: dict[str, Any], tool_schema: Any):
        self.config = config
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        self.name: str = _schema_name(self.tool_schema)

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema


def _schema_name(schema: Any) -> str:
    function = schema["function"] if isinstance(schema, dict) else schema.function
    name = function["name"] if isinstance(function, dict) else function.name
    return str(name)


def _verl() -> tuple[type, type, Any]:
    """verl's BaseTool, ToolResponse and schema validator, or the standalone ones."""
    try:  # imported by name so that the type checker needs no verl
        base_tool = importlib.import_module("verl.tools.base_tool")
        schemas = importlib.import_module("verl.tools.schemas")
    except ImportError:
        return _StandaloneTool, _StandaloneResponse, lambda schema: schema
    return base_tool.BaseTool, schemas.ToolResponse, schemas.OpenAIFunctionToolSchema.model_validate


if TYPE_CHECKING:
    _BaseTool = _StandaloneTool
    _ToolResponse = _StandaloneResponse
    _to_schema: Any = None
else:
    _BaseTool, _ToolResponse, _to_schema = _verl()


# ---------------------------------------------------------------- the rollouts' sessions


@dataclass(eq=False)
class _Episode:
    """One rollout: its label, its session (opened on first need) and the
    best reward its tests reached."""

    label: Any
    session: Session | None = None
    rollout_scoped: bool = False  # kept across per-call instances (verl 0.9.1's loop)
    ended: str | None = None  # why its last session ended, until a call opens a new one
    best: float = 0.0
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)


_episodes: dict[str, _Episode] = {}  # instance ids, shared by every tool of the process
_rollouts: "weakref.WeakKeyDictionary[Any, _Episode]" = weakref.WeakKeyDictionary()
_episodes_lock = threading.Lock()
# Closes sessions of rollouts that ended: a finalizer must not block the event loop on the engine.
_closer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rewardbox-verl-close")


def _close_quietly(episode: _Episode) -> None:
    session, episode.session = episode.session, None
    if session is not None:
        try:
            session.close()
        except Exception:  # noqa: BLE001 - the container ends itself at its idle limit anyway
            log.warning("verl tool: could not close a session; its idle limit will end it", exc_info=True)


def _rollout_ended(episode: _Episode) -> None:
    try:
        _closer.submit(_close_quietly, episode)
    except RuntimeError:  # at interpreter exit the pool takes no more work
        _close_quietly(episode)


def _label(create_kwargs: Any, kwargs: dict[str, Any]) -> Any:
    for source in (create_kwargs if isinstance(create_kwargs, dict) else {}, kwargs):
        for key in ("ground_truth", "label"):
            if source.get(key) is not None:
                return source[key]
    return None


class SessionTool(_BaseTool):
    """The lifecycle both tools share; see the module's docstring. `config`
    (the tool config's `config` mapping) may set `file` (the graded file,
    default solution.py), `max_output_chars` and `session_limits`
    (`SessionLimits`' fields)."""

    default_schema: dict[str, Any] = RUN_CODE_SCHEMA

    def __init__(self, config: dict[str, Any], tool_schema: Any = None):
        config = dict(config or {})
        super().__init__(config, tool_schema if tool_schema is not None else _to_schema(self.default_schema))
        self.file = str(config.get("file") or SOLUTION_FILE)
        self.max_output_chars = int(config.get("max_output_chars") or MAX_OUTPUT_CHARS)
        self.session_limits = SessionLimits(**(config.get("session_limits") or {}))

    def get_openai_tool_schema(self) -> Any:
        return _to_schema(self.default_schema)

    async def create(self, instance_id: str | None = None, create_kwargs: Any = None,
                     **kwargs: Any) -> tuple[str, Any]:
        """Registers the rollout's label under `instance_id` (a new id if
        None). A named instance is a rollout: its session opens now."""
        label = _label(create_kwargs, kwargs)
        named = instance_id is not None
        instance_id = str(instance_id) if named else uuid.uuid4().hex
        with _episodes_lock:
            episode = _episodes.get(instance_id)
            if episode is None:
                episode = _episodes[instance_id] = _Episode(label=label)
            elif label is not None:  # the other tool of the same rollout
                episode.label = label
        if named:
            try:
                await self._open(episode)
            except SandboxError as exc:  # the first call tries again and tells the model
                log.error("verl tool: could not open a session for %s: %s", instance_id, exc)
        return instance_id, _ToolResponse()

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any) -> tuple[Any, float, dict[str, Any]]:
        episode = self._episode(instance_id, kwargs.get("agent_data"))
        if episode is None:
            return _ToolResponse(text=f"Error: there is no session {instance_id!r} (it was never created, "
                                      "or was released)."), 0.0, {}
        if not isinstance(parameters, dict):
            return _ToolResponse(text="Error: the arguments must be a JSON object."), 0.0, {}
        try:
            session = await self._open(episode)
            text, reward, metrics = await self._act(episode, session, parameters)
        except SessionRefused as exc:
            return _ToolResponse(text=f"Error: {exc}"), 0.0, {}
        except SessionEnded as exc:
            episode.session, episode.ended = None, str(exc)  # the next call opens a new one
            return _ToolResponse(text=f"Error: your session ended ({exc}); its files are gone. The next call "
                                      "starts a new, empty one."), 0.0, {}
        except Exception as exc:  # noqa: BLE001 - ours, not the model's: an answer, never a broken rollout
            log.error("verl tool %s: the sandbox failed on a call: %s: %s", self.name, type(exc).__name__, exc,
                      exc_info=True)
            return _ToolResponse(text=f"The sandbox failed on this call, through no fault of your code "
                                      f"({type(exc).__name__}). Try again."), 0.0, {"sandbox_error": 1.0}
        return _ToolResponse(text=text), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The reward of the graded file as it is now. An unusable label is
        0.0 with a warning (as verl's compute_score); a failure of ours raises,
        and so does a session whose container ended (its files are gone)."""
        episode = self._episode(instance_id, kwargs.get("agent_data"))
        if episode is None:
            raise KeyError(f"verl tool: no session {instance_id!r} to reward (never created, or released)")
        if episode.session is None and episode.ended is not None:
            raise SessionEnded(f"no file to reward: {episode.ended}")
        return _reward(await self._grade(episode))

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Closes the session of a rollout named at `create`; a per-call
        instance of a rollout's session only lets go of it. Twice is harmless."""
        with _episodes_lock:
            episode = _episodes.pop(instance_id, None)
        if episode is not None and not episode.rollout_scoped:
            await asyncio.to_thread(_close_quietly, episode)

    # -- the mechanics ----------------------------------------------------------

    async def _act(self, episode: _Episode, session: Session,
                   parameters: dict[str, Any]) -> tuple[str, float, dict[str, Any]]:
        raise NotImplementedError

    def _episode(self, instance_id: str, rollout: Any) -> _Episode | None:
        """The episode of this call: the rollout's when the caller passes it
        (verl 0.9.1's AgentData), taking over the per-call instance's label."""
        with _episodes_lock:
            episode = _episodes.get(instance_id)
            if rollout is None:
                return episode
            try:
                held = _rollouts.get(rollout)
            except TypeError:  # not weakly referable: per instance only
                return episode
            if held is None:
                if episode is None:
                    return None
                episode.rollout_scoped = True
                _rollouts[rollout] = episode
                weakref.finalize(rollout, _rollout_ended, episode)
                return episode
            if episode is not None and episode is not held:
                if episode.label is not None:
                    held.label = episode.label
                _episodes[instance_id] = held
            return held

    async def _open(self, episode: _Episode) -> Session:
        async with episode.opening:
            if episode.session is None:
                box, grader = process_sandbox()
                episode.session = await asyncio.to_thread(box.session, grader.limits, self.session_limits, grader)
                episode.ended = None
            return episode.session

    async def _grade(self, episode: _Episode) -> Grade:
        session = await self._open(episode)
        try:
            grade: Grade = await asyncio.to_thread(session.score, episode.label, self.file)
        except SessionEnded as exc:
            # Its files are gone (idle or lifetime limit, removed from outside): the next call
            # opens a new session, and no reward is made up for what was lost.
            episode.session, episode.ended = None, str(exc)
            raise
        return grade


class RunCodeTool(SessionTool):
    """"run_code": saves `code` to `file` (default solution.py) and runs it."""

    default_schema = RUN_CODE_SCHEMA

    async def _act(self, episode: _Episode, session: Session,
                   parameters: dict[str, Any]) -> tuple[str, float, dict[str, Any]]:
        code, file, stdin = parameters.get("code"), parameters.get("file") or self.file, parameters.get("stdin")
        if not isinstance(code, str) or not code.strip():
            raise SessionRefused("run_code needs `code`: the Python source to run, as a string")
        if not isinstance(file, str) or not file.endswith(".py"):
            raise SessionRefused("`file` must be a Python file name such as 'solution.py'")
        if stdin is not None and not isinstance(stdin, str):
            raise SessionRefused("`stdin` must be a string")
        await asyncio.to_thread(session.write_file, file, code)
        result = await asyncio.to_thread(session.run, file=file, stdin=stdin)
        return call_text(result, self.max_output_chars), 0.0, {"verdict": result.verdict.value,
                                                                "duration_s": result.duration_s}


class RunTestsTool(SessionTool):
    """"run_tests": grades the session's graded file against the label."""

    default_schema = RUN_TESTS_SCHEMA

    async def _act(self, episode: _Episode, session: Session,
                   parameters: dict[str, Any]) -> tuple[str, float, dict[str, Any]]:
        grade = await self._grade(episode)
        reward = _reward(grade)
        gained = max(0.0, reward - episode.best)
        episode.best = max(episode.best, reward)
        return grade_text(grade, self.file), gained, {"reward": reward, "passed": float(grade.passed),
                                                      "total": float(grade.total)}


def _reward(grade: Grade) -> float:
    if grade.reward is None:
        log.warning("verl tool: rewarding 0.0 for an unusable label: %s", grade.error)
        return 0.0
    return float(grade.reward)
