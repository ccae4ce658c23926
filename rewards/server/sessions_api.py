"""Sessions over HTTP (`/v1/sessions`): an agent's rollout in a container of
its own (`rewardbox.sandbox.session`), driven by tool calls from a trainer
in another process.

- `POST /v1/sessions` makes one; its `id` is the capability (see
  `rewardbox.rewards.server.session_registry`). An id the service does not
  hold, whatever the reason, is answered 404 "no such session".
- `POST /v1/sessions/{id}/run`: `code`, a work-dir `file` or a shell
  `command` (exactly one), with `stdin` and `timeout_s`; the `CallResult`.
- `PUT` / `GET /v1/sessions/{id}/files/{path}`: the file's bytes.
- `POST /v1/sessions/{id}/score`: the file graded as `/get_reward` grades a
  completion (the service's reward, through its line).
- `DELETE /v1/sessions/{id}`: closed, its container removed.

What the agent's code did is data (200). A call the session refuses (a path
out of the work dir, data over a limit) is 400; a session whose container is
gone (its lifetime, its PID 1 killed from inside) is 410 once, then dropped.
Every blocking call runs on the registry's threads, never the event loop's.
With `ServerSettings.warm_sessions`, the local sandbox keeps that many
containers made ahead for sessions of the service's limits (a create that
asks for none), from the start of the service to its stop.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardbox.rewards.base import Sample
from rewardbox.rewards.code import CodeReward
from rewardbox.rewards.server.rewards_api import SampleIn, SampleResult, result
from rewardbox.rewards.server.service import Service, request_service
from rewardbox.rewards.server.session_registry import SWEEP_S, TooManySessions, UnknownSession
from rewardbox.sandbox import Limits, Sandbox, SandboxError
from rewardbox.sandbox.session import CallResult, NoSuchFile, Session, SessionEnded, SessionLimits, SessionRefused

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
T = TypeVar("T")
NO_SUCH_SESSION = "no such session"


class SessionRequest(BaseModel):
    """A new session's limits; each absent one is the service's."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(None, gt=0, description="a call's deadline when the call gives none")
    memory_mb: int | None = Field(None, ge=32, description="the container's memory limit")
    lifetime_s: float | None = Field(None, gt=0, description="at most the service's session_lifetime_s")
    idle_s: float | None = Field(None, gt=0, description="at most the service's session_idle_s")


class SessionCreated(BaseModel):
    id: str = Field(description="the session's capability: whoever holds it owns the session")
    lifetime_s: float
    idle_s: float
    timeout_s: float
    memory_mb: int


class CallRequest(BaseModel):
    """One call: Python `code`, a work-dir Python `file`, or a shell `command`."""

    model_config = ConfigDict(extra="forbid")

    code: str | None = None
    file: str | None = None
    command: str | None = None
    stdin: str | None = None
    timeout_s: float | None = Field(None, description="default: the session's timeout_s")
    background: bool = Field(False, description="start it and return (file or command): killed at close")

    @model_validator(mode="after")
    def _one_kind(self) -> "CallRequest":
        if sum(x is not None for x in (self.code, self.file, self.command)) != 1:
            raise ValueError("give exactly one of code, file and command")
        return self


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: Any
    file: str = "solution.py"
    prompt: str | None = None
    reward: str | None = Field(None, description="a registered reward or mix; default: the server's, as /get_reward")


