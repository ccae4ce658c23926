"""`/metrics` and `/healthz` against fakes: metric names and values from fake
samples and fake sandbox counters, health statuses from fake engine probes,
and the sandbox's own counters over a fake engine. No Docker engine."""

import asyncio
import json
import socket
import threading
from concurrent.futures import Future

import docker.errors
import pytest
import requests
import requests.exceptions
from prometheus_client.parser import text_string_to_metric_families

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import Registry
from rewardbox.rewards.server import ServerSettings, Service, create_app
from rewardbox.rewards.server.health import check
from rewardbox.sandbox import LazySandbox, RunRequest, Sandbox, SandboxError
from rewardbox.sandbox.engine import AttachChannel, ContainerState, DockerEngine, EngineProbe
from rewardbox.sandbox.runner import SandboxStats

CODE_PASSED = RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed", "kind": "asserts", "duration_s": 0.4})
CODE_TIMEOUT = RewardOutput(reward=-0.5, score=0.25, metadata={"verdict": "timeout", "kind": "stdio", "duration_s": 10.2})
NO_CODE = RewardOutput(reward=-1.0, score=0.0, metadata={"verdict": "no_code", "kind": "asserts", "duration_s": 0.0})
MATH_PASSED = RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed", "duration_s": 0.01})
UNSCORABLE = RewardOutput.unscorable("bad stdio label: 1 inputs but 0 outputs", verdict=None, kind="stdio")
MIX = RewardOutput(reward=0.4, score=0.6, metadata={"verdict": "failed", "components": {
    "correctness": {"reward": 0.0, "score": 0.5, "metadata": {"verdict": "failed", "kind": "pytest", "duration_s": 0.7}},
    "format": {"reward": 1.0, "score": 1.0, "metadata": {"verdict": "passed", "format_ok": True}}}})
STRANGE = RewardOutput(reward=0.1, score=0.1, metadata={"verdict": "banana"})


class Canned(Reward):
    """Answers each sample with the output named by its completion."""

    name = "canned"

    def __init__(self, **outputs: RewardOutput):
        self.outputs = outputs

    def score(self, sample: Sample) -> RewardOutput:
        return self.outputs[sample.completion]


class Pending(Reward):
    """Hands out futures that stay pending until `finish()`."""

    name = "pending"

    def __init__(self):
        self.futures: list[Future] = []

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        future: Future[RewardOutput] = Future()
        self.futures.append(future)
        return future

    def finish(self) -> None:
        for future in self.futures:
            future.set_result(MATH_PASSED)


class CountingSandbox:
    """A sandbox's monitoring surface, with fixed answers."""

    image = "rewardbox/python:test"
    max_containers = 8

    def __init__(self, stats: SandboxStats | None = None, probe: EngineProbe | None = None):
        self._stats = stats or SandboxStats()
        self._probe = probe or EngineProbe(reachable=True, version="27.0.1", image_present=True)

    def stats(self) -> SandboxStats:
        return self._stats

    def probe(self, timeout_s: float) -> EngineProbe:
        return self._probe


def service_with(sandbox=None, *rewards: Reward, **settings) -> Service:
    registry = Registry()
    for reward in rewards:
        registry.register(reward.name, reward)
    return Service(registry, sandbox or CountingSandbox(), ServerSettings(**{"default_reward": "canned", **settings}))


