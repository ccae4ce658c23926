"""SandboxFusion's `/run_code`, as verl's built-in code scoring calls it: the
request and response models and the mapping to and from a sandbox run, for
every language of rewardbox's table (`rewardbox.sandbox.languages`). Pure: no
HTTP, no Docker.

The models follow SandboxFusion's own (`sandbox/server/sandbox_api.py`:
`RunCodeRequest`, `RunStatus`, `RunCodeResponse`; `sandbox/runners/types.py`:
`CommandRunStatus`, `CommandRunResult`) field for field. verl
(`verl/utils/reward_score/sandbox_fusion/utils.py`) sends `code`, `stdin`,
`language`, `compile_timeout`, `run_timeout`, `memory_limit_MB`, `files` ({})
and `fetch_files` ([]), and reads `status`, `compile_result` and
`run_result.{status, stdout, stderr, return_code, execution_time}`:

    status "SandboxError"                                 -> -1 (sandbox error)
    "Failed", compile_result "TimeLimitExceeded", or
              "Finished" + return_code != 0               -> -4 (compile error)
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
    >>> run_request(RunCodeRequest(code="public class Solution {}", language="java")).program
    'Solution.java'
    >>> refused("no").model_dump(mode="json")["status"]
    'SandboxError'
"""

import base64
import binascii
import enum

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from rewardbox.sandbox import Limits, RunRequest, RunResult, Verdict
from rewardbox.sandbox.languages import LANGUAGES as TABLE
from rewardbox.sandbox.languages import Language, language
from rewardbox.sandbox.models import MAX_PROGRAM_OUTPUT_BYTES, CompileResult

# Every spelling of the table's languages (SandboxFusion's `python`, `cpp`, `nodejs`, `go`, `java` and
# `rust` among them), as written there: SandboxFusion's names are case-sensitive too.
LANGUAGES: tuple[str, ...] = tuple(alias for lang in TABLE for alias in lang.aliases)
CODE_FILE = "main.py"  # Python's code file (SandboxFusion: a temporary *.py); see `code_file`
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
    compile_timeout: float = Field(10, description="for compiled languages; Python and JavaScript have no compile step")
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
    max_compile_timeout_s: float = Field(60.0, gt=0, description="a longer compile_timeout is cut to this")
    max_memory_mb: int = Field(2048, ge=32, description="a larger memory_limit_MB, or none (-1), gets this")
    max_stdin_bytes: int = Field(8 << 20, ge=0, description="a larger stdin is refused")
    max_files_bytes: int = Field(8 << 20, ge=0, description="more decoded `files` than this are refused")


class RunCodeRefused(ValueError):
    """A request this server cannot run; answered as SandboxFusion answers a
    request it cannot run: status SandboxError and the reason as message."""


def supported() -> str:
    """The languages this server runs, each with its other spellings.

    >>> supported().split("; ")[:2]
    ['python (python3, py)', 'cpp (c++, cc, cxx, cpp17, c++17)']
    """
    return "; ".join(lang.name + (f" ({', '.join(a for a in lang.aliases if a != lang.name)})"
                                  if len(lang.aliases) > 1 else "") for lang in TABLE)


def request_language(name: str) -> Language:
    """The table's language that `name` spells (exactly, as SandboxFusion
    matches its names), or `RunCodeRefused` naming those this server runs:
    SandboxFusion's others (php, csharp, typescript, pytest, ...) are not run here."""
    if name not in LANGUAGES:
        raise RunCodeRefused(f"language {name!r} is not supported: this rewardbox server runs {supported()}")
    return language(name)


def code_file(lang: Language, code: str) -> str:
    """The file the code is written to: Python's `main.py`, else the
    language's source file (`Language.source_name`). SandboxFusion writes Java
    to Main.java whatever the code; here it is named after its public class,
    so that `public class Solution` compiles too (javac refuses it in Main.java).

    >>> code_file(language("cpp"), "int main() {}"), code_file(language("python"), "")
    ('main.cpp', 'main.py')
    """
    return CODE_FILE if lang.name == "python" else lang.source_name(code)


