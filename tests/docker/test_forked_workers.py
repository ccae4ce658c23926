"""A pool made in a forked worker goes with that worker, however it is ended
(verl's prime manager terminates its process pool's workers, and kills those
that linger; Ray kills actors): no container is left for a later sweep."""

import multiprocessing
import os
import signal
import time

import pytest

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.modes import make_sandbox

TESTS = {"test_solution.py": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}


def worker(pipe) -> None:
    box = make_sandbox("pooled", max_containers=2, retry_s=20)
    result = box.run(RunRequest(files={"solution.py": "def add(a, b):\n    return a + b\n"}, tests=TESTS,
                                limits=Limits(timeout_s=10)))
    pipe.send((box.engine.owner, result.verdict))
    time.sleep(600)  # until killed, its pool waiting warm


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_workers_containers_go_with_it(docker_client, sig):
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=worker, args=(theirs,))
    started = time.time()
    process.start()
    try:
        assert ours.poll(120), "the worker never ran"
        owner, verdict = ours.recv()
        assert verdict is Verdict.PASSED
        mine = {"label": f"rewardbox.owner={owner}"}
        assert docker_client.api.containers(all=True, filters=mine), "no warm container: the check would be blind"
        os.kill(process.pid, sig)
        process.join(30)
        deadline = time.monotonic() + 20
        while left := docker_client.api.containers(all=True, filters=mine):
            assert time.monotonic() < deadline, f"left behind: {[(c['Id'][:12], c['Status']) for c in left]}"
            time.sleep(0.2)
        # Removed as they exited, not by a later sweep (any process's start
        # removes what dead owners left: other test runs on this engine).
        times: dict[str, dict[str, float]] = {}
        for e in docker_client.api.events(since=f"{started - 1:.9f}", until=f"{time.time():.9f}", decode=True,
                                          filters={"event": ["die", "destroy"], "label": f"rewardbox.owner={owner}"}):
            times.setdefault(e["id"], {})[e["Action"]] = e["timeNano"] / 1e9
        assert times and max(t["destroy"] - t["die"] for t in times.values()) < 1.0, times
    finally:
        if process.is_alive():
            process.kill()
            process.join()