def scrape(service: Service) -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition by (name, sorted labels)."""
    text = service.metrics.exposition().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_samples_are_counted_by_verdict_and_only_code_runs_are_timed():
    outputs = {"passed": CODE_PASSED, "timeout": CODE_TIMEOUT, "no_code": NO_CODE, "math": MATH_PASSED,
               "unscorable": UNSCORABLE, "mix": MIX, "strange": STRANGE}
    service = service_with(None, Canned(**outputs))

    asyncio.run(service.score(service.reward("canned"), [Sample(completion=key) for key in outputs]))

    values = scrape(service)
    verdicts = {labels[0][1]: v for (name, labels), v in values.items() if name == "rewardbox_samples_scored_total"}
    assert verdicts == {"passed": 2, "failed": 1, "timeout": 1, "no_code": 1, "unscorable": 1, "other": 1,
                        "syntax_error": 0, "compile_error": 0, "import_error": 0, "collection_error": 0,
                        "out_of_memory": 0, "output_limit": 0, "killed": 0, "unknown": 0}
    # Three sandbox runs: the two code samples and the mix's code component; not math, not the code-less one.
    assert values[("rewardbox_sandbox_run_seconds_count", ())] == 3
    assert values[("rewardbox_sandbox_run_seconds_sum", ())] == pytest.approx(0.4 + 10.2 + 0.7)
    assert values[("rewardbox_sandbox_run_seconds_bucket", (("le", "0.5"),))] == 1
    assert values[("rewardbox_sandbox_run_seconds_bucket", (("le", "1.0"),))] == 2
    assert values[("rewardbox_sandbox_run_seconds_bucket", (("le", "10.0"),))] == 2
    assert values[("rewardbox_sandbox_run_seconds_bucket", (("le", "+Inf"),))] == 3


def test_scrape_time_values_come_from_the_service_and_the_sandbox_counters():
    stats = SandboxStats(containers_running=3, engine_errors=5, engine_call_retries=4, run_retries=1)
    reward = Pending()
    service = service_with(CountingSandbox(stats), reward, max_waiting_samples=100)

    async def scrape_while_pending() -> tuple[dict, dict]:
        task = asyncio.create_task(service.score(reward, [Sample(completion="x")] * 7))
        while len(reward.futures) < 7:
            await asyncio.sleep(0)
        during = scrape(service)
        reward.finish()
        await task
        return during, scrape(service)

    during, after = asyncio.run(scrape_while_pending())

    assert during[("rewardbox_samples_waiting", ())] == 7
    assert after[("rewardbox_samples_waiting", ())] == 0
    assert after[("rewardbox_samples_waiting_max", ())] == 100
    assert after[("rewardbox_containers_running", ())] == 3
    assert after[("rewardbox_containers_max", ())] == 8
    assert after[("rewardbox_engine_errors_total", ())] == 5
    assert after[("rewardbox_engine_retries_total", (("kind", "call"),))] == 4
    assert after[("rewardbox_engine_retries_total", (("kind", "run"),))] == 1


def test_a_lazy_sandbox_not_yet_made_reports_zeros_without_making_it():
    sandbox = LazySandbox(max_containers=6)
    service = service_with(sandbox)

    values = scrape(service)

    assert values[("rewardbox_containers_running", ())] == 0
    assert values[("rewardbox_containers_max", ())] == 6
    assert values[("rewardbox_engine_errors_total", ())] == 0
    assert not sandbox.started


def test_each_service_has_a_registry_of_its_own():
    first, second = service_with(None, Canned(a=CODE_PASSED)), service_with(None, Canned(a=CODE_PASSED))

    asyncio.run(first.score(first.reward("canned"), [Sample(completion="a")]))

    assert scrape(first)[("rewardbox_samples_scored_total", (("verdict", "passed"),))] == 1
    assert scrape(second)[("rewardbox_samples_scored_total", (("verdict", "passed"),))] == 0


async def call(app, method: str, path: str, body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through the ASGI app, without a server."""
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


def test_requests_are_counted_by_route_template_method_and_status():
    service = service_with(None, Canned())
    app = create_app(service)

    async def traffic() -> tuple[int, dict, bytes]:
        await call(app, "POST", "/get_reward", b'{"query": [], "prompts": [], "labels": []}')
        await call(app, "POST", "/get_reward", b'{"query": [], "prompts": [], "labels": []}')
        await call(app, "POST", "/get_reward", b'{"query": ["x"')
        await call(app, "POST", "/v1/rewards", b'{"samples": [{"label": 1}]}')
        await call(app, "GET", "/no/such/path/42")
        return await call(app, "GET", "/metrics")

    status, headers, body = asyncio.run(traffic())

    assert status == 200 and headers[b"content-type"].startswith(b"text/plain; version=")
    requests_ = {tuple(s.labels[k] for k in ("route", "method", "status")): s.value
                 for family in text_string_to_metric_families(body.decode()) for s in family.samples
                 if s.name == "rewardbox_http_requests_total"}
    assert requests_ == {("/get_reward", "POST", "200"): 2, ("/get_reward", "POST", "400"): 1,
                         ("/v1/rewards", "POST", "422"): 1, ("unmatched", "GET", "404"): 1}  # /metrics counts once answered


def test_an_app_that_raises_is_counted_as_500():
    service = service_with(None)
    app = create_app(service)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):
        asyncio.run(call(app, "GET", "/boom"))

    assert scrape(service)[("rewardbox_http_requests_total", (("method", "GET"), ("route", "/boom"), ("status", "500")))] == 1


@pytest.mark.parametrize("probe, waiting, status, code", [
    (EngineProbe(reachable=True, version="27.0.1", image_present=True), 0, "ok", 200),
    (EngineProbe(reachable=True, version="27.0.1", image_present=True), 10, "degraded", 200),  # the queue is full
    (EngineProbe(reachable=True, version="27.0.1", image_present=False), 0, "down", 503),
    (EngineProbe(reachable=False, error="connection refused"), 0, "down", 503),
])
def test_healthz_answers_the_status_load_balancers_read(probe, waiting, status, code):
    service = service_with(CountingSandbox(SandboxStats(containers_running=2), probe), max_waiting_samples=10)
    service.waiting = waiting

    got, headers, body = asyncio.run(call(create_app(service), "GET", "/healthz"))

    assert got == code
    engine = {"reachable": probe.reachable, **({"version": probe.version} if probe.version else {}),
              **({"error": probe.error} if probe.error else {})}
    assert json.loads(body) == {"status": status, "engine": engine,
                                "image": {"name": "rewardbox/python:test", "present": probe.image_present},
                                "pool": {"max_containers": 8, "running": 2, "waiting_samples": waiting,
                                         "max_waiting_samples": 10}}


