"""The reward service: one FastAPI app over the rewards and the sandbox.

`Service` (rewardbox.rewards.server.service) holds what every route shares
(the registry of rewards, the line for the sandbox, the settings); each group of routes is a module of its own
(`rewards_api`, `run_code`, `health`, `sessions_api`). Scoring never blocks the event loop:
rewards hand out futures, which the routes await. Under load, requests wait
in line as long as their clients do (`rewardbox.rewards.server.line`).
"""

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from rewardbox.rewards.safe_json import plain
from rewardbox.rewards.server import health, rewards_api, run_code, sessions_api
from rewardbox.rewards.server.config import ServerSettings
from rewardbox.rewards.server.line import Busy, Held
from rewardbox.rewards.server.metrics import RequestMetrics
from rewardbox.rewards.server.service import Service, request_service
from rewardbox.sandbox import SandboxError

# Service and its settings live in modules of their own (the routers import
# them, and this module imports the routers); named here as they always were.
__all__ = ["SafeJSONResponse", "ServerSettings", "Service", "create_app", "request_service"]

log = logging.getLogger(__name__)


class SafeJSONResponse(JSONResponse):
    """Every route's JSON: whatever a reward reported (a lone surrogate in a
    message, a NaN, an object) is made JSON data first, so that a response can
    always be sent (Starlette's encoder refuses both)."""

    def render(self, content: object) -> bytes:
        return json.dumps(plain(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def create_app(service: Service) -> FastAPI:
    """The app with every route; `rewardbox serve` runs it on uvicorn."""
    app = FastAPI(title="rewardbox", description="Sandboxed code-execution rewards for RL training.",
                  default_response_class=SafeJSONResponse, lifespan=sessions_api.lifespan)
    app.state.service = service
    app.include_router(rewards_api.router)
    app.include_router(run_code.router)
    app.include_router(health.router)
    app.include_router(sessions_api.router)
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
