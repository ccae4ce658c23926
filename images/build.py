"""Building and moving the sandbox image: `rewardbox image build|push|save|list|base`.

Works from an installed wheel on any machine with a Docker engine: the build
context is this package's data (`rewardbox.images`), the wheels are fetched on
the host by pip for the image's interpreter (CPython 3.11, manylinux, this
machine's architecture) into a cache outside the package, and the engine builds
with no network at all. The base image is, in order: `$REWARDBOX_BASE_IMAGE`;
python:3.11-slim-bookworm if present or pullable; else a Debian bookworm made
with debootstrap from the host's own apt sources (`$DEBIAN_MIRROR` overrides;
proxies as apt and debootstrap take them, from the environment) and imported
as rewardbox/debian-base:bookworm, once.

>>> debian_mirror([("sources.list", "deb [arch=amd64] http://ftp.fr.debian.org/debian bookworm main")])
'http://ftp.fr.debian.org/debian'
>>> sorted(modules_in_wheel_names(["numpy/__init__.py", "numpy.libs/x.so", "numpy-2.4.6.dist-info/RECORD"]))
['numpy']
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import requests
from pydantic import BaseModel, ConfigDict

from rewardbox.images import (
    HARNESS_LABEL,
    IMAGE_LABEL,
    MODULES_LABEL,
    PACKAGES_LABEL,
    VARIANTS,
    build_hint,
    context_digest,
    context_files,
    image_manifest,
    image_tag,
    language_tag,
    package_set,
)
from rewardbox.images.languages import (
    DEBIAN_SUITE,
    DEBS_LABEL,
    FROM_LABEL,
    INSTALL,
    LANGUAGE_IMAGES,
    LANGUAGE_LABEL,
    USER,
    WORKDIR,
    LanguageImage,
)

if TYPE_CHECKING:
    import docker

__all__ = [
    "BuildResult",
    "ImageBuildError",
    "add_command",
    "build_image",
    "build_language_image",
    "debs_label",
    "debian_mirror",
    "fetch_debs",
    "host_debian_mirror",
    "language_image_current",
    "modules_in_wheel",
    "modules_in_wheel_names",
    "planned_debs",
    "pick_base",
    "push_image",
    "push_target",
    "save_image",
    "target_platforms",
    "wanted_packages",
]

REGISTRY_BASE = "python:3.11-slim-bookworm"
LOCAL_BASE = "rewardbox/debian-base:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The image's interpreter, for which the host's pip fetches wheels.
PYTHON_VERSION = "3.11"
GLIBC_MINOR = 36  # bookworm's glibc 2.36
# The installer of the packages beyond the lean set, run from its wheel in the build.
INSTALLER = "pip==25.3"
PULL_TIMEOUT_S = 120
BUILD_TIMEOUT_S = 3600  # the engine may say nothing for minutes while a layer is written
# Debian's suite names, for telling the host's Debian mirror from other distributions' and third parties'.
DEBIAN_SUITES = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                 "oldoldstable", "oldstable", "stable", "testing", "unstable"}


class ImageBuildError(Exception):
    """The image could not be built, pushed or saved; the message says what to do."""


class BuildResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    tag: str
    built: bool  # False: an image with this tag and matching labels was already there
    base: str | None = None


def _log(message: str) -> None:
    print(f"[rewardbox image] {message}", file=sys.stderr, flush=True)


# -- the host's apt sources ----------------------------------------------------------

def _one_line_entries(text: str) -> Iterable[tuple[str, list[str]]]:
    """(URI, suites) of the `deb` lines of a one-line-style sources.list."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)  # [arch=amd64 signed-by=...]
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            yield words[1], [words[2]]


def _deb822_entries(text: str) -> Iterable[tuple[str, list[str]]]:
    """(URI, suites) of the enabled `deb` stanzas of a deb822 *.sources file."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.lstrip().startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:  # a continuation line
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            yield uri, fields.get("suites", "").split()


def debian_mirror(sources: Iterable[tuple[str, str]]) -> str | None:
    """The Debian mirror of apt sources given as (file name, text): the first
    `deb` entry of a Debian suite that is not the security archive. None when
    the sources hold none (another distribution's host)."""
    for name, text in sources:
        entries = _deb822_entries(text) if name.endswith(".sources") else _one_line_entries(text)
        for uri, suites in entries:
            if not uri.startswith(("http://", "https://")) or "security" in uri:
                continue
            if any(suite.split("-", 1)[0] in DEBIAN_SUITES and "security" not in suite for suite in suites):
                return uri.rstrip("/")
    return None


def host_debian_mirror(apt: Path = Path("/etc/apt")) -> str:
    """`$DEBIAN_MIRROR`, else the host's own Debian mirror, else deb.debian.org."""
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"]
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list")),
             *sorted((apt / "sources.list.d").glob("*.sources"))]
    readable = []
    for file in files:
        try:
            readable.append((file.name, file.read_text(errors="replace")))
        except OSError:
            continue
    return debian_mirror(readable) or DEFAULT_MIRROR


