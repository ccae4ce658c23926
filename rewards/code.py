"""The code reward: completion + label -> sandbox run -> grade."""

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import docker

from rewardbox.images import VARIANTS, image_manifest
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.grade import Grade, grade, grade_no_code
from rewardbox.rewards.label_formats import CodeLabel, LabelError, MathLabel, StdioLabel
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.needed_modules import missing_modules_error, needed_modules
from rewardbox.rewards.policy import GradingPolicy
from rewardbox.rewards.safe_json import plain
from rewardbox.sandbox import ImageMissing, LazySandbox, Limits, Sandbox, SandboxBackend, SandboxError
from rewardbox.sandbox import language as language_entry

T = TypeVar("T")
U = TypeVar("U")

log = logging.getLogger(__name__)


class CodeReward(Reward):
    """Grades completions by running their tests in the sandbox.

    Thread-safe: one `CodeReward` can serve many threads; they share the
    sandbox's bound on containers running at once. Without a sandbox given,
    one with default options is made on first use. Without a `timeout_s` in
    `limits`, a sample's run deadline grows with its label's test count
    (`Limits.for_tests`). A label whose tests import a module the sandbox's
    image does not hold is unscorable on it, whatever the completion (the
    dataset's need; `rewardbox.rewards.needed_modules`); so is a label whose
    program is in a language whose image the engine lacks (docs/languages.md).
    """

    name = "code"

    def __init__(self, sandbox: SandboxBackend | None = None, policy: GradingPolicy | None = None,
                 limits: Limits | None = None, language: str = "python"):
        """`language`: the language of a stdio label that names none (APPS and
        TACO rows carry none: the trainer's choice); a label's own wins."""
        self._owns_sandbox = sandbox is None
        self.sandbox = sandbox if sandbox is not None else LazySandbox()
        self.policy = policy or GradingPolicy()
        self.limits = limits or Limits()
        self.language = language_entry(language).name

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
        if isinstance(label, StdioLabel) and self.language != "python" and "language" not in label.model_fields_set:
            label = label.in_language(self.language)
        if needed := needed_modules(label):
            image = _sandbox_image(self.sandbox)
            held = IMAGE_MODULES.modules(*image) if image else None
            if image is not None and held is not None and (missing := set(needed) - held):
                return _unusable(sample, missing_modules_error(missing, image[0], VARIANTS.get("scientific", ())),
                                 label.kind)
        code = label.program(sample.completion, sample.prompt)
        if code is None:
            return _done(grade_no_code(label.expected.total, self.policy).model_copy(update={"kind": label.kind}))
        try:
            # Our default deadline must not cut a slow but correct run of many tests short.
            request = label.request(code, self.limits.for_tests(label.expected.total), sample.prompt)
        except (TypeError, ValueError) as exc:  # e.g. label values that are not JSON data
            return _unusable(sample, f"bad {label.kind} label: {exc}", label.kind)
        future = self.sandbox.submit(request)
        graded = _then(future, lambda run: grade(run, label.expected, self.policy).model_copy(
            update={"kind": label.kind}))
        if request.language == "python":
            return graded
        # Another language's image may not be on the engine (the sandbox names its
        # build command): the dataset's need, not the model's fault, so unscored.
        return _or_unusable(graded, ImageMissing, sample, label.kind)


def output(g: Grade) -> RewardOutput:
    """A grade as the reward's output: the verdict and figures typed, the rest in metadata."""
    if g.reward is None:
        return RewardOutput.unscorable(g.error or "unusable label", kind=g.kind)
    # JSON data whatever backend made the run (a Ray worker's records included).
    metadata = plain(g.model_dump(mode="json", exclude={"reward", "score", *_TYPED_FIGURES}))
    return RewardOutput(reward=g.reward, score=g.score, verdict=g.verdict, passed=g.passed, total=g.total,
                        duration_s=g.duration_s, metadata=metadata)


_TYPED_FIGURES = ("verdict", "passed", "total", "duration_s")


def _sandbox_image(sandbox: object) -> tuple[str, str | None] | None:
    """The image a sandbox runs and its engine's address (None: the
    environment's engine), or None when it runs elsewhere: Ray's workers use
    their own nodes' engines."""
    if isinstance(sandbox, LazySandbox):
        if sandbox.config.ray:
            return None
        return sandbox.image, getattr(sandbox.engine, "base_url", None)
    if isinstance(sandbox, Sandbox):
        return sandbox.image, getattr(sandbox.engine, "base_url", None)
    return None


class ImageModules:
    """The modules each image holds, by its labels (`image_manifest`): one
    inspect per engine and image per process, whatever the samples and
    threads. Unknown (None) for a foreign image; also, retried after
    `retry_s`, when the engine could not tell: the check is skipped then,
    never a failure of the sample."""

    def __init__(self, retry_s: float = 30.0):
        self.retry_s = retry_s
        self._known: dict[tuple[str, str | None], tuple[frozenset[str] | None, float]] = {}
        self._lock = threading.Lock()

    def modules(self, image: str, base_url: str | None = None) -> frozenset[str] | None:
        key = (image, base_url)
        with self._lock:  # held through the one inspect: concurrent first samples wait for it
            known = self._known.get(key)
            if known is not None and time.monotonic() < known[1]:
                return known[0]
            try:
                modules, until = self._inspect(image, base_url), math.inf
            except Exception as exc:  # noqa: BLE001 - the engine could not tell: no check, the run says the rest
                log.warning("cannot read the modules of image %s (%s); tests' imports go unchecked", image, exc)
                modules, until = None, time.monotonic() + self.retry_s
            self._known[key] = (modules, until)
            return modules

    @staticmethod
    def _inspect(image: str, base_url: str | None) -> frozenset[str] | None:
        api = docker.APIClient(base_url=base_url, version="auto", timeout=10) if base_url else \
            docker.from_env(timeout=10).api
        try:
            manifest = image_manifest(image, api)
        finally:
            api.close()
        if manifest is None:
            raise LookupError("not on the engine")
        return None if manifest.modules is None else frozenset(manifest.modules)


IMAGE_MODULES = ImageModules()


def _unusable(sample: Sample, error: str, kind: str | None = None) -> "Future[Grade]":
    log.error("sample %s: unusable label: %s", sample.id, error)
    return _done(Grade(reward=None, score=None, verdict=None, error=error, kind=kind))


def _done(value: T) -> "Future[T]":
    future: Future[T] = Future()
    future.set_result(value)
    return future


def _or_unusable(source: "Future[Grade]", error: type[BaseException], sample: Sample,
                 kind: str | None) -> "Future[Grade]":
    """`source`, or an unusable grade naming the exception when it raised `error`."""
    target: Future[Grade] = Future()

    def chain(f: "Future[Grade]") -> None:
        exc = f.exception()
        if exc is None:
            target.set_result(f.result())
        elif isinstance(exc, error):
            log.error("sample %s: unusable label: %s", sample.id, exc)
            target.set_result(Grade(reward=None, score=None, verdict=None, error=str(exc), kind=kind))
        else:
            target.set_exception(exc)

    source.add_done_callback(chain)
    return target


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
