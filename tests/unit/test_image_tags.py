"""The sandbox image's name from its build context, and the pure rules of its build.

The tag must change with anything the image is made of (a stale image is never
used by default), the apt sources of the host give the Debian mirror of an
offline build, and the `rewardbox.modules` label lists what a wheel installs.
"""

import doctest
import shutil
import zipfile
from pathlib import Path

import pytest

import rewardbox.images
import rewardbox.images.build
from rewardbox import __version__
from rewardbox.images import (
    VARIANTS,
    build_hint,
    context_digest,
    context_files,
    image_tag,
    manifest_from_labels,
    resolve_image,
)
from rewardbox.images.build import (
    ImageBuildError,
    debian_mirror,
    host_debian_mirror,
    modules_in_wheel,
    target_platforms,
    wanted_packages,
)
from rewardbox.sandbox import DEFAULT_IMAGE

CONTEXT = Path(rewardbox.images.__file__).parent / "python"


@pytest.fixture
def context(tmp_path) -> Path:
    """A copy of the package's build context, bytecode caches and all."""
    copy = tmp_path / "python"
    shutil.copytree(CONTEXT, copy)
    (copy / "harness" / "__pycache__").mkdir(exist_ok=True)
    return copy


def test_the_digest_of_the_copy_is_the_packages(context):
    assert context_digest(context) == context_digest()


@pytest.mark.parametrize("name", [name for name, _ in context_files()])
def test_any_context_file_changed_changes_the_digest(context, name):
    before = context_digest(context)
    with open(context / name, "ab") as file:
        file.write(b"\n# changed\n")
    assert context_digest(context) != before


def test_a_new_harness_file_changes_the_digest_and_bytecode_does_not(context):
    before = context_digest(context)
    (context / "harness" / "__pycache__" / "supervisor.cpython-311.pyc").write_bytes(b"\0" * 16)
    assert context_digest(context) == before
    (context / "harness" / "rbnew.py").write_text("X = 1\n")
    assert context_digest(context) != before


def test_the_context_covers_the_harness_the_dockerfile_and_the_requirements():
    names = [name for name, _ in context_files()]
    assert {"Dockerfile", "requirements.txt", "harness/supervisor.py", "harness/pytest.ini"} <= set(names)
    assert not any("__pycache__" in name or name.startswith("wheels/") for name in names)


def test_a_changed_harness_names_a_new_image():
    assert image_tag(context="0" * 12) != image_tag()
    assert image_tag("scientific", context="0" * 12) != image_tag("scientific")
    assert image_tag(packages=["numpy"], context="0" * 12) != image_tag(packages=["numpy"])


def test_tags_name_the_version_the_variant_and_the_digest():
    assert image_tag() == f"rewardbox/python:{__version__}-{context_digest()}"
    assert image_tag("scientific").startswith(f"rewardbox/python:{__version__}-scientific-")
    assert image_tag(packages=["sortedcontainers"]).startswith(f"rewardbox/python:{__version__}-custom-")
    assert len(image_tag("scientific").rsplit("-", 1)[1]) == 12
    assert image_tag("python") == DEFAULT_IMAGE


def test_the_package_set_is_part_of_the_tag_but_not_its_order_or_spacing():
    assert image_tag(packages=["numpy", "scipy"]) == image_tag(packages=[" scipy", "numpy", "numpy # again"])
    assert image_tag(packages=["numpy"]) != image_tag(packages=["numpy==2.4.6"])
    assert image_tag(packages=["numpy"]) != image_tag()
    # The scientific pins asked for one by one are the scientific image.
    assert image_tag("python", VARIANTS["scientific"]) == image_tag("scientific").replace("-scientific-", "-custom-")
    assert image_tag("scientific", ["numpy==2.4.6"]) == image_tag("scientific")
    assert image_tag("scientific", ["sortedcontainers", "attrs"]) != image_tag("scientific")


def test_the_scientific_variant_is_pinned():
    assert VARIANTS["python"] == ()
    names = {pin.split("==")[0] for pin in VARIANTS["scientific"]}
    assert {"numpy", "scipy", "pandas", "sympy", "networkx", "sortedcontainers", "mpmath", "requests"} <= names
    assert all("==" in pin for pin in VARIANTS["scientific"])


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="one of python, scientific"):
        image_tag("gpu")


def test_resolve_image_takes_variant_names_and_passes_references():
    assert resolve_image(None) == image_tag()
    assert resolve_image("python") == image_tag()
    assert resolve_image("scientific") == image_tag("scientific")
    assert resolve_image("ghcr.io/me/sandbox:1") == "ghcr.io/me/sandbox:1"
    assert resolve_image("rewardbox/python:0.1.0") == "rewardbox/python:0.1.0"