# -- the base image -------------------------------------------------------------------

def _client(timeout_s: int = 60) -> docker.APIClient:
    import docker

    try:
        api = docker.from_env(timeout=timeout_s).api
        api.ping()
    except docker.errors.DockerException as exc:
        raise ImageBuildError(f"no Docker engine answers ({exc}): start one, or set DOCKER_HOST") from None
    return api


def _present(api: docker.APIClient, image: str) -> bool:
    import docker

    try:
        api.inspect_image(image)  # type: ignore[no-untyped-call]  # docker's stubs leave inspect_image unannotated
        return True
    except docker.errors.ImageNotFound:
        return False


def pick_base(api: docker.APIClient) -> str:
    """The base image of the sandbox and service images, pulled or made if need be."""
    import docker

    if os.environ.get("REWARDBOX_BASE_IMAGE"):
        return os.environ["REWARDBOX_BASE_IMAGE"]
    for image in (REGISTRY_BASE, LOCAL_BASE):
        if _present(api, image):
            return image
    _log(f"trying to pull {REGISTRY_BASE}")
    try:
        puller = docker.from_env(timeout=PULL_TIMEOUT_S).api
        repository, tag = REGISTRY_BASE.split(":")
        puller.pull(repository, tag=tag)
        if _present(api, REGISTRY_BASE):
            return REGISTRY_BASE
    except Exception as exc:  # any failure to pull means: no registry here
        _log(f"no registry reachable ({type(exc).__name__}): a Debian base is made instead")
    return _bootstrap_base(api)


def _bootstrap_base(api: docker.APIClient, target: str = LOCAL_BASE) -> str:
    """Debian bookworm with python3, by debootstrap from the host's mirror, imported as `target`."""
    mirror = host_debian_mirror()
    if not shutil.which("debootstrap"):
        if os.geteuid() == 0 and shutil.which("apt-get"):
            _log("installing debootstrap")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            if subprocess.run(["apt-get", "install", "-y", "-qq", "debootstrap"], env=env,
                              stdout=subprocess.DEVNULL).returncode:
                subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
                subprocess.run(["apt-get", "install", "-y", "-qq", "debootstrap"], env=env,
                               stdout=subprocess.DEVNULL, check=False)
        if not shutil.which("debootstrap"):
            raise ImageBuildError("no registry is reachable and debootstrap is missing: install it "
                                  "(apt-get install debootstrap), or set REWARDBOX_BASE_IMAGE to an image with "
                                  "python3 3.11")
    if os.geteuid() != 0:
        raise ImageBuildError("no registry is reachable and debootstrap needs root: run `rewardbox image base` "
                              "as root once, or set REWARDBOX_BASE_IMAGE to an image with python3 3.11")
    _log(f"bootstrapping Debian {DEBIAN_SUITE} from {mirror} (once, a few minutes)")
    with tempfile.TemporaryDirectory(prefix="rewardbox-rootfs.", dir="/var/tmp") as work:
        rootfs, tarball = Path(work) / "rootfs", Path(work) / "rootfs.tar"
        done = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3", DEBIAN_SUITE, str(rootfs),
                               mirror], capture_output=True, text=True)
        if done.returncode:
            raise ImageBuildError(f"debootstrap from {mirror} failed: {done.stderr.strip()[-2000:]} "
                                  "(set DEBIAN_MIRROR to a reachable Debian mirror)")
        # Nothing the tests need: package caches, documentation, translations.
        for junk in ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
                     "usr/share/info"):
            for child in (rootfs / junk).glob("*"):
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        repository, tag = target.rsplit(":", 1)
        api.import_image_from_file(str(tarball), repository=repository, tag=tag)
    _log(f"imported {target}")
    return target


# -- wheels ---------------------------------------------------------------------------

def target_platforms(machine: str | None = None) -> list[str]:
    """pip's platform tags for wheels that run on bookworm's glibc (pip takes
    each tag literally, so every manylinux level up to 2.36 is listed)."""
    machine = machine or platform.machine()
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{machine}"]


