"""OpenRLHF's agent API: a multi-step coding episode with the failing tests fed back.

Part of `rewardbox.adapters.openrlhf` (which re-exports these names); the
agent file (`--train.agent_func_path`) drives a `CodingEpisode`.
"""

import logging
from collections.abc import Mapping
from typing import Any

import torch

from rewardbox.adapters.openrlhf_scoring import _PROCESS, OpenRLHFReward
from rewardbox.rewards.base import RewardOutput, Sample
from rewardbox.rewards.logs import CRASH_VERDICTS, sample_logs, trainer_numbers, verdict_of
from rewardbox.sandbox import SandboxError
from rewardbox.settings import FEEDBACK_TEMPLATES

__all__ = ["CodingEpisode", "feedback"]

# The adapter's one logger, whichever of its modules logs: users configure it by that name.
log = logging.getLogger("rewardbox.adapters.openrlhf")


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
    verdict = verdict_of(output)
    error = _clip(str(output.first_metadata("error") or output.first_metadata("message") or "").strip(), max_chars)
    if verdict == "no_code":
        lines = ["No Python code was found in your answer."]
    elif verdict == "timeout":
        lines = ["Your code did not finish within the time limit."]
    elif verdict in CRASH_VERDICTS:
        lines = [_CRASH_TEXT.get(verdict, "Your code crashed.") + (f"\n{error}" if error else "")]
    else:
        passed, total = output.first("passed"), output.first("total")
        lines = [f"Your code passed {passed} of {total} tests." if total else "Your answer is not correct."]
        failing = [test for test in output.first_metadata("tests") or () if _field(test, "outcome") != "passed"]
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
        done = unusable or verdict_of(output) == "passed" or self.steps >= self.max_steps
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
