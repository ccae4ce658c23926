"""SandboxFusion's `/run_code`, for verl: point verl's sandbox URL here and its
built-in code scoring runs each test case in the service's sandbox (same
containers, limits, hardening and container bound as every other route).

What the program did is data in SandboxFusion's shape (see
`rewards.sandboxfusion`). What could not be run answers 200 with status
"SandboxError" and the reason, as SandboxFusion answers: an unsupported
language, unusable files, or our own failure (the engine down). A full queue
answers 504 with Retry-After, not the service's usual 503: verl's client
retries a 504 (three attempts, 1 s then 2 s apart) and counts any other
non-2xx as a failed test case at once.
"""

import asyncio
import logging

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from rewards.sandboxfusion import (
    RunCodeRefused,
    RunCodeRequest,
    RunCodeResponse,
    refused,
    run_code_response,
    run_request,
)
from rewards.server.app import Busy, Service, request_service
from sandbox import SandboxError

log = logging.getLogger(__name__)
router = APIRouter()



@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(body: RunCodeRequest, service: Service = Depends(request_service)) -> RunCodeResponse | JSONResponse:
    """Runs `code` as a Python 3 program with `stdin`; SandboxFusion's answer."""
    service.check_sizes([body.code], "code")
    settings = service.settings.run_code
    try:
        request = run_request(body, settings)
    except RunCodeRefused as exc:
        return refused(str(exc))
    try:
        async with service.admitted(1):
            result = await asyncio.wrap_future(service.sandbox.submit(request))
    except Busy:
        s = service.settings
        return JSONResponse({"detail": f"over {s.max_waiting_samples} samples are waiting; retry later"},
                            status_code=504, headers={"Retry-After": str(s.retry_after_s)})
    except SandboxError as exc:
        log.error("/run_code failed on our side: %s", exc)
        return refused(f"rewardbox could not run the code: {exc}")
    service.metrics.sandbox_run.observe(result.duration_s)
    service.metrics.samples.labels(result.verdict.value).inc()
    return run_code_response(result)
