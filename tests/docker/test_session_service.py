"""Sessions over HTTP (`/v1/sessions`): a real server (uvicorn on a loopback
port, the app `rewardbox serve` runs) over real containers. An agent's episode
through the routes, ids as capabilities, the bound on sessions, idle expiry
and the service's stop removing every session's container."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import docker
import pytest
import requests
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from server import free_port

from rewardbox.rewards.registry import configured_registry
from rewardbox.rewards.server import ServerSettings, Service, create_app
from rewardbox.rewards.server.stopping import STOP_GRACE_S

WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
LABEL = {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]}
NOT_FOUND = {"detail": "no such session"}
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving(sandbox, **settings) -> Iterator[tuple[str, Service]]:
    """A server on a loopback port (as tests/docker/server.py's) that also
    hands out its `Service`, which the test keeps: what the service's stop
    removes must be removed by the stop, not by the objects' collection."""
    service = Service(configured_registry(sandbox=sandbox), sandbox, ServerSettings(**settings))
    port = free_port()
    # Stopped as `rewardbox serve` stops: in-flight requests get STOP_GRACE_S, then the lifespan's end.
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=STOP_GRACE_S))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", service
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        service.registry.get("correctness").close()


@pytest.fixture(scope="module")
def served(sandbox):
    with serving(sandbox, max_sessions=8) as (url, service):
        yield url, service


def session_containers(docker_client, sandbox) -> set[str]:
    """This process's session containers, stopped ones too (`docker ps -a`)."""
    found = docker_client.api.containers(all=True, filters={"label": f"rewardbox.owner={sandbox.engine.owner}",
                                                             "name": "rewardbox-session-"})
    return {c["Id"] for c in found}


def wait_until(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.2)
    return value


