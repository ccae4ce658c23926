"""One configuration, every way in: REWARDBOX_IMAGE, REWARDBOX_WORKERS and a
TOML settings file change the sandbox of `rewardbox score` (a subprocess),
of `rewardbox serve` (a real server on a loopback port) and of TRL's default
reward (called as TRL calls it)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from server import free_port

from rewardbox import adapters
from rewardbox.adapters.trl import trl_reward
from rewardbox.sandbox import SandboxError
from rewardbox.settings import SettingsError

ROLLOUTS = Path(__file__).parents[2] / "examples" / "rollouts.jsonl"
LABEL = {"pytest": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture
def env():
    """The environment of a child process, without the caller's REWARDBOX_* settings."""
    return {key: value for key, value in os.environ.items() if not key.startswith("REWARDBOX_")}


def _score(env: dict, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardbox", "score", str(ROLLOUTS), "--no-progress", "-j", "1", *flags],
                          capture_output=True, text=True, timeout=300, env=env)


# ---- rewardbox score -----------------------------------------------------------------------------------------

def test_rewardbox_image_changes_the_image_rewardbox_score_runs(env):
    done = _score({**env, "REWARDBOX_IMAGE": "nosuch:1"})
    assert done.returncode == 2 and "nosuch:1" in done.stderr, done.stderr
    assert done.stdout == ""


def test_a_settings_file_changes_the_image_rewardbox_score_runs(env, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text('image = "nosuch:2"\n')
    by_flag = _score(env, "--config", str(config))
    by_variable = _score({**env, "REWARDBOX_CONFIG": str(config)})
    for done in (by_flag, by_variable):
        assert done.returncode == 2 and "nosuch:2" in done.stderr, done.stderr


def test_rewardbox_workers_reaches_rewardbox_score_and_a_flag_overrides_it(env, tmp_path):
    refused = subprocess.run([sys.executable, "-m", "rewardbox", "score", str(ROLLOUTS), "--no-progress"],
                             capture_output=True, text=True, timeout=300, env={**env, "REWARDBOX_WORKERS": "0"})
    assert refused.returncode == 2
    assert refused.stderr.strip() == "rewardbox: REWARDBOX_WORKERS='0': Input should be greater than or equal to 1"
    config = tmp_path / "rewardbox.toml"
    config.write_text("workers = 0\n")
    from_file = subprocess.run([sys.executable, "-m", "rewardbox", "score", str(ROLLOUTS), "--no-progress", "--config",
                                str(config)], capture_output=True, text=True, timeout=300, env=env)
    assert from_file.returncode == 2 and f"settings file {config}: workers = 0" in from_file.stderr, from_file.stderr
    # The flag wins over the variable, and the file's good values are used.
    config.write_text('image = "python"\nmode = "cold"\n')
    done = _score({**env, "REWARDBOX_WORKERS": "0", "REWARDBOX_IMAGE": "nosuch:1"}, "--image", "python",
                  "--config", str(config))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == len(ROLLOUTS.read_text().splitlines()) and 1.0 in [row["reward"] for row in rows]


# ---- rewardbox serve -----------------------------------------------------------------------------------------

class _Server:
    def __init__(self, env: dict, *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "rewardbox", "serve", "--port", str(self.port), *flags],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def health(self, timeout_s: float = 120) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the service ended ({self.process.returncode}): {self.process.stderr.read()}")
            try:
                return requests.get(f"{self.url}/healthz", timeout=5).json()
            except requests.ConnectionError:
                time.sleep(0.2)
        raise AssertionError("the service did not answer")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)


def test_rewardbox_image_changes_the_image_the_service_runs(env):
    server = _Server({**env, "REWARDBOX_IMAGE": "nosuch:1"})
    try:
        assert server.process.wait(timeout=120) == 2
        assert "nosuch:1" in server.process.stderr.read()
    finally:
        server.stop()


def test_rewardbox_workers_and_a_settings_file_shape_the_service(env, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text("workers = 1\nmax_waiting = 7\nmode = \"cold\"\n")
    workers = (os.cpu_count() or 2) + 1  # not the command line's own default
    server = _Server({**env, "REWARDBOX_WORKERS": str(workers), "REWARDBOX_CONFIG": str(config)})
    try:
        health = server.health()
        assert health["status"] == "ok", health
        # The variable over the file; the file's queue size, where nothing else says.
        assert (health["pool"]["max_containers"], health["pool"]["max_waiting_samples"]) == (workers, 7)
        answer = requests.post(f"{server.url}/v1/rewards", json={"samples": [{"completion": RIGHT, "label": LABEL}]},
                               timeout=120)
        assert answer.status_code == 200, answer.text
        assert [r["reward"] for r in answer.json()["results"]] == [1.0]
    finally:
        server.stop()


def test_a_settings_file_changes_the_image_the_service_runs(env, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text('image = "nosuch:3"\n')
    server = _Server(env, "--config", str(config))
    try:
        assert server.process.wait(timeout=120) == 2
        assert "nosuch:3" in server.process.stderr.read()
    finally:
        server.stop()


# ---- TRL's default reward ------------------------------------------------------------------------------------

@pytest.fixture
def trl_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith("REWARDBOX_"):
            monkeypatch.delenv(var)
    monkeypatch.setattr(adapters, "_default", None)
    yield monkeypatch
    made = adapters._default
    monkeypatch.setattr(adapters, "_default", None)
    if made is not None:
        made[1].close()


def _as_trl_calls(reward, n: int = 2) -> list:
    return reward(prompts=["Write add."] * n, completions=[RIGHT] * n, completion_ids=[[1, 2, 3]] * n,
                  trainer_state=object(), label=[LABEL] * n)


def test_rewardbox_image_changes_the_image_of_trls_default_reward(trl_env):
    trl_env.setenv("REWARDBOX_IMAGE", "nosuch:1")
    with pytest.raises(SandboxError, match="nosuch:1"):
        _as_trl_calls(trl_reward())


def test_rewardbox_workers_sets_the_containers_of_trls_default_reward(trl_env):
    trl_env.setenv("REWARDBOX_WORKERS", "2")
    assert _as_trl_calls(trl_reward(), n=3) == [1.0, 1.0, 1.0]
    # The real sandbox the reward ran on (not 4, the sandbox's own default).
    assert adapters.default_reward().code.sandbox.sandbox.max_containers == 2


def test_a_settings_file_shapes_trls_default_reward(trl_env, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text('image = "nosuch:4"\n')
    trl_env.setenv("REWARDBOX_CONFIG", str(config))
    with pytest.raises(SandboxError, match="nosuch:4"):
        _as_trl_calls(trl_reward())
    trl_env.setattr(adapters, "_default", None)
    config.write_text("workers = 3\nmode = \"cold\"\n")
    assert _as_trl_calls(trl_reward()) == [1.0, 1.0]
    sandbox = adapters.default_reward().code.sandbox.sandbox
    assert (sandbox.max_containers, type(sandbox).__name__) == (3, "Sandbox")
    trl_env.setattr(adapters, "_default", None)
    config.write_text("workers = 0\n")
    with pytest.raises(SettingsError, match=f"settings file {config}: workers = 0"):
        _as_trl_calls(trl_reward())
