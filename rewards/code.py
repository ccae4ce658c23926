"""The code reward: completion + label -> sandbox run -> grade."""

import logging
from concurrent.futures import Future

from rewards.base import Reward, RewardOutput, Sample, done
from rewards.grade import Grade, grade, grade_no_code
from rewards.labels import CodeLabel, LabelError, MathLabel, parse_label
from rewards.policy import GradingPolicy
from sandbox import LazySandbox, Limits, RunResult, Sandbox

log = logging.getLogger(__name__)


class CodeReward(Reward):
    """Grades completions by running their tests in the sandbox.

    Thread-safe: one `CodeReward` can serve many threads; they share the
    sandbox's bound on containers running at once. Without a sandbox given,
    one with default options is made on first use.
    """

    name = "code"

    def __init__(self, sandbox: Sandbox | LazySandbox | None = None, policy: GradingPolicy | None = None,
                 limits: Limits | None = None):
        self._owns_sandbox = sandbox is None
        self.sandbox = sandbox if sandbox is not None else LazySandbox()
        self.policy = policy or GradingPolicy()
        self.limits = limits or Limits()

    def close(self) -> None:
        """Closes the sandbox if this reward made it (not one it was given)."""
        if self._owns_sandbox:
            self.sandbox.close()

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        """Start grading one sample. The future holds its output, or raises a
        `SandboxError` for a failure of ours."""
        try:
            label = parse_label(sample.label)
        except LabelError as exc:
            log.error("sample %s: unusable label: %s", sample.id, exc)
            return done(RewardOutput.unscorable(str(exc), verdict=None))
        if isinstance(label, MathLabel):
            log.error("sample %s: unusable label: a math answer is not a code label", sample.id)
            return done(RewardOutput.unscorable("a math answer is not a code label", verdict=None, kind="math"))
        return self.submit_label(label, sample)

    def submit_label(self, label: CodeLabel, sample: Sample) -> "Future[RewardOutput]":
        code = label.program(sample.completion, sample.prompt)
        if code is None:
            return done(output(grade_no_code(label.expected.total, self.policy), label.kind))
        run = self.sandbox.submit(label.request(code, self.limits))
        graded: Future[RewardOutput] = Future()
        run.add_done_callback(lambda f: _chain(f, graded, label, self.policy))
        return graded


def output(g: Grade, kind: str) -> RewardOutput:
    """A grade as the reward's output; everything but the numbers goes to metadata."""
    metadata = g.model_dump(mode="json", exclude={"reward", "score"})
    return RewardOutput(reward=g.reward, score=g.score, metadata={**metadata, "kind": kind})


def _chain(run: "Future[RunResult]", graded: "Future[RewardOutput]", label: CodeLabel, policy: GradingPolicy) -> None:
    try:
        graded.set_result(output(grade(run.result(), label.expected, policy), label.kind))
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
        graded.set_exception(exc)