def create(url: str, **limits) -> str:
    response = requests.post(f"{url}/v1/sessions", json=limits, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["id"]


@contextmanager
def opened(url: str, **limits) -> Iterator[str]:
    """A new session's id, deleted at the end whatever happened."""
    sid = create(url, **limits)
    try:
        yield sid
    finally:
        with suppress(requests.RequestException):
            requests.delete(f"{url}/v1/sessions/{sid}", timeout=60)


def call(url: str, sid: str, timeout: float = 60, **body) -> requests.Response:
    return requests.post(f"{url}/v1/sessions/{sid}/run", json=body, timeout=timeout)


def put(url: str, sid: str, path: str, data: str | bytes) -> requests.Response:
    return requests.put(f"{url}/v1/sessions/{sid}/files/{path}", data=data, timeout=60)


def test_a_multi_turn_episode_over_http(served, sandbox, docker_client):
    url, _ = served
    before = session_containers(docker_client, sandbox)
    sid = create(url)
    made = session_containers(docker_client, sandbox) - before
    assert len(made) == 1 and len(sid) >= 43  # 32 random bytes, base64url

    assert put(url, sid, "solution.py", WRONG).json() == {"path": "solution.py", "bytes": len(WRONG)}
    out = call(url, sid, code="from solution import add\nassert add(1, 2) == 3, add(1, 2)").json()
    assert (out["verdict"], out["exit_code"]) == ("failed", 1)
    assert out["stderr"].splitlines()[-1] == "AssertionError: -1"

    assert put(url, sid, "solution.py", RIGHT).status_code == 200
    assert requests.get(f"{url}/v1/sessions/{sid}/files/solution.py", timeout=60).content == RIGHT.encode()
    shell = call(url, sid, command="python3 -c 'from solution import add; print(add(2, 3))'").json()
    assert (shell["verdict"], shell["stdout"]) == ("passed", "5\n")

    scored = requests.post(f"{url}/v1/sessions/{sid}/score", json={"label": LABEL}, timeout=120)
    assert scored.status_code == 200, scored.text
    result = scored.json()
    assert (result["reward"], result["score"], result["verdict"], result["passed"], result["total"]) == \
        (1.0, 1.0, "passed", 2, 2)
    # Exactly the reward /v1/rewards gives the same file as a completion.
    alike = requests.post(f"{url}/v1/rewards", json={"samples": [{"completion": RIGHT, "label": LABEL}]}, timeout=120)
    assert alike.json()["results"][0]["reward"] == result["reward"]

    assert requests.delete(f"{url}/v1/sessions/{sid}", timeout=60).json() == {"closed": True}
    assert not made & session_containers(docker_client, sandbox)  # removed by the DELETE, not later
    assert call(url, sid, code="print(1)").status_code == 404
    assert requests.delete(f"{url}/v1/sessions/{sid}", timeout=60).status_code == 404


def test_a_score_of_a_wrong_file_and_of_a_missing_one(served):
    url, _ = served
    with opened(url) as sid:
        put(url, sid, "pkg/mine.py", WRONG)
        wrong = requests.post(f"{url}/v1/sessions/{sid}/score", json={"label": LABEL, "file": "pkg/mine.py"},
                              timeout=120).json()
        assert (wrong["reward"], wrong["passed"], wrong["total"]) == (0.5, 1, 2)
        missing = requests.post(f"{url}/v1/sessions/{sid}/score", json={"label": LABEL}, timeout=120).json()
        assert (missing["reward"], missing["verdict"]) == (-1.0, "no_code")


def test_unknown_and_other_ids_are_refused_alike(served):
    url, _ = served
    with opened(url) as sid:
        put(url, sid, "solution.py", RIGHT)
        near = sid[:-1] + ("A" if sid[-1] != "A" else "B")
        for other in (secrets.token_urlsafe(32), near, "x"):
            answers = [
                call(url, other, code="print(1)"),
                put(url, other, "solution.py", WRONG),
                requests.get(f"{url}/v1/sessions/{other}/files/solution.py", timeout=60),
                requests.get(f"{url}/v1/sessions/{other}/files/%2E%2E/x", timeout=60),
                requests.post(f"{url}/v1/sessions/{other}/score", json={"label": LABEL}, timeout=60),
                requests.delete(f"{url}/v1/sessions/{other}", timeout=60),
            ]
            assert [(a.status_code, a.json()) for a in answers] == [(404, NOT_FOUND)] * len(answers)
        # and the owner's session is untouched by them
        assert requests.get(f"{url}/v1/sessions/{sid}/files/solution.py", timeout=60).content == RIGHT.encode()


def test_paths_out_of_the_work_dir_are_400_and_a_missing_file_404(served):
    url, _ = served
    with opened(url) as sid:
        assert call(url, sid, command="ln -s /etc out && mkdir -p d").json()["verdict"] == "passed"
        for path in ("%2E%2E/escape.txt", "d/%2E%2E/%2E%2E/escape.txt", "%2Fetc/passwd", "out/passwd", "out"):
            assert put(url, sid, path, "x").status_code == 400, path
            got = requests.get(f"{url}/v1/sessions/{sid}/files/{path}", timeout=60)
            assert got.status_code == 400, (path, got.text)
        missing = requests.get(f"{url}/v1/sessions/{sid}/files/d/nothing.txt", timeout=60)
        assert (missing.status_code, missing.json()) == (404, {"detail": "no such file: d/nothing.txt"})
        # (os.listdir, not ls: gVisor answers ls's statx with EINVAL)
        assert call(url, sid, code="import os; print(*sorted(os.listdir('/work')))").json()["stdout"] == "d out\n"


def test_a_file_over_the_limit_is_413_and_not_written(served):
    url, _ = served
    with opened(url) as sid:
        over = put(url, sid, "big.bin", b"x" * ((8 << 20) + 1))
        assert over.status_code == 413 and "8388608 bytes" in over.json()["detail"]
        assert requests.get(f"{url}/v1/sessions/{sid}/files/big.bin", timeout=60).status_code == 404
        assert put(url, sid, "big.bin", b"x" * (8 << 20)).json()["bytes"] == 8 << 20


def test_a_call_past_its_deadline_times_out_and_the_session_goes_on(served):
    url, _ = served
    with opened(url) as sid:
        put(url, sid, "kept.txt", "still here")
        late = call(url, sid, code="while True:\n    pass\n", timeout_s=1).json()
        assert late["verdict"] == "timeout"
        after = call(url, sid, command="cat kept.txt").json()
        assert (after["verdict"], after["stdout"]) == ("passed", "still here")


def test_a_long_call_does_not_hold_the_event_loop(served):
    url, _ = served
    with opened(url) as sid:
        answer: list[requests.Response] = []
        sleeper = threading.Thread(target=lambda: answer.append(call(url, sid, command="sleep 6")))
        sleeper.start()
        time.sleep(1)  # the call is under way
        assert requests.get(f"{url}/healthz", timeout=60).status_code == 200
        assert sleeper.is_alive()  # answered while the call still ran
        sleeper.join(timeout=60)
        assert answer[0].json()["verdict"] == "passed"


def test_a_session_whose_container_died_is_410_then_gone(served, sandbox, docker_client):
    url, _ = served
    before = session_containers(docker_client, sandbox)
    sid = create(url)
    (container_id,) = session_containers(docker_client, sandbox) - before
    docker_client.api.kill(container_id)

    ended = call(url, sid, code="print(1)")
    assert ended.status_code == 410 and "the session ended" in ended.json()["detail"], ended.text
    assert call(url, sid, code="print(1)").status_code == 404  # dropped


def test_create_asks_for_limits_within_the_service_s(served, sandbox, docker_client):
    url, _ = served
    for over in ({"idle_s": 10**6}, {"lifetime_s": 10**6}, {"memory_mb": 1 << 20}):
        answer = requests.post(f"{url}/v1/sessions", json=over, timeout=60)
        assert answer.status_code == 400 and "over the service's" in answer.json()["detail"], over
    before = session_containers(docker_client, sandbox)
    with opened(url, timeout_s=2, memory_mb=128, idle_s=60, lifetime_s=120) as sid:
        (container_id,) = session_containers(docker_client, sandbox) - before
        assert docker_client.api.inspect_container(container_id)["HostConfig"]["Memory"] == 128 << 20
        # the session's own call default: 2 s
        assert call(url, sid, command="sleep 30").json()["verdict"] == "timeout"


def test_past_the_cap_429_until_one_is_closed(sandbox):
    with serving(sandbox, max_sessions=2) as (url, _):
        first, second = create(url), create(url)
        refused = requests.post(f"{url}/v1/sessions", json={}, timeout=60)
        assert refused.status_code == 429 and "2 sessions are open already" in refused.json()["detail"]
        assert refused.headers["Retry-After"]
        requests.delete(f"{url}/v1/sessions/{first}", timeout=60)
        third = create(url)
        for sid in (second, third):
            requests.delete(f"{url}/v1/sessions/{sid}", timeout=60)


def test_an_idle_session_is_closed_by_the_service(sandbox, docker_client):
    with serving(sandbox, max_sessions=1, session_idle_s=3) as (url, _):
        before = session_containers(docker_client, sandbox)
        sid = create(url)
        made = session_containers(docker_client, sandbox) - before
        # The slot is given back by the service's sweep (the container's own
        # idle limit would only end the container): a new session fits.
        other = wait_until(lambda: (r := requests.post(f"{url}/v1/sessions", json={}, timeout=60)).status_code == 200
                           and r.json()["id"], 20, "a second session once the first was idle")
        assert call(url, sid, code="print(1)").status_code == 404  # dropped by the sweep, not found ended (410)
        wait_until(lambda: not made & session_containers(docker_client, sandbox), 15, "the idle container removed")
        requests.delete(f"{url}/v1/sessions/{other}", timeout=60)


def call_quietly(url: str, sid: str) -> None:
    # A call under way when the server stops: its answer (if any) is not the point.
    with suppress(requests.RequestException):
        call(url, sid, command="sleep 60", timeout=120)


def test_the_service_s_stop_removes_every_session(sandbox, docker_client):
    before = session_containers(docker_client, sandbox)
    with serving(sandbox) as (url, service):
        ids = [create(url) for _ in range(3)]
        busy = threading.Thread(target=call_quietly, args=(url, ids[0]))
        busy.start()
        made = session_containers(docker_client, sandbox) - before
        assert len(made) == 3
        time.sleep(1)
    # The server has stopped; `service` is still held, so no finalizer did this.
    assert not made & session_containers(docker_client, sandbox)
    assert len(service.sessions) == 0
    busy.join(timeout=60)


def test_rewardbox_serve_holds_sessions_and_its_sigterm_removes_them(docker_client):
    # The command as users run it: its sandbox is made lazily and stopped at the
    # signal; the sessions' containers go with it, one in a call included.
    with rewardbox_serve(docker_client) as (url, owner, serve, left):
        sid = create(url)
        put(url, sid, "solution.py", RIGHT)
        assert requests.post(f"{url}/v1/sessions/{sid}/score", json={"label": LABEL}, timeout=120).json()["reward"] == 1.0
        create(url)
        busy = threading.Thread(target=call_quietly, args=(url, sid))
        busy.start()
        assert len(serve_sessions(docker_client, owner)) == 2
        time.sleep(1)
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
        busy.join(timeout=60)
    assert serve.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert left == []


@contextmanager
def rewardbox_serve(docker_client, *flags: str, env: dict[str, str] | None = None
                    ) -> Iterator[tuple[str, str, subprocess.Popen, list[str]]]:
    """`rewardbox serve` on a loopback port, up: its URL, its containers'
    owner prefix, the process and, once the block is left, the session
    containers it left (then removed, so that a failure leaves nothing)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen([sys.executable, "-m", "rewardbox.cli", "serve", "--port", str(port), "-j", "1", *flags],
                             cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    owner = f"{socket.gethostname()}:{serve.pid}:"
    left: list[str] = []
    try:
        wait_until(lambda: _answers(f"{url}/healthz"), 60, "the service up")
        yield url, owner, serve, left
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        left.extend(serve_sessions(docker_client, owner))
        for container_id in left:
            with suppress(docker.errors.NotFound):
                docker_client.api.remove_container(container_id, force=True)


def serve_sessions(docker_client, owner_prefix: str) -> list[str]:
    found = docker_client.api.containers(all=True, filters={"label": "rewardbox.owner", "name": "rewardbox-session-"})
    return [c["Id"] for c in found if c["Labels"]["rewardbox.owner"].startswith(owner_prefix)]


def _answers(address: str) -> bool:
    try:
        return requests.get(address, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def container_of(url: str, sid: str) -> str:
    """The id of the session's container, as its mounts name it (runc)."""
    out = call(url, sid, command="grep -o 'containers/[0-9a-f]*/hostname' /proc/self/mountinfo").json()["stdout"]
    return out.split("/")[1]


def metrics(url: str) -> dict[str, float]:
    """The sessions' samples of /metrics by name (they carry no labels)."""
    text = requests.get(f"{url}/metrics", timeout=30).text
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("rewardbox_sessions_")}


