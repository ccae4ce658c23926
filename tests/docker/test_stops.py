"""Stops: Ctrl-C on `rewardbox score`, SIGTERM and SIGINT on `rewardbox serve`,
`docker stop` of the service's container. Each answers what it holds, leaves
no sandbox container behind (warm pooled ones included), prints no traceback
and exits with its status, within seconds: slow samples (60 s deadlines) are
not waited for.

The processes are real (subprocesses, a container), their containers found by
the owner label of each (`host:pid:start`).
"""

import contextlib
import gzip
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import docker
import pytest

from rewardbox.rewards.lifecycle import StoppableEngine, Stopped
from rewardbox.sandbox import __version__

REPO = Path(__file__).resolve().parents[2]
SERVICE_IMAGE = f"rewardbox/service:{__version__}"
# Generous for a loaded 2-core machine; a stop takes about half a second here.
# Without the fixes: the deadline of the slow samples (60 s) and more.
STOP_S = 5.0
SLOW = {"completion": "```python\nwhile True:\n    pass\n```", "label": {"pytest": "import solution\ndef test_a(): pass"}}
FAST = {"completion": "```python\ndef f():\n    return 1\n```", "label": {"tests": ["assert f() == 1"]}}
INTERRUPTED = "interrupted before it was scored"


def own_containers(client: docker.DockerClient, owner_prefix: str) -> list[str]:
    """The sandbox containers, in any state, of the owner(s) whose label starts so."""
    found = client.api.containers(all=True, filters={"label": "rewardbox.owner"})
    return [c["Id"][:12] for c in found if c["Labels"]["rewardbox.owner"].startswith(owner_prefix)]


def remove_left(client: docker.DockerClient, owner_prefix: str) -> list[str]:
    """The containers left behind, removed: a failed test must not leave
    them to the leftover checks of other tests sharing the engine."""
    left = own_containers(client, owner_prefix)
    for container_id in left:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(container_id, force=True)
    return left


def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s} s")
        time.sleep(interval_s)
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(base: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
            return json.load(answer)
    except (OSError, ValueError):
        return None


class SlowRequest(threading.Thread):
    """A /v1/rewards request of one slow sample, in flight until answered."""

    def __init__(self, base: str):
        super().__init__(daemon=True)
        self.base = base
        self.status: int | None = None
        self.body = ""

    def run(self) -> None:
        body = json.dumps({"samples": [{"id": "slow", **SLOW}]}).encode()
        request = urllib.request.Request(f"{self.base}/v1/rewards", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=90) as answer:
                self.status, self.body = answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            self.status, self.body = exc.code, exc.read().decode()


def in_flight(base: str) -> SlowRequest:
    """A slow request, once its run holds a container."""
    request = SlowRequest(base)
    request.start()
    wait_for(lambda: ((health(base) or {}).get("pool") or {}).get("running"), 60, "run of the slow request")
    return request


def assert_answered_as_stopped(request: SlowRequest) -> None:
    request.join(timeout=STOP_S)
    assert not request.is_alive(), "the request in flight was not answered"
    assert request.status == 503, request.body
    assert "the sandbox was stopped before this run finished" in request.body


# --- rewardbox score ------------------------------------------------------------

def test_ctrl_c_on_score_answers_every_line_and_leaves_nothing(tmp_path, docker_client):
    # Two containers: fast-0 then slow-1 take them; fast-2 and fast-3 follow fast-0, then slow-4;
    # fast-5 waits in the queue. Results come in a different order than the lines.
    plan = ["fast", "slow", "fast", "fast", "slow", "fast"]
    rollouts = tmp_path / "rollouts.jsonl.gz"
    rollouts.write_bytes(gzip.compress("".join(
        json.dumps({"id": f"{kind}-{n}", **(FAST if kind == "fast" else SLOW)}) + "\n"
        for n, kind in enumerate(plan)).encode()))
    output = tmp_path / "results.jsonl"
    # A session of its own, signalled as a terminal's Ctrl-C signals: the whole process group.
    score = subprocess.Popen([sys.executable, "-m", "rewardbox.cli", "score", str(rollouts), "-o", str(output),
                              "-j", "2", "--timeout-s", "60", "--no-progress"],
                             cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: output.exists() and output.read_text(), 120, "first result")
        time.sleep(4)  # fast-2 and fast-3 done meanwhile; the slow ones hold both containers
        assert score.poll() is None
        assert own_containers(docker_client, f"{socket.gethostname()}:{score.pid}:")

        sent = time.monotonic()
        os.killpg(score.pid, signal.SIGINT)
        _, stderr = score.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if score.poll() is None:
            score.kill()
            score.wait()
        left = remove_left(docker_client, f"{socket.gethostname()}:{score.pid}:")

    assert score.returncode == 130, stderr
    assert took < STOP_S, f"stopping took {took:.1f} s"
    assert "Traceback" not in stderr, stderr
    assert "rewardbox: interrupted: 3 sample(s) not scored" in stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["id"] for r in records] == [f"{kind}-{n}" for n, kind in enumerate(plan)]  # every line, in order
    assert [(r["reward"], r["error"]) for r in records] == [
        (1.0, None), (None, INTERRUPTED), (1.0, None), (1.0, None), (None, INTERRUPTED), (None, INTERRUPTED)]
    assert left == []


