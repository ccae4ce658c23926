"""The sandbox a configuration makes, here or on a Ray cluster
(`make_sandbox`), and the one made on first use (`LazySandbox`). The modes
themselves and `SandboxConfig` are in rewardbox.sandbox.config (re-exported here).
"""

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from rewardbox.sandbox.backend import SandboxBackend
from rewardbox.sandbox.config import DEFAULT_MODE, MODES, Mode, SandboxConfig, check_mode, make_local_sandbox
from rewardbox.sandbox.engine import DockerEngine, EngineProbe, probe_engine
from rewardbox.sandbox.models import RunRequest, RunResult
from rewardbox.sandbox.runner import DEFAULT_MAX_CONTAINERS, SandboxStats

__all__ = ["DEFAULT_MODE", "MODES", "LazySandbox", "Mode", "SandboxConfig", "make_sandbox"]


def _config(config: SandboxConfig | str | None, fields: dict[str, Any]) -> SandboxConfig:
    """A `SandboxConfig`, or one made of a mode and keywords (a mistyped
    keyword fails here, named, rather than deep inside a backend)."""
    if isinstance(config, SandboxConfig):
        if fields:
            raise TypeError(f"a SandboxConfig and keywords ({', '.join(sorted(fields))}): give one or the other")
        return config
    if config is not None:
        fields = {"mode": config, **fields}
    check_mode(fields.get("mode", DEFAULT_MODE))
    return SandboxConfig(**fields)


def make_sandbox(config: SandboxConfig | str | None = None, *, engine: DockerEngine | None = None, sweep: bool = True,
                 **fields: Any) -> SandboxBackend:
    """The sandbox of `config`, or of a mode and `SandboxConfig`'s fields as
    keywords (`make_sandbox("fresh", max_containers=2)`); a pool starts its
    first containers for `limits`. With `ray` (an address, or "auto"), a
    `RaySandbox` whose workers on the cluster's sandbox nodes each run a
    sandbox of this configuration (pip install 'rewardbox[ray]'). `engine`
    and `sweep` are the local sandbox's (tests and benchmarks).

    >>> make_sandbox("warm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sandbox mode 'warm' (modes: pooled, fresh, cold)
    """
    config = _config(config, fields)
    if config.ray:
        try:
            from rewardbox.sandbox.ray_backend import RaySandbox
        except ImportError as exc:
            raise ImportError(f"the Ray backend needs Ray: pip install 'rewardbox[ray]' ({exc})") from exc
        return RaySandbox(config)
    return make_local_sandbox(config, engine=engine, sweep=sweep)


class LazySandbox:
    """The sandbox of this configuration (or of `SandboxConfig`'s fields as
    keywords), made on first use: a caller that may never run code (a
    math-only batch) needs no engine, and concurrent first calls make exactly one."""

    def __init__(self, config: SandboxConfig | None = None, *, engine: DockerEngine | None = None, **fields: Any):
        self.config = _config(config, fields)
        self.engine = engine
        self._sandbox: SandboxBackend | None = None
        self._lock = threading.Lock()

    @property
    def options(self) -> dict[str, Any]:
        """The keywords of `make_sandbox` this sandbox was made with: the
        fields given (not the defaults), and the engine if one was given."""
        options = self.config.model_dump(exclude_unset=True)
        options = {key: getattr(self.config, key) for key in options}  # the limits as `Limits`, not a dict
        if self.engine is not None:
            options["engine"] = self.engine
        return options

    @property
    def started(self) -> bool:
        return self._sandbox is not None

    @property
    def image(self) -> str:
        return self.config.image

    @property
    def max_containers(self) -> int:
        return self.config.max_containers or DEFAULT_MAX_CONTAINERS

    def stats(self) -> SandboxStats:
        """The sandbox's counters; zeros before it is made (this never makes it)."""
        sandbox = self._sandbox
        return sandbox.stats() if sandbox is not None else SandboxStats()

    def probe(self, timeout_s: float = 2.0) -> EngineProbe:
        """A quick look at the engine the sandbox uses or would use; never makes it."""
        sandbox = self._sandbox
        if sandbox is not None:
            return sandbox.probe(timeout_s)
        return probe_engine(self.image, getattr(self.engine, "base_url", None), timeout_s)

    @property
    def sandbox(self) -> SandboxBackend:
        with self._lock:
            if self._sandbox is None:
                self._sandbox = make_sandbox(self.config, engine=self.engine)
            return self._sandbox

    def submit(self, request: RunRequest) -> "Future[RunResult]":
        return self.sandbox.submit(request)

    def run(self, request: RunRequest) -> RunResult:
        return self.sandbox.run(request)

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        return self.sandbox.run_many(requests)

    def __enter__(self) -> "LazySandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None


if TYPE_CHECKING:
    # The type checker holds every backend to the interface its callers use
    # (tests/unit/test_backend_protocol.py does the same for the test fake).
    from rewardbox.sandbox.pool import PooledSandbox
    from rewardbox.sandbox.ray_backend import RaySandbox
    from rewardbox.sandbox.runner import Sandbox

    BACKENDS: tuple[type[SandboxBackend], ...] = (Sandbox, PooledSandbox, RaySandbox, LazySandbox)
