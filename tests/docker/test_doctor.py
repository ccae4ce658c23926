"""`rewardbox doctor` and `rewardbox --version`, as a user runs them, on this
machine's real engine: all ok on a good setup, and a missing or stale image,
or a runtime the engine lacks, each a failed line with its fix (exit 1)."""

import io
import os
import re
import subprocess
import sys

import docker
import pytest

from rewardbox import __version__
from rewardbox.images import HARNESS_LABEL, context_digest, image_tag

CHECKS = ("engine", "storage", "image", "contents", "runtimes", "limits")


@pytest.fixture
def env():
    return {key: value for key, value in os.environ.items() if not key.startswith("REWARDBOX_")}


def doctor(env: dict, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardbox", "doctor", *flags], capture_output=True, text=True,
                          timeout=300, env=env)


def _lines(out: str) -> dict[str, tuple[str, str]]:
    """Each check's status and the rest of its report (detail and fix)."""
    found: dict[str, tuple[str, str]] = {}
    name = None
    for line in out.split("\n\nsettings")[0].splitlines():
        match = re.match(r"(ok|fail)\s+(\w+)\s+(.*)", line)
        if match:
            name = match[2]
            found[name] = (match[1], match[3])
        elif name and line.strip().startswith("fix: "):
            found[name] = (found[name][0], f"{found[name][1]}\n{line.strip()}")
    return found


def test_a_good_setup_is_all_ok_and_shows_each_setting_and_its_source(env, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text("memory_mb = 256\n")
    done = doctor({**env, "REWARDBOX_WORKERS": "3", "REWARDBOX_CONFIG": str(config)}, "--timeout-s", "9")
    assert done.returncode == 0, done.stdout + done.stderr
    checks = _lines(done.stdout)
    assert list(checks) == list(CHECKS), done.stdout
    assert all(status == "ok" for status, _ in checks.values()), done.stdout
    assert "fail" not in done.stdout.lower()
    assert f"{image_tag()} (harness {context_digest()}" in checks["image"][1]
    assert "pytest" in checks["contents"][1]
    assert re.search(r"took \d+\.\d s", checks["limits"][1])
    settings = done.stdout.split("\n\nsettings", 1)[1]
    for key, shown in [("workers", "3  (env REWARDBOX_WORKERS)"), ("memory_mb", f"256  (file {config})"),
                       ("timeout_s", "9.0  (flag --timeout-s)"), ("mode", "'pooled'  (default)"),
                       ("image", f"'python' -> {image_tag()}  (default)")]:
        assert re.search(rf"^  {key}\s+{re.escape(shown)}$", settings, re.M), settings


def test_a_missing_image_fails_with_the_fix(env):
    done = doctor({**env, "REWARDBOX_IMAGE": "nosuch:1"})
    assert done.returncode == 1, done.stdout + done.stderr
    status, text = _lines(done.stdout)["image"]
    assert status == "fail" and "nosuch:1 is not on the engine" in text and "docker pull nosuch:1" in text
    assert "limits" not in _lines(done.stdout)  # nothing to run it in


def test_a_missing_variant_image_names_the_build_command(env):
    done = doctor(env, "--image", image_tag("python", ["nosuch-package==0"]))
    assert done.returncode == 1
    status, text = _lines(done.stdout)["image"]
    assert status == "fail" and "rewardbox image build --packages" in text


@pytest.fixture
def stale_image():
    """The lean image relabelled as built from another harness."""
    client = docker.from_env()
    tag = "rewardbox-test/stale-harness:1"
    client.images.build(fileobj=io.BytesIO(f"FROM {image_tag()}\n".encode()), tag=tag, rm=True,
                        labels={HARNESS_LABEL: "000000000000"})
    yield tag
    client.images.remove(tag, force=True)
    client.close()


def test_an_image_of_another_harness_fails_with_image_build(env, stale_image):
    done = doctor({**env, "REWARDBOX_IMAGE": stale_image})
    assert done.returncode == 1
    status, text = _lines(done.stdout)["image"]
    assert status == "fail" and f"holds harness 000000000000, this version's is {context_digest()}" in text
    assert "fix: run `rewardbox image build`" in text


def test_a_runtime_the_engine_lacks_fails_with_the_fix(env):
    done = doctor({**env, "REWARDBOX_RUNTIME": "nosuchrt"})
    assert done.returncode == 1
    status, text = _lines(done.stdout)["runtimes"]
    assert status == "fail" and "nosuchrt is not registered with the engine" in text and "daemon.json" in text


def test_the_run_is_pinned_as_set_and_a_cpu_the_engine_lacks_fails(env):
    pinned = doctor(env, "--pin-cpus", "1")
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    status, text = _lines(pinned.stdout)["limits"]
    assert status == "ok" and "pinned over CPUs 1)" in text
    missing = doctor({**env, "REWARDBOX_PIN_CPUS": "999"})
    assert missing.returncode == 1
    status, text = _lines(missing.stdout)["limits"]
    assert status == "fail" and "pin_cpus '999': the Docker engine has" in text, missing.stdout


def test_an_unreachable_ray_cluster_fails_with_the_fix(env):
    pytest.importorskip("ray", reason="the ray extra is not installed in this environment")
    done = doctor({**env, "REWARDBOX_RAY": "127.0.0.1:1"})
    assert done.returncode == 1
    assert _lines(done.stdout)["ray"][0] == "fail"


def test_version_names_the_version_and_the_default_image(env):
    done = subprocess.run([sys.executable, "-m", "rewardbox", "--version"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0
    assert done.stdout.strip() == f"rewardbox {__version__} (sandbox image {image_tag()})"
