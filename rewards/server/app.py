"""The reward service: one FastAPI app over the rewards and the sandbox.

`Service` holds what every route shares (the registry of rewards, the line
for the sandbox, the settings); each group of routes is a module of its own
(`rewards_api`, `run_code`, `health`). Scoring never blocks the event loop:
rewards hand out futures, which the routes await. Under load, requests wait
in line as long as their clients do (`rewardbox.rewards.server.line`).
"""

import json
import logging
from collections.abc import Hashable, Sequence

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rewardbox.adapters import score_async
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import Registry, UnknownRewardError
from rewardbox.rewards.safe_json import plain
from rewardbox.rewards.sandboxfusion import RunCodeSettings
from rewardbox.rewards.server.line import Busy, Held, Line
from rewardbox.rewards.server.metrics import RequestMetrics, ServiceMetrics
from rewardbox.sandbox import LazySandbox, Sandbox, SandboxError
from rewardbox.settings import MAX_COMPLETION_BYTES, MAX_HELD_SAMPLES, MAX_WAITING_SAMPLES

log = logging.getLogger(__name__)


class ServerSettings(BaseModel):
    """The service's own limits; the sandbox's are in `Limits`. `rewardbox
    serve` makes them from the settings (`rewardbox.settings.server_settings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_completion_bytes: int = Field(MAX_COMPLETION_BYTES, ge=1, description="a completion over this is refused (413)")
    max_waiting_samples: int = Field(MAX_WAITING_SAMPLES, ge=1, description="samples in the sandbox at once (running or queued "
                                     "for a container); more wait in line, in arrival order")
    max_held_samples: int = Field(MAX_HELD_SAMPLES, ge=1, description="samples waiting in line; beyond, a request is refused "
                                  "at once (503; 504 on /run_code): a bound on memory, not on patience")
    hold_s: float = Field(170.0, gt=0, description="a /get_reward or /v1/rewards request waits this long at most, "
                          "then 503 while its samples keep their place for the retry; under the 180 s per attempt "
                          "of OpenRLHF's client (0.8.11-0.11.2)")
    run_code_margin_s: float = Field(3.0, ge=0, description="a /run_code request still waiting this long before "
                                     "verl's own timeout (compile_timeout + run_timeout + 10 s) is answered 504")
    keep_s: float = Field(30.0, gt=0, description="work whose requests were answered 503/504 keeps its place (or "
                          "its answer) this long for their retry; then it leaves the line unrun")
    retry_after_s: int = Field(5, ge=1, description="the Retry-After of a 503 or 504")
    default_reward: str = Field("correctness", description="registered reward or mix when a request names none")
    run_code: RunCodeSettings = Field(default_factory=RunCodeSettings, description="limits of /run_code (SandboxFusion)")


class SafeJSONResponse(JSONResponse):
    """Every route's JSON: whatever a reward reported (a lone surrogate in a
    message, a NaN, an object) is made JSON data first, so that a response can
    always be sent (Starlette's encoder refuses both)."""

    def render(self, content: object) -> bytes:
        return json.dumps(plain(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


class Service:
    """What the routes share. Thread-safe."""

    def __init__(self, registry: Registry, sandbox: Sandbox | LazySandbox, settings: ServerSettings | None = None):
        self.registry = registry
        self.sandbox = sandbox
        self.settings = settings or ServerSettings()
        s = self.settings
        self.line = Line(s.max_waiting_samples, s.max_held_samples, s.keep_s)
        self.metrics = ServiceMetrics(self)  # a registry of its own: a process may hold several services

    def reward(self, name: str | None) -> Reward:
        """The named reward (or mix); the default when None. 400 for an unknown name."""
        try:
            return self.registry.resolve(name or self.settings.default_reward)
        except (UnknownRewardError, ValueError) as exc:
            raise HTTPException(400, str(exc)) from None

    @property
    def waiting(self) -> int:
        """Samples in the sandbox (running or queued for a container)."""
        return self.line.waiting

    @waiting.setter
    def waiting(self, samples: int) -> None:  # for stand-ins of a loaded service in tests
        self.line.waiting = samples

    async def score(self, reward: Reward, samples: Sequence[Sample], key: Hashable | None = None) -> list[RewardOutput]:
        """Every sample scored, in order; a failure of ours raises `SandboxError`.
        Requests of the same `key` (the same content) share one scoring, so
        that a client's retry picks up where it left; `Held` after `hold_s`."""
        if not samples:
            return []

        async def run() -> list[RewardOutput]:
            outputs = await score_async(reward, samples)
            self.metrics.scored(outputs)
            return outputs

        return await self.line.wait(object() if key is None else key, len(samples), run, self.settings.hold_s)

    def check_sizes(self, texts: Sequence[str], what: str) -> None:
        limit = self.settings.max_completion_bytes
        for i, text in enumerate(texts):
            if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
                raise HTTPException(413, f"{what}[{i}] is over the limit of {limit} bytes")


def create_app(service: Service) -> FastAPI:
    """The app with every route; `rewardbox serve` runs it on uvicorn."""
    from rewardbox.rewards.server import health, rewards_api, run_code

    app = FastAPI(title="rewardbox", description="Sandboxed code-execution rewards for RL training.",
                  default_response_class=SafeJSONResponse)
    app.state.service = service
    app.include_router(rewards_api.router)
    app.include_router(run_code.router)
    app.include_router(health.router)
    app.add_middleware(RequestMetrics, metrics=service.metrics)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        malformed = any(e.get("type") == "json_invalid" for e in errors)
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
                             for e in errors)
        return SafeJSONResponse({"detail": f"{'malformed JSON' if malformed else 'invalid request'}: {problems}"},
                            status_code=400 if malformed else 422)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> JSONResponse:
        s = service.settings
        return SafeJSONResponse({"detail": f"over {s.max_held_samples} samples are waiting in line; retry later"},
                            status_code=503, headers={"Retry-After": str(s.retry_after_s)})

    @app.exception_handler(Held)
    async def held(request: Request, exc: Held) -> JSONResponse:
        s = service.settings
        return SafeJSONResponse({"detail": f"still in line after {s.hold_s:g} s; the same request again keeps its "
                                           "place and gets the answer"},
                                status_code=503, headers={"Retry-After": str(s.retry_after_s)})

    @app.exception_handler(SandboxError)
    async def ours(request: Request, exc: SandboxError) -> JSONResponse:
        # Our failure (the engine down): never a reward. 503 so that clients retry.
        log.error("a request failed on our side: %s", exc)
        return SafeJSONResponse({"detail": f"rewardbox could not score: {exc}"}, status_code=503,
                            headers={"Retry-After": str(service.settings.retry_after_s)})

    return app


def request_service(request: Request) -> Service:
    return request.app.state.service



