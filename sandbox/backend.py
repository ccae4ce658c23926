"""What a sandbox backend is to its callers: the rewards, the service and the
command line hold any of `Sandbox` (cold), `PooledSandbox` (pooled, fresh),
`RaySandbox` and `LazySandbox` through this interface and nothing more.

A backend runs `RunRequest`s (`run` blocks, `submit` returns a future,
`run_many` keeps the requests' order), reports its counters (`stats`) and its
engine's health (`probe`) without starting anything, names its `image` and
how many runs it takes at once (`max_containers`: the service's gauges and
queue sizes), and is closed once (`close`, or a `with` block).
"""

from collections.abc import Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rewardbox.sandbox.models import RunRequest, RunResult

if TYPE_CHECKING:
    from rewardbox.sandbox.engine import EngineProbe
    from rewardbox.sandbox.runner import SandboxStats


@runtime_checkable
class SandboxBackend(Protocol):
    """Structural: a class satisfies it by having these members (isinstance
    checks their presence only; their signatures are for the type checker)."""

    @property
    def image(self) -> str: ...

    @property
    def max_containers(self) -> int: ...

    def run(self, request: RunRequest) -> RunResult: ...

    def submit(self, request: RunRequest) -> "Future[RunResult]": ...

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]: ...

    def stats(self) -> "SandboxStats": ...

    def probe(self, timeout_s: float = 2.0) -> "EngineProbe": ...

    def close(self) -> None: ...

    def __enter__(self) -> "SandboxBackend": ...

    def __exit__(self, *exc: object) -> None: ...