def run_request(body: RunCodeRequest, settings: RunCodeSettings | None = None) -> RunRequest:
    """The sandbox run for a `/run_code` request, or `RunCodeRefused`.

    The code is written to its file in the work dir (`code_file`; SandboxFusion:
    a temporary file in a temporary dir), the `files` beside it, and run there
    as its language runs (`python3 main.py`, `./main` after `g++`, ...).
    Limits: `run_timeout` is the program's deadline (cut to the server's
    maximum), `compile_timeout` the compile step's (likewise, for a language
    with one), `memory_limit_MB` the container's memory (at least 32 MB, at
    most the server's ceiling; it covers the harness's few MB, and the
    compiler's too, as SandboxFusion's limit covers both steps).
    """
    settings = settings or RunCodeSettings()
    lang = request_language(body.language)
    if not body.run_timeout > 0:
        raise RunCodeRefused(f"run_timeout must be positive, not {body.run_timeout}")
    compiled = lang.first_step(program_run=True) is not None
    if compiled and not body.compile_timeout > 0:
        raise RunCodeRefused(f"compile_timeout must be positive, not {body.compile_timeout}")
    if body.stdin is not None and len(body.stdin.encode("utf-8", "surrogatepass")) > settings.max_stdin_bytes:
        raise RunCodeRefused(f"stdin is over the limit of {settings.max_stdin_bytes} bytes")
    binary_files = _files(body.files, settings.max_files_bytes)
    source = code_file(lang, body.code)
    if source in binary_files:
        raise RunCodeRefused(f"files may not use {source!r}: the code is written there")
    memory_mb = settings.max_memory_mb if body.memory_limit_MB <= 0 else min(body.memory_limit_MB, settings.max_memory_mb)
    update: dict[str, float | int] = {
        "timeout_s": min(float(body.run_timeout), settings.max_run_timeout_s),
        "memory_mb": max(memory_mb, 32),
    }
    if compiled:
        update["compile_timeout_s"] = min(float(body.compile_timeout), settings.max_compile_timeout_s)
    limits = settings.limits.model_copy(update=update)
    try:
        return RunRequest(files={source: body.code}, program=source, stdin=body.stdin, language=lang.name,
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


def run_code_response(result: RunResult, language_name: str = "python") -> RunCodeResponse:
    """A program run as SandboxFusion reports it.

    A compiled language's answer carries its compile step (`compile_result`);
    Python and JavaScript have no compile step, so theirs is None, as there
    (a JavaScript syntax error shows at run, as SandboxFusion's). Code that
    did not compile never ran: `run_result` None, status Failed and an empty
    message, SandboxFusion's exact shape, which verl reads as a compile error.

    Run timeout: run_result "TimeLimitExceeded" without a return code.
    Anything else finished: its return code decides Success (0) or Failed. A
    run stopped at a limit (memory, output) without a telling exit status
    reads as killed by SIGKILL, so that a client never takes it for success.
    """
    compiled = language(language_name).compile is not None
    if result.verdict is Verdict.COMPILE_ERROR:
        return RunCodeResponse(status=RunStatus.FAILED, message="", files=result.files,
                               compile_result=compile_result(result.compile, result.message))
    compiled_step = compile_result(result.compile, result.message) if compiled and result.compile is not None else None
    execution_time = result.test_duration_s or result.duration_s
    if result.verdict is Verdict.TIMEOUT:
        run = CommandRunResult(status=CommandRunStatus.TIME_LIMIT_EXCEEDED, execution_time=execution_time,
                               stdout=result.stdout, stderr=result.stderr)
        return RunCodeResponse(status=RunStatus.FAILED, message=result.message, compile_result=compiled_step,
                               run_result=run, files=result.files)
    return_code = result.exit_code
    stopped = result.verdict in (Verdict.OUT_OF_MEMORY, Verdict.OUTPUT_LIMIT, Verdict.KILLED)
    if return_code is None or (return_code == 0 and stopped):
        return_code = SIGKILL_RETURN_CODE
    run = CommandRunResult(status=CommandRunStatus.FINISHED, execution_time=execution_time, return_code=return_code,
                           stdout=result.stdout, stderr=result.stderr)
    return RunCodeResponse(status=RunStatus.SUCCESS if return_code == 0 else RunStatus.FAILED,
                           message=result.message, compile_result=compiled_step, run_result=run, files=result.files)


def compile_result(step: CompileResult | None, message: str = "") -> CommandRunResult:
    """The compile step as SandboxFusion reports its compile command: past
    its deadline "TimeLimitExceeded" without a return code, else "Finished"
    with the compiler's; a compiler stopped without a telling status (its
    output cap, the memory limit) reads as killed by SIGKILL, and a step that
    did not report as that with the judge's `message` as its stderr.

    >>> compile_result(CompileResult(returncode=1, stderr="error")).return_code
    1
    >>> compile_result(CompileResult(returncode=-9, timed_out=True, duration_s=2.0)).status.value
    'TimeLimitExceeded'
    """
    if step is None:
        return CommandRunResult(status=CommandRunStatus.FINISHED, return_code=SIGKILL_RETURN_CODE, stdout="",
                                stderr=message)
    if step.timed_out:
        return CommandRunResult(status=CommandRunStatus.TIME_LIMIT_EXCEEDED, execution_time=step.duration_s,
                                stdout=step.stdout, stderr=step.stderr)
    return_code = step.returncode
    if return_code is None or (return_code == 0 and not step.ok):
        return_code = SIGKILL_RETURN_CODE
    return CommandRunResult(status=CommandRunStatus.FINISHED, execution_time=step.duration_s,
                            return_code=return_code, stdout=step.stdout, stderr=step.stderr)


def refused(message: str) -> RunCodeResponse:
    """A request that was not run, in the response's usual shape."""
    return RunCodeResponse(status=RunStatus.SANDBOX_ERROR, message=message)
