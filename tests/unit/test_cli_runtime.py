"""`--runtime` (gVisor: runsc), `--mode` and `--reuse` reach the sandbox of
`rewardbox score` and `rewardbox serve`.

No engine here: `score` gets an empty file (its lazy sandbox is never made),
and `serve`'s sandbox is replaced by one that records its options and refuses to start.
"""

import os

import pytest

from rewards import cli
from rewards.lifecycle import StoppableSandbox
from sandbox import SandboxError


@pytest.fixture
def made(monkeypatch):
    """The options of each sandbox the CLI makes, in order; made, it refuses to start."""
    options = []

    class RecordingSandbox(StoppableSandbox):
        def __init__(self, **kwargs):
            options.append(kwargs)
            super().__init__(**kwargs)

        def _make(self):
            raise SandboxError("no engine in the unit tier")

    monkeypatch.setattr(cli, "StoppableSandbox", RecordingSandbox)
    return options


@pytest.mark.parametrize("flags, runtime", [(["--runtime", "runsc"], "runsc"), ([], None)])
def test_score_passes_the_runtime_to_its_sandbox(made, tmp_path, flags, runtime):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")

    status = cli.main(["score", str(rollouts), "-o", str(tmp_path / "out.jsonl"), "--no-progress", *flags])

    assert status == 0
    assert [m["runtime"] for m in made] == [runtime]


def test_serve_passes_the_runtime_to_its_sandbox(made, capsys):
    status = cli.main(["serve", "--runtime", "runsc", "--port", "0"])

    assert status == 2  # the refusing sandbox: a clear error, no server
    assert "no engine in the unit tier" in capsys.readouterr().err
    assert [m["runtime"] for m in made] == ["runsc"]


@pytest.mark.parametrize("flags, expected", [
    ([], {"mode": "pooled", "reuse": 1000}),
    (["--mode", "fresh"], {"mode": "fresh", "reuse": 1000}),
    (["--mode", "pooled", "--reuse", "7"], {"mode": "pooled", "reuse": 7}),
    (["--mode", "cold"], {"mode": "cold"}),
])
def test_score_passes_the_mode_to_its_sandbox(made, tmp_path, flags, expected):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")

    assert cli.main(["score", str(rollouts), "-o", str(tmp_path / "out.jsonl"), "--no-progress", *flags]) == 0

    [options] = made
    assert {key: options[key] for key in ("mode", "reuse") if key in options} == expected
    assert ("limits" in options) == (expected["mode"] != "cold")  # a pool warms up for the run's limits


def test_a_bad_reuse_is_a_clear_error(made, tmp_path, capsys):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")

    assert cli.main(["score", str(rollouts), "--reuse", "0"]) == 2
    assert "--reuse must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("flags, expected", [
    ([], {"max_containers": os.cpu_count() or 2}),
    (["-j", "3"], {"max_containers": 3}),
    (["--ray", "auto"], {"ray": "auto"}),  # each sandbox node runs as many containers as it has CPUs
    (["--ray", "127.0.0.1:6379", "-j", "5"], {"ray": "127.0.0.1:6379", "max_containers": 5}),
])
def test_score_passes_ray_and_workers_to_its_sandbox(made, tmp_path, flags, expected):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")

    assert cli.main(["score", str(rollouts), "-o", str(tmp_path / "out.jsonl"), "--no-progress", *flags]) == 0

    [options] = made
    assert {key: options[key] for key in ("ray", "max_containers") if key in options} == expected


def test_serve_passes_ray_to_its_sandbox(made, capsys):
    assert cli.main(["serve", "--ray", "auto", "--port", "0"]) == 2  # the refusing sandbox
    assert [m.get("ray") for m in made] == ["auto"]
    assert "max_containers" not in made[0]
