"""`--runtime` (gVisor: runsc), `--mode` and `--reuse` reach the sandbox of
`rewardbox score` and `rewardbox serve`, over the settings (REWARDBOX_*
variables, `--config`); and the sandbox they share stops at once.

No engine here: `score` gets an empty file (its lazy sandbox is never made),
and `serve`'s sandbox is replaced by one that records its options and refuses to start.
"""

import os
from concurrent.futures import Future

import pytest

from rewardbox import cli
from rewardbox.images import image_tag
from rewardbox.rewards.lifecycle import StoppableSandbox, Stopped
from rewardbox.sandbox import RunRequest, SandboxError


@pytest.fixture
def made(monkeypatch):
    """The options of each sandbox the CLI makes, in order; made, it refuses to start."""
    options = []

    class RecordingSandbox(StoppableSandbox):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            options.append(self.options)  # the fields its SandboxConfig was given

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
    assert "--reuse: input should be greater than or equal to 1, not 0" in capsys.readouterr().err


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


# --- the settings: flags over REWARDBOX_* variables over the --config file -----------------------------------

def _score(tmp_path, *flags):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("")
    return cli.main(["score", str(rollouts), "-o", str(tmp_path / "out.jsonl"), "--no-progress", *flags])


@pytest.fixture
def no_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith("REWARDBOX_"):
            monkeypatch.delenv(var)
    return monkeypatch


def test_the_cli_reads_the_environment_and_the_file_and_its_flags_win(no_env, made, tmp_path):
    path, other = tmp_path / "rewardbox.toml", tmp_path / "other.toml"
    path.write_text('image = "me/box:1"\nworkers = 2\nmode = "fresh"\n')
    other.write_text('mode = "cold"\n')
    no_env.setenv("REWARDBOX_WORKERS", "5")
    assert _score(tmp_path, "--config", str(path)) == 0
    assert _score(tmp_path, "--config", str(path), "-j", "3", "--image", "scientific") == 0
    no_env.setenv("REWARDBOX_CONFIG", str(path))
    assert cli.main(["--config", str(other), "score", str(tmp_path / "rollouts.jsonl"),
                     "-o", str(tmp_path / "out.jsonl"), "--no-progress"]) == 0
    assert [(m["image"], m["max_containers"], m["mode"]) for m in made] == [
        ("me/box:1", 5, "fresh"), (image_tag("scientific"), 3, "fresh"), (image_tag(), 5, "cold")]


def test_a_bad_setting_from_the_environment_stops_the_cli_in_one_line(no_env, made, tmp_path, capsys):
    no_env.setenv("REWARDBOX_WORKERS", "none")
    assert _score(tmp_path) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rewardbox: REWARDBOX_WORKERS='none': Input should be a valid integer, unable to parse string as an integer"]
    assert _score(tmp_path, "-j", "2") == 0  # the flag's value is the one used


# --- stopping at once -----------------------------------------------------------

class NeverFinishing:
    """A sandbox whose runs never end by themselves, like slow samples."""

    max_containers = 2

    def __init__(self):
        self.runs: list[Future] = []
        self.closed = False

    def submit(self, request):
        future: Future = Future()
        self.runs.append(future)
        return future

    def close(self):
        self.closed = True


@pytest.fixture
def stoppable():
    inner = NeverFinishing()

    class Stoppable(StoppableSandbox):
        def _make(self):
            return inner

    return Stoppable(), inner


def test_a_stop_answers_every_unfinished_run_at_once(stoppable):
    box, inner = stoppable
    request = RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"})
    finished, queued, running = (box.submit(request) for _ in range(3))
    inner.runs[0].set_result("a result")
    assert inner.runs[2].set_running_or_notify_cancel()

    box.stop()

    assert finished.result(timeout=0) == "a result"
    for future in (queued, running):
        with pytest.raises(Stopped, match="the sandbox was stopped before this run finished"):
            future.result(timeout=0)
    assert inner.runs[1].cancelled()  # a queued run never starts
    assert inner.closed
    with pytest.raises(Stopped):
        box.submit(request)
    box.stop()  # again: nothing left to do


def test_a_run_that_ends_after_a_stop_changes_nothing(stoppable):
    box, inner = stoppable
    request = RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"})
    running = box.submit(request)
    assert inner.runs[0].set_running_or_notify_cancel()

    box.stop()
    inner.runs[0].set_result("too late")

    with pytest.raises(Stopped):
        running.result(timeout=0)
