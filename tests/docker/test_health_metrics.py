"""`/healthz` and `/metrics` over a real socket, with the real engine behind
them: healthy, the image missing, the engine unreachable or hanging (on
loopback ports only), and counters that move with traffic."""

import json
import socket
import threading
from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from server import free_port, running_server

from rewardbox.sandbox import DEFAULT_IMAGE, LazySandbox, Sandbox

MISSING_IMAGE = "rewardbox/python:no-such-version"
ASSERTS = json.dumps({"tests": ["assert f(1) == 2", "assert f(2) == 4"]})
PLUS_ONE = "```python\ndef f(x):\n    return x + 1\n```"
DOUBLE = "```python\ndef f(x):\n    return 2 * x\n```"


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of `/metrics` by (name, sorted labels)."""
    response = requests.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def requests_total(route: str, method: str, status: int) -> tuple[str, tuple]:
    return "rewardbox_http_requests_total", (("method", method), ("route", route), ("status", str(status)))


def verdicts(verdict: str) -> tuple[str, tuple]:
    return "rewardbox_samples_scored_total", (("verdict", verdict),)


def test_healthz_is_ok_with_the_real_engine(server_url):
    response = requests.get(f"{server_url}/healthz", timeout=30)

    assert response.status_code == 200, response.text
    health = response.json()
    assert health["status"] == "ok"
    assert health["engine"]["reachable"] is True and health["engine"]["version"]
    assert "error" not in health["engine"]
    assert health["image"] == {"name": DEFAULT_IMAGE, "present": True}
    assert health["pool"] == {"max_containers": 4, "running": 0, "waiting_samples": 0, "max_waiting_samples": 4096}


def test_healthz_is_503_when_the_image_is_missing():
    with running_server(LazySandbox(image=MISSING_IMAGE)) as url:
        response = requests.get(f"{url}/healthz", timeout=30)

    assert response.status_code == 503, response.text
    health = response.json()
    assert health["status"] == "down"
    assert health["engine"]["reachable"] is True
    assert health["image"] == {"name": MISSING_IMAGE, "present": False}


def test_healthz_of_a_running_sandbox_sees_its_image_go_missing():
    box = Sandbox(max_containers=1, retry_s=20, sweep=False)
    try:
        with running_server(box) as url:
            before = requests.get(f"{url}/healthz", timeout=30)
            box.image = MISSING_IMAGE  # as if the image were deleted under it
            after = requests.get(f"{url}/healthz", timeout=30)
    finally:
        box.close()

    assert (before.status_code, before.json()["status"]) == (200, "ok")
    assert (after.status_code, after.json()["status"]) == (503, "down")
    assert after.json()["image"] == {"name": MISSING_IMAGE, "present": False}


@pytest.fixture
def hanging_engine() -> Iterator[str]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("engine", ["closed port", "hanging"])
def test_healthz_is_503_and_answers_when_the_engine_is_unreachable(engine, hanging_engine, monkeypatch):
    # The server runs in this process, so its probe reads this DOCKER_HOST; the session's
    # sandbox already holds its client and is not affected.
    docker_host = f"tcp://127.0.0.1:{free_port()}" if engine == "closed port" else hanging_engine
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    sandbox = LazySandbox()

    with running_server(sandbox) as url:
        response = requests.get(f"{url}/healthz", timeout=30)
        metrics = scrape(url)

    assert response.status_code == 503, response.text
    health = response.json()
    assert health["status"] == "down"
    assert health["engine"]["reachable"] is False and health["engine"]["error"]
    assert "version" not in health["engine"]
    assert health["image"] == {"name": DEFAULT_IMAGE, "present": False}
    assert metrics[("rewardbox_containers_running", ())] == 0  # never started
    assert not sandbox.started


def test_metrics_move_with_traffic(server_url):
    before = scrape(server_url)
    batch = {"samples": [
        {"id": "pass", "completion": DOUBLE, "label": ASSERTS},
        {"id": "fail", "completion": PLUS_ONE, "label": ASSERTS},
        {"id": "math", "completion": "#### 1,800", "label": "1800"},
        {"id": "bad", "completion": "x", "label": {"inputs": ["1"], "outputs": []}},
    ]}

    scored = requests.post(f"{server_url}/v1/rewards", json=batch, timeout=120)
    empty = requests.post(f"{server_url}/get_reward", json={"query": [], "prompts": [], "labels": []}, timeout=30)
    invalid = requests.post(f"{server_url}/get_reward", json={"query": "x"}, timeout=30)
    after = scrape(server_url)

    assert (scored.status_code, empty.status_code, invalid.status_code) == (200, 200, 422)

    def moved(key: tuple[str, tuple]) -> float:
        return after[key] - before.get(key, 0.0)

    assert moved(requests_total("/v1/rewards", "POST", 200)) == 1
    assert moved(requests_total("/get_reward", "POST", 200)) == 1
    assert moved(requests_total("/get_reward", "POST", 422)) == 1
    assert moved(requests_total("/metrics", "GET", 200)) == 1  # the scrape before; this one is counted once answered
    assert (moved(verdicts("passed")), moved(verdicts("failed")), moved(verdicts("unscorable"))) == (2, 1, 1)
    assert moved(("rewardbox_sandbox_run_seconds_count", ())) == 2  # the two code samples; math runs no container
    assert moved(("rewardbox_sandbox_run_seconds_sum", ())) > 0
    assert after[("rewardbox_samples_waiting", ())] == 0
    assert after[("rewardbox_containers_running", ())] == 0
    assert after[("rewardbox_containers_max", ())] == 4
    for key in [("rewardbox_engine_errors_total", ()), ("rewardbox_engine_retries_total", (("kind", "call"),)),
                ("rewardbox_engine_retries_total", (("kind", "run"),))]:
        assert moved(key) == 0, key  # a healthy engine


def test_queue_depth_and_containers_running_are_read_while_a_run_is_under_way(server_url):
    slow = "```python\nimport time\ndef f(x):\n    time.sleep(2)\n    return 2 * x\n```"
    body = {"samples": [{"id": "slow", "completion": slow, "label": {"tests": ["assert f(1) == 2"]}}]}
    answers: list[requests.Response] = []
    request = threading.Thread(target=lambda: answers.append(requests.post(f"{server_url}/v1/rewards", json=body,
                                                                         timeout=120)))
    seen = {"waiting": 0.0, "running": 0.0, "pool_running": 0}

    request.start()
    while request.is_alive() and not (seen["waiting"] and seen["running"] and seen["pool_running"]):
        metrics = scrape(server_url)
        seen["waiting"] = max(seen["waiting"], metrics[("rewardbox_samples_waiting", ())])
        seen["running"] = max(seen["running"], metrics[("rewardbox_containers_running", ())])
        pool = requests.get(f"{server_url}/healthz", timeout=30).json()["pool"]
        seen["pool_running"] = max(seen["pool_running"], pool["running"])
    request.join()

    assert answers and answers[0].status_code == 200 and answers[0].json()["results"][0]["verdict"] == "passed"
    assert seen == {"waiting": 1, "running": 1, "pool_running": 1}
    assert scrape(server_url)[("rewardbox_containers_running", ())] == 0
