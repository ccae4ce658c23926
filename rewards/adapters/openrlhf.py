"""OpenRLHF: `reward_func(queries, prompts, labels)` and a multi-step coding episode.

OpenRLHF imports a reward file by path (`--reward.remote_url reward_func.py`;
before 0.10.2 `--remote_rm_url`) and calls its `reward_func`: 0.9.1 and
later with one sample per call from many threads at once
(`asyncio.to_thread`), 0.8.11 and 0.9.0 with a micro-batch per Ray task. The agent path
(`--train.agent_func_path`; before 0.10.2 `--agent_func_path`) drives a
`CodingEpisode`. The two files to pass are in `examples/openrlhf/`.

The trainer passes no options, so the settings come from the environment (an
empty value counts as unset; a bad value raises `SettingsError` naming it):

    REWARDBOX_REWARD             registered reward name or composition spec; default "correctness"
    REWARDBOX_TIMEOUT_S          wall clock for a sample's tests; default grows with the tests (Limits.for_tests: 10 s + 0.5 s a test, at most 120 s)
    REWARDBOX_MEMORY_MB          memory per container; default Limits.memory_mb (512)
    REWARDBOX_WORKERS            containers running at once, per process (with REWARDBOX_RAY, per
                                 sandbox node); default Sandbox's (4), on Ray the node's CPU count
    REWARDBOX_IMAGE              sandbox image; default sandbox.DEFAULT_IMAGE
    REWARDBOX_RUNTIME            OCI runtime, e.g. runsc (gVisor); default the engine's
    REWARDBOX_MODE               sandbox mode: pooled (default), fresh or cold (README, Sandbox modes)
    REWARDBOX_REUSE              pooled: samples per container at most; default 1000
    REWARDBOX_RAY                score on the sandbox nodes of a Ray cluster: "auto" (the cluster this
                                 process runs in) or an address; default unset, this machine's engine
    REWARDBOX_RETRY_S            how long a failure of ours is retried before raising; default Sandbox's (60)
    REWARDBOX_TIMEOUT_REWARD     reward for a timeout; default GradingPolicy's (-0.5)
    REWARDBOX_CRASH_REWARD       reward for a crash; default GradingPolicy's (-1.0)
    REWARDBOX_NO_CODE_REWARD     reward when no code is found; default GradingPolicy's (-1.0)
    REWARDBOX_FORMAT_WEIGHT      if > 0: (1 - w) * reward + w * format_one_code_block; default 0
    REWARDBOX_MAX_STEPS          agent: attempts per episode; default 3
    REWARDBOX_FEEDBACK_TEMPLATE  agent: the user turn around the feedback, a preset name
                                 (chatml, llama3, plain) or a text holding "{feedback}"; default chatml

The reward is resolved by a registry whose built-ins (code, math,
correctness) use the sandbox, limit and policy settings. The sandbox starts
on the first call, whatever the reward.

What the model did is always a number. A sample whose label cannot be used
gets reward 0.0 and score 0.0, logged at ERROR: OpenRLHF needs a number, and
this one is no penalty. A failure of ours (a `SandboxError`, after the
sandbox's own bounded retries) is logged at ERROR and raised.
"""

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rewardbox.adapters import split_response
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.logs import CRASH_VERDICTS, LOG_KEYS, find, sample_logs, trainer_numbers, verdict_of
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.sandbox import Limits, SandboxError

__all__ = [
    "CodingEpisode",
    "ENV_VARS",
    "FEEDBACK_TEMPLATES",
    "LOG_KEYS",
    "OpenRLHFReward",
    "OpenRLHFSettings",
    "Scores",
    "SettingsError",
    "build_reward",
    "feedback",
    "reset",
    "reward_func",
    "sample_logs",
    "settings_from_env",
    "split_response",
]

log = logging.getLogger(__name__)


# The text after the model's end-of-turn token (part of the action text): close
# nothing, open a user turn, then open the assistant's next turn.
FEEDBACK_TEMPLATES = {
    "chatml": "\n<|im_start|>user\n{feedback}<|im_end|>\n<|im_start|>assistant\n",
    "llama3": "<|start_header_id|>user<|end_header_id|>\n\n{feedback}<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "plain": "\n\nUser: {feedback}\n\nAssistant: ",
}

