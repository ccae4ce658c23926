"""The language images' names from what they are made of, and the pure parts of their build.

A language image's tag must change with each of its inputs (the sandbox image
it is built on, its Debian packages, its setup, the install script, its user), so a node never
runs a toolchain image built from other ones; the order packages are listed in
is not an input. apt's plan and file names give the .debs and their label.
"""

import doctest
import json
import sys
from pathlib import Path

import pytest

import rewardbox.images.build
import rewardbox.images.languages
from rewardbox import __version__
from rewardbox.images import build_hint, image_tag, language_tag, resolve_image
from rewardbox.images.build import ImageBuildError, debs_label, fetch_debs, language_image_current, planned_debs
from rewardbox.images.languages import JAVAC_JVM_FLAGS, LANGUAGE_IMAGES, LanguageImage, language_of_tag
from rewardbox.sandbox.languages import LANGUAGES, language

# `apt-get -s install g++ g++-12` against the lean image, cut down: what it prints.
SIMULATION = """\
NOTE: This is only a simulation!
Inst binutils-common (2.40-2 Debian:12.11/stable [amd64])
Inst libcrypt-dev (1:4.4.33-2 Debian:12.11/stable [amd64])
Inst libc6 [2.36-9+deb12u13] (2.36-9+deb12u14 Debian:12.11/stable [amd64])
Inst g++-12 (12.2.0-14+deb12u1 Debian:12.11/stable [amd64])
Conf binutils-common (2.40-2 Debian:12.11/stable [amd64])
Conf g++-12 (12.2.0-14+deb12u1 Debian:12.11/stable [amd64])
"""


def test_every_language_of_the_table_but_python_has_an_image_and_every_image_a_language():
    wanted = {lang.image.removeprefix("rewardbox/") for lang in LANGUAGES if lang.name != "python"}
    assert set(LANGUAGE_IMAGES) == wanted == {"cpp", "java", "javascript", "go", "rust"}  # cpp20 is cpp's


def test_cpp_is_g_plus_plus_12_from_debian_with_its_usual_command_names():
    assert set(LANGUAGE_IMAGES["cpp"].packages) == {"g++", "g++-12"}


def test_the_other_toolchains_are_debians_own_of_the_versions_decided():
    packages = {name: set(entry.packages) for name, entry in LANGUAGE_IMAGES.items()}
    assert packages["java"] == {"openjdk-17-jdk-headless"}  # javac and java 17
    assert packages["javascript"] == {"nodejs"}  # bookworm's 18.x, never the host's
    assert packages["go"] == {"golang-1.19-go", "golang-go"}  # golang-go: `go` on PATH
    assert packages["rust"] == {"rustc-web"}  # 1.85 (bookworm's rustc is 1.63)


def test_javas_class_data_archive_is_dumped_for_the_tables_javac_and_runs():
    # The archive is recorded with javac's flags as the table has them (one list, checked here:
    # the images package cannot import the sandbox's table) and dumped with the runs' collector.
    java = language("java")
    assert java.compile is not None
    assert tuple(arg for arg in java.compile if arg.startswith("-J")) == JAVAC_JVM_FLAGS
    setup = LANGUAGE_IMAGES["java"].setup
    (record,) = [line for line in setup if "DumpLoadedClassList" in line]
    assert record.startswith("javac ") and all(flag in record.split() for flag in JAVAC_JVM_FLAGS)
    (dump,) = [line for line in setup if "-Xshare:dump" in line]
    assert "-XX:+UseSerialGC" in java.run and "-XX:+UseSerialGC" in dump.split()
    assert '-XX:SharedArchiveFile="$jdk/lib/server/classes.jsa"' in dump.split()  # the default archive


def test_the_tag_names_the_language_and_the_version():
    tag = language_tag("cpp")
    assert tag.startswith(f"rewardbox/cpp:{__version__}-") and len(tag.rsplit("-", 1)[1]) == 12
    assert language_tag("cpp") == tag  # decided from the package alone, the same every time
    assert language_tag("cpp", image_tag()) == tag  # built on the lean image by default


def test_the_tag_changes_with_the_sandbox_image_it_is_built_on():
    assert language_tag("cpp", image_tag("scientific")) != language_tag("cpp")
    assert language_tag("cpp", "rewardbox/python:0.1.0-000000000000") != language_tag("cpp")


@pytest.mark.parametrize("change", [
    pytest.param({"packages": ("g++", "g++-12", "gdb")}, id="a package more"),
    pytest.param({"packages": ("g++",)}, id="a package less"),
    pytest.param({"packages": ("g++", "g++-11")}, id="another package"),
    pytest.param({"setup": ()}, id="no setup"),
    pytest.param({"setup": (*LANGUAGE_IMAGES["cpp"].setup, "true")}, id="another setup"),
])
def test_the_tag_changes_with_the_packages_and_the_setup(monkeypatch, change):
    before = language_tag("cpp")
    entry = LANGUAGE_IMAGES["cpp"].model_copy(update=change)
    monkeypatch.setitem(LANGUAGE_IMAGES, "cpp", entry)
    assert language_tag("cpp") != before


