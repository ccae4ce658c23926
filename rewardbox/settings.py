"""One settings model, read the same way by every way in: `rewardbox score`
and `serve`, the service, the OpenRLHF reward and agent files and every
adapter's default reward (`rewardbox.adapters.default_reward()`).

Each key is set, from the highest precedence to the lowest, by a
command-line flag (`--workers 8`, where the command has one), an environment
variable (`REWARDBOX_` and the key in capitals; an empty value counts as
unset), the TOML file named by `--config FILE` or `REWARDBOX_CONFIG` (flat
`key = value` lines), or its default. `load_settings` says where each value
came from (`Settings.sources`, printed by `rewardbox doctor`); a value that
cannot be used is a `SettingsError` naming the key and its source.

>>> s = load_settings(environ={"REWARDBOX_WORKERS": "8", "REWARDBOX_TIMEOUT_S": ""}, flags={"workers": 2})
>>> s.workers, s.sources["workers"], s.sources["timeout_s"]
(2, 'flag --workers', 'default')
>>> load_settings(environ={"REWARDBOX_WORKERS": "0"})
Traceback (most recent call last):
...
rewardbox.settings.SettingsError: REWARDBOX_WORKERS='0': Input should be greater than or equal to 1
"""
from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, TypeVar, overload

from pydantic import Field, PrivateAttr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rewardbox.rewards.policy import GradingPolicy

# The service's queue sizes, from its own light module (no web framework:
# a trainer reads settings without loading the service).
from rewardbox.rewards.server.config import (
    MAX_COMPLETION_BYTES,
    MAX_HELD_SAMPLES,
    MAX_WAITING_SAMPLES,
    ServerSettings,
)
from rewardbox.sandbox.config import DEFAULT_MODE, Mode, SandboxConfig
from rewardbox.sandbox.cpu_pins import cpu_set
from rewardbox.sandbox.languages import language
from rewardbox.sandbox.models import DEFAULT_TIMEOUT_S, MAX_DEFAULT_TIMEOUT_S, PER_TEST_TIMEOUT_S, Limits
from rewardbox.sandbox.pool import DEFAULT_REUSE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    # mypy checks as 3.10 (this branch) in a 3.11 venv, where tomli (a 3.10-only dependency) is not installed
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

if TYPE_CHECKING:
    from rewardbox.rewards.base import Reward
    from rewardbox.rewards.registry import Registry
    from rewardbox.sandbox import LazySandbox
    from rewardbox.sandbox.backend import SandboxBackend

__all__ = [
    "CONFIG_VAR",
    "ENV_PREFIX",
    "FEEDBACK_TEMPLATES",
    "MAX_COMPLETION_BYTES",
    "MAX_HELD_SAMPLES",
    "MAX_WAITING_SAMPLES",
    "Settings",
    "SettingsError",
    "build_reward",
    "build_sandbox",
    "env_var",
    "load_settings",
    "reward_spec",
    "sandbox_config",
    "sandbox_options",
    "server_settings",
]

ENV_PREFIX = "REWARDBOX_"
CONFIG_VAR = "REWARDBOX_CONFIG"
DEFAULT_SOURCE = "default"

# The OpenRLHF agent's user turn after the model's end-of-turn token (part of
# the action text): close nothing, open a user turn, then the assistant's next turn.
FEEDBACK_TEMPLATES = {
    "chatml": "\n<|im_start|>user\n{feedback}<|im_end|>\n<|im_start|>assistant\n",
    "llama3": "<|start_header_id|>user<|end_header_id|>\n\n{feedback}<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "plain": "\n\nUser: {feedback}\n\nAssistant: ",
}


class SettingsError(ValueError):
    """A setting holds a value we cannot use; the message names the key and
    where the value came from (flag, variable or file)."""


def _rules(model: Any, name: str) -> Any:
    """The constraints of `model`'s field `name` (ge=..., gt=...), so that a
    setting is checked where it is read, by the rule its consumer keeps."""
    field = model.model_fields[name]
    params = (field.annotation, *field.metadata)
    return Annotated[params]


def _default(model: Any, name: str) -> Any:
    return model.model_fields[name].default