# A prompt truncated on the left by the trainer still ends with this much of itself.


class SettingsError(ValueError):
    """A REWARDBOX_* environment variable holds a value we cannot use."""


class OpenRLHFSettings(BaseModel):
    """Everything the OpenRLHF adapter can be told, from `settings_from_env`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reward: str = Field("correctness", min_length=1, description="registered reward name or composition spec")
    image: str | None = Field(None, min_length=1, description="sandbox image; None: sandbox.DEFAULT_IMAGE")
    runtime: str | None = Field(None, min_length=1, description="OCI runtime (runsc); None: the engine's default")
    mode: Literal["pooled", "fresh", "cold"] = Field("pooled", description="sandbox mode (rewardbox.sandbox.modes)")
    reuse: int | None = Field(None, ge=1, description="pooled: samples per container at most; None: the default")
    ray: str | None = Field(None, min_length=1, description="Ray cluster address or 'auto'; None: this machine's engine")
    workers: int | None = Field(None, ge=1, description="containers running at once per process; None: Sandbox's")
    retry_s: float | None = Field(None, ge=0, description="retry budget for failures of ours; None: Sandbox's")
    limits: Limits = Field(default_factory=Limits)
    policy: GradingPolicy = Field(default_factory=GradingPolicy)
    format_weight: float = Field(0.0, ge=0, lt=1, description="weight of format_one_code_block in the mix")
    max_steps: int = Field(3, ge=1, description="agent: attempts per episode")
    feedback_template: str = Field("chatml", validate_default=True,
                                   description="agent: preset name or a text holding {feedback}")

    @field_validator("feedback_template")
    @classmethod
    def _template(cls, value: str) -> str:
        template = FEEDBACK_TEMPLATES.get(value, value)
        if "{feedback}" not in template:
            raise ValueError(f"must be one of {sorted(FEEDBACK_TEMPLATES)} or a text containing {{feedback}}")
        return template


ENV_VARS: dict[str, tuple[str, ...]] = {
    "REWARDBOX_REWARD": ("reward",),
    "REWARDBOX_TIMEOUT_S": ("limits", "timeout_s"),
    "REWARDBOX_MEMORY_MB": ("limits", "memory_mb"),
    "REWARDBOX_WORKERS": ("workers",),
    "REWARDBOX_IMAGE": ("image",),
    "REWARDBOX_RUNTIME": ("runtime",),
    "REWARDBOX_MODE": ("mode",),
    "REWARDBOX_REUSE": ("reuse",),
    "REWARDBOX_RAY": ("ray",),
    "REWARDBOX_RETRY_S": ("retry_s",),
    "REWARDBOX_TIMEOUT_REWARD": ("policy", "timeout_reward"),
    "REWARDBOX_CRASH_REWARD": ("policy", "crash_reward"),
    "REWARDBOX_NO_CODE_REWARD": ("policy", "no_code_reward"),
    "REWARDBOX_FORMAT_WEIGHT": ("format_weight",),
    "REWARDBOX_MAX_STEPS": ("max_steps",),
    "REWARDBOX_FEEDBACK_TEMPLATE": ("feedback_template",),
}
"""Each environment variable and the settings field it sets."""


def settings_from_env(environ: Mapping[str, str] | None = None) -> OpenRLHFSettings:
    """Settings from REWARDBOX_* variables (default: `os.environ`).

    >>> settings_from_env({"REWARDBOX_TIMEOUT_S": "4", "REWARDBOX_CRASH_REWARD": ""}).limits.timeout_s
    4.0
    >>> settings_from_env({"REWARDBOX_WORKERS": "0"})
    Traceback (most recent call last):
    ...
    rewardbox.adapters.openrlhf.SettingsError: REWARDBOX_WORKERS='0': Input should be greater than or equal to 1
    """
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    for var, path in ENV_VARS.items():
        value = env.get(var, "")
        if value.strip():
            node = data
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
    try:
        return OpenRLHFSettings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError("; ".join(_env_problem(error, env) for error in exc.errors())) from None


def _env_problem(error: Any, env: Mapping[str, str]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    for var, path in ENV_VARS.items():
        if loc[:len(path)] == path:
            return f"{var}={env.get(var)!r}: {error['msg']}"
    # A rule over several fields (the policy's, say): name every variable it covers.
    names = [var for var, path in ENV_VARS.items() if path[:len(loc)] == loc and env.get(var, "").strip()]
    return f"{', '.join(names) or 'REWARDBOX_*'}: {error['msg']}"


def build_reward(settings: OpenRLHFSettings) -> Reward:
    """The reward the settings describe, from a registry configured with
    their sandbox, policy and limits. The sandbox starts here, whatever the
    reward, so a dead engine shows at the first call; tests replace this function."""
    from rewardbox.rewards.registry import configured_registry
    from rewardbox.sandbox.modes import make_sandbox

    options = {"image": settings.image, "max_containers": settings.workers,
               "runtime": settings.runtime, "retry_s": settings.retry_s, "reuse": settings.reuse, "ray": settings.ray}
    if settings.mode != "cold":
        options["limits"] = settings.limits
    sandbox = make_sandbox(settings.mode, **{key: value for key, value in options.items() if value is not None})
    registry = configured_registry(sandbox=sandbox, policy=settings.policy, limits=settings.limits)
    reward = registry.resolve(settings.reward)
    if settings.format_weight == 0:
        return reward
    from rewardbox.rewards.composite import CompositeReward
    from rewardbox.rewards.format import FormatReward

    return CompositeReward([(reward, 1.0 - settings.format_weight), (FormatReward.one_code_block(), settings.format_weight)])


class OpenRLHFReward:
    """OpenRLHF's `reward_func` over one `Reward`. Thread-safe.

    Without a `reward`, the reward is built from the settings (default: the
    environment) on the first call, once per process: the file is imported in
    every Ray actor that scores.
    """

    def __init__(self, reward: Reward | None = None, settings: OpenRLHFSettings | None = None):
        self._given = reward
        self._built: tuple[int, Reward] | None = None  # with the pid that built it
        self._settings = settings
        self._lock = threading.Lock()

    @property
    def settings(self) -> OpenRLHFSettings:
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

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __bool__(self) -> bool:
        return self.numel() > 0

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.as_subclass(torch.Tensor).__reduce_ex__(protocol)

    def __deepcopy__(self, memo: dict[int, Any]) -> "Scores":
        return torch.Tensor.clone(self).as_subclass(Scores)


_PROCESS = OpenRLHFReward()


def reward_func(queries: Sequence[str], prompts: Sequence[str | None] | None = None,
                labels: Sequence[Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's `reward_func(queries, prompts, labels)`, with this process's
    reward (see `OpenRLHFReward`)."""
    return _PROCESS(queries, prompts, labels, **kwargs)


