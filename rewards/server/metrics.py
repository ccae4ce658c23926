"""The service's Prometheus metrics, in a registry each service owns (one
process may hold several apps; the tests do).

Counted as they happen: HTTP requests by route, method and status (an ASGI
middleware), samples scored by verdict and the sandbox's run times (from
`Service.score`). Read when scraped: samples waiting, containers running, the
engine's failures and retries, the sessions open, warm, created, closed and
expired (the sandbox keeps plain counters and knows
nothing of Prometheus).
"""

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewardbox.rewards.base import RewardOutput
from rewardbox.rewards.label_formats import CodeLabel
from rewardbox.sandbox import Verdict

if TYPE_CHECKING:
    from rewardbox.rewards.server.service import Service

# A label value per verdict we know; anything else is "other", so that a
# reward reporting free-form verdicts cannot grow the series without bound.
VERDICTS = (*(v.value for v in Verdict), "unscorable", "unknown", "other")
CODE_KINDS = frozenset(label.model_fields["kind"].default for label in get_args(CodeLabel))
# A run takes about half a second when the code is quick; the default limit's timeouts land near 10 s.
SANDBOX_BUCKETS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
UNMATCHED_ROUTE = "unmatched"  # not the raw path: random paths must not become series


class ServiceMetrics:
    """The metrics of one `Service`; `exposition()` is the body of `/metrics`."""

    def __init__(self, service: "Service"):
        self.registry = CollectorRegistry()
        self.requests = Counter("rewardbox_http_requests", "HTTP requests answered, by route template, method and status code",
                                ("route", "method", "status"), registry=self.registry)
        self.samples = Counter("rewardbox_samples_scored",
                               "Samples scored, by verdict ('unscorable': no reward, e.g. a label that cannot be used)",
                               ("verdict",), registry=self.registry)
        self.sandbox_run = Histogram("rewardbox_sandbox_run_seconds",
                                     "Wall time of one sandbox run of a code sample, from creating its container to removing it",
                                     buckets=SANDBOX_BUCKETS_S, registry=self.registry)
        for verdict in VERDICTS:
            self.samples.labels(verdict)  # present at 0, so that rates exist before the first one
        self.registry.register(_ReadWhenScraped(service))

    def request(self, route: str, method: str, status: int) -> None:
        self.requests.labels(route, method, str(status)).inc()

    def scored(self, outputs: Sequence[RewardOutput]) -> None:
        for out in outputs:
            self.samples.labels(verdict_of(out)).inc()
            for seconds in sandbox_seconds(out):
                self.sandbox_run.observe(seconds)

    content_type = CONTENT_TYPE_LATEST

    def exposition(self) -> bytes:
        """The Prometheus text format, of type `content_type`."""
        return generate_latest(self.registry)


def verdict_of(out: RewardOutput) -> str:
    """The verdict label of one output.

    >>> verdict_of(RewardOutput(reward=1.0, score=1.0, verdict=Verdict.PASSED))
    'passed'
    >>> verdict_of(RewardOutput.unscorable("bad label"))
    'unscorable'
    >>> verdict_of(RewardOutput(reward=0.3, score=0.3, metadata={"length_chars": 9}))
    'unknown'
    >>> verdict_of(RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "great"}))  # a reward function's own word
    'other'
    """
    if out.reward is None:
        return "unscorable"
    if out.verdict is not None:
        return out.verdict.value
    return "other" if out.metadata.get("verdict") else "unknown"


def sandbox_seconds(out: RewardOutput) -> Iterator[float]:
    """The sandbox run times behind one output: a code sample's own, or those of
    the code components of a mix. Math, format and code-less samples ran nothing.

    >>> failed = RewardOutput(reward=0.0, score=0.0, verdict=Verdict.FAILED, duration_s=0.5, metadata={"kind": "asserts"})
    >>> list(sandbox_seconds(failed))
    [0.5]
    >>> list(sandbox_seconds(RewardOutput(reward=0.0, score=0.0, verdict=Verdict.NO_CODE, duration_s=0.0,
    ...                                   metadata={"kind": "asserts"})))
    []
    >>> list(sandbox_seconds(RewardOutput(reward=1.0, score=1.0, verdict=Verdict.PASSED, duration_s=0.01)))  # math
    []
    >>> list(sandbox_seconds(RewardOutput(reward=0.0, score=0.0, components={"code": failed})))
    [0.5]
    """
    if out.components:
        for part in out.components.values():
            yield from sandbox_seconds(part)
        return
    if (out.metadata.get("kind") in CODE_KINDS and out.verdict is not Verdict.NO_CODE
            and out.duration_s is not None):
        yield out.duration_s


