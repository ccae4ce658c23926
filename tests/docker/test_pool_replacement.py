"""A pooled container's foreseen retirement (its last runs of `reuse`) has
its replacement warm before it goes, so that the run after its last one
takes a warm container instead of waiting for a start (issue 21: the tail of
`/run_code`, where such waits were the slowest requests)."""

import os

import pytest

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.pool import PooledSandbox

# The gVisor pass of `make test` runs these too (REWARDBOX_TEST_RUNTIME=runsc).
pytestmark = pytest.mark.core
RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None


def program() -> RunRequest:
    return RunRequest(files={"main.py": "print(6 * 7)\n"}, program="main.py", limits=Limits(timeout_s=20))


def test_a_warm_container_is_waiting_after_every_run_through_retirements():
    reuse = 4
    with PooledSandbox(max_containers=1, reuse=reuse, retry_s=20, runtime=RUNTIME) as box:
        assert box.settle()
        containers = [box.warm_ids()]
        for n in range(3 * reuse):
            result = box.run(program())
            assert result.verdict is Verdict.PASSED and result.stdout == "42\n", (result.verdict, result.message)
            # Looked at once, before a start begun by the run's end could be done: a
            # run arriving now finds a warm container (none: it would wait for a start).
            assert box.warm_ids(), f"after run {n + 1}, no container was warm"
            assert box.settle()
            containers.append(box.warm_ids())
        # One warm container at a time, and retirements did happen (every `reuse` runs at most).
        assert all(len(ids) == 1 for ids in containers)
        served = [sum(1 for ids in containers[1:] if ids == c) for c in {tuple(ids) for ids in containers}]
        assert len(served) >= 3 and max(served) <= reuse, containers
