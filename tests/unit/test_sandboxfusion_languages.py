"""`/run_code` in every language of the table: a SandboxFusion request to a
sandbox run (language, code file, compile deadline) and a run with its compile
step back to SandboxFusion's answer, read as verl reads it. No Docker."""

import base64
import json

import pytest

from rewardbox.rewards.sandboxfusion import (
    LANGUAGES,
    RunCodeRefused,
    RunCodeRequest,
    RunCodeSettings,
    compile_result,
    run_code_response,
    run_request,
)
from rewardbox.sandbox import RunResult, Verdict
from rewardbox.sandbox.languages import LANGUAGES as TABLE
from rewardbox.sandbox.models import CompileResult
from tests.unit.test_sandboxfusion import verl_payload, verl_reads

SOLUTION = "import java.util.*;\n\npublic class Solution {\n    public static void main(String[] a) {}\n}\n"
COMPILED = [lang.name for lang in TABLE if lang.compile is not None]


def answer(result: RunResult, language: str) -> dict:
    return json.loads(run_code_response(result, language).model_dump_json())


# Request -> sandbox run.

@pytest.mark.parametrize("spelling", sorted({alias for lang in TABLE for alias in lang.aliases}))
def test_every_name_and_alias_of_the_table_runs_as_its_language(spelling):
    run = run_request(RunCodeRequest(code="", language=spelling))

    assert {alias for lang in TABLE if lang.name == run.language for alias in lang.aliases} >= {spelling}


@pytest.mark.parametrize("spelling, name", [("python", "python"), ("cpp", "cpp"), ("nodejs", "javascript"),
                                            ("go", "go"), ("java", "java"), ("rust", "rust"), ("python3", "python")])
def test_sandboxfusions_names_are_accepted(spelling, name):
    # The names verl's SUPPORTED_LANGUAGES and SandboxFusion's Language literal share with the table.
    assert run_request(RunCodeRequest.model_validate(verl_payload("", None, language=spelling))).language == name
    assert spelling in LANGUAGES


def test_every_sandboxfusion_name_of_the_table_is_accepted():
    assert {lang.sandboxfusion for lang in TABLE if lang.sandboxfusion} <= set(LANGUAGES)


@pytest.mark.parametrize("language, code, file", [
    ("python", "print(1)", "main.py"),
    ("cpp", "int main() {}", "main.cpp"),
    ("c++", "int main() {}", "main.cpp"),
    ("cpp20", "int main() {}", "main.cpp"),
    ("java", "class Main { public static void main(String[] a) {} }", "Main.java"),
    ("java", SOLUTION, "Solution.java"),  # SandboxFusion writes Main.java, where javac refuses it
    ("nodejs", "console.log(1)", "main.js"),
    ("golang", "package main\nfunc main() {}", "main.go"),
    ("rust", "fn main() {}", "main.rs"),
])
def test_the_code_is_written_to_its_languages_file_and_run_from_it(language, code, file):
    run = run_request(RunCodeRequest(code=code, language=language, stdin="1\n"))

    assert (run.files, run.program, run.stdin) == ({file: code}, file, "1\n")


def test_files_go_beside_the_code_in_another_language():
    data = base64.b64encode(b"5 7\n").decode()
    run = run_request(RunCodeRequest(code=SOLUTION, language="java", files={"Main.java": data, "in/x.txt": data}))

    assert run.binary_files == {"Main.java": data, "in/x.txt": data} and run.program == "Solution.java"


@pytest.mark.parametrize("language, code, file", [
    ("cpp", "int main() {}", "main.cpp"), ("java", SOLUTION, "Solution.java"), ("java", "", "Main.java"),
    ("nodejs", "", "main.js"), ("go", "", "main.go"), ("rust", "", "main.rs"), ("python", "", "main.py"),
])
def test_a_file_named_as_the_code_is_refused(language, code, file):
    with pytest.raises(RunCodeRefused, match=f"files may not use '{file}': the code is written there"):
        run_request(RunCodeRequest(code=code, language=language, files={file: ""}))


@pytest.mark.parametrize("language", COMPILED)
def test_compile_timeout_is_the_compile_steps_deadline_cut_to_the_servers_maximum(language):
    settings = RunCodeSettings(max_compile_timeout_s=20)

    asked = run_request(RunCodeRequest(code="", language=language, compile_timeout=7, run_timeout=3), settings)
    cut = run_request(RunCodeRequest(code="", language=language, compile_timeout=600), settings)

    assert (asked.limits.compile_timeout_s, asked.limits.timeout_s) == (7.0, 3.0)
    assert asked.deadline_s() == 7.0 + 3.0 + asked.limits.startup_grace_s  # the host waits for both steps
    assert cut.limits.compile_timeout_s == 20.0


def test_the_servers_compile_timeout_maximum_defaults_to_a_minute():
    assert run_request(RunCodeRequest(code="", language="cpp", compile_timeout=1e9)).limits.compile_timeout_s == 60.0


@pytest.mark.parametrize("language", ["python", "nodejs"])
def test_a_language_without_a_compile_step_ignores_compile_timeout(language):
    # verl sends compile_timeout = run_timeout for every language; Python's and JavaScript's program
    # runs have no first step, so the host's deadline does not wait for one.
    run = run_request(RunCodeRequest(code="", language=language, compile_timeout=0, run_timeout=3))

    assert run.deadline_s() == 3.0 + run.limits.startup_grace_s
    assert "compile_timeout_s" not in run.limits.model_fields_set


