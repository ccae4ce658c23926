"""SandboxFusion's `/run_code`, as verl's built-in code scoring calls it: the
request and response models and the mapping to and from a sandbox run. Pure:
no HTTP, no Docker.

The models follow SandboxFusion's own (`sandbox/server/sandbox_api.py`:
`RunCodeRequest`, `RunStatus`, `RunCodeResponse`; `sandbox/runners/types.py`:
`CommandRunStatus`, `CommandRunResult`) field for field. verl
(`verl/utils/reward_score/sandbox_fusion/utils.py`) sends `code`, `stdin`,
`language`, `compile_timeout`, `run_timeout`, `memory_limit_MB`, `files` ({})
and `fetch_files` ([]), and reads `status`, `compile_result` and
`run_result.{status, stdout, stderr, return_code, execution_time}`:

    status "SandboxError"                                 -> -1 (sandbox error)
    "Failed", run_result.status "TimeLimitExceeded"       -> -3 (timeout)
    "Failed", run_result "Error" or "Finished" + code != 0 -> -2 (runtime error)
    "Success", run_result "Finished"                      -> stdout compared

verl has no memory status of its own: SandboxFusion reports a program over
its memory limit as finished with a non-zero return code (its RLIMIT_AS makes
Python raise MemoryError, exit status 1), which verl counts as a runtime
error. Here the container's memory cgroup kills the program instead; it is
reported the same way, finished with return code -9 (SIGKILL), or 1 when
Python raised MemoryError first.

    >>> body = RunCodeRequest(code="print(input())", stdin="7", language="python", run_timeout=3)
    >>> run_request(body).limits.timeout_s
    3.0
    >>> refused("no").model_dump(mode="json")["status"]
    'SandboxError'
"""

import base64
import binascii
import enum

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from rewardbox.sandbox import Limits, RunRequest, RunResult, Verdict
from rewardbox.sandbox.models import MAX_PROGRAM_OUTPUT_BYTES

LANGUAGES = ("python", "python3")
CODE_FILE = "main.py"
SIGKILL_RETURN_CODE = -9  # how a killed child's status reads in Python, as SandboxFusion reports it


class RunStatus(str, enum.Enum):
    SUCCESS = "Success"  # every command finished with return code 0
    FAILED = "Failed"  # a command timed out or returned non-zero
    SANDBOX_ERROR = "SandboxError"  # the sandbox could not run the request


class CommandRunStatus(str, enum.Enum):
    FINISHED = "Finished"
    ERROR = "Error"  # SandboxFusion: the command could not be run at all
    TIME_LIMIT_EXCEEDED = "TimeLimitExceeded"


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeRequest(BaseModel):
    """SandboxFusion's request, with its defaults. Unknown keys are ignored, as
    there."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: str
    compile_timeout: float = Field(10, description="for compiled languages; Python has no compile step")
    run_timeout: float = 10
    memory_limit_MB: int = Field(-1, description="-1: no limit asked; the server's ceiling applies")
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="base64 contents by path, beside the code")
    fetch_files: list[str] = Field(default_factory=list, description="paths returned base64 in `files` after the run")
    args: list[str] = Field(default_factory=list, description="SandboxFusion's pytest arguments; not used")


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class RunCodeSettings(BaseModel):
    """The server's bounds on what a `/run_code` request may ask for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limits: Limits = Field(Limits(output_bytes=MAX_PROGRAM_OUTPUT_BYTES),
                           description="every other limit of a run; timeout and memory come from the request")
    max_run_timeout_s: float = Field(300.0, gt=0, description="a longer run_timeout is cut to this")
    max_memory_mb: int = Field(2048, ge=32, description="a larger memory_limit_MB, or none (-1), gets this")
    max_stdin_bytes: int = Field(8 << 20, ge=0, description="a larger stdin is refused")
    max_files_bytes: int = Field(8 << 20, ge=0, description="more decoded `files` than this are refused")


class RunCodeRefused(ValueError):
    """A request this server cannot run; answered as SandboxFusion answers a
    request it cannot run: status SandboxError and the reason as message."""


