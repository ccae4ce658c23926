"""Unit tier: pure logic only, against a fake sandbox. No Docker engine is needed."""

from collections.abc import Callable, Iterable
from concurrent.futures import Future

import pytest

from rewardbox.sandbox import Outcome, RunRequest, RunResult, TestResult, Verdict
from rewardbox.sandbox.engine import EngineProbe
from rewardbox.sandbox.runner import SandboxStats

Answer = RunResult | BaseException | Callable[[RunRequest], RunResult]


class FakeSandbox:
    """Stands in for `sandbox.Sandbox` in `CodeReward(sandbox=...)`.

    Records every request and answers with canned answers, in order: a
    `RunResult`, an exception (the run's future raises it, like a
    `SandboxError` from a dead engine), or a callable `request -> RunResult`.
    With `defer=True` the futures stay pending until `finish()`, so a test can
    see what happens before a run ends.
    """

    def __init__(self, *answers: Answer, defer: bool = False):
        self.answers = list(answers)
        self.requests: list[RunRequest] = []
        self.defer = defer
        self._pending: list[tuple[Future, Answer, RunRequest]] = []

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        self.requests.append(request)
        if not self.answers:
            raise AssertionError(f"FakeSandbox: unexpected request #{len(self.requests)}")
        answer = self.answers.pop(0)
        future: Future[RunResult] = Future()
        if self.defer:
            self._pending.append((future, answer, request))
        else:
            _settle(future, answer, request)
        return future

    # The rest of `SandboxBackend`, as a sandbox that never started reports it.
    image = "rewardbox-fake"
    max_containers = 4

    def run(self, request: RunRequest) -> RunResult:
        return self.submit(request).result()

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        return [future.result() for future in [self.submit(request) for request in requests]]

    def stats(self) -> SandboxStats:
        return SandboxStats()

    def probe(self, timeout_s: float = 2.0) -> EngineProbe:
        return EngineProbe(reachable=True, version="fake", image_present=True)

    def close(self) -> None:
        pass

    def __enter__(self) -> "FakeSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish(self) -> None:
        pending, self._pending = self._pending, []
        for future, answer, request in pending:
            _settle(future, answer, request)


def _settle(future: Future, answer: Answer, request: RunRequest) -> None:
    if isinstance(answer, BaseException):
        future.set_exception(answer)
    elif callable(answer):
        future.set_result(answer(request))
    else:
        future.set_result(answer)


def make_result(verdict: Verdict, *outcomes: tuple[str, Outcome] | tuple[str | None, str, Outcome],
                **fields) -> RunResult:
    """A `RunResult` with per-test outcomes given as `(name, outcome)` or `(cls, name, outcome)`."""
    tests = []
    for spec in outcomes:
        cls, name, outcome = spec if len(spec) == 3 else (None, *spec)
        prefix = f"test_solution.py::{cls}::" if cls else "test_solution.py::"
        tests.append(TestResult(nodeid=f"{prefix}{name}[{len(tests)}]", name=name, cls=cls, outcome=outcome))
    return RunResult(verdict=verdict, tests=tuple(tests), **fields)


@pytest.fixture
def fake_sandbox() -> type[FakeSandbox]:
    return FakeSandbox


@pytest.fixture
def result() -> Callable[..., RunResult]:
    return make_result