class Settings(BaseSettings):
    """rewardbox's settings. Each key, its environment variable, its default:

    | key | variable | default |
    | --- | --- | --- |
    | image | REWARDBOX_IMAGE | python (the lean image) |
    | mode | REWARDBOX_MODE | pooled |
    | runtime | REWARDBOX_RUNTIME | the engine's (runc) |
    | workers | REWARDBOX_WORKERS | the CPU count in `rewardbox score`/`serve`; 4 per trainer process |
    | reuse | REWARDBOX_REUSE | 1000 |
    | pin_cpus | REWARDBOX_PIN_CPUS | unset: containers not pinned |
    | timeout_s | REWARDBOX_TIMEOUT_S | 10 s + 0.5 s per test, at most 120 s |
    | memory_mb | REWARDBOX_MEMORY_MB | 512 |
    | retry_s | REWARDBOX_RETRY_S | 60 |
    | ray | REWARDBOX_RAY | unset: this machine's engine |
    | language_images | REWARDBOX_LANGUAGE_IMAGES | each language's toolchain image built here |
    | language | REWARDBOX_LANGUAGE | python |
    | reward | REWARDBOX_REWARD | correctness |
    | format_weight | REWARDBOX_FORMAT_WEIGHT | 0 |
    | timeout_reward | REWARDBOX_TIMEOUT_REWARD | -0.5 |
    | crash_reward | REWARDBOX_CRASH_REWARD | -1.0 |
    | no_code_reward | REWARDBOX_NO_CODE_REWARD | -1.0 |
    | max_steps | REWARDBOX_MAX_STEPS | 3 |
    | feedback_template | REWARDBOX_FEEDBACK_TEMPLATE | chatml |
    | max_waiting | REWARDBOX_MAX_WAITING | 4096 |
    | max_held | REWARDBOX_MAX_HELD | 32768 |
    | max_completion_bytes | REWARDBOX_MAX_COMPLETION_BYTES | 1048576 |
    | max_sessions | REWARDBOX_MAX_SESSIONS | 64 |
    | session_idle_s | REWARDBOX_SESSION_IDLE_S | 300 |
    | session_lifetime_s | REWARDBOX_SESSION_LIFETIME_S | 3600 |
    | warm_sessions | REWARDBOX_WARM_SESSIONS | 0 |

    The TOML file (`--config FILE` or `REWARDBOX_CONFIG`) holds the same keys,
    lower case, at its top level. `Settings()` reads the environment and that
    file; `load_settings` adds the command line's flags and each value's source.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True)

    # The sandbox.
    image: str = Field("python", min_length=1, description=(
        "the sandbox image: a variant name (`python`, the lean image; `scientific`, with numpy, scipy, pandas, "
        "sympy and the like), built by `rewardbox image build [--variant NAME]`, or an image reference "
        "(`registry/name:tag`)"))
    mode: Mode = Field(DEFAULT_MODE, description=(
        "sandbox mode: `pooled` (warm containers serving many samples each from a clean slate; fastest), "
        "`fresh` (a new container per sample, started ahead) or `cold` (a new container per sample, on demand)"))
    runtime: str | None = Field(None, min_length=1, description="OCI runtime, `runsc` for gVisor; unset: the engine's")
    workers: int | None = Field(None, ge=1, description=(
        "containers running at once, per process (with `ray`: per sandbox node); unset: the CPU count in "
        "`rewardbox score` and `serve` (one process per machine), 4 in each trainer process (often one per GPU), "
        "on Ray each sandbox node's CPU count"))
    reuse: int = Field(DEFAULT_REUSE, ge=1, description="pooled: samples a container serves at most")
    pin_cpus: str | None = Field(None, min_length=1, description=(
        "pin each container to its own CPUs, spread evenly over this set: `all` (every CPU of the Docker engine's "
        "machine) or a list such as `0-3,8` (on a shared node, the cores the trainer leaves free); cuts the slow "
        "tail at two or more containers per core; unset: the kernel places them"))
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False, description=(
        f"wall clock for one sample's tests, in seconds; unset: {DEFAULT_TIMEOUT_S:g} s plus {PER_TEST_TIMEOUT_S:g} s "
        f"per test, at most {MAX_DEFAULT_TIMEOUT_S:g} s"))
    memory_mb: _rules(Limits, "memory_mb") = Field(_default(Limits, "memory_mb"),  # type: ignore[valid-type]
                                                   description="memory per container in MiB (no swap)")
    retry_s: float = Field(60.0, ge=0, allow_inf_nan=False, description=(
        "how long a failure of ours (the engine, a lost container) is retried before it is raised"))
    ray: str | None = Field(None, min_length=1, description=(
        "run the samples on the sandbox nodes of a Ray cluster: `auto` (the cluster this machine belongs to) or "
        "an address; needs `rewardbox[ray]`; unset: this machine's engine"))
    language_images: str | None = Field(None, min_length=1, description=(
        "the images of other languages than Python, `cpp=registry/cpp:tag,java=...` (a TOML table too); a "
        "language not named runs in its toolchain image, built by `rewardbox image build --language NAME`"))
    # The reward.
    language: str = Field("python", min_length=1, description=(
        "the language of a stdio label that names none (APPS and TACO rows carry none); a label's own wins"))
    reward: str = Field("correctness", min_length=1, description=(
        "a registered reward or a weighted mix such as `correctness=0.9,format_one_code_block=0.1`"))
    format_weight: float = Field(0.0, ge=0, lt=1, description=(
        "if above 0, `format_one_code_block` is mixed in with this weight (the reward's weights scaled by 1 - w)"))
    timeout_reward: _rules(GradingPolicy, "timeout_reward") = Field(  # type: ignore[valid-type]
        _default(GradingPolicy, "timeout_reward"), description="reward of a run stopped by its deadline before any test passed")
    crash_reward: _rules(GradingPolicy, "crash_reward") = Field(  # type: ignore[valid-type]
        _default(GradingPolicy, "crash_reward"), description="reward of a syntax, import or collection error, out of "
                                                             "memory, output limit or a killed run")
    no_code_reward: _rules(GradingPolicy, "no_code_reward") = Field(  # type: ignore[valid-type]
        _default(GradingPolicy, "no_code_reward"), description="reward of a completion with no code in it")
    # The OpenRLHF agent.
    max_steps: int = Field(3, ge=1, description="OpenRLHF agent: attempts per episode")
    feedback_template: str = Field("chatml", description=(
        "OpenRLHF agent: the user turn around the feedback, a preset name (chatml, llama3, plain) or a text "
        "holding `{feedback}`"))
    # The service.
    max_waiting: int = Field(MAX_WAITING_SAMPLES, ge=1, description=(
        "service: samples in the sandbox at once (running or queued for a container); more wait in line"))
    max_held: int = Field(MAX_HELD_SAMPLES, ge=1, description=(
        "service: samples waiting in line; beyond, requests are refused at once (503; 504 on /run_code)"))
    max_completion_bytes: int = Field(MAX_COMPLETION_BYTES, ge=1, description=(
        "service: a completion over this many bytes is refused (413)"))
    max_sessions: _rules(ServerSettings, "max_sessions") = Field(  # type: ignore[valid-type]
        _default(ServerSettings, "max_sessions"), description=(
            "service: sessions (/v1/sessions) open at once; one more is refused (429)"))
    session_idle_s: _rules(ServerSettings, "session_idle_s") = Field(  # type: ignore[valid-type]
        _default(ServerSettings, "session_idle_s"), allow_inf_nan=False, description=(
            "service: a session no call came for this long is closed; the default and the most a session may ask for"))
    session_lifetime_s: _rules(ServerSettings, "session_lifetime_s") = Field(  # type: ignore[valid-type]
        _default(ServerSettings, "session_lifetime_s"), allow_inf_nan=False, description=(
            "service: a session's container ends this long after it was handed out; the default and the most a "
            "session may ask for"))
    warm_sessions: _rules(ServerSettings, "warm_sessions") = Field(  # type: ignore[valid-type]
        _default(ServerSettings, "warm_sessions"), description=(
            "session containers made ahead, so that a session of the default limits starts at once: the "
            "service's, and the trainer adapters' (verl's tools, AgentFly's resource, OpenRLHF's agent); 0: none"))

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("language_images", mode="before")
    @classmethod
    def _language_images(cls, value: Any) -> Any:
        """Kept as `name=image,...` with each language's own name; checked here."""
        if isinstance(value, dict):  # a TOML table
            value = ",".join(f"{k}={v}" for k, v in value.items())
        if isinstance(value, str):
            return ",".join(f"{k}={v}" for k, v in language_image_map(value).items()) or None
        return value

    @property
    def language_image_map(self) -> dict[str, str]:
        """`language_images` as a map of language name to image."""
        return language_image_map(self.language_images or "")

    @field_validator("pin_cpus")
    @classmethod
    def _pin_cpus(cls, value: str | None) -> str | None:
        return cpu_set(value) if value is not None else None

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return language(value).name

    @field_validator("feedback_template")
    @classmethod
    def _template(cls, value: str) -> str:
        template = FEEDBACK_TEMPLATES.get(value, value)
        if "{feedback}" not in template:
            raise ValueError(f"must be one of {sorted(FEEDBACK_TEMPLATES)} or a text containing {{feedback}}")
        return template

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        if _LAYERED.get():  # `load_settings` has read the layers itself, and hands their values in
            return (init_settings,)
        # `Settings()` reads what `load_settings` reads, by the same code.
        return init_settings, _Layer(settings_cls, lambda: _env_layer(os.environ)), \
            _Layer(settings_cls, lambda: _file_layer(_config_path(None, os.environ))[0])

    @property
    def sources(self) -> dict[str, str]:
        """Where each key's value came from: `default`, `file PATH`,
        `env REWARDBOX_X` or `flag --x` (filled by `load_settings`)."""
        return {key: self._sources.get(key, DEFAULT_SOURCE) for key in type(self).model_fields}

    @property
    def image_tag(self) -> str:
        """The image to run: a variant's tag, or the reference as given."""
        from rewardbox.images import resolve_image

        return resolve_image(self.image)

    @property
    def limits(self) -> Limits:
        """The limits of a run. An unset `timeout_s` stays unset, so that the
        deadline grows with each sample's tests (`Limits.for_tests`)."""
        if self.timeout_s is None:
            return Limits(memory_mb=self.memory_mb)
        return Limits(memory_mb=self.memory_mb, timeout_s=self.timeout_s)

    @property
    def policy(self) -> GradingPolicy:
        return GradingPolicy(timeout_reward=self.timeout_reward, crash_reward=self.crash_reward,
                             no_code_reward=self.no_code_reward)