def cache_dir() -> Path:
    """Where fetched wheels are kept: `$REWARDBOX_CACHE_DIR`, else the user's
    cache (the package's own folder may be read-only)."""
    if os.environ.get("REWARDBOX_CACHE_DIR"):
        return Path(os.environ["REWARDBOX_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rewardbox"


def _pip_download(dest: Path, arguments: Sequence[str], deps: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    target = ["--only-binary=:all:", "--implementation", "cp", "--python-version", PYTHON_VERSION,
              "--abi", "cp" + PYTHON_VERSION.replace(".", "")]
    for tag in target_platforms():
        target += ["--platform", tag]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               *([] if deps else ["--no-deps"]), *target, "-d", str(dest), *arguments]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        errors = "\n".join(line for line in done.stderr.splitlines() if "is ignored" not in line)
        raise ImageBuildError(f"pip could not fetch the wheels for Python {PYTHON_VERSION} on "
                              f"{platform.machine()} Linux:\n{errors.strip()}")


def modules_in_wheel_names(names: Iterable[str]) -> set[str]:
    """The top-level importable modules a wheel installs, from its file names:
    packages (folders) and modules (`x.py`, `x.cpython-311-*.so`), not its
    metadata (`*.dist-info`), data or vendored libraries (`numpy.libs`)."""
    found = set()
    for name in names:
        parts = name.split("/")
        if parts[0].endswith(".data") and len(parts) > 3 and parts[1] in ("purelib", "platlib"):
            parts = parts[2:]
        first = parts[0]
        if len(parts) > 1:
            if first.isidentifier():
                found.add(first)
        elif first.endswith((".py", ".so", ".pyd")) or ".cpython-" in first or ".abi3." in first:
            module = first.split(".", 1)[0]
            if module.isidentifier():
                found.add(module)
    return found


def modules_in_wheel(path: Path) -> set[str]:
    with zipfile.ZipFile(path) as wheel:
        return modules_in_wheel_names(wheel.namelist())


def _requirements_file(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ImageBuildError(f"cannot read the requirements file {path}: {exc.strerror}") from None
    requirements = package_set(lines)
    options = [line for line in requirements if line.startswith("-")]
    if options:
        raise ImageBuildError(f"{path}: only requirement lines are taken (name, name==version, name[extra]), "
                              f"not pip options: {', '.join(options)}")
    return requirements


# -- building -------------------------------------------------------------------------

def wanted_packages(variant: str, packages: Sequence[str] = (), requirements: Path | None = None) -> list[str]:
    """The requirement lines installed beyond the lean set, as labelled."""
    if variant not in VARIANTS:
        raise ImageBuildError(f"unknown variant {variant!r}: one of {', '.join(sorted(VARIANTS))}")
    return package_set([*VARIANTS[variant], *packages, *(_requirements_file(requirements) if requirements else [])])


def _stage_context(stage: Path) -> None:
    """The package's build context, copied out (bytecode caches left out, as in its digest)."""
    for name, file in context_files():
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(file.read_bytes())


def build_image(variant: str = "python", packages: Sequence[str] = (), requirements: Path | None = None,
                rebuild: bool = False, api: docker.APIClient | None = None) -> BuildResult:
    """Builds the sandbox image of `variant` plus `packages` (and a requirements
    file's lines) unless an image with its tag and matching labels exists."""
    extra = wanted_packages(variant, packages, requirements)
    harness = context_digest()
    tag = image_tag(variant, extra)
    api = api or _client(BUILD_TIMEOUT_S)
    manifest = image_manifest(tag, api)
    if manifest and not rebuild and manifest.harness == harness and manifest.packages == extra \
            and manifest.modules is not None:
        _log(f"{tag} is up to date (--rebuild builds it again)")
        return BuildResult(tag=tag, built=False)

    base = pick_base(api)
    wheels = cache_dir() / "wheels"
    with tempfile.TemporaryDirectory(prefix="rewardbox-image.") as work:
        stage = Path(work) / "context"
        _stage_context(stage)
        # The lean pins' wheels in one folder; each package set's in its own (re-resolved
        # per build, fetched only once).
        lean, extras = wheels / "lean", wheels / tag.rsplit(":", 1)[1]
        _log(f"fetching wheels for Python {PYTHON_VERSION} ({platform.machine()}) into {wheels}")
        _pip_download(lean, ["-r", str(stage / "requirements.txt")], deps=False)
        lean_wheels = _wheels_of(lean, stage / "requirements.txt")
        _copy(lean_wheels, stage / "wheels")
        modules = set().union(*(modules_in_wheel(w) for w in lean_wheels))
        (stage / "extra").mkdir()
        if extra:
            (stage / "extra" / "requirements.txt").write_text("\n".join(extra) + "\n")
            # Resolved with their dependencies, within the lean pins; into a
            # fresh folder (the set's own wheels), from pip's cache when fetched before.
            _pip_download(extras, ["-c", str(stage / "requirements.txt"), "-r",
                                   str(stage / "extra" / "requirements.txt"), INSTALLER], deps=True)
            extra_wheels = sorted(extras.glob("*.whl"))
            _copy(extra_wheels, stage / "extra")
            modules |= set().union(*(modules_in_wheel(w) for w in extra_wheels if not w.name.startswith("pip-")))
        labels = {IMAGE_LABEL: "python", HARNESS_LABEL: harness, PACKAGES_LABEL: json.dumps(extra),
                  MODULES_LABEL: json.dumps(sorted(modules))}
        _log(f"building {tag} on {base}")
        _engine_build(api, stage, tag, base, labels)
    _log(f"built {tag}")
    return BuildResult(tag=tag, built=True, base=base)


def _engine_build(api: docker.APIClient, stage: Path, tag: str, base: str, labels: dict[str, str]) -> None:
    """The engine builds the context `stage` as `tag` from `base`, with no network."""
    import docker

    try:
        stream = api.build(path=str(stage), tag=tag, rm=True, forcerm=True, network_mode="none",
                           buildargs={"BASE": base}, labels=labels, decode=True)
        output: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise ImageBuildError(f"the image build failed: {chunk['error'].strip()}\n"
                                      + "".join(output[-30:]))
            output.append(chunk.get("stream", ""))
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"the engine refused the build: {exc}") from None


def _wheels_of(folder: Path, requirements: Path) -> list[Path]:
    """The wheels in `folder` of the pinned lines of `requirements` (the folder
    is a cache and may hold others)."""
    pins = {re.sub(r"[-_.]+", "_", line.split("==")[0]).lower(): line.split("==")[1]
            for line in package_set(requirements.read_text().splitlines()) if "==" in line}
    chosen = []
    for wheel in sorted(folder.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if pins.get(re.sub(r"[-_.]+", "_", name).lower()) == version:
            chosen.append(wheel)
    return chosen


def _copy(files: Iterable[Path], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for file in files:
        shutil.copyfile(file, folder / file.name)


# -- language images ------------------------------------------------------------------

_NO_IMAGE = LanguageImage(packages=())
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# `apt-get -s install` lines of what it would unpack: "Inst name [old] (version Origin [arch])".
_INST = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) .*\[([\w-]+)\]\)", re.MULTILINE)


def _image_dpkg_status(api: docker.APIClient, image: str) -> bytes:
    """The dpkg database (/var/lib/dpkg/status) of `image`, read from a created,
    never started container: what the toolchain's dependencies may count as installed."""
    import docker

    container = api.create_container(image, ["true"], labels={"rewardbox.build": "1"})
    try:
        try:
            stream, _ = api.get_archive(container["Id"], "/var/lib/dpkg/status")
        except docker.errors.NotFound:
            raise ImageBuildError(f"{image} has no dpkg database: language images need a Debian {DEBIAN_SUITE} "
                                  "base (unset REWARDBOX_BASE_IMAGE, or name a Debian one)") from None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile("status")
            assert member is not None  # a regular file: get_archive of a file holds that file
            return member.read()
    finally:
        api.remove_container(container["Id"], force=True)


def _apt(config: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["apt-get", "-q", *arguments], env={**os.environ, "APT_CONFIG": str(config)},
                          capture_output=True, text=True)


def fetch_debs(packages: Sequence[str], status: bytes, dest: Path, mirror: str | None = None) -> list[Path]:
    """The .debs that install `packages` on an image whose dpkg database is
    `status`: resolved and downloaded by the host's apt-get with a state of its
    own (sources: Debian's mirror, suite and keyring only; lists and archives in
    the cache; none of the host's apt configuration, hooks or packages
    touched), into `dest`. Returns the files in `dest`, sorted."""
    if not shutil.which("apt-get"):
        raise ImageBuildError("language images are made from Debian's packages, fetched on this machine by apt-get: "
                              "build them on a Debian or Ubuntu host (or load one built there: rewardbox image save)")
    if not DEBIAN_KEYRING.is_file():
        raise ImageBuildError(f"{DEBIAN_KEYRING} is missing: install debian-archive-keyring to check Debian's packages")
    mirror = mirror or host_debian_mirror()
    apt = cache_dir() / "apt"
    lists, archives = apt / "lists", apt / "archives"
    for folder in (lists / "partial", archives / "partial"):
        folder.mkdir(parents=True, exist_ok=True)
    # apt runs without its own locks (they are the host's): two builds at once take turns
    # on the cached lists and archives instead.
    with open(apt / "lock", "w") as lock, tempfile.TemporaryDirectory(prefix="rewardbox-apt.") as work:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = Path(work)
        (root / "parts").mkdir()
        (root / "status").write_bytes(status)
        (root / "sources.list").write_text(f"deb [signed-by={DEBIAN_KEYRING}] {mirror} {DEBIAN_SUITE} main\n")
        settings = {
            # Read first (APT_CONFIG): the host's apt.conf and apt.conf.d (hooks, pins, its
            # own sources) are replaced by empty ones, so nothing of the host's is read or run.
            "Dir::Etc::Main": "/dev/null", "Dir::Etc::Parts": root / "parts",
            "Dir::Etc::SourceList": root / "sources.list", "Dir::Etc::SourceParts": root / "parts",
            "Dir::Etc::Preferences": "/dev/null", "Dir::Etc::PreferencesParts": root / "parts",
            "Dir::State": root, "Dir::State::Lists": lists, "Dir::State::status": root / "status",
            "Dir::Cache": root, "Dir::Cache::Archives": archives, "Dir::Log": root,
            "Debug::NoLocking": "true", "Acquire::Languages": "none",
            "APT::Architecture": _DEB_ARCH.get(platform.machine(), platform.machine()),
            "APT::Install-Recommends": "false", "APT::Sandbox::User": "root" if os.geteuid() == 0 else "",
        }
        settings.update(_host_apt_proxies())
        config = root / "apt.conf"
        config.write_text("".join(f'{key} "{value}";\n' for key, value in settings.items() if value != ""))
        _log(f"resolving {' '.join(packages)} against the image's packages, from {mirror} {DEBIAN_SUITE}")
        updated = _apt(config, "update")
        if updated.returncode:
            if not any(lists.glob("*_Packages*")):
                raise ImageBuildError(f"apt-get update from {mirror} failed: {updated.stderr.strip()[-2000:]} "
                                      "(set DEBIAN_MIRROR to a reachable Debian mirror)")
            _log(f"{mirror} unreachable: using the package lists fetched before")
        plan = _apt(config, "install", "-s", "-y", *packages)
        if plan.returncode:
            raise ImageBuildError(f"apt-get cannot install {' '.join(packages)} on this image:\n"
                                  f"{(plan.stdout + plan.stderr).strip()[-2000:]}")
        if re.search(r"^Remv ", plan.stdout, re.MULTILINE):
            raise ImageBuildError(f"installing {' '.join(packages)} would remove packages of the image:\n{plan.stdout}")
        wanted = planned_debs(plan.stdout)
        if not wanted:
            raise ImageBuildError(f"apt-get planned nothing to install for {' '.join(packages)}:\n{plan.stdout}")
        if not all((archives / name).is_file() for name in wanted):
            fetched = _apt(config, "install", "--download-only", "-y", *packages)
            if fetched.returncode:
                raise ImageBuildError(f"apt-get could not download {' '.join(packages)} from {mirror}:\n"
                                      f"{fetched.stderr.strip()[-2000:]}")
        missing = [name for name in wanted if not (archives / name).is_file()]
        if missing:
            raise ImageBuildError(f"apt-get downloaded, but these files are not in {archives}: {', '.join(missing)}")
        _copy((archives / name for name in wanted), dest)
    return sorted(dest / name for name in wanted)


def planned_debs(simulation: str) -> list[str]:
    """The .deb file names (as apt stores them) of what `apt-get -s install` would unpack.

    >>> planned_debs("Inst libcrypt-dev (1:4.4.33-2 Debian:12.11/stable [amd64])\\n"
    ...              "Inst g++ [4:12.2.0-2] (4:12.2.0-3 Debian:12.11/stable [amd64])\\nConf g++ (4:12.2.0-3)")
    ['libcrypt-dev_1%3a4.4.33-2_amd64.deb', 'g++_4%3a12.2.0-3_amd64.deb']
    """
    return [f"{name}_{version.replace(':', '%3a')}_{arch}.deb" for name, version, arch in _INST.findall(simulation)]


def _install_and_commit(api: docker.APIClient, base: str, stage: Path, tag: str, labels: dict[str, str]) -> None:
    """Runs INSTALL as root in a container of `base` with no network, the folder
    `stage` handed in as /tmp/toolchain, and commits the container as `tag`
    (one layer), running as the sandbox user in /work with `base`'s command and
    `labels` beyond `base`'s. The container is removed, whatever happens."""
    import docker

    cmd = (api.inspect_image(base)["Config"] or {}).get("Cmd")  # type: ignore[no-untyped-call]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(stage, arcname="toolchain")
    container = api.create_container(
        base, ["sh", "-eu", "-c", INSTALL], user="0:0", working_dir="/", network_disabled=True,
        name=f"rewardbox-build-{uuid.uuid4().hex[:12]}", host_config=api.create_host_config(network_mode="none"))["Id"]
    try:
        api.put_archive(container, "/tmp", archive.getvalue())
        api.start(container)
        try:
            status = api.wait(container, timeout=BUILD_TIMEOUT_S)["StatusCode"]
        except requests.exceptions.ReadTimeout:
            raise ImageBuildError(f"the install of the toolchain did not end within {BUILD_TIMEOUT_S} s") from None
        if status:
            output = api.logs(container).decode(errors="replace")
            raise ImageBuildError(f"the install of the toolchain failed (exit status {status}):\n{output[-3000:]}")
        # The committed config is the container's with these fields replaced: its
        # command (our install) goes back to the image's, root to the sandbox user.
        api.commit(container, repository=tag.rsplit(":", 1)[0], tag=tag.rsplit(":", 1)[1],
                   conf={"Cmd": cmd, "User": USER, "WorkingDir": WORKDIR, "Labels": labels})
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"the engine refused the build: {exc}") from None
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_container(container, force=True)


def _host_apt_proxies() -> dict[str, str]:
    """The host apt's proxy settings (the environment's proxies apt takes by itself)."""
    if not shutil.which("apt-config"):
        return {}
    done = subprocess.run(["apt-config", "dump"], capture_output=True, text=True)
    found = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if re.fullmatch(r"Acquire::(https?|ftp)::Proxy(::[^ ]+)?", key, re.IGNORECASE):
            found[key] = value.rstrip(";").strip('"')
    return found


def debs_label(debs: Iterable[Path]) -> list[str]:
    """`name=version` of each .deb file (apt's file names), as the `rewardbox.debs` label lists them.

    >>> debs_label([Path("libcrypt-dev_1%3a4.4.33-2_amd64.deb"), Path("g++-12_12.2.0-14_amd64.deb")])
    ['g++-12=12.2.0-14', 'libcrypt-dev=1:4.4.33-2']
    """
    return sorted("{}={}".format(*deb.name.split("_")[:2]).replace("%3a", ":") for deb in debs)


def language_image_current(labels: dict[str, str], language: str, python: str) -> bool:
    """Whether an image's labels say it is `language`'s toolchain image built on
    the sandbox image `python` with every label of ours (the tag alone is not
    trusted: anything can be tagged so)."""
    return (labels.get(IMAGE_LABEL) == labels.get(LANGUAGE_LABEL) == language and labels.get(FROM_LABEL) == python
            and DEBS_LABEL in labels and HARNESS_LABEL in labels)


def build_language_image(language: str, variant: str = "python", packages: Sequence[str] = (),
                         requirements: Path | None = None, rebuild: bool = False,
                         api: docker.APIClient | None = None) -> BuildResult:
    """Builds `rewardbox/<language>:<version>-<digest>`: the sandbox image of
    `variant` plus `packages` (built first if need be) with the language's
    Debian packages installed, unless an image with its tag and labels exists."""
    import docker

    if language not in LANGUAGE_IMAGES:
        raise ImageBuildError(f"no image for language {language!r}: one of {', '.join(sorted(LANGUAGE_IMAGES))}")
    entry = LANGUAGE_IMAGES[language]
    api = api or _client(BUILD_TIMEOUT_S)
    python = build_image(variant, packages, requirements, api=api).tag
    tag = language_tag(language, python)
    try:
        labels = api.inspect_image(tag)["Config"].get("Labels") or {}  # type: ignore[no-untyped-call]
    except docker.errors.ImageNotFound:
        labels = {}
    if language_image_current(labels, language, python) and not rebuild:
        _log(f"{tag} is up to date (--rebuild builds it again)")
        return BuildResult(tag=tag, built=False)

    with tempfile.TemporaryDirectory(prefix="rewardbox-image.") as work:
        stage = Path(work) / "toolchain"
        debs = fetch_debs(entry.packages, _image_dpkg_status(api, python), stage / "debs")
        (stage / "setup.sh").write_text("".join(f"{line}\n" for line in entry.setup))
        labels = {IMAGE_LABEL: language, LANGUAGE_LABEL: language, FROM_LABEL: python,
                  DEBS_LABEL: json.dumps(debs_label(debs))}
        size = sum(deb.stat().st_size for deb in debs)
        _log(f"building {tag} on {python}: {len(debs)} Debian packages ({size / 1e6:.0f} MB)")
        _install_and_commit(api, python, stage, tag, labels)
    _log(f"built {tag}")
    return BuildResult(tag=tag, built=True, base=python)


# -- moving images --------------------------------------------------------------------

def _existing(api: docker.APIClient, tag: str) -> str:
    if not _present(api, tag):
        raise ImageBuildError(f"{tag} is not on this engine: {build_hint(tag)}")
    return tag


def push_target(tag: str, repository: str) -> tuple[str, str]:
    """(repository, tag) to push `tag` as: `repository`'s own tag if it has
    one (a colon in its last path segment, not a registry's port), else ours.

    >>> push_target("rewardbox/python:0.1.0-abc", "registry:5000/sandbox")
    ('registry:5000/sandbox', '0.1.0-abc')
    >>> push_target("rewardbox/python:0.1.0-abc", "ghcr.io/me/sandbox:prod")
    ('ghcr.io/me/sandbox', 'prod')
    """
    if ":" in repository.rsplit("/", 1)[-1]:
        repository, given = repository.rsplit(":", 1)
        return repository, given
    return repository, tag.rsplit(":", 1)[1]


def push_image(tag: str, repository: str, api: docker.APIClient) -> str:
    """Tags `tag` as `repository` (keeping our tag unless one is given) and pushes it; the pushed reference."""
    repository, target_tag = push_target(tag, repository)
    import docker

    api.tag(_existing(api, tag), repository, target_tag)
    try:
        errors = [chunk["error"] for chunk in api.push(repository, tag=target_tag, stream=True, decode=True)
                  if "error" in chunk]
    except docker.errors.APIError as exc:
        errors = [str(exc)]
    if errors:
        raise ImageBuildError(f"the push of {repository}:{target_tag} failed: {errors[0]} "
                              "(logged in? `docker login` to the registry)")
    return f"{repository}:{target_tag}"


class _BytesSink(Protocol):
    """Where an image tarball is written: an open binary file or a gzip stream (not an IO[bytes] to the checker)."""

    def write(self, data: bytes, /) -> object: ...


def save_image(tag: str, output: _BytesSink, api: docker.APIClient) -> None:
    for chunk in api.get_image(_existing(api, tag)):
        output.write(chunk)


# -- the command line -----------------------------------------------------------------

def _selection(command: argparse.ArgumentParser) -> None:
    command.add_argument("--variant", choices=sorted(VARIANTS), default="python",
                         help="python: pytest and the harness only (default); scientific: with "
                              + ", ".join(pin.split("==")[0] for pin in VARIANTS["scientific"]))
    command.add_argument("--packages", nargs="+", default=[], metavar="REQUIREMENT",
                         help="packages beyond the variant's, as pip takes them (numpy, 'scipy==1.17.1'); "
                              "they are part of the tag")
    command.add_argument("-r", "--requirements", type=Path, metavar="FILE",
                         help="a requirements file of more packages (requirement lines only)")
    command.add_argument("--language", choices=sorted(LANGUAGE_IMAGES), default=None,
                         help="the toolchain image of this language (rewardbox/<language>:<version>-<digest>): the "
                              "sandbox image selected by the other options plus the language's Debian packages")


def _selected_tag(args: argparse.Namespace) -> str:
    python = image_tag(args.variant, wanted_packages(args.variant, args.packages, args.requirements))
    return language_tag(args.language, python) if args.language else python


def _build(args: argparse.Namespace) -> int:
    if args.language:
        result = build_language_image(args.language, args.variant, args.packages, args.requirements,
                                      rebuild=args.rebuild)
    else:
        result = build_image(args.variant, args.packages, args.requirements, rebuild=args.rebuild)
    print(result.tag)
    return 0


def _push(args: argparse.Namespace) -> int:
    reference = push_image(_selected_tag(args), args.repository, _client(BUILD_TIMEOUT_S))
    print(reference)
    _log(f"pushed. On each node: docker pull {reference}, then REWARDBOX_IMAGE={reference} "
         "(or image = \"...\" in the settings file)")
    return 0


def _save(args: argparse.Namespace) -> int:
    tag = _selected_tag(args)
    api = _client(BUILD_TIMEOUT_S)
    partial = args.output.with_name(args.output.name + ".partial")
    with open(partial, "wb") as raw:
        if args.output.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as packed:
                save_image(tag, packed, api)
        else:
            save_image(tag, raw, api)
    partial.replace(args.output)  # never a half-written tarball under the name asked for
    print(args.output)
    _log(f"saved {tag}. On each node: docker load -i {args.output.name} (the tag is the one rewardbox uses by default "
         "when the versions match; else REWARDBOX_IMAGE=" + tag + ")")
    return 0


def _list(args: argparse.Namespace) -> int:
    api = _client()
    current = context_digest()
    rows = []
    for image in api.images(filters={"label": IMAGE_LABEL}):
        labels = image.get("Labels") or {}
        if labels.get(IMAGE_LABEL) != "python" and labels.get(IMAGE_LABEL) not in LANGUAGE_IMAGES:
            continue
        for reference in image.get("RepoTags") or []:
            if reference == "<none>:<none>":  # an image a rebuild took the tag from: the engine lists it so
                continue
            manifest = image_manifest(reference, api)
            if manifest is None:
                continue
            state = "current" if manifest.harness == current else "stale"
            held = list(manifest.packages)
            if labels.get(LANGUAGE_LABEL):  # a language image: its toolchain's packages, as asked for
                held += [f"deb:{name}" for name in LANGUAGE_IMAGES.get(labels[LANGUAGE_LABEL], _NO_IMAGE).packages]
            rows.append((reference, f"{image['Size'] / 1e6:.0f} MB", f"{manifest.harness or 'unlabelled'} ({state})",
                         " ".join(held) or "-"))
    if not rows:
        print("no sandbox images on this engine: rewardbox image build")
        return 0
    header = ("IMAGE", "SIZE", "HARNESS", "PACKAGES")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *sorted(rows)]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return 0


