"""The judge on a compiled language's report (images/python/harness/rbcompile.py):
a failed compile step is the code's compile_error, whatever limit it hit, and
every result of such a run carries the step (`RunResult.compile`)."""

import base64

import pytest

from rewardbox.sandbox import Verdict
from rewardbox.sandbox.models import CompileResult
from rewardbox.sandbox.protocol import PHASE_COMPILE, PROTOCOL_VERSION, Report, clean_report
from rewardbox.sandbox.verdict import MESSAGE_HEAD_CHARS, ContainerFacts, judge


def step(returncode=0, stderr=b"", timed_out=False, output_exceeded=False, duration_s=0.25):
    return {"returncode": returncode, "timed_out": timed_out, "output_exceeded": output_exceeded,
            "duration_s": duration_s, "stdout_b64": "", "stderr_b64": base64.b64encode(stderr).decode(),
            "ok": returncode == 0 and not timed_out and not output_exceeded}


def report(**fields):
    return Report.model_validate(clean_report({"version": PROTOCOL_VERSION, **fields}))


ERROR = b"main.cpp:1:19: error: 'cout' is not a member of 'std'\n"


@pytest.mark.parametrize("record, facts, message", [
    pytest.param(step(1, ERROR), ContainerFacts(), "the compiler exited with status 1: " + ERROR.decode().strip(),
                 id="error"),
    pytest.param(step(1, ERROR), ContainerFacts(oom_killed=True), "the compiler ran out of memory",
                 id="out-of-memory-while-compiling"),
    pytest.param(step(-9, timed_out=True, duration_s=10.0), ContainerFacts(), "the compiler ran past its deadline "
                 "(10.0 s)", id="compile-bomb-timeout"),
    pytest.param(step(-9, output_exceeded=True), ContainerFacts(output_capped=True),
                 "the compiler wrote more than its output cap", id="diagnostics-flood"),
    pytest.param(step(-9), ContainerFacts(), "the compiler exited with signal 9", id="killed"),
])
def test_a_failed_compile_is_a_compile_error_before_any_limit(record, facts, message):
    result = judge(report(phase=PHASE_COMPILE, compile=record), facts)

    assert (result.verdict, result.message) == (Verdict.COMPILE_ERROR, message)
    assert result.compile is not None and result.compile.returncode == record["returncode"]
    assert result.tests == ()


def test_a_long_compiler_message_keeps_its_head_and_the_result_keeps_it_whole():
    error = b"e" * 10_000
    result = judge(report(phase=PHASE_COMPILE, compile=step(1, error)), ContainerFacts())

    assert result.message.startswith("the compiler exited with status 1: eee") and len(result.message) < 2200
    assert f"[{10_000 - MESSAGE_HEAD_CHARS} more characters]" in result.message
    assert result.compile is not None and result.compile.stderr == error.decode()


def test_a_compiled_program_run_carries_its_compile_step():
    out = base64.b64encode(b"4\n").decode()
    result = judge(report(phase="program", compile=step(0, b"warning: unused\n"), returncode=0, stdout_b64=out,
                          stderr_b64=""), ContainerFacts())

    assert (result.verdict, result.stdout) == (Verdict.PASSED, "4\n")
    assert result.compile == CompileResult(returncode=0, duration_s=0.25, stderr="warning: unused\n")
    assert result.compile.ok


def test_a_python_run_has_no_compile_step():
    result = judge(report(phase="program", returncode=0, stdout_b64="", stderr_b64=""), ContainerFacts())
    assert result.compile is None


@pytest.mark.parametrize("record", [
    {"returncode": "1", "timed_out": "yes", "duration_s": "slow", "stderr_b64": "not base64!"},
    {"returncode": True, "stderr_b64": 7},
    {},
])
def test_a_compile_record_of_odd_types_still_gives_a_verdict(record):
    result = judge(report(phase=PHASE_COMPILE, compile=record), ContainerFacts())
    assert result.verdict is Verdict.COMPILE_ERROR
    assert result.compile == CompileResult()
    assert result.model_dump_json()