@pytest.mark.parametrize("value", [0, -1])
def test_a_compiled_languages_compile_timeout_must_be_positive(value):
    with pytest.raises(RunCodeRefused, match=f"compile_timeout must be positive, not {value}"):
        run_request(RunCodeRequest(code="", language="rust", compile_timeout=value))


# Sandbox run -> SandboxFusion's answer, and what verl makes of it.

OK_STEP = CompileResult(returncode=0, duration_s=0.8, stderr="main.cpp:3: warning: unused variable\n")


@pytest.mark.parametrize("language", COMPILED)
def test_a_compiled_program_carries_its_compile_result(language):
    out = answer(RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="3\n", test_duration_s=0.01, compile=OK_STEP),
                 language)

    assert out["status"] == "Success" and out["message"] == ""
    assert out["compile_result"] == {"status": "Finished", "execution_time": 0.8, "return_code": 0, "stdout": "",
                                     "stderr": "main.cpp:3: warning: unused variable\n"}
    assert out["run_result"] == {"status": "Finished", "execution_time": 0.01, "return_code": 0, "stdout": "3\n",
                                 "stderr": ""}
    assert verl_reads(out) is True


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_python_and_javascript_have_no_compile_result(language):
    out = answer(RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="3\n"), language)

    assert out["compile_result"] is None and verl_reads(out) is True


def test_a_javascript_syntax_error_is_a_runtime_error_as_sandboxfusion_reports_it():
    out = answer(RunResult(verdict=Verdict.FAILED, exit_code=1, stderr="SyntaxError: missing ) after argument list\n"),
                 "javascript")

    assert (out["status"], out["compile_result"], out["run_result"]["return_code"]) == ("Failed", None, 1)
    assert verl_reads(out) == -2


def test_a_failed_compile_is_sandboxfusions_exact_shape():
    step = CompileResult(returncode=1, duration_s=0.3, stderr="main.cpp:1:1: error: 'a' does not name a type\n")
    out = answer(RunResult(verdict=Verdict.COMPILE_ERROR, compile=step, duration_s=0.9,
                           message="the compiler exited with status 1: main.cpp:1:1: error: ..."), "cpp")

    assert out == {"status": "Failed", "message": "", "run_result": None, "executor_pod_name": None, "files": {},
                   "compile_result": {"status": "Finished", "execution_time": 0.3, "return_code": 1, "stdout": "",
                                      "stderr": "main.cpp:1:1: error: 'a' does not name a type\n"}}
    assert verl_reads(out) == -4


def test_a_compile_past_its_deadline_is_time_limit_exceeded_without_a_return_code():
    step = CompileResult(returncode=-9, timed_out=True, duration_s=2.01, stderr="partial")
    out = answer(RunResult(verdict=Verdict.COMPILE_ERROR, compile=step), "cpp")

    assert (out["status"], out["message"], out["run_result"]) == ("Failed", "", None)
    assert out["compile_result"] == {"status": "TimeLimitExceeded", "execution_time": 2.01, "return_code": None,
                                     "stdout": "", "stderr": "partial"}
    assert verl_reads(out) == -4


@pytest.mark.parametrize("step, return_code", [
    (CompileResult(returncode=0, output_truncated=True), -9),  # stopped at its output cap
    (CompileResult(returncode=None), -9),  # no status known
    (CompileResult(returncode=-9), -9),  # the memory limit
    (None, -9),  # the step did not report at all
])
def test_a_compiler_stopped_without_a_telling_status_reads_as_killed(step, return_code):
    out = answer(RunResult(verdict=Verdict.COMPILE_ERROR, compile=step, message="the compile step did not report"),
                 "java")

    assert (out["compile_result"]["status"], out["compile_result"]["return_code"]) == ("Finished", return_code)
    assert verl_reads(out) == -4
    if step is None:
        assert out["compile_result"]["stderr"] == "the compile step did not report"


@pytest.mark.parametrize("result, verl", [
    (RunResult(verdict=Verdict.TIMEOUT, exit_code=None, compile=OK_STEP), -3),
    (RunResult(verdict=Verdict.FAILED, exit_code=101, stderr="thread 'main' panicked", compile=OK_STEP), -2),
    (RunResult(verdict=Verdict.KILLED, exit_code=-11, compile=OK_STEP), -2),
    (RunResult(verdict=Verdict.OUT_OF_MEMORY, exit_code=0, compile=OK_STEP), -2),
    (RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="4\n", compile=OK_STEP), False),
], ids=["timeout", "panic", "segfault", "out-of-memory", "wrong"])
def test_a_compiled_program_that_fails_at_run_keeps_its_compile_result(result, verl):
    out = answer(result, "rust")

    assert out["compile_result"]["status"] == "Finished" and out["compile_result"]["return_code"] == 0
    assert verl_reads(out) == verl


def test_a_compiled_run_stopped_before_its_compile_reported_has_no_compile_result():
    # Nothing known of the compile (the harness never reported): no compile result is made up.
    out = answer(RunResult(verdict=Verdict.TIMEOUT, duration_s=9.0), "go")

    assert out["compile_result"] is None and out["run_result"]["status"] == "TimeLimitExceeded"
    assert verl_reads(out) == -3


def test_compile_result_of_a_step():
    assert compile_result(CompileResult(returncode=1, duration_s=0.5, stdout="o", stderr="e")).model_dump() == {
        "status": "Finished", "execution_time": 0.5, "return_code": 1, "stdout": "o", "stderr": "e"}
