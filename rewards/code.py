"""The code reward: completion + label -> sandbox run -> grade."""

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.grade import Grade, grade, grade_no_code
from rewardbox.rewards.labels import CodeLabel, LabelError, MathLabel, parse_label
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.rewards.safe_json import plain
from rewardbox.sandbox import LazySandbox, Limits, Sandbox, SandboxError

T = TypeVar("T")
U = TypeVar("U")

log = logging.getLogger(__name__)


class CodeReward(Reward):
    """Grades completions by running their tests in the sandbox.

    Thread-safe: one `CodeReward` can serve many threads; they share the
    sandbox's bound on containers running at once. Without a sandbox given,
    one with default options is made on first use. Without a `timeout_s` in
    `limits`, a sample's run deadline grows with its label's test count
    (`Limits.for_tests`).
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
        return _then(self.submit_grade(sample), output)

    def grade(self, completion: str, label: Any, prompt: str | None = None) -> Grade:
        """The typed grade of one completion (verdict, tests), for callers of
        the code path alone."""
        return self.submit_grade(Sample(completion=completion, label=label, prompt=prompt)).result()

    def submit_grade(self, sample: Sample) -> "Future[Grade]":
        """Whatever the sample holds, its future answers it: reading it (label,
        extraction, the request) never raises. Only a failure of the sandbox
        (`SandboxError`) reaches the caller."""
        try:
            label = parse_label(sample.label)
            if isinstance(label, MathLabel):
                return _unusable(sample, "a math answer is not a code label", "math")
            return self.submit_label(label, sample)
        except LabelError as exc:
            return _unusable(sample, str(exc))
        except SandboxError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of ours on this sample: unscored, never a penalty
            log.exception("sample %s: could not be read", sample.id)
            return _unusable(sample, f"rewardbox could not read this sample: {type(exc).__name__}: {exc}"[:2000])

    def submit_label(self, label: CodeLabel, sample: Sample) -> "Future[Grade]":
        code = label.program(sample.completion, sample.prompt)
        if code is None:
            return _done(grade_no_code(label.expected.total, self.policy).model_copy(update={"kind": label.kind}))
        try:
            # Our default deadline must not cut a slow but correct run of many tests short.
            request = label.request(code, self.limits.for_tests(label.expected.total), sample.prompt)
        except (TypeError, ValueError) as exc:  # e.g. label values that are not JSON data
            return _unusable(sample, f"bad {label.kind} label: {exc}", label.kind)
        return _then(self.sandbox.submit(request),
                     lambda run: grade(run, label.expected, self.policy).model_copy(update={"kind": label.kind}))


def output(g: Grade) -> RewardOutput:
    """A grade as the reward's output; everything but the numbers goes to metadata."""
    if g.reward is None:
        return RewardOutput.unscorable(g.error or "unusable label", verdict=None, kind=g.kind)
    metadata = plain(g.model_dump(mode="json", exclude={"reward", "score"}))  # whatever backend made the run
    return RewardOutput(reward=g.reward, score=g.score, metadata=metadata)


def _unusable(sample: Sample, error: str, kind: str | None = None) -> "Future[Grade]":
    log.error("sample %s: unusable label: %s", sample.id, error)
    return _done(Grade(reward=None, score=None, verdict=None, error=error, kind=kind))


def _done(value: T) -> "Future[T]":
    future: Future[T] = Future()
    future.set_result(value)
    return future


def _then(source: "Future[T]", then: Callable[[T], U]) -> "Future[U]":
    """A future of `then(result)`; an exception (a failure of ours) passes through."""
    target: Future[U] = Future()

    def chain(f: "Future[T]") -> None:
        try:
            target.set_result(then(f.result()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            target.set_exception(exc)

    source.add_done_callback(chain)
    return target
