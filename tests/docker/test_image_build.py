"""`rewardbox image build|save|list` on a real engine, as a user runs them.

An image with an extra package (`--packages sortedcontainers`: small, pure
Python, not in the lean image) is built through the CLI: its tag is the one
`rewardbox.images` names, its labels say what it holds, a container imports
the package, and a second build reuses it. `image save` writes a tarball that
`docker load` takes back. An image built from another harness is never the
current tag and is listed as stale.
"""

import contextlib
import json
import subprocess
import sys
import tarfile
import uuid

import docker
import pytest

from rewardbox import __version__
from rewardbox.images import context_digest, image_manifest, image_tag

PACKAGE = "sortedcontainers"
TAG = image_tag("python", [PACKAGE])


def rewardbox_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rewardbox", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"rewardbox {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def api():
    client = docker.from_env(timeout=300)
    yield client.api
    client.close()


def remove(api, tag: str) -> None:
    with contextlib.suppress(docker.errors.ImageNotFound):
        api.remove_image(tag)


@pytest.fixture(scope="module")
def built(api):
    """The image with the extra package, built by the CLI from scratch (its layers may be cached)."""
    remove(api, TAG)
    done = rewardbox_cli("image", "build", "--packages", PACKAGE)
    yield done
    remove(api, TAG)


def test_the_build_prints_the_tag_rewardbox_images_names(built):
    assert built.stdout.strip() == TAG
    assert TAG.startswith(f"rewardbox/python:{__version__}-custom-")
    assert "built" in built.stderr


def test_the_labels_say_what_the_image_holds(built, api):
    labels = api.inspect_image(TAG)["Config"]["Labels"]
    assert labels["rewardbox.image"] == "python"
    assert labels["rewardbox.harness"] == context_digest()
    assert json.loads(labels["rewardbox.packages"]) == [PACKAGE]
    modules = json.loads(labels["rewardbox.modules"])
    assert {"sortedcontainers", "pytest", "_pytest", "pluggy"} <= set(modules)
    assert "pip" not in modules  # the installer runs from its wheel and is not left behind
    manifest = image_manifest(TAG, api)
    assert (manifest.harness, manifest.packages, manifest.modules) == (context_digest(), [PACKAGE], modules)


def test_a_container_imports_the_package_with_one_thread_per_numerical_library(built, api):
    client = docker.from_env()
    try:
        out = client.containers.run(
            TAG, ["python3", "-c", "import os, sortedcontainers; "
                                   "print(sortedcontainers.SortedList([3, 1, 2])[0], os.environ['OPENBLAS_NUM_THREADS'])"],
            network_mode="none", remove=True, labels={"rewardbox-test": "image-build"})
    finally:
        client.close()
    assert out.decode().split() == ["1", "1"]


def test_a_second_build_reuses_the_image(built, api):
    before = api.inspect_image(TAG)["Id"]
    again = rewardbox_cli("image", "build", "--packages", PACKAGE, timeout=120)
    assert again.stdout.strip() == TAG
    assert "up to date" in again.stderr
    assert api.inspect_image(TAG)["Id"] == before


def test_a_tag_with_other_labels_is_built_again(built, api):
    """The tag alone is not trusted: an image under it whose labels differ is replaced."""
    impostor = api.create_container(TAG, ["true"], labels={"rewardbox-test": "image-build"})
    try:
        impostor_id = api.commit(impostor["Id"], repository=TAG.split(":")[0], tag=TAG.split(":")[1],
                                 changes=['LABEL rewardbox.packages="[]"'])["Id"]
    finally:
        api.remove_container(impostor["Id"])
    try:
        assert image_manifest(TAG, api).packages == []
        rebuilt = rewardbox_cli("image", "build", "--packages", PACKAGE)
        assert "up to date" not in rebuilt.stderr
        assert image_manifest(TAG, api).packages == [PACKAGE]
    finally:
        remove(api, impostor_id)


def test_save_writes_a_tarball_docker_load_takes(built, api, tmp_path):
    tarball = tmp_path / "sandbox.tar"
    done = rewardbox_cli("image", "save", "--packages", PACKAGE, "-o", str(tarball))
    assert done.stdout.strip() == str(tarball)
    assert "docker load" in done.stderr
    with tarfile.open(tarball) as archive:
        assert "manifest.json" in archive.getnames()
    image_id = api.inspect_image(TAG)["Id"]
    remove(api, TAG)
    loaded = subprocess.run(["docker", "load", "-i", str(tarball)], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    assert api.inspect_image(TAG)["Id"] == image_id
    assert image_manifest(TAG, api).packages == [PACKAGE]


def test_an_image_of_another_harness_is_not_current_and_is_listed_stale(built, api):
    stale_digest = "0" * 12
    stale = f"rewardbox/python:{__version__}-{stale_digest}"
    assert stale != image_tag() and stale != image_tag("python", [PACKAGE])
    container = api.create_container(TAG, ["true"], labels={"rewardbox-test": "image-build"})
    try:
        api.commit(container["Id"], repository=stale.split(":")[0], tag=stale.split(":")[1],
                   changes=[f"LABEL rewardbox.harness={stale_digest}"])
    finally:
        api.remove_container(container["Id"])
    try:
        listing = rewardbox_cli("image", "list").stdout
        rows = {line.split()[0]: line for line in listing.splitlines()[1:]}
        assert f"{stale_digest} (stale)" in rows[stale]
        assert f"{context_digest()} (current)" in rows[TAG] and PACKAGE in rows[TAG]
    finally:
        remove(api, stale)


def test_an_unknown_package_fails_with_pips_words():
    missing = f"rewardbox-no-such-package-{uuid.uuid4().hex[:8]}"
    done = subprocess.run([sys.executable, "-m", "rewardbox", "image", "build", "--packages", missing],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "pip could not fetch the wheels" in done.stderr and missing in done.stderr


def test_push_tags_the_image_and_names_the_registry_that_refused_it(built, api):
    # Nothing listens on loopback port 1: the tag is made, the push fails with the engine's words.
    repository = "127.0.0.1:1/rewardbox-test"
    done = subprocess.run([sys.executable, "-m", "rewardbox", "image", "push", repository, "--packages", PACKAGE],
                          capture_output=True, text=True, timeout=300)
    pushed = f"{repository}:{TAG.rsplit(':', 1)[1]}"
    try:
        assert done.returncode == 2, done.stderr
        assert f"the push of {pushed} failed" in done.stderr and "docker login" in done.stderr
        assert api.inspect_image(pushed)["Id"] == api.inspect_image(TAG)["Id"]
    finally:
        remove(api, pushed)
