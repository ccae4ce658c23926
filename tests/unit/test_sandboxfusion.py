"""`rewardbox.rewards.sandboxfusion`: SandboxFusion's `/run_code` models, and the mapping
from a request to a sandbox run and from a run to SandboxFusion's answer."""

import base64
import json

import pytest

from rewardbox.rewards.sandboxfusion import (
    CODE_FILE,
    CommandRunResult,
    RunCodeRefused,
    RunCodeRequest,
    RunCodeResponse,
    RunCodeSettings,
    refused,
    run_code_response,
    run_request,
)
from rewardbox.sandbox import RunResult, Verdict


def verl_payload(code: str, stdin: str | None, timeout: int = 10, memory_limit_mb: int = 1024,
                 language: str = "python") -> dict:
    """The body exactly as verl's `call_sandbox_api` builds it."""
    return json.loads(json.dumps({"compile_timeout": timeout, "run_timeout": timeout, "code": code, "stdin": stdin,
                                  "memory_limit_MB": memory_limit_mb, "language": language, "files": {},
                                  "fetch_files": []}))


def verl_reads(answer: dict) -> int | bool:
    """What verl's `_process_single_case` makes of an answer (our restatement of
    its branches): True/False for a finished run, -1 sandbox error, -2 runtime
    error, -3 timeout, -4 compile error. The expected output here is "3"."""
    status, compile_result, run = answer.get("status"), answer.get("compile_result"), answer.get("run_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if compile_result and (compile_result["status"] in ("Error", "TimeLimitExceeded")
                               or compile_result.get("return_code") != 0):
            return -4
        if not run:
            return -1
        if run["status"] == "TimeLimitExceeded":
            return -3
        if run["status"] == "Error" or (run["status"] == "Finished" and run.get("return_code") != 0):
            return -2
        return -1
    if status == "Success":
        if run and run["status"] == "Finished":
            return (run["stdout"] or "").rstrip("\n") == "3"
        return -1
    return -1


def answer(result: RunResult) -> dict:
    return json.loads(run_code_response(result).model_dump_json())


# The models, field by field against SandboxFusion's own.

def test_request_fields_and_defaults_are_sandboxfusions():
    body = RunCodeRequest(code="print(1)", language="python")

    assert body.model_dump() == {"code": "print(1)", "language": "python", "compile_timeout": 10, "run_timeout": 10,
                                 "memory_limit_MB": -1, "stdin": None, "files": {}, "fetch_files": [], "args": []}


def test_verl_body_parses_as_sent():
    body = RunCodeRequest.model_validate(verl_payload("print(input())", "1 2\n", timeout=4, memory_limit_mb=256))

    assert (body.code, body.stdin, body.run_timeout, body.compile_timeout, body.memory_limit_MB) == (
        "print(input())", "1 2\n", 4, 4, 256)


def test_unknown_request_keys_are_ignored_as_by_sandboxfusion():
    assert RunCodeRequest.model_validate({"code": "", "language": "python", "extra": 1}).code == ""


def test_response_fields_are_sandboxfusions():
    out = json.loads(RunCodeResponse(status="Success", message="", run_result=CommandRunResult(
        status="Finished", execution_time=0.1, return_code=0, stdout="3\n", stderr="")).model_dump_json())

    assert set(out) == {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    assert set(out["run_result"]) == {"status", "execution_time", "return_code", "stdout", "stderr"}
    assert out["compile_result"] is None and out["files"] == {}


@pytest.mark.parametrize("value", ["Success", "Failed", "SandboxError"])
def test_run_status_values(value):
    assert RunCodeResponse(status=value, message="").status.value == value


@pytest.mark.parametrize("value", ["Finished", "Error", "TimeLimitExceeded"])
def test_command_run_status_values(value):
    assert CommandRunResult(status=value).status.value == value


# Request -> sandbox run.

def test_code_becomes_a_program_run_with_stdin():
    run = run_request(RunCodeRequest.model_validate(verl_payload("print(input())", "1 2\n", timeout=3,
                                                                 memory_limit_mb=256)))

    assert run.program == CODE_FILE and run.files == {CODE_FILE: "print(input())"} and not run.tests
    assert run.stdin == "1 2\n"
    assert (run.limits.timeout_s, run.limits.memory_mb) == (3.0, 256)


@pytest.mark.parametrize("asked, memory_mb", [(-1, 2048), (0, 2048), (64, 64), (16, 32), (10**6, 2048)])
def test_memory_limit_is_bounded(asked, memory_mb):
    run = run_request(RunCodeRequest(code="", language="python", memory_limit_MB=asked))

    assert run.limits.memory_mb == memory_mb


def test_run_timeout_is_cut_to_the_servers_maximum():
    settings = RunCodeSettings(max_run_timeout_s=5)

    assert run_request(RunCodeRequest(code="", language="python", run_timeout=60), settings).limits.timeout_s == 5


def test_python3_is_python():
    assert run_request(RunCodeRequest(code="", language="python3")).program == CODE_FILE


# SandboxFusion's languages rewardbox does not run, a spelling it does not know (its names are
# case-sensitive), and none at all.
@pytest.mark.parametrize("language", ["php", "csharp", "typescript", "pytest", "go_test", "Python", "CPP", ""])
def test_other_languages_are_refused_naming_the_supported_ones(language):
    with pytest.raises(RunCodeRefused, match=f"language '{language}' is not supported: this rewardbox server runs "
                                             r"python \(python3, py\); cpp \(.*javascript \(js, node, nodejs\)"):
        run_request(RunCodeRequest(code="", language=language))


def test_files_go_beside_the_code_and_fetch_files_come_back():
    data = base64.b64encode(b"\x00\xff binary").decode()
    body = RunCodeRequest(code="", language="python", files={"data/in.bin": data, "skip": None,
                                                             "IGNORE_THIS_FILE.txt": data},
                          fetch_files=["out.txt", "data/res.txt"])

    run = run_request(body)

    assert run.binary_files == {"data/in.bin": data}  # None and IGNORE_THIS_FILE skipped, as SandboxFusion does
    assert run.fetch_files == ("out.txt", "data/res.txt")


@pytest.mark.parametrize("changes, reason", [
    ({"files": {"a.txt": "not base64!"}}, "files['a.txt'] is not base64"),
    ({"files": {"../escape.txt": ""}}, "must be relative"),
    ({"files": {"/etc/passwd": ""}}, "must be relative"),
    ({"files": {".hidden": ""}}, "must be relative"),
    ({"files": {"main.py": ""}}, "may not use 'main.py'"),
    ({"files": {"a": "", "a/b": ""}}, "needs a directory 'a'"),
    ({"fetch_files": ["/tmp/out.txt"]}, "must be relative"),
    ({"run_timeout": 0}, "run_timeout must be positive"),
    ({"stdin": "x" * 101}, "stdin is over the limit of 100 bytes"),
    ({"files": {"big": base64.b64encode(b"x" * 101).decode()}}, "over the limit of 100"),
])
def test_requests_that_cannot_run_are_refused_with_the_reason(changes, reason):
    settings = RunCodeSettings(max_stdin_bytes=100, max_files_bytes=100)

    with pytest.raises(RunCodeRefused, match=reason.replace("[", r"\[").replace("(", r"\(")):
        run_request(RunCodeRequest(code="", language="python", **changes), settings)


def test_refusal_has_the_usual_shape():
    out = json.loads(refused("language 'cpp' is not supported").model_dump_json())

    assert out["status"] == "SandboxError" and "cpp" in out["message"]
    assert out["run_result"] is None and out["compile_result"] is None


# Sandbox run -> SandboxFusion's answer, and what verl makes of it.

def test_finished_with_zero_is_success():
    out = answer(RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="3\n", test_duration_s=0.02, duration_s=0.4))

    assert out["status"] == "Success" and out["message"] == "" and out["compile_result"] is None
    assert out["run_result"] == {"status": "Finished", "execution_time": 0.02, "return_code": 0, "stdout": "3\n",
                                 "stderr": ""}
    assert verl_reads(out) is True


