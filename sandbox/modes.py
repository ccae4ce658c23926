"""The sandbox's modes by name, for the CLI, the service and the adapters.

    pooled  long-lived containers serving up to `reuse` runs each, one at a
            time, every run from a clean slate (sandbox/pool.py); the default
    fresh   a container nothing else has used for every run, started ahead of
            demand (a pool with reuse=1)
    cold    a container created on demand for every run, with the image's
            single-use harness (sandbox/runner.py)
"""

from typing import Any

from rewardbox.sandbox.models import Limits
from rewardbox.sandbox.pool import DEFAULT_REUSE, PooledSandbox
from rewardbox.sandbox.runner import Sandbox

MODES = ("pooled", "fresh", "cold")
DEFAULT_MODE = "pooled"


def make_sandbox(mode: str = DEFAULT_MODE, reuse: int | None = None, limits: Limits | None = None,
                 ray: str | None = None, **options: Any) -> Sandbox:
    """A sandbox of this mode; `options` as `Sandbox` takes them; a pool
    starts its first containers for `limits`. With `ray` (an address, or
    "auto"), a `RaySandbox` whose workers on the cluster's sandbox nodes each
    run a sandbox of this mode and options (pip install 'rewardbox[ray]').

    >>> make_sandbox("warm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sandbox mode 'warm' (modes: pooled, fresh, cold)
    """
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r} (modes: {', '.join(MODES)})")
    if ray:
        try:
            from rewardbox.sandbox.ray_backend import RaySandbox
        except ImportError as exc:
            raise ImportError(f"the Ray backend needs Ray: pip install 'rewardbox[ray]' ({exc})") from exc
        return RaySandbox(ray, mode=mode, reuse=reuse, limits=limits, **options)  # type: ignore[return-value]
    if mode == "pooled":
        return PooledSandbox(reuse=reuse or DEFAULT_REUSE, limits=limits, **options)
    if mode == "fresh":
        return PooledSandbox(reuse=1, limits=limits, **options)
    return Sandbox(**options)