def test_the_order_packages_are_listed_in_does_not_change_the_tag(monkeypatch):
    before = language_tag("cpp")
    cpp = LANGUAGE_IMAGES["cpp"]
    monkeypatch.setitem(LANGUAGE_IMAGES, "cpp", LanguageImage(packages=cpp.packages[::-1], setup=cpp.setup))
    assert language_tag("cpp") == before


@pytest.mark.parametrize(("name", "value"), [
    ("INSTALL", rewardbox.images.languages.INSTALL.replace("chmod a-s", "true")),
    ("USER", "0:0"),
    ("WORKDIR", "/"),
])
def test_the_tag_changes_with_the_install_script_and_the_images_user_and_work_dir(monkeypatch, name, value):
    before = language_tag("cpp")
    monkeypatch.setattr(rewardbox.images.languages, name, value)
    assert language_tag("cpp") != before


def test_an_unknown_language_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="no image for language 'cobol': one of cpp"):
        language_tag("cobol")


@pytest.mark.parametrize("name", sorted(LANGUAGE_IMAGES))
def test_a_language_name_resolves_to_its_image_and_its_hint_is_the_build_command(name):
    assert resolve_image(name) == language_tag(name) and language_tag(name).startswith(f"rewardbox/{name}:")
    assert resolve_image("python") == image_tag()  # the variants are unchanged
    assert f"rewardbox image build --language {name}" in build_hint(language_tag(name))
    assert language_of_tag(language_tag(name)) == name
    assert language_of_tag(image_tag()) is None and language_of_tag("ghcr.io/me/rewardbox/cpp:1") is None


def test_the_install_strips_setuid_and_the_image_runs_as_the_sandbox_user_in_work():
    install = rewardbox.images.languages.INSTALL.splitlines()
    assert "find / -xdev -perm /6000 -type f -exec chmod a-s {} +" in install
    # Before dpkg: update-alternatives links the JDK's manual pages there, and the install leaves
    # /usr/share/man out.
    assert install.index("mkdir -p /usr/share/man/man1") < next(i for i, line in enumerate(install) if "dpkg -i" in line)
    assert (rewardbox.images.languages.USER, rewardbox.images.languages.WORKDIR) == ("10001:10001", "/work")


def test_apts_plan_gives_the_deb_files_as_apt_names_them():
    assert planned_debs(SIMULATION) == [
        "binutils-common_2.40-2_amd64.deb",
        "libcrypt-dev_1%3a4.4.33-2_amd64.deb",  # the epoch's colon as apt writes it in file names
        "libc6_2.36-9+deb12u14_amd64.deb",  # an upgrade of the image's own: the new version
        "g++-12_12.2.0-14+deb12u1_amd64.deb",
    ]


def test_the_debs_label_lists_name_and_version():
    files = [Path(name) for name in planned_debs(SIMULATION)]
    assert debs_label(files) == ["binutils-common=2.40-2", "g++-12=12.2.0-14+deb12u1", "libc6=2.36-9+deb12u14",
                                 "libcrypt-dev=1:4.4.33-2"]


def test_doctests():
    # The root conftest collects the doctests of rewardbox, sandbox and rewards, not images/.
    assert doctest.testmod(rewardbox.images.languages).failed == 0


def test_an_image_is_current_only_with_every_label_of_a_language_image_built_on_that_sandbox_image():
    python = image_tag()
    labels = {"rewardbox.image": "cpp", "rewardbox.language": "cpp", "rewardbox.from": python,
              "rewardbox.debs": "[]", "rewardbox.harness": "abc"}
    assert language_image_current(labels, "cpp", python)
    assert not language_image_current(labels, "cpp", image_tag("scientific"))  # built on another sandbox image
    assert not language_image_current(labels, "java", python)
    for missing in labels:  # an image tagged so by hand, or committed from another
        assert not language_image_current({k: v for k, v in labels.items() if k != missing}, "cpp", python), missing
    assert not language_image_current({**labels, "rewardbox.image": "python"}, "cpp", python)


# -- fetch_debs with a stand-in apt-get: what it is given, and what it leaves alone --