def test_the_warm_set_hands_out_its_container_and_the_metrics_count_sessions(sandbox, docker_client):
    with serving(sandbox, max_sessions=4, session_idle_s=30, warm_sessions=1) as (url, service):
        wait_until(lambda: metrics(url)["rewardbox_sessions_warm"] == 1, 30, "the warm set filled")
        warm = session_containers(docker_client, sandbox)
        assert metrics(url) == {"rewardbox_sessions_open": 0, "rewardbox_sessions_max": 4,
                                "rewardbox_sessions_warm": 1, "rewardbox_sessions_created_total": 0,
                                "rewardbox_sessions_closed_total": 0, "rewardbox_sessions_expired_total": 0}
        with opened(url) as sid:  # the service's limits: the warm one
            with service.sessions.use(sid) as session:
                assert session.container_id in warm
            assert call(url, sid, code="print(6 * 7)").json()["stdout"] == "42\n"
            cold = create(url, idle_s=2)  # other limits: made cold, then expired
            with service.sessions.use(cold) as session:
                assert session.container_id not in warm
            wait_until(lambda: metrics(url)["rewardbox_sessions_expired_total"] == 1, 20, "the idle session expired")
            counts = metrics(url)
            assert (counts["rewardbox_sessions_open"], counts["rewardbox_sessions_created_total"]) == (1, 2)
            wait_until(lambda: metrics(url)["rewardbox_sessions_warm"] == 1, 30, "the warm set refilled")
        counts = metrics(url)
        assert (counts["rewardbox_sessions_open"], counts["rewardbox_sessions_closed_total"]) == (0, 1)
        refilled = session_containers(docker_client, sandbox)
    # The service's stop removed the warm container too.
    assert refilled and not refilled & session_containers(docker_client, sandbox)


