"""A sandbox's configuration (`SandboxConfig`), its modes by name, and the
single-machine sandbox a configuration makes (`make_local_sandbox`).

    pooled  long-lived containers serving up to `reuse` runs each, one at a
            time, every run from a clean slate (sandbox/pool.py); the default
    fresh   a container nothing else has used for every run, started ahead of
            demand (a pool with reuse=1)
    cold    a container created on demand for every run, with the image's
            single-use harness (sandbox/runner.py)

The Ray backend builds on this module (each worker makes the local sandbox
of its configuration) and `rewardbox.sandbox.modes` on both, so that no two
of them import each other.
"""

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rewardbox.sandbox.cpu_pins import cpu_set
from rewardbox.sandbox.engine import DockerEngine
from rewardbox.sandbox.languages import language
from rewardbox.sandbox.models import Limits
from rewardbox.sandbox.pool import DEFAULT_REUSE, PooledSandbox
from rewardbox.sandbox.runner import DEFAULT_IMAGE, DEFAULT_MAX_CONTAINERS, DEFAULT_RETRY_S, Sandbox

Mode = Literal["pooled", "fresh", "cold"]
MODES: tuple[str, ...] = get_args(Mode)  # the one list of the modes; the settings' field is typed `Mode`
DEFAULT_MODE: Mode = "pooled"


class SandboxConfig(BaseModel):
    """What makes a sandbox, checked once, wherever it comes from (settings,
    the command line, a caller's keywords). A field left unset is the
    backend's own default; `model_dump(exclude_unset=True)` is what was given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = DEFAULT_MODE
    image: str = Field(DEFAULT_IMAGE, min_length=1)
    runtime: str | None = None  # the OCI runtime (`runsc`: gVisor); None: the engine's
    max_containers: int | None = Field(None, ge=1)  # runs at once; None: 4, on Ray each node's CPU count
    reuse: int | None = Field(None, ge=1)  # pooled: runs a container serves; None: DEFAULT_REUSE
    limits: Limits | None = None  # a pool starts its first containers for these
    retry_s: float | None = Field(None, ge=0)  # how long failures of ours are retried; None: 60 s
    ray: str | None = None  # a Ray address ("auto"); None: this machine's engine
    # Another language's image by its name ("cpp": "registry/cpp:tag"); one not named runs in its
    # toolchain image built here (`rewardbox image build --language`). `image` runs Python.
    images: dict[str, str] = Field(default_factory=dict)
    # Pin each container to CPUs of this set, spread evenly: `all` (the engine's) or `0-3,8`; None: not pinned.
    pin_cpus: str | None = None

    @field_validator("pin_cpus")
    @classmethod
    def _cpus(cls, value: str | None) -> str | None:
        return cpu_set(value) if value is not None else None

    @field_validator("images")
    @classmethod
    def _languages(cls, value: dict[str, str]) -> dict[str, str]:
        named = {language(name).name: image for name, image in value.items()}
        if "python" in named:
            raise ValueError("Python runs in `image`, not in `images`")
        if not all(named.values()):
            raise ValueError("an image reference is empty")
        return named


def check_mode(mode: str) -> None:
    """
    >>> check_mode("warm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sandbox mode 'warm' (modes: pooled, fresh, cold)
    """
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r} (modes: {', '.join(MODES)})")


def make_local_sandbox(config: SandboxConfig, engine: DockerEngine | None = None, sweep: bool = True) -> Sandbox:
    """The sandbox of `config` on this machine's engine (its `ray` is not looked at)."""
    max_containers = config.max_containers if config.max_containers is not None else DEFAULT_MAX_CONTAINERS
    retry_s = config.retry_s if config.retry_s is not None else DEFAULT_RETRY_S
    if config.mode in ("pooled", "fresh"):
        reuse = (config.reuse or DEFAULT_REUSE) if config.mode == "pooled" else 1
        return PooledSandbox(config.image, max_containers, engine=engine, runtime=config.runtime, retry_s=retry_s,
                             sweep=sweep, reuse=reuse, limits=config.limits, images=config.images,
                             pin_cpus=config.pin_cpus)
    return Sandbox(config.image, max_containers, engine=engine, runtime=config.runtime, retry_s=retry_s, sweep=sweep,
                   images=config.images, pin_cpus=config.pin_cpus)
