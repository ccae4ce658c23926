"""The sandbox image's name and contents, decided from the package alone.

The build context (Dockerfile, pinned requirements, the in-container harness)
ships in the wheel as package data. Its digest is part of the image tag, so a
changed harness names a new image and a node can never run an old one by
accident; the package set installed beyond the lean image is part of the tag
too. Nothing here talks to Docker except `image_manifest`, which reads an
image's labels (building is `rewardbox.images.build`).

>>> image_tag("python").startswith(f"rewardbox/python:{__version__}-")
True
>>> image_tag("scientific") == image_tag("python", VARIANTS["scientific"]).replace("-custom-", "-scientific-")
True
>>> resolve_image("python") == image_tag()
True
>>> resolve_image("ghcr.io/me/sandbox:1")
'ghcr.io/me/sandbox:1'
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from rewardbox import __version__
from rewardbox.images.languages import LANGUAGE_IMAGES, language_digest, language_of_tag

if TYPE_CHECKING:
    import docker

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:  # where Traversable lived before 3.11 (mypy checks as 3.10)
        from importlib.abc import Traversable

__all__ = [
    "HARNESS_LABEL",
    "IMAGE_LABEL",
    "ImageManifest",
    "MODULES_LABEL",
    "PACKAGES_LABEL",
    "REPOSITORY",
    "VARIANTS",
    "build_hint",
    "context_digest",
    "context_files",
    "image_manifest",
    "image_tag",
    "language_tag",
    "manifest_from_labels",
    "package_set",
    "resolve_image",
]

REPOSITORY = "rewardbox/python"
IMAGE_LABEL = "rewardbox.image"
HARNESS_LABEL = "rewardbox.harness"
PACKAGES_LABEL = "rewardbox.packages"
MODULES_LABEL = "rewardbox.modules"

# What the datasets' tests import beyond the standard library (KodCode's
# pytest tasks: numpy, scipy, requests, sympy, mpmath, sortedcontainers), and
# their usual company. Pinned so that every node's scientific image grades alike;
# their own dependencies are resolved by pip against these pins at build time.
VARIANTS: dict[str, tuple[str, ...]] = {
    "python": (),
    "scientific": (
        "mpmath==1.3.0",
        "networkx==3.6.1",
        "numpy==2.4.6",
        "pandas==3.1.1",
        "requests==2.34.2",
        "scipy==1.17.1",
        "sortedcontainers==2.4.0",
        "sympy==1.14.0",
    ),
}

# The build context inside the package: what the image is made of.
_CONTEXT_FILES = ("Dockerfile", "requirements.txt")
_CONTEXT_DIRS = ("harness",)


def _context_root() -> Traversable:
    return resources.files(__name__) / "python"


def context_files(root: Traversable | Path | None = None) -> Iterator[tuple[str, Traversable | Path]]:
    """The build context's files as (relative path, file), sorted by path:
    the Dockerfile, the requirements and the harness; bytecode caches left out
    (they differ between machines and are not copied into the image)."""
    root = _context_root() if root is None else root

    def walk(node: Traversable | Path, prefix: str) -> Iterator[tuple[str, Traversable | Path]]:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__" or child.name.endswith(".pyc"):
                continue
            if child.is_dir():
                yield from walk(child, f"{prefix}{child.name}/")
            else:
                yield f"{prefix}{child.name}", child

    for name in _CONTEXT_FILES:
        yield name, root / name
    for name in _CONTEXT_DIRS:
        yield from walk(root / name, f"{name}/")


def context_digest(root: Traversable | Path | None = None) -> str:
    """12 hex digits of SHA-256 over the build context's paths and bytes: the
    `rewardbox.harness` label of an image built from it."""
    digest = hashlib.sha256()
    for name, file in context_files(root):
        data = file.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def package_set(packages: Sequence[str]) -> list[str]:
    """Requirement lines as the image's label lists them: stripped, blank and
    comment lines dropped, duplicates once, sorted (the order given changes
    neither the image nor its tag)."""
    lines = {line.split("#", 1)[0].strip() for line in packages}
    return sorted(line for line in lines if line)


def image_tag(variant: str = "python", packages: Sequence[str] = (), *, context: str | None = None) -> str:
    """The tag of the sandbox image built from this package's context:
    `rewardbox/python:<version>-<digest>` (lean), `...-scientific-<digest>` (the
    scientific variant) or `...-custom-<digest>` (with `packages` beyond the
    variant's). `context` is a context digest other than this package's (tests)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown image variant {variant!r}: one of {', '.join(sorted(VARIANTS))}")
    context = context or context_digest()
    wanted = package_set([*VARIANTS[variant], *packages])
    if not wanted:
        return f"{REPOSITORY}:{__version__}-{context}"
    kind = variant if wanted == package_set(VARIANTS[variant]) else "custom"
    digest = hashlib.sha256(json.dumps([context, wanted]).encode()).hexdigest()[:12]
    return f"{REPOSITORY}:{__version__}-{kind}-{digest}"


def language_tag(language: str, python: str | None = None) -> str:
    """The toolchain image of `language` (`rewardbox.images.languages`) built on
    the sandbox image `python` (default: the lean one):
    `rewardbox/<language>:<version>-<digest>`, the digest over both.

    >>> language_tag("cpp").startswith(f"rewardbox/cpp:{__version__}-")
    True
    """
    return f"rewardbox/{language}:{__version__}-{language_digest(language, python or image_tag())}"


def build_hint(image: str) -> str:
    """How to get `image` when the engine lacks it: the build command for one
    of our tags, else a pull."""
    language = language_of_tag(image)
    if language:
        return f"run `rewardbox image build --language {language}` to build it (or pull or load it)"
    for variant in VARIANTS:
        if image == image_tag(variant):
            return "run `rewardbox image build" + ("`" if variant == "python" else f" --variant {variant}`") + " to build it"
    if image.startswith(f"{REPOSITORY}:{__version__}-custom-"):
        return "run `rewardbox image build --packages ...` with the packages it was named for"
    if image.startswith(f"{REPOSITORY}:"):
        return ("it is not this rewardbox's image (another version or harness): run `rewardbox image build` "
                "and use its tag, or leave the image unset")
    return f"pull it (`docker pull {image}`) or load it (`docker load -i FILE`)"


def resolve_image(name: str | None) -> str:
    """None or a variant name -> that variant's tag (built by `rewardbox image
    build [--variant NAME]`); a language's name (`cpp`) -> its toolchain image's
    tag (`rewardbox image build --language NAME`); anything else is an image
    reference, unchanged."""
    if name is None:
        return image_tag()
    if name in LANGUAGE_IMAGES:
        return language_tag(name)
    return image_tag(name) if name in VARIANTS else name


class ImageManifest(BaseModel):
    """What an image on the engine says it holds, from its labels. `modules` is
    None for a foreign image (no labels of ours): what it holds is unknown."""

    model_config = ConfigDict(frozen=True)

    reference: str
    harness: str | None
    packages: list[str]
    modules: list[str] | None


def manifest_from_labels(reference: str, labels: dict[str, str] | None) -> ImageManifest:
    """An image's manifest from its labels (a label of ours that does not parse
    counts as absent: what the image holds is then unknown, not empty)."""
    labels = labels or {}

    def json_list(key: str) -> list[str] | None:
        try:
            value = json.loads(labels[key])
        except (KeyError, ValueError):
            return None
        return [str(item) for item in value] if isinstance(value, list) else None

    return ImageManifest(reference=reference, harness=labels.get(HARNESS_LABEL),
                         packages=json_list(PACKAGES_LABEL) or [], modules=json_list(MODULES_LABEL))


def image_manifest(image: str, api: docker.APIClient | None = None) -> ImageManifest | None:
    """The manifest of `image` on the engine `api` talks to (default: the
    environment's), from `docker image inspect`; None when the engine has no
    such image. No container is started."""
    import docker  # only here: the rest of this module is pure

    engine = docker.from_env(timeout=30).api if api is None else api
    try:
        # docker's stubs leave inspect_image unannotated: a dict of the engine's JSON
        config = engine.inspect_image(image).get("Config") or {}  # type: ignore[no-untyped-call]
    except docker.errors.ImageNotFound:
        return None
    finally:
        if api is None:  # ours to close
            engine.close()
    return manifest_from_labels(image, config.get("Labels"))