def test_rewardbox_serve_takes_the_session_settings_from_flags_env_and_file(docker_client, tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text("max_sessions = 5\nsession_idle_s = 40\nwarm_sessions = 1\nsession_lifetime_s = 70\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("REWARDBOX_")}
    env.update(REWARDBOX_CONFIG=str(config), REWARDBOX_SESSION_LIFETIME_S="90", REWARDBOX_MAX_SESSIONS="3")
    with rewardbox_serve(docker_client, "--max-sessions", "2", env=env) as (url, owner, serve, left):
        # The flag over the variable over the file; the file where nothing else says.
        wait_until(lambda: metrics(url)["rewardbox_sessions_warm"] == 1, 60, "the file's warm set filled")
        assert metrics(url)["rewardbox_sessions_max"] == 2
        (warm,) = serve_sessions(docker_client, owner)
        made = requests.post(f"{url}/v1/sessions", json={}, timeout=60).json()
        assert (made["idle_s"], made["lifetime_s"]) == (40, 90)
        assert container_of(url, made["id"]) == warm  # handed out, not made
        create(url)
        assert requests.post(f"{url}/v1/sessions", json={}, timeout=60).status_code == 429
        wait_until(lambda: metrics(url)["rewardbox_sessions_warm"] == 1, 60, "the warm set refilled")
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0, stderr
    assert left == []  # the sessions and the warm container


def test_nothing_is_left_behind_by_the_session_routes(leftovers):
    assert leftovers() == {"containers": [], "processes": []}
