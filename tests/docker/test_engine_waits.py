"""The engine's waits on real containers. A container still running when a
wait runs out is killed, and the caller told so; it is not taken for a lost
connection to the engine. The engine answers a wait's headers at once and
its body when the container gets there, so the timeout comes while reading
the body, which requests raises as a ConnectionError (a pooled run's
container that took over 30 s to go under gVisor once became a lost sample:
the run was retried as if the engine had gone, until the retry budget ran out).
"""

import time
import uuid

import docker.errors
import pytest

from rewardbox.sandbox import DEFAULT_IMAGE, Limits
from rewardbox.sandbox.engine import DockerEngine


@pytest.fixture
def engine(sandbox) -> DockerEngine:
    return sandbox.engine  # the session's


def started_sleeper(engine: DockerEngine, auto_remove: bool) -> str:
    container = engine.create(DEFAULT_IMAGE, Limits(), f"rewardbox-test-wait-{uuid.uuid4().hex[:10]}",
                              command=["sleep", "120"], lifetime_s=120, auto_remove=auto_remove)
    engine.start(container)
    return container


def test_a_container_that_outlives_the_wait_is_killed_and_its_state_read(engine):
    container = started_sleeper(engine, auto_remove=False)
    try:
        started = time.monotonic()
        state, killed = engine.wait(container, timeout_s=1)

        assert killed
        assert state.exit_code == 137  # our SIGKILL
        assert time.monotonic() - started < 30
    finally:
        engine.remove(container)


def test_an_auto_removed_container_that_outlives_the_wait_is_killed_and_its_end_read(engine, docker_client):
    since = time.time()
    container = started_sleeper(engine, auto_remove=True)
    try:
        end, killed = engine.ended(container, since=since, timeout_s=1)

        assert killed
        assert end.exit_code == 137
        with pytest.raises(docker.errors.NotFound):  # gone: the engine removed it once we killed it
            docker_client.containers.get(container)
    finally:
        engine.remove(container)
