"""OpenRLHF's agent API: a multi-step coding episode with the failing tests fed back.

Part of `rewardbox.adapters.openrlhf` (which re-exports these names); the
agent file (`--train.agent_func_path`) drives a `CodingEpisode`.

An episode keeps one rewardbox session (a container of its own,
`rewardbox.sandbox.session`): each step writes the model's code to the
session's `solution.py` and grades that file with `Session.score`, so every
step of an episode runs in the same container, and the container is removed
when the episode ends (its tests pass, its last step, a failure), when the
episode is dropped (collected), or at the session's idle limit.
"""

import logging
import threading
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import torch

from rewardbox.adapters.openrlhf_scoring import _PROCESS, OpenRLHFReward
from rewardbox.adapters.session_tools import process_sandbox
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.code import CodeReward
from rewardbox.rewards.composite import CompositeReward
from rewardbox.rewards.correctness import CorrectnessReward
from rewardbox.rewards.extract import extract_code
from rewardbox.rewards.label_formats import MathLabel, StdioLabel
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.logs import CRASH_VERDICTS, sample_logs, trainer_numbers, verdict_of
from rewardbox.sandbox import SandboxError, Session, SessionEnded, SessionRefused
from rewardbox.sandbox import language as language_entry
from rewardbox.settings import FEEDBACK_TEMPLATES

__all__ = ["CodingEpisode", "feedback"]

# The adapter's one logger, whichever of its modules logs: users configure it by that name.
log = logging.getLogger("rewardbox.adapters.openrlhf")


def feedback(output: RewardOutput, max_tests: int = 5, max_chars: int = 500, language: str = "python") -> str:
    """What the model hears after an attempt that did not pass: the failing
    tests (at most `max_tests`) and their errors (at most `max_chars` each),
    and how to answer in the task's language.

    >>> print(feedback(RewardOutput(reward=0.5, score=0.75, metadata={
    ...     "verdict": "failed", "passed": 1, "total": 2,
    ...     "tests": [{"nodeid": "t.py::test_a", "name": "test_a", "outcome": "passed"},
    ...               {"nodeid": "t.py::test_b", "name": "test_b", "outcome": "failed", "message": "assert 3 == 4"}]})))
    Your code passed 1 of 2 tests.
    Failing tests:
    - test_b: assert 3 == 4
    Fix the code and answer with the complete solution in one ```python block.
    """
    lang = language_entry(language)
    verdict = verdict_of(output)
    error = _clip(str(output.first_metadata("error") or output.first_metadata("message") or "").strip(), max_chars)
    if verdict == "no_code":
        lines = [f"No {lang.title} code was found in your answer."]
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
    lines.append(f"Fix the code and answer with the complete solution in one ```{lang.fence} block.")
    return "\n".join(lines)


