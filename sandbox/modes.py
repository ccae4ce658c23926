"""The sandbox's modes by name, for the CLI, the service and the adapters.

    pooled  long-lived containers serving up to `reuse` runs each, one at a
            time, every run from a clean slate (sandbox/pool.py); the default
    fresh   a container nothing else has used for every run, started ahead of
            demand (a pool with reuse=1)
    cold    a container created on demand for every run, with the image's
            single-use harness (sandbox/runner.py)
"""

from typing import Any

from sandbox.models import Limits
from sandbox.pool import DEFAULT_REUSE, PooledSandbox
from sandbox.runner import Sandbox

MODES = ("pooled", "fresh", "cold")
DEFAULT_MODE = "pooled"


def make_sandbox(mode: str = DEFAULT_MODE, reuse: int | None = None, limits: Limits | None = None,
                 **options: Any) -> Sandbox:
    """A sandbox of this mode; `options` as `Sandbox` takes them; a pool
    starts its first containers for `limits`.

    >>> make_sandbox("warm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sandbox mode 'warm' (modes: pooled, fresh, cold)
    """
    if mode == "pooled":
        return PooledSandbox(reuse=reuse or DEFAULT_REUSE, limits=limits, **options)
    if mode == "fresh":
        return PooledSandbox(reuse=1, limits=limits, **options)
    if mode == "cold":
        return Sandbox(**options)
    raise ValueError(f"unknown sandbox mode {mode!r} (modes: {', '.join(MODES)})")