def _base(args: argparse.Namespace) -> int:
    print(pick_base(_client(BUILD_TIMEOUT_S)))
    return 0


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ImageBuildError as exc:
            print(f"rewardbox: {exc}", file=sys.stderr)
            return 2
    return run


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`rewardbox image ...`, on the CLI's subcommands."""
    image = commands.add_parser(
        "image", help="build, push, save or list the sandbox image",
        description="The sandbox image, built from this package: its tag carries the version and a digest of the "
                    "harness and the packages (rewardbox/python:<version>-<digest>), so every node can tell it has "
                    "the right one. The default image is the lean one; `--variant scientific` or "
                    "`--packages` add what a dataset's tests import; `--language cpp` builds the C++ image on it "
                    "(rewardbox/cpp:<version>-<digest>).")
    verbs = image.add_subparsers(dest="image_command", required=True)
    build = verbs.add_parser(
        "build", help="build the sandbox image (seconds when it is up to date)",
        description="Build the sandbox image on this machine's Docker engine. Wheels are fetched on the host by pip "
                    "(for CPython 3.11, manylinux, this architecture) into $REWARDBOX_CACHE_DIR or ~/.cache/rewardbox; "
                    "the engine builds without network. Base: $REWARDBOX_BASE_IMAGE, else python:3.11-slim-bookworm "
                    "if present or pullable, else Debian bookworm by debootstrap from the host's apt sources "
                    "($DEBIAN_MIRROR overrides; proxies from the environment). Skipped when the tag exists with "
                    "matching labels. Prints the tag. With --language, the language's Debian packages are resolved "
                    "against the image's own and downloaded on the host by apt-get (from the same mirror, with a "
                    "private apt state), then installed by the engine, again without network.")
    _selection(build)
    build.add_argument("--rebuild", action="store_true", help="build even if the tag exists (layers are still reused)")
    build.set_defaults(run=_guarded(_build))
    push = verbs.add_parser(
        "push", help="push the built image to a registry",
        description="Tag the built image as REPOSITORY (keeping its tag unless REPOSITORY has one) and push it. "
                    "Nodes then `docker pull` it and run with REWARDBOX_IMAGE=<the printed reference>.")
    push.add_argument("repository", help="e.g. ghcr.io/me/rewardbox-python or registry:5000/rewardbox-python:tag")
    _selection(push)
    push.set_defaults(run=_guarded(_push))
    save = verbs.add_parser(
        "save", help="write the built image to a tarball for `docker load`",
        description="Write the built image to FILE (gzip-compressed if it ends in .gz), for nodes without a registry: "
                    "copy it over and `docker load -i FILE` there.")
    save.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    _selection(save)
    save.set_defaults(run=_guarded(_save))
    listing = verbs.add_parser(
        "list", help="list the sandbox images on this engine",
        description="The sandbox images on this engine: size, harness digest (current: built from this package's "
                    "harness; stale: from another, never used by default) and the packages beyond the lean set.")
    listing.set_defaults(run=_guarded(_list))
    base = verbs.add_parser(
        "base", help="print the base image the builds use, pulling or making it if need be",
        description="Print the base image of the sandbox (and service) image: $REWARDBOX_BASE_IMAGE, else "
                    f"{REGISTRY_BASE} if present or pullable, else {LOCAL_BASE} (made by debootstrap, once).")
    base.set_defaults(run=_guarded(_base))