def test_wrong_output_is_still_success_for_verl_to_compare():
    out = answer(RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="4\n"))

    assert out["status"] == "Success" and verl_reads(out) is False


def test_exception_is_failed_with_return_code_and_stderr():
    out = answer(RunResult(verdict=Verdict.FAILED, exit_code=1, stderr="Traceback ...\nValueError: boom\n",
                           message="the program exited with status 1"))

    assert (out["status"], out["run_result"]["status"], out["run_result"]["return_code"]) == ("Failed", "Finished", 1)
    assert "ValueError: boom" in out["run_result"]["stderr"]
    assert verl_reads(out) == -2


def test_syntax_error_is_a_runtime_error_as_python_reports_it():
    out = answer(RunResult(verdict=Verdict.SYNTAX_ERROR, exit_code=1, stderr="SyntaxError: invalid syntax\n"))

    assert (out["status"], out["run_result"]["return_code"], out["compile_result"]) == ("Failed", 1, None)
    assert verl_reads(out) == -2


@pytest.mark.parametrize("exit_code, test_duration_s, execution_time", [(-9, 2.0, 2.0), (None, 0.0, 7.5)])
def test_timeout_is_time_limit_exceeded_without_return_code(exit_code, test_duration_s, execution_time):
    out = answer(RunResult(verdict=Verdict.TIMEOUT, exit_code=exit_code, stdout="partial", test_duration_s=test_duration_s,
                           duration_s=7.5))

    assert out["status"] == "Failed"
    assert out["run_result"] == {"status": "TimeLimitExceeded", "execution_time": execution_time, "return_code": None,
                                 "stdout": "partial", "stderr": ""}
    assert verl_reads(out) == -3


@pytest.mark.parametrize("verdict, exit_code, return_code", [
    (Verdict.OUT_OF_MEMORY, -9, -9),  # the cgroup killed the program
    (Verdict.OUT_OF_MEMORY, 1, 1),  # Python raised MemoryError first
    (Verdict.OUT_OF_MEMORY, None, -9),  # the harness itself was killed: no exit status reported
    (Verdict.OUT_OF_MEMORY, 137, 137),  # ... and the container's own status
    (Verdict.OUTPUT_LIMIT, 0, -9),  # stopped at the output limit, even if it had just exited 0
    (Verdict.KILLED, -11, -11),
])
def test_runs_stopped_at_a_limit_are_runtime_errors(verdict, exit_code, return_code):
    out = answer(RunResult(verdict=verdict, exit_code=exit_code, message="memory limit exceeded"))

    assert (out["status"], out["run_result"]["status"], out["run_result"]["return_code"]) == (
        "Failed", "Finished", return_code)
    assert out["message"] == "memory limit exceeded"
    assert verl_reads(out) == -2


def test_fetched_files_are_returned():
    out = answer(RunResult(verdict=Verdict.PASSED, exit_code=0, files={"out.txt": "aGk="}))

    assert out["files"] == {"out.txt": "aGk="}


def test_sandbox_error_is_minus_one_for_verl():
    assert verl_reads(json.loads(refused("engine down").model_dump_json())) == -1