FAKE_APT = r'''#!{python}
import json, os, pathlib, re, sys
config = dict(re.findall(r'^(\S+) "(.*)";$', pathlib.Path(os.environ["APT_CONFIG"]).read_text(), re.M))
log = pathlib.Path({log!r})
with log.open("a") as out:
    out.write(json.dumps({{"args": sys.argv[1:], "config": config,
                          "status": pathlib.Path(config["Dir::State::status"]).read_text()}}) + "\n")
plan = {plan!r}
if "update" in sys.argv:
    sys.exit({update_status})
if "-s" in sys.argv:
    print(plan)
elif "--download-only" in sys.argv:
    for name, version, arch in re.findall(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) .*\[([\w-]+)\]\)", plan, re.M):
        pathlib.Path(config["Dir::Cache::Archives"], f"{{name}}_{{version.replace(':', '%3a')}}_{{arch}}.deb").write_text("deb")
'''


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    """A stand-in apt-get alone on PATH; returns a function writing it with a
    plan and an update status, and the calls it logged."""
    bin_dir, log = tmp_path / "bin", tmp_path / "apt.log"
    bin_dir.mkdir()
    keyring = tmp_path / "keyring.gpg"
    keyring.write_text("key")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("REWARDBOX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rewardbox.images.build, "DEBIAN_KEYRING", keyring)

    def install(plan: str = SIMULATION, update_status: int = 0):
        script = bin_dir / "apt-get"
        script.write_text(FAKE_APT.format(python=sys.executable, log=str(log), plan=plan, update_status=update_status))
        script.chmod(0o755)

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return install, calls


def test_fetch_debs_gives_apt_a_state_of_its_own_and_none_of_the_hosts(fake_apt, tmp_path):
    install, calls = fake_apt
    install()
    debs = fetch_debs(["g++-12"], b"Package: libc6\nStatus: install ok installed\n", tmp_path / "debs",
                      mirror="http://mirror.example/debian")
    assert [deb.name for deb in debs] == sorted(planned_debs(SIMULATION))
    assert all(deb.parent == tmp_path / "debs" for deb in debs)
    made = calls()
    assert [call["args"] for call in made] == [["-q", "update"], ["-q", "install", "-s", "-y", "g++-12"],
                                               ["-q", "install", "--download-only", "-y", "g++-12"]]
    config = made[0]["config"]
    # The host's apt.conf, apt.conf.d (hooks), sources and preferences are never read.
    assert config["Dir::Etc::Main"] == config["Dir::Etc::Preferences"] == "/dev/null"
    private = Path(config["Dir::State"])
    for key in ("Dir::Etc::Parts", "Dir::Etc::SourceParts", "Dir::Etc::PreferencesParts", "Dir::Etc::SourceList",
                "Dir::State::status", "Dir::Cache", "Dir::Log"):
        assert Path(config[key]).is_relative_to(private) and not str(private).startswith(("/etc", "/var")), key
    assert config["Dir::State::Lists"] == str(tmp_path / "cache" / "apt" / "lists")
    assert config["Dir::Cache::Archives"] == str(tmp_path / "cache" / "apt" / "archives")
    assert made[0]["status"] == "Package: libc6\nStatus: install ok installed\n"  # the image's, not the host's
    assert not private.exists()  # removed after


def test_fetch_debs_downloads_nothing_it_has_and_reads_old_lists_when_the_mirror_is_down(fake_apt, tmp_path):
    install, calls = fake_apt
    install()
    fetch_debs(["g++-12"], b"", tmp_path / "first", mirror="http://mirror.example/debian")
    lists = tmp_path / "cache" / "apt" / "lists"
    (lists / "mirror_dists_bookworm_main_binary-amd64_Packages").write_text("")
    install(update_status=100)
    again = fetch_debs(["g++-12"], b"", tmp_path / "again", mirror="http://mirror.example/debian")
    assert len(again) == 4
    assert [call["args"][1] for call in calls()[3:]] == ["update", "install"]  # no --download-only: all cached


def test_fetch_debs_says_what_failed(fake_apt, tmp_path):
    install, _ = fake_apt
    install(update_status=100)
    with pytest.raises(ImageBuildError, match="apt-get update from http://mirror.example/debian failed"):
        fetch_debs(["g++-12"], b"", tmp_path / "debs", mirror="http://mirror.example/debian")
    install(plan="Remv libc6 [2.36]\n" + SIMULATION)
    with pytest.raises(ImageBuildError, match="would remove packages of the image"):
        fetch_debs(["g++-12"], b"", tmp_path / "debs", mirror="http://mirror.example/debian")
    (tmp_path / "bin" / "apt-get").unlink()
    with pytest.raises(ImageBuildError, match="fetched on this machine by apt-get"):
        fetch_debs(["g++-12"], b"", tmp_path / "debs", mirror="http://mirror.example/debian")


# -- image list on an engine holding untagged images --

class _ListingEngine:
    """The parts of docker's APIClient `rewardbox image list` reads: a tagged
    image and one a rebuild took the tag from, which the engine lists as
    <none>:<none> and refuses to inspect by that name."""

    def __init__(self, labels):
        self.labels = labels

    def images(self, filters):
        return [{"Labels": self.labels, "RepoTags": ["<none>:<none>"], "Size": 10**8},
                {"Labels": self.labels, "RepoTags": [language_tag("java")], "Size": 435 * 10**6}]

    def inspect_image(self, name):
        import docker

        if name == "<none>:<none>":
            raise docker.errors.APIError("400 Client Error: no such image: <none>:<none>: invalid reference format")
        return {"Config": {"Labels": self.labels}}


def test_image_list_passes_over_untagged_images(monkeypatch, capsys):
    labels = {"rewardbox.image": "java", "rewardbox.language": "java", "rewardbox.from": image_tag(),
              "rewardbox.debs": "[]", "rewardbox.harness": "abc"}
    monkeypatch.setattr(rewardbox.images.build, "_client", lambda *args: _ListingEngine(labels))
    assert rewardbox.images.build._list(None) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2 and rows[1].split()[:3] == [language_tag("java"), "435", "MB"]
    assert rows[1].split()[-1] == "deb:openjdk-17-jdk-headless"
