"""The code reward: completion + label -> sandbox run -> grade."""

import logging
from collections.abc import Iterable
from concurrent.futures import Future

from pydantic import BaseModel, ConfigDict

from rewards.extract import extract_code
from rewards.grade import Grade, grade, grade_no_code, ungradable
from rewards.labels import Label, LabelError, parse_label
from rewards.policy import GradingPolicy
from sandbox import Limits, RunResult, Sandbox

log = logging.getLogger(__name__)


class Sample(BaseModel):
    """One rollout to grade. `label` is the dataset's label column, raw."""

    model_config = ConfigDict(frozen=True)

    id: str | int | None = None
    completion: str
    label: object
    prompt: str | None = None


class CodeReward:
    """Grades completions by running their tests in the sandbox.

    Thread-safe: one `CodeReward` can serve many threads; they share the
    sandbox's bound on containers running at once.
    """

    def __init__(self, sandbox: Sandbox | None = None, policy: GradingPolicy | None = None,
                 limits: Limits | None = None):
        self.sandbox = sandbox or Sandbox()
        self.policy = policy or GradingPolicy()
        self.limits = limits or Limits()

    def score(self, completion: str, label: object, prompt: str | None = None) -> Grade:
        return self.submit(Sample(completion=completion, label=label, prompt=prompt)).result()

    def score_many(self, samples: Iterable[Sample]) -> list[Grade]:
        """Grades in the order of the samples; runs go to the sandbox in parallel."""
        futures = [self.submit(s) for s in samples]
        return [f.result() for f in futures]

    def submit(self, sample: Sample) -> "Future[Grade]":
        """Start grading one sample; the future holds its `Grade`, or raises a
        `SandboxError` for a failure of ours."""
        try:
            label = parse_label(sample.label)
        except LabelError as exc:
            log.error("sample %s: unusable label: %s", sample.id, exc)
            return _done(ungradable(str(exc)))
        code = extract_code(sample.completion, sample.prompt)
        if code is None:
            return _done(grade_no_code(label.expected.total, self.policy))
        run = self.sandbox.submit(label.request(code, self.limits))
        graded: Future[Grade] = Future()
        run.add_done_callback(lambda f: _chain(f, graded, label, self.policy))
        return graded


def _chain(run: "Future[RunResult]", graded: "Future[Grade]", label: Label, policy: GradingPolicy) -> None:
    try:
        graded.set_result(grade(run.result(), label.expected, policy))
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
        graded.set_exception(exc)


def _done(value: Grade) -> "Future[Grade]":
    future: Future[Grade] = Future()
    future.set_result(value)
    return future