def reset() -> None:
    """Forget this process's reward and settings; the next call builds them again."""
    _PROCESS.reset()


def feedback(output: RewardOutput, max_tests: int = 5, max_chars: int = 500) -> str:
    """What the model hears after an attempt that did not pass: the failing
    tests (at most `max_tests`) and their errors (at most `max_chars` each).

    >>> print(feedback(RewardOutput(reward=0.5, score=0.75, metadata={
    ...     "verdict": "failed", "passed": 1, "total": 2,
    ...     "tests": [{"nodeid": "t.py::test_a", "name": "test_a", "outcome": "passed"},
    ...               {"nodeid": "t.py::test_b", "name": "test_b", "outcome": "failed", "message": "assert 3 == 4"}]})))
    Your code passed 1 of 2 tests.
    Failing tests:
    - test_b: assert 3 == 4
    Fix the code and answer with the complete solution in one ```python block.
    """
    metadata = output.metadata
    verdict = verdict_of(metadata)
    error = _clip(str(find(metadata, "error") or find(metadata, "message") or "").strip(), max_chars)
    if verdict == "no_code":
        lines = ["No Python code was found in your answer."]
    elif verdict == "timeout":
        lines = ["Your code did not finish within the time limit."]
    elif verdict in CRASH_VERDICTS:
        lines = [_CRASH_TEXT.get(verdict, "Your code crashed.") + (f"\n{error}" if error else "")]
    else:
        passed, total = find(metadata, "passed"), find(metadata, "total")
        lines = [f"Your code passed {passed} of {total} tests." if total else "Your answer is not correct."]
        failing = [test for test in find(metadata, "tests") or () if _field(test, "outcome") != "passed"]
        if failing:
            lines.append("Failing tests:")
            for test in failing[:max_tests]:
                name = _field(test, "name") or _field(test, "nodeid") or "a test"
                message = _clip(str(_field(test, "message") or _field(test, "outcome") or "").strip(), max_chars)
                lines.append(f"- {name}: " + message.replace("\n", "\n  "))
            if len(failing) > max_tests:
                lines.append(f"- ... and {len(failing) - max_tests} more")
    lines.append("Fix the code and answer with the complete solution in one ```python block.")
    return "\n".join(lines)