_CRASH_TEXT = {
    "syntax_error": "Your code has a syntax error.",
    "compile_error": "Your code did not compile.",
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


SOLUTION_FILE = "solution.py"


class CodingEpisode:
    """One episode of OpenRLHF's agent API: the policy writes code, the tests
    run, failing tests and their errors go back as a user turn, until the code
    passes or `max_steps` attempts are spent.

    `reset(states)` and `step(states)` take and return OpenRLHF's dicts; they
    block while the tests run (the agent file calls `step` in a thread).
    OpenRLHF sums the `rewards` of all steps and keeps the last `scores`, so
    each step returns the change since the previous one: the episode's total
    is the reward of its last attempt, however many steps the trainer allows.

    The steps run in one session (opened at the first step with code, from
    the process's sandbox: `rewardbox.adapters.session_tools.configure` or the
    settings'): each writes its code to `solution.py` there and grades that
    file with `Session.score`, by the process's reward, which sees the
    model's answer with its code read back from the file: the numbers and the
    feedback are those of grading the answer. The session closes when the
    episode ends (`done`, or a failure raised), at the next `reset`, when the
    episode is collected, or at its idle limit. An answer without code, a
    label that is not code (a math answer), a program in another language
    than Python (a session is a Python container) and a reward that runs no
    code are graded as a single sample, without a session; so is every step when
    the samples run on Ray (`REWARDBOX_RAY`), whose nodes may have no engine here.

    An instance holds one episode at a time (its steps, task, reward paid so
    far and session). OpenRLHF builds one per episode, except 0.9.1, whose
    executor runs every episode on one instance: the agent file gives each its own.
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
        self._session: Session | None = None
        self._session_lock = threading.Lock()

    @property
    def session(self) -> Session | None:
        """The episode's session, once a step opened it (None after it closed)."""
        return self._session

    def reset(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """Remember the task; the observation is the prompt unchanged."""
        self.close()
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
            output = self._grade(sample)
        except SandboxError as exc:
            log.error("rewardbox could not score an agent step, raising to the trainer: %s", exc)
            self.close()
            raise
        except BaseException:
            self.close()
            raise
        reward, score = trainer_numbers(output, f"agent step {self.steps}")
        unusable = output.reward is None
        done = unusable or verdict_of(output) == "passed" or self.steps >= self.max_steps
        if done:
            self.close()
        delta, self._paid = reward - self._paid, reward
        return {
            # float64: the trainer adds up .item() of each step; float32 rounding would show in the total.
            "rewards": torch.tensor(delta, dtype=torch.float64),
            "scores": torch.tensor(score, dtype=torch.float32),
            "environment_feedback": "" if done else self.template.replace(
                "{feedback}", feedback(output, language=self._language(sample.label) or "python")),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {key: torch.tensor(value, dtype=torch.float32)
                           for key, value in {**sample_logs(output), "agent_steps": float(self.steps)}.items()},
        }

    def close(self) -> None:
        """Removes the episode's session, if one is open. Idempotent."""
        with self._session_lock:
            session, self._session = self._session, None
        if session is not None:
            with suppress(SandboxError):  # the engine lost it already: nothing is left to remove
                session.close()

    # -- grading in the session --------------------------------------------------------------------------

    def _grade(self, sample: Sample) -> RewardOutput:
        reward = self._scorer.reward
        code = extract_code(sample.completion, sample.prompt) if self._in_session(reward, sample.label) else None
        if code is None:
            return reward.score(sample)
        grader = _StepGrader(reward, sample, code)
        for attempt in (1, 2):
            session = self._open()
            try:
                session.write_file(SOLUTION_FILE, code)
                output: RewardOutput = session.score(sample.label, SOLUTION_FILE, grader=grader, prompt=sample.prompt)
                return output
            except SessionRefused as exc:  # code over the session's file_bytes: graded as the answer alone
                log.warning("agent step %d: the code does not fit the session (%s); graded as a single sample",
                            self.steps, exc)
                return reward.score(sample)
            except SessionEnded as exc:  # its idle or lifetime limit passed between steps: a new one
                self.close()
                if attempt == 2:
                    raise
                log.warning("agent step %d: the episode's session ended (%s); opening a new one", self.steps, exc)
        raise AssertionError("unreachable")

    def _in_session(self, reward: Reward, label: Any) -> bool:
        if self._scorer.settings.ray or not _runs_code(reward):
            return False
        # A session is a Python container: another language's program is graded alone, in its image.
        return self._language(label) == "python"

    def _language(self, label: Any) -> str | None:
        """The language of the label's program (a stdio label naming none: the
        settings'); None for a label that is not code or cannot be read."""
        try:
            parsed = parse_label(label)
        except Exception:  # noqa: BLE001 - an unusable label: the reward answers it, no container needed
            return None
        if isinstance(parsed, MathLabel):
            return None
        named = "language" in parsed.model_fields_set or not isinstance(parsed, StdioLabel)
        return parsed.code_language() if named else self._scorer.settings.language

    def _open(self) -> Session:
        with self._session_lock:
            if self._session is None:

                self._session = process_sandbox()[0].session()
            return self._session


def _runs_code(reward: Reward) -> bool:
    """Whether `reward` grades code in a sandbox (itself or a part of it)."""
    if isinstance(reward, (CodeReward, CorrectnessReward)):
        return True
    if isinstance(reward, CompositeReward):
        return any(_runs_code(part) for _, part, _ in reward.components)
    return False


class _StepGrader:
    """Grades the session's `solution.py` with the process's reward: the
    step's answer with its code (`code`, as extracted) replaced by the file's
    text. The file holding what the step wrote, that is the answer itself,
    graded as a single sample would be (format rewards included)."""

    def __init__(self, reward: Reward, sample: Sample, code: str):
        self.reward, self.sample, self.code = reward, sample, code

    def grade(self, completion: str, label: Any, prompt: str | None = None) -> RewardOutput:
        answer = self.sample.completion
        at = answer.rfind(self.code)
        # Code read across turn boundaries is not one span of the answer: the file's text is the answer then.
        text = answer[:at] + completion + answer[at + len(self.code):] if at >= 0 else completion
        return self.reward.score(self.sample.model_copy(update={"completion": text, "label": label, "prompt": prompt}))
