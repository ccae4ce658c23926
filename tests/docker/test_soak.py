"""The soak's short form (`make soak` is the long one): bench/soak.py with 200
runs, honest and hostile mixed at full concurrency, in a process of its own
so that this process's memory does not blur the figure. Every sample gets its
verdict, nothing of the soak's containers is left on the host (container,
process, mount, directory, volume, temp file, thread, open file), and its
memory is flat."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNS, WARMUP = 200, 30
# Flat for the short form: the end within 2 MiB of the start (10 KiB a run), and no more than 5 MiB per
# 1,000 runs over the later points: looser than the long form's 8 MiB over 2,000 runs and 2 MiB per 1,000
# runs, as 100 runs make a noisy slope.
RSS_BOUND_MIB, SLOPE_BOUND_MIB = 2.0, 5.0


@pytest.fixture(scope="module")
def soak(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    figures = tmp_path_factory.mktemp("soak") / "soak.json"
    command = [sys.executable, str(REPO / "bench" / "soak.py"), "--runs", str(RUNS), "--warmup", str(WARMUP),
               "--points", "6", "--rss-bound-mib", str(RSS_BOUND_MIB), "--slope-bound-mib", str(SLOPE_BOUND_MIB),
               "--json", str(figures)]
    process = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert figures.exists(), f"the soak wrote no figures (status {process.returncode}):\n{process.stderr[-4000:]}"
    return process, json.loads(figures.read_text())


def test_soak_ran_the_mix(soak):
    _, figures = soak

    assert figures["runs"] == RUNS
    # A container per run in the cold mode; a pool makes its first ones, and a
    # replacement for each it gives up (a hostile run that killed its zygote, say).
    if figures["mode"] == "cold":
        assert figures["containers_created"] == RUNS + WARMUP
    else:
        assert figures["workers"] < figures["containers_created"] < RUNS + WARMUP
    assert figures["hostile_share"] == 0.3
    # The hostile samples met their limits: deadline, memory, output cap, a harness killed.
    for verdict in ("passed", "failed", "timeout", "out_of_memory", "output_limit", "killed"):
        assert figures["verdicts"].get(verdict), figures["verdicts"]


def test_every_sample_gets_its_verdict(soak):
    _, figures = soak

    assert figures["mismatches"] == 0, figures["mismatch_examples"]


def test_nothing_of_the_soak_is_left(soak, docker_client):
    process, figures = soak

    assert figures["leaks"] == {"containers": [], "processes": [], "mounts": [], "docker_dirs": [], "volumes": [],
                                "temp_files": [], "threads_added": [], "fds_added": [], "unrecorded_containers": []}
    assert figures["leaks_total"] == 0
    # The checks can see what they look for: half way through the warm-up, the soak's running
    # containers showed as containers, host processes, mounts and directories.
    seen = figures["seen_while_running"]
    assert all(seen[what] > 0 for what in ("containers", "processes", "mounts", "docker_dirs")), seen
    # Its process has ended now: as a dead owner, it left no container behind either.
    owner = figures["owner"]
    assert docker_client.api.containers(all=True, filters={"label": f"rewardbox.owner={owner}"}) == []
    assert process.returncode == 0, process.stderr[-4000:]


def test_memory_is_flat(soak):
    _, figures = soak
    memory = figures["memory"]

    assert memory["flat"], memory
    assert memory["rss_growth_mib"] <= RSS_BOUND_MIB
    assert memory["rss_slope_mib_per_1000_runs"] <= SLOPE_BOUND_MIB
    assert memory["points"][0]["threads"] == memory["points"][-1]["threads"]