_CRASH_TEXT = {
    "syntax_error": "Your code has a syntax error.",
    "import_error": "Your code failed to import.",
    "collection_error": "The tests could not load your code.",
    "out_of_memory": "Your code ran out of memory.",
    "output_limit": "Your code printed too much output.",
    "killed": "Your code was killed before it finished.",
}


def _field(test: Any, key: str) -> Any:
    value = test.get(key) if isinstance(test, Mapping) else getattr(test, key, None)
    return getattr(value, "value", value)


def _clip(text: str, max_chars: int) -> str:
    """At most `max_chars`, keeping both ends: the error is often the last line."""
    if len(text) <= max_chars:
        return text
    half = (max_chars - 5) // 2
    return f"{text[:half]} ... {text[len(text) - half:]}"


class CodingEpisode:
    """One episode of OpenRLHF's agent API: the policy writes code, the tests
    run, failing tests and their errors go back as a user turn, until the code
    passes or `max_steps` attempts are spent.

    `reset(states)` and `step(states)` take and return OpenRLHF's dicts; they
    block while the tests run (the agent file calls `step` in a thread).
    OpenRLHF sums the `rewards` of all steps and keeps the last `scores`, so
    each step returns the change since the previous one: the episode's total
    is the reward of its last attempt, however many steps the trainer allows.

    An instance holds one episode at a time (its steps, task and reward paid
    so far). OpenRLHF builds one per episode, except 0.9.1, whose executor
    runs every episode on one instance: the agent file gives each its own.
    """

    def __init__(self, scorer: OpenRLHFReward | None = None, max_steps: int | None = None,
                 template: str | None = None):
        self._scorer = scorer or _PROCESS
        settings = self._scorer.settings
        self.max_steps = max_steps or settings.max_steps
        self.template = FEEDBACK_TEMPLATES.get(template, template) if template else settings.feedback_template
        self.steps = 0
        self._prompt: str | None = None
        self._label: Any = None
        self._paid = 0.0

    def reset(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """Remember the task; the observation is the prompt unchanged."""
        self._prompt = states.get("observation", states.get("prompt"))
        self._label = states.get("label")
        self.steps, self._paid = 0, 0.0
        return {"observation": self._prompt or ""}

    def step(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """Score `states["action_text"]`; feedback and `done` for the trainer."""
        self.steps += 1
        sample = Sample(id=f"step {self.steps}", completion=states.get("action_text") or "",
                        label=states.get("label", self._label), prompt=self._prompt)
        try:
            output = self._scorer.reward.score(sample)
        except SandboxError as exc:
            log.error("rewardbox could not score an agent step, raising to the trainer: %s", exc)
            raise
        reward, score = trainer_numbers(output, f"agent step {self.steps}")
        unusable = output.reward is None
        done = unusable or verdict_of(output.metadata) == "passed" or self.steps >= self.max_steps
        delta, self._paid = reward - self._paid, reward
        return {
            # float64: the trainer adds up .item() of each step; float32 rounding would show in the total.
            "rewards": torch.tensor(delta, dtype=torch.float64),
            "scores": torch.tensor(score, dtype=torch.float32),
            "environment_feedback": "" if done else self.template.replace("{feedback}", feedback(output)),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {key: torch.tensor(value, dtype=torch.float32)
                           for key, value in {**sample_logs(output), "agent_steps": float(self.steps)}.items()},
        }