def test_a_stop_ends_a_wait_on_a_container_at_once(docker_client, sandbox):
    """A run's thread may wait up to 30 s for its container's end (`ended`,
    `wait`); the stop must end that wait at once. A Ctrl-C once took 30.5 s
    in the docker tier: `close()` joins the run threads. Here the container
    is one the engine is not asked to remove, so only the stop can end the wait."""
    engine = StoppableEngine(retry_s=5)
    container = docker_client.containers.run(sandbox.image, ["sleep", "60"], detach=True, auto_remove=True,
                                             network_mode="none", user="nobody")
    raised: list[BaseException] = []

    def wait_for_its_end() -> None:
        try:
            engine.ended(container.id, since=time.time(), timeout_s=30)
        except BaseException as exc:  # noqa: BLE001 - what the run's thread would see
            raised.append(exc)

    waiting = threading.Thread(target=wait_for_its_end, daemon=True)
    try:
        waiting.start()
        time.sleep(1.5)
        assert waiting.is_alive() and not raised, raised  # inside the wait
        sent = time.monotonic()
        engine.stop()
        waiting.join(timeout=20)
        took = time.monotonic() - sent
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
        engine.close()
    assert not waiting.is_alive() and took < STOP_S, f"the wait went on {took:.1f} s after the stop"
    assert [type(exc) for exc in raised] == [Stopped]


# --- rewardbox serve ------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_serve_with_its_request_answered_and_nothing_left(docker_client, signum):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen([sys.executable, "-m", "rewardbox.cli", "serve", "--port", str(port), "-j", "2",
                              "--timeout-s", "60"], cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)
    owner = f"{socket.gethostname()}:{serve.pid}:"
    try:
        wait_for(lambda: health(base), 60, "answer from /healthz")
        wait_for(lambda: len(own_containers(docker_client, owner)) >= 2, 60, "warm pooled containers")
        request = in_flight(base)

        sent = time.monotonic()
        serve.send_signal(signum)
        _, stderr = serve.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        left = remove_left(docker_client, owner)

    assert serve.returncode == 0, stderr
    assert took < STOP_S, f"stopping took {took:.1f} s"
    assert "Traceback" not in stderr, stderr
    assert_answered_as_stopped(request)
    assert left == []


# --- the service's container ------------------------------------------------------

def source_digest() -> str:
    """What images/service/build.sh puts on the image's rewardbox.source label."""
    files = [REPO / name for name in ("pyproject.toml", "README.md", "LICENSE") if (REPO / name).is_file()] + [
        path for folder in ("rewardbox", "sandbox", "rewards", "images") for path in (REPO / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts]
    listing = b"".join(
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  ./{path.relative_to(REPO)}\n".encode()
        for path in sorted(files, key=lambda p: str(p.relative_to(REPO)).encode()))
    return hashlib.sha256(listing).hexdigest()[:16]


@pytest.fixture(scope="session")
def service_image(docker_client) -> str:
    """The service image of this source: built as `make service-image` does
    (about 30 s here) when missing or made from other code."""
    try:
        built_from = docker_client.api.inspect_image(SERVICE_IMAGE)["Config"]["Labels"].get("rewardbox.source")
    except docker.errors.ImageNotFound:
        built_from = None
    if built_from != source_digest():
        done = subprocess.run(["bash", str(REPO / "images" / "service" / "build.sh"), SERVICE_IMAGE],
                              env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"images/service/build.sh failed:\n{done.stderr}", pytrace=False)
    return SERVICE_IMAGE


def test_docker_stop_of_the_service_exits_0_and_leaves_nothing(docker_client, service_image):
    socket_path = "/var/run/docker.sock"
    hostname = f"rewardbox-stops-{uuid.uuid4().hex[:8]}"  # the owner label of its sandbox containers
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # As README.md runs it ("The service in a container").
    service = docker_client.containers.run(
        service_image, ["--workers", "2", "--timeout-s", "60"], detach=True, init=True, hostname=hostname,
        ports={"8000/tcp": ("127.0.0.1", port)}, volumes={socket_path: {"bind": socket_path, "mode": "rw"}},
        group_add=[str(os.stat(socket_path).st_gid)])
    try:
        wait_for(lambda: health(base), 60, "answer from /healthz")
        wait_for(lambda: len(own_containers(docker_client, f"{hostname}:")) >= 2, 60, "warm pooled containers")
        request = in_flight(base)

        sent = time.monotonic()
        service.stop(timeout=10)  # then SIGKILL: 137, and its containers left behind
        took = time.monotonic() - sent
        service.reload()
        state, logs = service.attrs["State"], service.logs().decode("utf-8", "replace")
    finally:
        service.remove(force=True)
        left = remove_left(docker_client, f"{hostname}:")

    assert state["ExitCode"] == 0, logs
    assert took < STOP_S, f"stopping took {took:.1f} s"
    assert "Traceback" not in logs, logs
    assert_answered_as_stopped(request)
    assert left == []