class _ReadWhenScraped:
    """The values that are state, not events: read from the service and its
    sandbox at each scrape."""

    def __init__(self, service: "Service"):
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service
        yield GaugeMetricFamily("rewardbox_samples_waiting", "Samples in the sandbox, running or queued for a container",
                                value=service.waiting)
        yield GaugeMetricFamily("rewardbox_samples_waiting_max", "Samples the sandbox takes at once; more wait in line",
                                value=service.settings.max_waiting_samples)
        yield GaugeMetricFamily("rewardbox_samples_held", "Samples waiting in line for room in the sandbox",
                                value=service.line.held)
        yield from _sessions(service)
        sandbox = service.sandbox
        if not hasattr(sandbox, "stats"):  # a stand-in without counters (tests)
            return
        stats = sandbox.stats()
        yield GaugeMetricFamily("rewardbox_containers_running", "Sandbox containers running a sample",
                                value=stats.containers_running)
        yield GaugeMetricFamily("rewardbox_containers_warm", "Pooled sandbox containers waiting for a sample",
                                value=stats.containers_warm)
        yield GaugeMetricFamily("rewardbox_containers_max", "Sandbox containers allowed at once",
                                value=sandbox.max_containers)
        yield CounterMetricFamily("rewardbox_engine_errors",
                                  "Docker engine calls and run connections that failed on the engine's side "
                                  "(connection lost, timeout, 5xx), retried or not", value=stats.engine_errors)
        retries = CounterMetricFamily("rewardbox_engine_retries",
                                      "Work repeated after an engine failure: a Docker API call (kind=call) "
                                      "or a whole run in a new container (kind=run)", labels=("kind",))
        retries.add_metric(("call",), stats.engine_call_retries)
        retries.add_metric(("run",), stats.run_retries)
        yield retries


def _sessions(service: "Service") -> Iterator[Metric]:
    registry = service.sessions
    yield GaugeMetricFamily("rewardbox_sessions_open", "Sessions (/v1/sessions) held now", value=len(registry))
    yield GaugeMetricFamily("rewardbox_sessions_max", "Sessions held at once at most",
                            value=service.settings.max_sessions)
    yield GaugeMetricFamily("rewardbox_sessions_warm", "Session containers made ahead, ready to hand out",
                            value=_warm_sessions(service.sandbox))
    yield CounterMetricFamily("rewardbox_sessions_created", "Sessions created", value=registry.created)
    yield CounterMetricFamily("rewardbox_sessions_closed", "Sessions closed: DELETE, their container ended, or "
                              "the service's stop", value=registry.closed)
    yield CounterMetricFamily("rewardbox_sessions_expired", "Sessions closed by their idle limit or lifetime",
                              value=registry.expired)


def _warm_sessions(backend: object) -> int:
    # A LazySandbox not made yet holds none: looking must not make it.
    if getattr(backend, "started", True) is False:
        return 0
    try:
        inner = getattr(backend, "sandbox", backend)
    except Exception:  # noqa: BLE001 - stopped: nothing is warm
        return 0
    warm = getattr(inner, "warm_sessions", 0)
    return warm if isinstance(warm, int) else 0


class RequestMetrics:
    """ASGI middleware counting every answered request by its route template.
    Pure ASGI (no `BaseHTTPMiddleware`): nothing is buffered or copied."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the server answers if the app raises before starting a response

        async def send_seen(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_seen)
        finally:
            # The router records the matched route in the scope it was given, which is this one.
            route = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
            self.metrics.request(route, scope["method"], status)