class Closed(BaseModel):
    closed: bool = True


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: the warm set kept and idle sessions swept while it
    serves; every session, and the warm set, closed when it stops."""
    service: Service = app.state.service
    warm = service.settings.warm_sessions
    if warm:
        await asyncio.to_thread(_keep_warm, service, warm)
    sweeping = asyncio.create_task(_sweep_forever(service))
    try:
        yield
    finally:
        sweeping.cancel()
        with suppress(asyncio.CancelledError):
            await sweeping
        if warm:
            await asyncio.to_thread(_keep_warm, service, 0)
        await asyncio.to_thread(service.close_sessions)


def _keep_warm(service: Service, size: int) -> None:
    """The local sandbox's warm set of `size` sessions of the service's limits (blocking)."""
    try:
        sandbox = _local_sandbox(service)
    except HTTPException as exc:  # not a local sandbox: sessions are refused anyway
        log.warning("no warm sessions: %s", exc.detail)
        return
    except Exception as exc:  # noqa: BLE001 - the sandbox stopped, or could not be made: creates will say why
        log.warning("no warm sessions: %s", exc)
        return
    limits, session_limits = _defaults(service)
    sandbox.keep_sessions_warm(size, limits, session_limits)


async def _sweep_forever(service: Service) -> None:
    while True:
        await asyncio.sleep(SWEEP_S)
        try:
            await _blocking(service, service.sessions.sweep)
        except Exception:  # noqa: BLE001 - a failed sweep must not end the sweeping
            log.exception("the sweep of idle sessions failed")


async def _blocking(service: Service, call: Callable[[], T]) -> T:
    """`call` on the registry's threads (a session's call may take minutes)."""
    try:
        future = service.sessions.executor.submit(call)
    except RuntimeError:  # shut down: the service is stopping
        raise HTTPException(503, "the service is stopping") from None
    return await asyncio.wrap_future(future)


async def _on_session(service: Service, session_id: str, call: Callable[[Session], T]) -> T:
    """`call` on the session of `session_id`: 404 for an id not held, 400 for
    a refused call, 410 (and the session dropped) for an ended one."""

    def run() -> T:
        with service.sessions.use(session_id) as session:
            return call(session)

    try:
        return await _blocking(service, run)
    except UnknownSession:
        raise HTTPException(404, NO_SUCH_SESSION) from None
    except SessionRefused as exc:
        raise HTTPException(400, str(exc)) from None
    except SessionEnded as exc:
        await _drop(service, session_id)
        raise HTTPException(410, f"the session ended: {exc}") from None
    except SandboxError:
        raise  # ours (the engine down): 503, and the session may be used again
    except Exception as exc:  # noqa: BLE001 - the engine failed under the call in a way the session does not name
        # Seen: the container removed by the service's stop while a call
        # started its next exec (the engine's 500 "Removal In Progress").
        # What the session holds is unknown now: it ends here.
        log.warning("a session call failed on the engine's side; the session is closed: %s", exc)
        await _drop(service, session_id)
        raise HTTPException(410, f"the session ended: the engine failed under the call: {exc}") from None


async def _drop(service: Service, session_id: str) -> None:
    gone = service.sessions.drop(session_id)
    if gone is not None:
        await _blocking(service, gone.close)


def _local_sandbox(service: Service) -> Sandbox:
    # `rewardbox serve` holds a LazySandbox (made on first use): the sandbox under it.
    backend: object = service.sandbox
    inner = getattr(backend, "sandbox", backend)
    if not isinstance(inner, Sandbox):
        raise HTTPException(501, f"sessions need a local Docker sandbox; this service runs on {type(inner).__name__}")
    return inner


def _limits(service: Service) -> Limits:
    # The containers' limits the service grades with (`rewardbox serve --memory-mb`, ...).
    reward = service.registry.get("correctness")
    return reward.limits if isinstance(reward, CodeReward) else Limits()


def _defaults(service: Service) -> tuple[Limits, SessionLimits]:
    """A session's limits when its create asks for none: the warm set's."""
    s = service.settings
    return _limits(service), SessionLimits(lifetime_s=s.session_lifetime_s, idle_s=s.session_idle_s)


@router.post("", response_model=SessionCreated)
async def create_session(body: SessionRequest | None = None,
                         service: Service = Depends(request_service)) -> SessionCreated:
    """A new session; its `id` is all it takes to use it."""
    body = body or SessionRequest()
    s = service.settings
    for name, asked, most in (("lifetime_s", body.lifetime_s, s.session_lifetime_s),
                              ("idle_s", body.idle_s, s.session_idle_s)):
        if asked is not None and asked > most:
            raise HTTPException(400, f"{name} {asked:g} is over the service's {most:g}")
    limits, session_limits = _defaults(service)
    session_limits = session_limits.model_copy(update={"lifetime_s": body.lifetime_s or s.session_lifetime_s,
                                                       "idle_s": body.idle_s or s.session_idle_s})
    if body.timeout_s is not None:  # validated (> 0) by SessionRequest
        session_limits = session_limits.model_copy(update={"call_timeout_s": body.timeout_s})
    if session_limits.call_timeout_s > session_limits.max_call_timeout_s:
        raise HTTPException(400, f"timeout_s is over the {session_limits.max_call_timeout_s:g} s a call may take")
    if body.memory_mb is not None:
        if body.memory_mb > limits.memory_mb:
            raise HTTPException(400, f"memory_mb {body.memory_mb} is over the service's {limits.memory_mb}")
        limits = limits.model_copy(update={"memory_mb": body.memory_mb})
    sandbox = _local_sandbox(service)
    try:
        session_id = await _blocking(service, lambda: service.sessions.create(
            lambda: sandbox.session(limits, session_limits), session_limits.idle_s, session_limits.lifetime_s))
    except TooManySessions as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(s.retry_after_s)}) from None
    except UnknownSession as exc:  # the registry is closed
        raise HTTPException(503, str(exc)) from None
    return SessionCreated(id=session_id, lifetime_s=session_limits.lifetime_s, idle_s=session_limits.idle_s,
                          timeout_s=session_limits.call_timeout_s, memory_mb=limits.memory_mb)


@router.post("/{session_id}/run")
async def run(session_id: str, body: CallRequest, service: Service = Depends(request_service)) -> dict[str, Any]:
    """Runs `code`, `file` (Python) or `command` (`sh -c`) in the session's
    work dir; the `CallResult`: verdict, exit_code, stdout, stderr, ..."""

    def call(session: Session) -> CallResult:
        if body.command is not None:
            return session.shell(body.command, stdin=body.stdin, timeout_s=body.timeout_s, background=body.background)
        return session.run(body.code, file=body.file, stdin=body.stdin, timeout_s=body.timeout_s,
                           background=body.background)

    result = await _on_session(service, session_id, call)
    return result.model_dump(mode="json")


class Written(BaseModel):
    path: str
    bytes: int


@router.put("/{session_id}/files/{path:path}", response_model=Written)
async def put_file(session_id: str, path: str, request: Request, service: Service = Depends(request_service)) -> Written:
    """Writes the request's body to `path` under the work dir, its directories made."""
    data = await _body(request, SessionLimits().file_bytes)
    await _on_session(service, session_id, lambda session: session.write_file(path, data))
    return Written(path=path, bytes=len(data))


