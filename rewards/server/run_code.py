"""SandboxFusion's `/run_code`, for verl: point verl's sandbox URL here and its
built-in code scoring runs each test case in the service's sandbox (same
containers, limits, hardening and container bound as every other route), in
any language of rewardbox's table, each in its toolchain's image.

What the program did is data in SandboxFusion's shape (see
`rewardbox.rewards.sandboxfusion`). What could not be run answers 200 with status
"SandboxError" and the reason, as SandboxFusion answers: an unsupported
language, unusable files, a language whose image the engine lacks (the
message says how to build it), or our own failure (the engine down).

Under load a request waits in line (`rewardbox.rewards.server.line`) until just before
verl would stop waiting: verl 0.9.1 times an attempt out after
`compile_timeout + run_timeout + 10` s (`verl/utils/reward_score/sandbox_fusion/utils.py:115`)
and then counts the test case as failed (`:156-158`), but retries a 504, three
attempts, 1 s then 2 s apart (`:27-28`, `:132-145`). So a request still
waiting `run_code_margin_s` before that deadline is answered 504 (not the
service's usual 503, which verl counts as a failure at once), and its run
keeps its place: the retry, the same body, attaches to the run and gets its
answer.
"""

import asyncio
import hashlib
import logging

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from rewardbox.rewards.sandboxfusion import (
    RunCodeRefused,
    RunCodeRequest,
    RunCodeResponse,
    refused,
    run_code_response,
    run_request,
)
from rewardbox.rewards.server.line import Busy, Held
from rewardbox.rewards.server.service import Service, request_service
from rewardbox.sandbox import RunResult, SandboxError

log = logging.getLogger(__name__)
router = APIRouter()
VERL_API_TIMEOUT_S = 10  # verl 0.9.1 sandbox_fusion/utils.py:29, added to both timeouts (:115)


def client_timeout_s(body: RunCodeRequest) -> float:
    """How long verl waits for one attempt at this request.

    >>> client_timeout_s(RunCodeRequest(code="", language="python", compile_timeout=10, run_timeout=10))
    30.0
    """
    return float(body.compile_timeout) + float(body.run_timeout) + VERL_API_TIMEOUT_S


def hold_s(body: RunCodeRequest, margin_s: float) -> float:
    """How long the request may wait before its 504: `margin_s` before
    verl's timeout, and at least a second (a 504 right away spends verl's
    retries without waiting at all).

    >>> hold_s(RunCodeRequest(code="", language="python", compile_timeout=2, run_timeout=2), 3.0)
    11.0
    """
    return max(client_timeout_s(body) - margin_s, 1.0)


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(body: RunCodeRequest, http: Request,
                   service: Service = Depends(request_service)) -> RunCodeResponse | JSONResponse:
    """Compiles (for a compiled language) and runs `code` with `stdin`; SandboxFusion's answer."""
    service.check_sizes([body.code], "code")
    s = service.settings
    try:
        request = run_request(body, s.run_code)
    except RunCodeRefused as exc:
        return refused(str(exc))

    async def run() -> RunResult:
        result = await asyncio.wrap_future(service.sandbox.submit(request))
        service.metrics.sandbox_run.observe(result.duration_s)
        service.metrics.samples.labels(result.verdict.value).inc()
        return result

    # The run is a function of the body, so verl's retry (the very same bytes) is the same run.
    key = (http.url.path, hashlib.sha256(await http.body()).hexdigest())
    try:
        result = await service.line.wait(key, 1, run, hold_s(body, s.run_code_margin_s))
    except (Busy, Held) as exc:
        detail = (f"over {s.max_held_samples} samples are waiting in line; retry later" if isinstance(exc, Busy)
                  else "still in line; the same request again keeps its place and gets the answer")
        return JSONResponse({"detail": detail}, status_code=504, headers={"Retry-After": str(s.retry_after_s)})
    except SandboxError as exc:
        log.error("/run_code failed on our side: %s", exc)
        return refused(f"rewardbox could not run the code: {exc}")
    return run_code_response(result, request.language)