def run_request(body: RunCodeRequest, settings: RunCodeSettings | None = None) -> RunRequest:
    """The sandbox run for a `/run_code` request, or `RunCodeRefused`.

    The code is written as `main.py` in the work dir and run there as
    `python3 main.py` (SandboxFusion: a temporary `*.py` in a temporary dir), the
    `files` beside it. Limits: `run_timeout` is the program's deadline (cut to
    the server's maximum), `memory_limit_MB` the container's memory (at least
    32 MB, at most the server's ceiling; it covers the harness's few MB too).
    """
    settings = settings or RunCodeSettings()
    if body.language not in LANGUAGES:
        raise RunCodeRefused(f"language {body.language!r} is not supported: this rewardbox server runs "
                             f"{' and '.join(repr(lang) for lang in LANGUAGES)} (both Python 3)")
    if not body.run_timeout > 0:
        raise RunCodeRefused(f"run_timeout must be positive, not {body.run_timeout}")
    if body.stdin is not None and len(body.stdin.encode("utf-8", "surrogatepass")) > settings.max_stdin_bytes:
        raise RunCodeRefused(f"stdin is over the limit of {settings.max_stdin_bytes} bytes")
    binary_files = _files(body.files, settings.max_files_bytes)
    if CODE_FILE in binary_files:
        raise RunCodeRefused(f"files may not use {CODE_FILE!r}: the code is written there")
    memory_mb = settings.max_memory_mb if body.memory_limit_MB <= 0 else min(body.memory_limit_MB, settings.max_memory_mb)
    limits = settings.limits.model_copy(update={
        "timeout_s": min(float(body.run_timeout), settings.max_run_timeout_s),
        "memory_mb": max(memory_mb, 32),
    })
    try:
        return RunRequest(files={CODE_FILE: body.code}, program=CODE_FILE, stdin=body.stdin,
                          binary_files=binary_files, fetch_files=tuple(body.fetch_files), limits=limits)
    except pydantic.ValidationError as exc:
        problems = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
        raise RunCodeRefused(f"cannot run this request: {problems}") from None


def _files(files: dict[str, str | None], max_bytes: int) -> dict[str, str]:
    """SandboxFusion's `files`, as it restores them: entries that are not
    strings, or whose name says IGNORE_THIS_FILE, are skipped."""
    kept, total = {}, 0
    for path, content in files.items():
        if not isinstance(content, str) or "IGNORE_THIS_FILE" in path:
            continue
        try:
            total += len(base64.b64decode(content, validate=True))
        except (binascii.Error, ValueError):
            raise RunCodeRefused(f"files[{path!r}] is not base64") from None
        kept[path] = content
    if total > max_bytes:
        raise RunCodeRefused(f"files hold {total} bytes, over the limit of {max_bytes}")
    return kept


def run_code_response(result: RunResult) -> RunCodeResponse:
    """A program run as SandboxFusion reports it. Python has no compile step,
    so `compile_result` is None, as there.

    Timeout: run_result "TimeLimitExceeded" without a return code. Anything
    else finished: its return code decides Success (0) or Failed. A run
    stopped at a limit (memory, output) without a telling exit status reads
    as killed by SIGKILL, so that a client never takes it for success.
    """
    execution_time = result.test_duration_s or result.duration_s
    if result.verdict is Verdict.TIMEOUT:
        run = CommandRunResult(status=CommandRunStatus.TIME_LIMIT_EXCEEDED, execution_time=execution_time,
                               stdout=result.stdout, stderr=result.stderr)
        return RunCodeResponse(status=RunStatus.FAILED, message=result.message, run_result=run, files=result.files)
    return_code = result.exit_code
    stopped = result.verdict in (Verdict.OUT_OF_MEMORY, Verdict.OUTPUT_LIMIT, Verdict.KILLED)
    if return_code is None or (return_code == 0 and stopped):
        return_code = SIGKILL_RETURN_CODE
    run = CommandRunResult(status=CommandRunStatus.FINISHED, execution_time=execution_time, return_code=return_code,
                           stdout=result.stdout, stderr=result.stderr)
    return RunCodeResponse(status=RunStatus.SUCCESS if return_code == 0 else RunStatus.FAILED,
                           message=result.message, run_result=run, files=result.files)


def refused(message: str) -> RunCodeResponse:
    """A request that was not run, in the response's usual shape."""
    return RunCodeResponse(status=RunStatus.SANDBOX_ERROR, message=message)