async def _body(request: Request, limit: int) -> bytes:
    """The request's body, read no further than `limit` bytes (413 beyond):
    a client cannot make the service hold more than a session would take."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the body is over the {limit} bytes a session's file may hold")
        chunks.append(chunk)
    return b"".join(chunks)


@router.get("/{session_id}/files/{path:path}")
async def get_file(session_id: str, path: str, service: Service = Depends(request_service)) -> Response:
    """The bytes of `path` under the work dir; 404 if there is no such file."""

    def read(session: Session) -> bytes | None:
        try:
            data = session.read_file(path, text=False)
        except NoSuchFile:
            return None
        return data if isinstance(data, bytes) else data.encode()

    data = await _on_session(service, session_id, read)
    if data is None:
        raise HTTPException(404, f"no such file: {path}")
    return Response(data, media_type="application/octet-stream")


@router.post("/{session_id}/score", response_model=SampleResult)
async def score(session_id: str, body: ScoreRequest, service: Service = Depends(request_service)) -> SampleResult:
    """The session's `file` as it is now, graded as `/get_reward` grades a
    completion: the service's reward, in a fresh single-run container."""
    reward = service.reward(body.reward)
    # The session's own score() reads the file (bounded, a missing one an empty
    # completion); the grading is the service's, through its line.
    completion = await _on_session(service, session_id,
                                   lambda session: session.score(body.label, body.file, grader=_Completion()))
    service.check_sizes([completion], "the file")
    outputs = await service.score(reward, [Sample(completion=completion, label=body.label, prompt=body.prompt)])
    return result(SampleIn(completion="", label=None), outputs[0])


class _Completion:
    """A session's `Grader` that grades nothing: the completion it is handed."""

    def grade(self, completion: str, label: Any, prompt: str | None = None) -> str:
        return completion


@router.delete("/{session_id}", response_model=Closed)
async def delete(session_id: str, service: Service = Depends(request_service)) -> Closed:
    """Closes the session: everything in it killed, its container removed."""
    session = service.sessions.drop(session_id)
    if session is None:
        raise HTTPException(404, NO_SUCH_SESSION)
    await _blocking(service, session.close)
    return Closed()