def test_a_missing_image_names_the_command_that_builds_it():
    assert "`rewardbox image build`" in build_hint(image_tag())
    assert "`rewardbox image build --variant scientific`" in build_hint(image_tag("scientific"))
    assert "--packages" in build_hint(image_tag(packages=["numpy"]))
    assert "rewardbox image build" in build_hint("rewardbox/python:0.0.1")
    assert "docker pull nosuch:1" in build_hint("nosuch:1")


def test_a_foreign_image_has_an_unknown_module_list():
    foreign = manifest_from_labels("python:3.11", {"maintainer": "x"})
    assert (foreign.harness, foreign.packages, foreign.modules) == (None, [], None)
    ours = manifest_from_labels("t", {"rewardbox.image": "python", "rewardbox.harness": "abc",
                                      "rewardbox.packages": '["numpy"]', "rewardbox.modules": '["numpy", "pytest"]'})
    assert (ours.harness, ours.packages, ours.modules) == ("abc", ["numpy"], ["numpy", "pytest"])
    assert manifest_from_labels("t", {"rewardbox.modules": "not json"}).modules is None


# -- the host's apt sources ---------------------------------------------------------

ONE_LINE = """\
# the host's mirror, after a CD-ROM entry and the security archive
deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb-src http://ftp.de.debian.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.de.debian.org/debian/ bookworm main
"""
DEB822 = """\
Types: deb
URIs: https://packages.cloud.google.com/apt
Suites: cloud-sdk-bookworm
Components: main

Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_mirror_of_a_one_line_sources_list():
    assert debian_mirror([("sources.list", ONE_LINE)]) == "http://ftp.de.debian.org/debian"


def test_the_mirror_of_a_deb822_sources_file():
    assert debian_mirror([("debian.sources", DEB822)]) == "http://mirror.example.org/debian"


def test_disabled_stanzas_security_third_parties_and_other_distributions_give_no_mirror():
    disabled = DEB822.replace("Components: main\nSigned-By", "Enabled: no\nComponents: main\nSigned-By")
    ubuntu = "deb http://archive.ubuntu.com/ubuntu jammy main universe\n"
    assert debian_mirror([("debian.sources", disabled), ("ubuntu.list", ubuntu)]) is None
    assert debian_mirror([]) is None


def test_the_host_mirror_reads_sources_list_d_and_yields_to_debian_mirror(tmp_path, monkeypatch):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "old.list.disabled").write_text(ONE_LINE)  # apt reads neither
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    assert host_debian_mirror(tmp_path) == "http://mirror.example.org/debian"
    (tmp_path / "sources.list").write_text(ONE_LINE)
    assert host_debian_mirror(tmp_path) == "http://ftp.de.debian.org/debian"
    monkeypatch.setenv("DEBIAN_MIRROR", "http://local/debian")
    assert host_debian_mirror(tmp_path) == "http://local/debian"
    monkeypatch.delenv("DEBIAN_MIRROR")
    assert host_debian_mirror(tmp_path / "nothing") == "http://deb.debian.org/debian"


# -- what a wheel installs -----------------------------------------------------------

def make_wheel(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name in names:
            wheel.writestr(name, "")
    return path


def test_the_modules_of_a_wheel_are_its_top_level_packages_and_modules(tmp_path):
    wheel = make_wheel(tmp_path / "demo-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", [
        "demo/__init__.py", "demo/sub/core.py", "_demo_speedups.cpython-311-x86_64-linux-gnu.so", "isdemo.py",
        "demo.libs/libopenblas.so", "demo-1.0.dist-info/RECORD", "demo-1.0.dist-info/METADATA",
        "demo-1.0.data/purelib/demo_extra/__init__.py", "demo-1.0.data/scripts/demo", "demo-nspkg.pth",
    ])
    assert modules_in_wheel(wheel) == {"demo", "_demo_speedups", "isdemo", "demo_extra"}


def test_wheels_are_fetched_for_bookworms_glibc_on_this_architecture():
    tags = target_platforms("aarch64")
    assert tags[0] == "manylinux_2_36_aarch64" and "manylinux_2_17_aarch64" in tags
    assert "manylinux2014_aarch64" in tags and "manylinux_2_37_aarch64" not in tags


def test_a_requirements_file_gives_requirement_lines_only(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# the data's imports\nnumpy\n\nscipy==1.17.1  # pinned\n")
    assert wanted_packages("python", ["sortedcontainers"], requirements) == ["numpy", "scipy==1.17.1",
                                                                             "sortedcontainers"]
    requirements.write_text("--index-url http://elsewhere/simple\nnumpy\n")
    with pytest.raises(ImageBuildError, match="not pip options: --index-url"):
        wanted_packages("python", [], requirements)
    with pytest.raises(ImageBuildError, match="cannot read"):
        wanted_packages("python", [], tmp_path / "missing.txt")


@pytest.mark.parametrize("module", [rewardbox.images, rewardbox.images.build])
def test_doctests(module):
    # The root conftest collects the doctests of rewardbox, sandbox and rewards, not images/.
    assert doctest.testmod(module).failed == 0
