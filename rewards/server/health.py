"""`/healthz` for load balancers and `/metrics` for Prometheus.

A load balancer reads the status code: 200 while the service can score code
(the engine answers and holds the image), 503 when it cannot. The body says
why. The check answers within a few seconds even when the engine hangs: the
engine is asked in a worker thread, with a client of its own and a short
timeout, and the route stops waiting after a bound of its own.
"""

import asyncio
from typing import Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from rewardbox.rewards.server.service import Service, request_service
from rewardbox.sandbox.engine import EngineProbe

router = APIRouter()

PROBE_TIMEOUT_S = 2.0  # per engine call; a probe makes three


class EngineHealth(BaseModel):
    reachable: bool
    version: str | None = None
    error: str | None = None


class ImageHealth(BaseModel):
    name: str
    present: bool


class PoolHealth(BaseModel):
    max_containers: int
    running: int
    waiting_samples: int
    max_waiting_samples: int


class Health(BaseModel):
    """`down`: code cannot be scored (engine unreachable or image missing);
    `degraded`: it can, but the sandbox is full, so new requests wait in line."""

    status: Literal["ok", "degraded", "down"]
    engine: EngineHealth
    image: ImageHealth
    pool: PoolHealth


async def check(service: Service, timeout_s: float = PROBE_TIMEOUT_S) -> Health:
    sandbox = service.sandbox
    try:
        probe = await asyncio.wait_for(asyncio.to_thread(sandbox.probe, timeout_s), timeout=3 * timeout_s + 1)
    except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
        # The thread ends by itself when the client's own timeout fires.
        probe = EngineProbe(reachable=False, error=f"the Docker engine did not answer within {3 * timeout_s + 1:g} s")
    stats = sandbox.stats()
    pool = PoolHealth(max_containers=sandbox.max_containers, running=stats.containers_running,
                      waiting_samples=service.waiting, max_waiting_samples=service.settings.max_waiting_samples)
    status: Literal["ok", "degraded", "down"]
    if not (probe.reachable and probe.image_present):
        status = "down"
    elif pool.waiting_samples >= pool.max_waiting_samples:
        status = "degraded"
    else:
        status = "ok"
    return Health(status=status, engine=EngineHealth(reachable=probe.reachable, version=probe.version, error=probe.error),
                  image=ImageHealth(name=sandbox.image, present=probe.image_present), pool=pool)


@router.get("/healthz", response_model=Health, response_model_exclude_none=True,
            responses={503: {"model": Health, "description": "the engine is unreachable or the image is missing"}})
async def healthz(service: Service = Depends(request_service)) -> JSONResponse:
    health = await check(service)
    return JSONResponse(health.model_dump(mode="json", exclude_none=True), status_code=503 if health.status == "down" else 200,
                        headers={"Cache-Control": "no-store"})


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(service: Service = Depends(request_service)) -> Response:
    """Prometheus text format: requests, samples by verdict, sandbox run times,
    queue depth, containers running, engine errors and retries."""
    return Response(service.metrics.exposition(), media_type=service.metrics.content_type)
