"""Ray tier: a real Ray cluster started by the tests on this machine (a head
and more node processes, each a `ray start` advertising the sandbox
resource), real workers driving the real Docker engine.

Ray turns 127.0.0.1 into the machine's routable address when it finds one,
so this tier runs in a network namespace holding only `lo`
(`scripts/loopback-only`, as `make test` does); outside one it fails at once,
before a node starts, rather than send traffic off loopback.
"""

import os
import socket
import sys
from pathlib import Path

# A Ray call after ray.shutdown() would start a local Ray instance of its own
# (outside the cluster, off loopback, leaving files in ~/.ray): make it an error.
os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "docker"))  # the docker tier's sample sets


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.docker)
            item.add_marker(pytest.mark.ray)
            # A dispatcher thread that dies would leave requests waiting forever: fail the test.
            item.add_marker(pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"))


@pytest.fixture(scope="session", autouse=True)
def loopback_only():
    interfaces = sorted(name for _, name in socket.if_nameindex())  # this network namespace's
    if interfaces != ["lo"]:
        pytest.fail(f"the Ray tier must run where only loopback exists (found {interfaces}): "
                    "scripts/loopback-only python -m pytest tests/ray", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def swept():
    """Workers killed with their node leave their containers to the sweep
    (their owner is dead); sweep after the tier, and fail if any rewardbox
    container is still running."""
    yield
    import docker

    from rewardbox.sandbox.engine import DockerEngine

    engine = DockerEngine(retry_s=10)
    engine.sweep()
    engine.close()
    client = docker.from_env()
    running = client.api.containers(filters={"label": "rewardbox", "status": "running"})
    client.close()
    assert running == [], f"rewardbox containers still running after the Ray tier: {[c['Id'][:12] for c in running]}"