_LAYERED: ContextVar[bool] = ContextVar("rewardbox_settings_layered", default=False)


class _Layer(PydanticBaseSettingsSource):
    """One layer (the environment, the file) as a pydantic-settings source."""

    def __init__(self, settings_cls: type[BaseSettings], read: Callable[[], dict[str, Any]]):
        super().__init__(settings_cls)
        self._read = read

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return self._read().get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._read()


def env_var(key: str) -> str:
    """The environment variable of a key.

    >>> env_var("timeout_s")
    'REWARDBOX_TIMEOUT_S'
    """
    return ENV_PREFIX + key.upper()


def _env_layer(environ: Mapping[str, str]) -> dict[str, str]:
    """The keys set by REWARDBOX_* variables; an empty (or blank) value is unset.
    A value is passed on as written (a feedback template's spaces count)."""
    return {key: environ[env_var(key)] for key in Settings.model_fields if environ.get(env_var(key), "").strip()}


def _config_path(config: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str | None:
    if config is not None:
        return os.fspath(config)
    return environ.get(CONFIG_VAR, "").strip() or None


def _file_layer(path: str | None) -> tuple[dict[str, Any], str]:
    """The keys of the TOML file at `path` (none without a path), and the
    file's source name (empty without a path: no key ever comes from it). A missing or broken file, or a key we do not know, is
    a `SettingsError`: a typo must not leave a setting silently at its default."""
    if path is None:
        return {}, ""
    source = f"file {path}"
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise SettingsError(f"settings file {path} (--config or {CONFIG_VAR}): cannot read it: "
                            f"{exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"settings file {path}: not TOML: {exc}") from None
    keys = list(Settings.model_fields)
    for key in data:
        if key not in Settings.model_fields:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (keys: {', '.join(keys)})"
            raise SettingsError(f"settings file {path}: unknown key {key!r}{hint}")
    return data, source


def language_image_map(text: str) -> dict[str, str]:
    """`cpp=registry/cpp:tag,java=x` as {"cpp": "registry/cpp:tag", "java": "x"},
    each language by its own name; ValueError for an unknown language, Python
    (its image is `image`), or an entry without `=` or an image.

    >>> language_image_map(" C++ = r/cpp:1 , golang=r/go:2 ")
    {'cpp': 'r/cpp:1', 'go': 'r/go:2'}
    """
    images: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, image = (part.strip() for part in entry.partition("="))
        if not sep or not name or not image:
            raise ValueError(f"{entry!r} is not `language=image`")
        canonical = language(name).name  # UnknownLanguage (a ValueError) names the known ones
        if canonical == "python":
            raise ValueError("Python runs in `image`, not in `language_images`")
        images[canonical] = image
    return images


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def load_settings(flags: Mapping[str, Any] | None = None, config: str | os.PathLike[str] | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """The effective settings: `flags` (key -> value; None counts as not
    given) over the environment (default: `os.environ`) over the TOML file
    (`config`, else `REWARDBOX_CONFIG`) over the defaults, each value's
    source in `.sources`. A value that cannot be used, a broken file or an
    unknown key in it is a `SettingsError` naming the key and its source."""
    env = os.environ if environ is None else environ
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    unknown = sorted(set(given) - set(Settings.model_fields))
    if unknown:  # a caller's mistake, not a user's
        raise TypeError(f"not settings: {', '.join(unknown)}")
    file_values, file_source = _file_layer(_config_path(config, env))
    env_values = _env_layer(env)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    layers: list[tuple[Mapping[str, Any], Callable[[str], str]]] = [
        (file_values, lambda key: file_source), (env_values, lambda key: f"env {env_var(key)}"),
        (given, lambda key: f"flag {_flag(key)}")]
    for layer, source_of in layers:
        for key, value in layer.items():
            values[key], sources[key] = value, source_of(key)
    layered = _LAYERED.set(True)
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        raise SettingsError("; ".join(_problem(error, values, sources) for error in exc.errors())) from None
    finally:
        _LAYERED.reset(layered)
    settings._sources = sources
    return settings


def _problem(error: Any, values: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """One validation error, named the way its value was given."""
    key = str(error["loc"][0]) if error["loc"] else ""
    message = error["msg"]
    source = sources.get(key, DEFAULT_SOURCE)
    value = values.get(key)
    if source.startswith("flag "):  # as the command line words its other errors
        return f"{_flag(key)}: {message[:1].lower()}{message[1:]}, not {value!r}"
    return f"{_where(key, value, source)}: {message}"


def _where(key: str, value: Any, source: str) -> str:
    """A key's value as its source gave it: `REWARDBOX_X='v'`, `--x 'v'`,
    `settings file PATH: x = 'v'`."""
    if source.startswith("env "):
        return f"{env_var(key)}={value!r}"
    if source.startswith("flag "):
        return f"{_flag(key)} {value!r}"
    if source.startswith("file "):
        return f"settings file {source[5:]}: {key} = {value!r}"
    return f"{key} {value!r}"


# ---- what the settings build ------------------------------------------------------------------------------------

class _GivenSandboxFields(TypedDict, total=False):
    """The `SandboxConfig` fields the settings give only in some cases: left
    out, a field stays unset (the backend's default) rather than set to None."""

    max_containers: int
    reuse: int
    limits: Limits
    ray: str
    images: dict[str, str]
    pin_cpus: str


def sandbox_config(settings: Settings, default_workers: int | None = None) -> SandboxConfig:
    """The `SandboxConfig` of these settings. `default_workers`: the containers
    when `workers` is unset (the sandbox's own default if None); on Ray an
    unset `workers` leaves each node's worker its CPU count."""
    given: _GivenSandboxFields = {}
    workers = settings.workers if settings.workers is not None or settings.ray else default_workers
    if workers is not None:
        given["max_containers"] = workers
    if settings.mode != "cold":  # a pool warms its first containers for the run's limits
        given["reuse"], given["limits"] = settings.reuse, settings.limits
    if settings.ray:
        given["ray"] = settings.ray
    if settings.language_images:
        given["images"] = settings.language_image_map
    if settings.pin_cpus:
        given["pin_cpus"] = settings.pin_cpus
    return SandboxConfig(mode=settings.mode, image=settings.image_tag, runtime=settings.runtime,
                         retry_s=settings.retry_s, **given)


def sandbox_options(settings: Settings, default_workers: int | None = None) -> dict[str, Any]:
    """The keyword arguments of `rewardbox.sandbox.modes.make_sandbox` (and of
    `LazySandbox`) for these settings: the fields `sandbox_config` sets."""
    config = sandbox_config(settings, default_workers)
    return {key: getattr(config, key) for key in config.model_fields_set}


# What build_sandbox makes: a LazySandbox, a subclass of it, or what make_sandbox starts.
_Backend = TypeVar("_Backend", bound="SandboxBackend")


@overload
def build_sandbox(settings: Settings, factory: None = None, default_workers: int | None = None) -> LazySandbox: ...


@overload
def build_sandbox(settings: Settings, factory: Callable[..., _Backend],
                  default_workers: int | None = None) -> _Backend: ...


def build_sandbox(settings: Settings, factory: Callable[..., SandboxBackend] | None = None,
                  default_workers: int | None = None) -> SandboxBackend:
    """The sandbox of these settings, made by `factory(config=sandbox_config(...))`
    (default: a `LazySandbox`, started on first use; the command line passes
    its stoppable one, `make_sandbox` starts it now)."""
    if factory is None:
        from rewardbox.sandbox import LazySandbox

        factory = LazySandbox
    return factory(config=sandbox_config(settings, default_workers))


def reward_spec(settings: Settings) -> str:
    """The reward to resolve: `reward`, with `format_one_code_block` mixed in
    at `format_weight` (the reward's own weights scaled by 1 - w).

    >>> reward_spec(load_settings({"format_weight": 0.2}, environ={}))
    'correctness=0.8,format_one_code_block=0.2'
    >>> reward_spec(load_settings({"reward": "correctness=3,format_one_code_block=1", "format_weight": 0.5}, environ={}))
    'correctness=0.375,format_one_code_block=0.625'
    """
    w = settings.format_weight
    if w == 0:
        return settings.reward
    weights: dict[str, float] = {}
    for item in settings.reward.split(","):
        name, has_weight, weight = (part.strip() for part in item.partition("="))
        try:
            weights[name.lower()] = weights.get(name.lower(), 0.0) + (float(weight) if has_weight else 1.0)
        except ValueError:
            return settings.reward  # left to the registry, whose error names the bad weight
    total = sum(weights.values()) or 1.0
    mixed = {name: (1 - w) * weight / total for name, weight in weights.items()}
    mixed["format_one_code_block"] = mixed.get("format_one_code_block", 0.0) + w
    return ",".join(f"{name}={round(weight, 12):g}" for name, weight in mixed.items())


def build_reward(settings: Settings, sandbox: SandboxBackend | None = None, registry: Registry | None = None) -> Reward:
    """The reward of these settings (`reward_spec`) from `registry` (default:
    one configured with `sandbox`, the settings' policy and limits). An
    unknown name raises `UnknownRewardError`; unusable weights a `SettingsError`."""
    from rewardbox.rewards.registry import UnknownRewardError, configured_registry

    if registry is None:
        registry = configured_registry(sandbox=sandbox, policy=settings.policy, limits=settings.limits,
                                       language=settings.language)
    spec = reward_spec(settings)
    try:
        return registry.resolve(spec)
    except UnknownRewardError:
        raise
    except ValueError as exc:  # a mix whose weights cannot be used
        raise SettingsError(f"{_where('reward', settings.reward, settings.sources['reward'])}: {exc}") from None


def server_settings(settings: Settings) -> ServerSettings:
    """The service's settings: its queue sizes, its default reward, its sessions."""
    return ServerSettings(max_waiting_samples=settings.max_waiting, max_held_samples=settings.max_held,
                          max_completion_bytes=settings.max_completion_bytes, default_reward=reward_spec(settings),
                          max_sessions=settings.max_sessions, session_idle_s=settings.session_idle_s,
                          session_lifetime_s=settings.session_lifetime_s, warm_sessions=settings.warm_sessions)
