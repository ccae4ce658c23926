"""OpenRLHF: `reward_func(queries, prompts, labels)` and a multi-step coding episode.

OpenRLHF imports a reward file by path (`--reward.remote_url reward_func.py`;
before 0.10.2 `--remote_rm_url`) and calls its `reward_func`: 0.9.1 and
later with one sample per call from many threads at once
(`asyncio.to_thread`), 0.8.11 and 0.9.0 with a micro-batch per Ray task. The agent path
(`--train.agent_func_path`; before 0.10.2 `--agent_func_path`) drives a
`CodingEpisode`. The two files to pass are in `examples/openrlhf/`.

The trainer passes no options, so the settings come from the environment
and the file it names (`rewardbox.settings`: REWARDBOX_* variables such as
REWARDBOX_IMAGE, REWARDBOX_WORKERS, REWARDBOX_TIMEOUT_S, REWARDBOX_REWARD,
REWARDBOX_MAX_STEPS, and REWARDBOX_CONFIG, a TOML file of the same keys; an
empty value counts as unset; a bad value raises `SettingsError` naming it).
Unset, each process runs 4 containers at once (with REWARDBOX_RAY, each
sandbox node as many as it has CPUs).

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
from typing import Any

import torch

from rewardbox.adapters import split_response
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.logs import CRASH_VERDICTS, LOG_KEYS, find, sample_logs, trainer_numbers, verdict_of
from rewardbox.sandbox import SandboxError
from rewardbox.settings import FEEDBACK_TEMPLATES, Settings, SettingsError, build_sandbox, env_var, load_settings
from rewardbox.settings import build_reward as build_settings_reward

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


OpenRLHFSettings = Settings
"""The settings this adapter reads: `rewardbox.settings.Settings` (the name is kept for existing imports)."""

ENV_VARS: dict[str, str] = {env_var(key): key for key in Settings.model_fields}
"""Each environment variable and the settings key it sets."""


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from REWARDBOX_* variables and the REWARDBOX_CONFIG file
    (default: `os.environ`), as every other way in reads them.

    >>> settings_from_env({"REWARDBOX_TIMEOUT_S": "4", "REWARDBOX_CRASH_REWARD": ""}).limits.timeout_s
    4.0
    >>> settings_from_env({"REWARDBOX_WORKERS": "0"})
    Traceback (most recent call last):
    ...
    rewardbox.settings.SettingsError: REWARDBOX_WORKERS='0': Input should be greater than or equal to 1
    """
    return load_settings(environ=environ)


def build_reward(settings: Settings) -> Reward:
    """The reward the settings describe (`rewardbox.settings.build_reward`)
    on their sandbox, which starts here, whatever the reward, so that a dead
    engine shows at the first call; tests replace this function."""
    from rewardbox.sandbox import modes

    return build_settings_reward(settings, build_sandbox(settings, modes.make_sandbox))


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
