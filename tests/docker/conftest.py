"""Docker tier: real containers on a real engine.

The session shares one `Sandbox` and one `CodeReward`. A missing engine or
image is an error of the run, never a skip (CI starts the
engine), so the fixtures fail with the `SandboxError`'s own message.
"""

import os
import socket
import time
from pathlib import Path

import docker
import pytest

from rewardbox.rewards import CodeReward
from rewardbox.sandbox import SandboxError
from rewardbox.sandbox.modes import DEFAULT_MODE, make_sandbox
from rewardbox.sandbox.pool import warm_container_ids

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # This hook sees every item of the session, not only ours: mark only tests/docker.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def sandbox():
    # REWARDBOX_TEST_RUNTIME=runsc runs the tier under gVisor (needs `make gvisor`);
    # REWARDBOX_TEST_MODE=cold (or fresh) in another sandbox mode than the default.
    runtime = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
    mode = os.environ.get("REWARDBOX_TEST_MODE") or DEFAULT_MODE
    try:
        box = make_sandbox(mode, max_containers=4, retry_s=20, runtime=runtime)
    except SandboxError as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    yield box
    box.close()


@pytest.fixture(scope="session")
def code_reward(sandbox):
    return CodeReward(sandbox)


@pytest.fixture(scope="session")
def docker_client(sandbox):
    client = docker.from_env()
    yield client
    client.close()


def _harness_processes() -> dict[int, str]:
    """Processes on this host running the in-container harness, by pid, with
    their command lines. Container processes are visible in the host's /proc."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue  # exited while we looked
        if b"/opt/rewardbox/" in cmdline:
            found[int(proc.name)] = cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return found


def _process_start(pid: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _in_use_by_another_live_process(labels: dict, own_owner: str) -> bool:
    """Whether a container belongs to another process that is still running and
    within its expiry: the engine may be shared, and its runs are not ours to
    count. Checked here independently of the sweep's own logic."""
    owner = labels.get("rewardbox.owner", "")
    if owner == own_owner:
        return False
    try:
        if float(labels.get("rewardbox.expires", "0")) < time.time():
            return False
    except ValueError:
        return False
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname():
        return True
    return pid.isdigit() and _process_start(pid) == started


@pytest.fixture(scope="session")
def harness_processes():
    """A function listing the harness processes on this host, by pid."""
    return _harness_processes


@pytest.fixture(scope="session")
def leftovers(sandbox, docker_client):
    """A function returning what is left behind: `rewardbox` containers and
    harness processes, except those of other live processes sharing the engine."""

    def find(wait_s: float = 5.0) -> dict[str, list[str]]:
        deadline = time.monotonic() + wait_s
        while True:
            # A pool's warm containers wait, emptied, for the next run: not left behind.
            warm = warm_container_ids()
            containers, processes = _leftovers(sandbox.engine.owner, docker_client, warm)
            # Removal has returned before we look; give the kernel a moment to reap.
            if not (containers or processes) or time.monotonic() >= deadline:
                return {"containers": containers, "processes": processes}
            time.sleep(0.1)

    return find


def _leftovers(own_owner: str, client: docker.DockerClient, warm: set[str]) -> tuple[list[str], list[str]]:
    others = set(warm)
    containers = []
    for container in client.api.containers(all=True, filters={"label": "rewardbox"}):
        if container["Id"] in warm or _in_use_by_another_live_process(container.get("Labels") or {}, own_owner):
            others.add(container["Id"])
        else:
            containers.append(f"{container['Id'][:12]} {container.get('Names')} {container.get('Labels')}")
    processes = []
    for pid, cmdline in _harness_processes().items():
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue  # exited while we looked
        if not any(container_id in cgroup for container_id in others):
            processes.append(f"{pid}: {cmdline}")
    return containers, processes


@pytest.fixture(scope="session")
def server_url(sandbox):
    """A real server on a loopback port over the session's sandbox."""
    from server import running_server

    with running_server(sandbox) as url:
        yield url