def test_healthz_answers_when_the_engine_hangs():
    released = threading.Event()

    class HangingSandbox(CountingSandbox):
        def probe(self, timeout_s: float) -> EngineProbe:
            released.wait(30)  # an engine that never answers (the real probe's client would time out)
            return EngineProbe(reachable=True, image_present=True)

    async def check_then_release():
        try:
            return await check(service_with(HangingSandbox()), timeout_s=0.05)
        finally:
            released.set()  # before asyncio.run waits for its worker threads

    health = asyncio.run(check_then_release())

    assert health.status == "down"
    assert not health.engine.reachable and "did not answer" in health.engine.error


# The engine's and the sandbox's own counters, over fake Docker APIs.

def transient() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError("connection reset by peer")


def engine_over(api, retry_s: float = 5.0) -> DockerEngine:
    engine = DockerEngine.__new__(DockerEngine)  # no connection made
    engine.retry_s = retry_s
    engine._sleep = lambda seconds: None
    engine.owner = "host:1:1"
    engine._api = api
    return engine


class FlakyAPI:
    """Fails `failures` times with a lost connection, then answers."""

    def __init__(self, failures: int):
        self.failures = failures

    def inspect_image(self, image):
        if self.failures:
            self.failures -= 1
            raise transient()
        return {"Id": "sha256:1"}


def test_engine_counts_failed_attempts_and_retries():
    engine = engine_over(FlakyAPI(failures=2))

    engine.require_image("rewardbox/python:test")

    assert (engine.stats.errors, engine.stats.retries) == (2, 2)


def test_engine_counts_the_last_failure_that_is_not_retried():
    engine = engine_over(FlakyAPI(failures=10**9), retry_s=0.05)

    with pytest.raises(Exception, match="start a Docker engine"):
        engine.require_image("rewardbox/python:test")

    assert engine.stats.errors == engine.stats.retries + 1 >= 2


def test_engine_does_not_count_answers_that_are_not_failures():
    class NoImageAPI:
        def inspect_image(self, image):
            response = requests.Response()
            response.status_code = 404
            raise docker.errors.ImageNotFound("no such image", response=response)

    engine = engine_over(NoImageAPI())

    with pytest.raises(Exception, match="rewardbox image build"):
        engine.require_image("rewardbox/python:test")

    assert (engine.stats.errors, engine.stats.retries) == (0, 0)


class FakeRunEngine:
    """Runs containers that print nothing and exit 0; the first create loses
    its connection. Records the sandbox's containers count while one runs."""

    retry_s = 5.0

    def __init__(self):
        self.stats = engine_over(None).stats
        self.sandbox: Sandbox | None = None
        self.running_seen: list[int] = []
        self.creates = 0
        self.peers: list[socket.socket] = []

    def require_image(self, image): pass

    def require_runtime(self, runtime): return False

    def sweep(self): return 0

    def create(self, image, limits, name, runtime=None, gvisor=False, exec_work=False, cpuset=None):
        self.creates += 1
        if self.creates == 1:
            raise ConnectionResetError("connection reset by peer")
        return f"id-{self.creates}"

    def attach(self, container_id):
        ours, theirs = socket.socketpair()
        theirs.shutdown(socket.SHUT_WR)  # the container's output ends at once; its input is still read
        self.peers.append(theirs)
        return AttachChannel(ours)

    def start(self, container_id):
        self.running_seen.append(self.sandbox.stats().containers_running)

    def kill(self, container_id): pass

    def wait(self, container_id, timeout_s): return ContainerState(exit_code=0), False

    def stopped_from_outside(self, container_id, since): return False

    def remove(self, container_id): pass

    def close(self):
        for peer in self.peers:
            peer.close()


def test_sandbox_counts_containers_running_and_runs_restarted_after_an_engine_failure(monkeypatch):
    monkeypatch.setattr("rewardbox.sandbox.runner.time.sleep", lambda seconds: None)  # the pause before a run is retried
    engine = FakeRunEngine()
    sandbox = engine.sandbox = Sandbox(engine=engine, max_containers=2)

    with sandbox:
        sandbox.run(RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"}))

    assert engine.running_seen == [1]
    assert sandbox.stats() == SandboxStats(containers_running=0, engine_errors=1, engine_call_retries=0, run_retries=1)


def test_a_request_the_engine_refuses_is_not_repeated(monkeypatch):
    monkeypatch.setattr("rewardbox.sandbox.runner.time.sleep", lambda seconds: None)

    class RefusingEngine(FakeRunEngine):
        def create(self, image, limits, name, runtime=None, gvisor=False, exec_work=False, cpuset=None):
            self.creates += 1
            response = requests.Response()
            response.status_code = 400
            raise docker.errors.APIError("Bad Request", response=response, explanation="Unknown runtime specified nosuch")

    engine = RefusingEngine()
    sandbox = engine.sandbox = Sandbox(engine=engine, max_containers=1)
    with sandbox, pytest.raises(SandboxError, match="the Docker engine refused the run: .*Unknown runtime"):
        sandbox.run(RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"}))
    assert engine.creates == 1
