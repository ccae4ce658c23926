"""`rewardbox doctor`: is this machine ready to score, and with what settings?

Each check is a function returning `Check`s (ok, or the failure and its
fix); `run_checks` runs them in order, `report` words them. The command line
only prints. The checks: the engine and its version; its storage driver and
cgroup version; the configured image present and built from this version's
harness; what the image holds; the runtimes; one real one-second container
run under the default limits, through the `Sandbox`; Ray, if configured.
"""
from __future__ import annotations

import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rewardbox.images import build_hint, context_digest, image_manifest
from rewardbox.settings import Settings, env_var

if TYPE_CHECKING:
    import docker

    from rewardbox.images import ImageManifest

__all__ = ["Check", "check_contents", "check_engine", "check_image", "check_limits", "check_ray", "check_runtimes",
           "check_storage", "report", "run_checks"]

ENGINE_TIMEOUT_S = 10
GVISOR = "runsc"
RUN_S = 1.0
RUN_DEADLINE_S = 60.0  # the one-second run, its container's start and removal included
RAY_CONNECT_S = 5.0  # Ray's own client retries an address that does not answer for minutes


class Check(BaseModel):
    """One line of the report: what was checked, what was found, and for a
    failure, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def run_checks(settings: Settings, api: docker.APIClient | None = None) -> list[Check]:
    """Every check, in order; those that need what an earlier one found
    missing (an engine, the image, the runtime) are left out."""
    checks: list[Check] = []
    engine = check_engine(api)
    checks.append(engine.check)
    if engine.api is not None:
        try:
            checks.append(check_storage(engine.info))
            image, manifest = check_image(settings.image_tag, engine.api)
            checks.append(image)
            if manifest is not None:
                checks.append(check_contents(manifest))
            runtimes = check_runtimes(engine.info, settings.runtime)
            checks.append(runtimes)
            if manifest is not None and runtimes.ok and not settings.ray:
                checks.append(check_limits(settings))
        finally:
            if api is None:
                engine.api.close()
    if settings.ray:
        checks.append(check_ray(settings.ray))
    return checks


class _Engine(BaseModel, arbitrary_types_allowed=True):
    check: Check
    api: Any = None
    info: dict[str, Any] = {}


def check_engine(api: docker.APIClient | None = None) -> _Engine:
    """The engine answers: its version, and `docker info` for the next checks."""
    import docker
    import requests

    try:
        api = api or docker.from_env(timeout=ENGINE_TIMEOUT_S).api
        version = api.version()
        info = api.info()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        return _Engine(check=Check(name="engine", ok=False, detail=f"unreachable: {exc}"[:400],
                                   fix="start the Docker engine (systemctl start docker), or point DOCKER_HOST at "
                                       "it; your user needs access to its socket (the docker group)"))
    detail = f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')}) at {api.base_url}"
    return _Engine(check=Check(name="engine", ok=True, detail=detail), api=api, info=info)


def check_storage(info: dict[str, Any]) -> Check:
    """The storage driver and the cgroup version (the limits work on both
    cgroup versions; told so that a report from a machine says it)."""
    driver = info.get("Driver") or "unknown"
    cgroup = info.get("CgroupVersion") or "unknown"
    detail = f"storage driver {driver}, cgroup v{cgroup} ({info.get('CgroupDriver') or 'unknown'} driver)"
    return Check(name="storage", ok=True, detail=detail)


def check_image(tag: str, api: docker.APIClient) -> tuple[Check, ImageManifest | None]:
    """The image is on the engine and was built from this version's harness
    (its `rewardbox.harness` label against the package's context digest)."""
    manifest = image_manifest(tag, api)
    if manifest is None:
        return Check(name="image", ok=False, detail=f"{tag} is not on the engine", fix=build_hint(tag)), None
    current = context_digest()
    if manifest.harness is None:
        return Check(name="image", ok=False, detail=f"{tag} carries no rewardbox labels: not built by `rewardbox "
                                                    "image build`, so its harness cannot be told",
                     fix="run `rewardbox image build` (with --variant or --packages for more packages) and use its "
                         f"tag ({env_var('image')} or --image)"), manifest
    if manifest.harness != current:
        return Check(name="image", ok=False, detail=f"{tag} holds harness {manifest.harness}, this version's is {current}",
                     fix="run `rewardbox image build` and use the tag it prints (or leave the image unset)"), manifest
    return Check(name="image", ok=True, detail=f"{tag} (harness {current}, this version's)"), manifest


def check_contents(manifest: ImageManifest) -> Check:
    """What the image holds beyond the standard library: its packages and
    the modules a label's tests may import."""
    packages = ", ".join(manifest.packages) or "none beyond the lean set (pytest and the harness)"
    modules = ", ".join(manifest.modules or ()) or "unknown"
    return Check(name="contents", ok=True, detail=f"packages: {packages}; modules: {modules}")


def check_runtimes(info: dict[str, Any], runtime: str | None) -> Check:
    """The runtimes the engine has; the configured one among them."""
    runtimes = sorted(info.get("Runtimes") or {})
    default = info.get("DefaultRuntime") or "runc"
    listed = ", ".join(f"{name} (default)" if name == default else name for name in runtimes) or default
    if runtime is not None and runtime not in runtimes:
        fix = ("install gVisor and register runsc with the engine (`sudo scripts/ensure-gvisor.sh` from the "
               "repository, or gvisor.dev's install steps), then restart it" if runtime == GVISOR else
               f"register {runtime} in the engine's daemon.json and restart it, or unset {env_var('runtime')}")
        return Check(name="runtimes", ok=False, detail=f"{runtime} is not registered with the engine ({listed})", fix=fix)
    using = runtime or default
    gvisor = "" if GVISOR in runtimes else f"; gVisor's {GVISOR} is not installed (optional: a stronger sandbox)"
    return Check(name="runtimes", ok=True, detail=f"{listed}; samples run with {using}{gvisor}")


def check_limits(settings: Settings) -> Check:
    """One real container run of about a second under the default limits,
    through the `Sandbox` the settings describe (image, runtime, and the
    CPUs it pins its containers to: an engine without the cgroup's cpuset
    controller, or a CPU it does not have, fails here)."""
    from rewardbox.sandbox import Limits, RunRequest, Sandbox, SandboxError

    request = RunRequest(files={"main.py": f"import time\ntime.sleep({RUN_S})\nprint('slept')\n"}, program="main.py",
                         limits=Limits())
    started = time.monotonic()
    try:
        with Sandbox(image=settings.image_tag, runtime=settings.runtime, max_containers=1,
                     retry_s=min(settings.retry_s, 10.0), pin_cpus=settings.pin_cpus) as sandbox:
            result = sandbox.run(request)
    except SandboxError as exc:
        return Check(name="limits", ok=False, detail=f"a one-second run could not be made: {exc}"[:600],
                     fix="see the error; the engine's log (journalctl -u docker) tells more")
    elapsed = time.monotonic() - started
    limits = request.limits
    pinned = f", pinned over CPUs {settings.pin_cpus}" if settings.pin_cpus else ""
    if result.exit_code != 0 or "slept" not in result.stdout or elapsed > RUN_DEADLINE_S:
        return Check(name="limits", ok=False,
                     detail=f"the one-second run ended {result.verdict.value} (exit {result.exit_code}) in "
                            f"{elapsed:.1f} s: {(result.message or result.stderr).strip()[:300]}",
                     fix="the engine cannot run containers under the limits (memory, pids, read-only root); "
                         "check its cgroup setup (`docker info`) and log")
    return Check(name="limits", ok=True,
                 detail=f"a {RUN_S:g}-second run under the default limits ({limits.memory_mb} MiB, {limits.cpus:g} CPU, "
                        f"{limits.pids} pids{pinned}) took {elapsed:.1f} s, container start and removal included")


def check_ray(address: str) -> Check:
    """The Ray cluster answers and has sandbox nodes."""
    try:
        import ray

        from rewardbox.sandbox.ray_backend import RESOURCE
    except ImportError as exc:
        return Check(name="ray", ok=False, detail=f"Ray is not installed ({exc})", fix="pip install 'rewardbox[ray]'")
    if unreachable := _unreachable(address):
        return Check(name="ray", ok=False, detail=f"nothing answers at {address}: {unreachable}",
                     fix=f"start the cluster (`ray start --head`) or correct {env_var('ray')}")
    joined = not ray.is_initialized()
    try:
        if joined:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
        nodes = ray.cluster_resources().get(RESOURCE, 0)  # type: ignore[no-untyped-call]  # unannotated in ray
    except (ConnectionError, ValueError, RuntimeError) as exc:
        return Check(name="ray", ok=False, detail=f"cannot join the Ray cluster at {address}: {exc}"[:500],
                     fix=f"start the cluster (`ray start --head`) or correct {env_var('ray')}")
    finally:
        if joined and ray.is_initialized():
            ray.shutdown()
    if not nodes:
        return Check(name="ray", ok=False, detail=f"the cluster at {address} has no sandbox node",
                     fix=f"start sandbox nodes with `ray start --resources='{{\"{RESOURCE}\": 1}}'` beside an engine "
                         "holding the image")
    return Check(name="ray", ok=True, detail=f"the cluster at {address} has {nodes:g} sandbox node(s)")


def _unreachable(address: str) -> str | None:
    """Why a `host:port` address does not answer a TCP connection (None: it
    does, or the address is `auto` or a ray:// URL, left to Ray)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return None
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_S):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def report(checks: list[Check], settings: Settings) -> str:
    """The checks, one line each (`ok` or `fail`, then the fix), then every
    effective setting and where it came from."""
    width = max(len(check.name) for check in checks) if checks else 0
    lines = []
    for check in checks:
        lines.append(f"{'ok' if check.ok else 'fail':<5} {check.name:<{width}}  {check.detail}")
        if check.fix:
            lines.append(f"{'':<5} {'':<{width}}  fix: {check.fix}")
    lines += ["", "settings (effective value, then where it came from):"]
    values = settings.model_dump()
    key_width = max(map(len, values))
    sources = settings.sources
    for key, value in values.items():
        shown = "unset" if value is None else repr(value) if isinstance(value, str) else str(value)
        if key == "image":
            shown += f" -> {settings.image_tag}"
        lines.append(f"  {key:<{key_width}}  {shown}  ({sources[key]})")
    return "\n".join(lines)
