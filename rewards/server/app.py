"""The reward service: one FastAPI app over the rewards and the sandbox.

`Service` holds what every route shares (the registry of rewards, the bound on
samples waiting, the settings); each group of routes is a module of its own
(`rewards_api`, `run_code`, `health`). Scoring never blocks the event loop:
rewards hand out futures, which the routes await.
"""

import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Sequence

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rewards.adapters import score_async
from rewards.base import Reward, RewardOutput, Sample
from rewards.registry import Registry, UnknownRewardError
from rewards.safe_json import plain
from rewards.sandboxfusion import RunCodeSettings
from rewards.server.metrics import RequestMetrics, ServiceMetrics
from sandbox import LazySandbox, Sandbox, SandboxError

log = logging.getLogger(__name__)


class ServerSettings(BaseModel):
    """The service's own limits; the sandbox's are in `Limits`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_completion_bytes: int = Field(1 << 20, ge=1, description="a completion over this is refused (413)")
    max_waiting_samples: int = Field(4096, ge=1, description="samples accepted and not yet scored; beyond: 503")
    retry_after_s: int = Field(5, ge=1, description="the Retry-After of a 503")
    default_reward: str = Field("correctness", description="registered reward or mix when a request names none")
    run_code: RunCodeSettings = Field(default_factory=RunCodeSettings, description="limits of /run_code (SandboxFusion)")


class SafeJSONResponse(JSONResponse):
    """Every route's JSON: whatever a reward reported (a lone surrogate in a
    message, a NaN, an object) is made JSON data first, so that a response can
    always be sent (Starlette's encoder refuses both)."""

    def render(self, content: object) -> bytes:
        return json.dumps(plain(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


class Busy(Exception):
    """More samples are waiting than the settings allow."""


class Service:
    """What the routes share. Thread-safe."""

    def __init__(self, registry: Registry, sandbox: Sandbox | LazySandbox, settings: ServerSettings | None = None):
        self.registry = registry
        self.sandbox = sandbox
        self.settings = settings or ServerSettings()
        self.waiting = 0  # samples admitted and not yet scored
        self._lock = threading.Lock()
        self.metrics = ServiceMetrics(self)  # a registry of its own: a process may hold several services

    def reward(self, name: str | None) -> Reward:
        """The named reward (or mix); the default when None. 400 for an unknown name."""
        try:
            return self.registry.resolve(name or self.settings.default_reward)
        except (UnknownRewardError, ValueError) as exc:
            raise HTTPException(400, str(exc)) from None

    @contextlib.asynccontextmanager
    async def admitted(self, samples: int) -> AsyncIterator[None]:
        """Room for `samples` in the queue, or `Busy`: the caller answers 503
        with Retry-After, and the client (OpenRLHF retries non-2xx) comes back."""
        with self._lock:
            if self.waiting and self.waiting + samples > self.settings.max_waiting_samples:
                raise Busy()
            self.waiting += samples
        try:
            yield
        finally:
            with self._lock:
                self.waiting -= samples

    async def score(self, reward: Reward, samples: Sequence[Sample]) -> list[RewardOutput]:
        """Every sample scored, in order; a failure of ours raises `SandboxError`."""
        if not samples:
            return []
        async with self.admitted(len(samples)):
            outputs = await score_async(reward, samples)
        self.metrics.scored(outputs)
        return outputs

    def check_sizes(self, texts: Sequence[str], what: str) -> None:
        limit = self.settings.max_completion_bytes
        for i, text in enumerate(texts):
            if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
                raise HTTPException(413, f"{what}[{i}] is over the limit of {limit} bytes")


def create_app(service: Service) -> FastAPI:
    """The app with every route; `rewardbox serve` runs it on uvicorn."""
    from rewards.server import health, rewards_api, run_code

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
        return SafeJSONResponse({"detail": f"over {s.max_waiting_samples} samples are waiting; retry later"},
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



