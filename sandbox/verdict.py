"""Turns what the host saw and what the harness reported into a `RunResult`.
A pure function: no Docker, no clock."""

import base64
import binascii
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from rewardbox.sandbox.models import CompileResult, Outcome, RunResult, TestResult, Verdict
from rewardbox.sandbox.protocol import (
    PHASE_COMPILE,
    PHASE_HARNESS_ERROR,
    PHASE_PROGRAM,
    PHASE_SYNTAX,
    Record,
    Report,
    safe_text,
)

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}
# rbcheck.OutOfMemory: a generated test whose worker the kernel's OOM killer took.
_MEMORY_ERRORS = {"MemoryError", "rbcheck.OutOfMemory"}
# A generated test whose solution process ended (exit, signal, any thread) or
# broke the protocol without answering: a crash, whatever the other tests did,
# so that exiting never scores above the penalty it avoids.
_PROCESS_ENDED = {"rbcheck.WorkerError"}
# Of a compiler's message, the head the verdict's message keeps (the whole is the result's `compile`).
MESSAGE_HEAD_CHARS = 2000


class ContainerFacts(BaseModel):
    """What the host observed, independent of anything the container said."""

    model_config = ConfigDict(frozen=True)

    deadline_hit: bool = False
    oom_killed: bool = False
    exit_code: int | None = None
    output_capped: bool = False
    duration_s: float = 0.0
    stderr: str = ""


def judge(report: Report | None, facts: ContainerFacts) -> RunResult:
    """The verdict of one run.

    Order matters: a limit the host enforced explains everything after it, so
    limits come first; then what the harness saw; a missing or unsigned report
    means the harness did not finish, which the code under test caused.
    """
    records = report.records if report is not None else []
    tests = tuple(_test_results(records))
    # The report again, narrowed for the type checker, when it is a program run's.
    program_report = report if report is not None and report.phase == PHASE_PROGRAM else None
    sent = report.model_fields_set if report is not None else set()
    common: dict[str, Any] = {
        "tests": tests,
        "duration_s": facts.duration_s,
        "test_duration_s": report.duration_s if report is not None else 0.0,
        "exit_code": report.returncode if report is not None and "returncode" in sent else facts.exit_code,
        "stdout": _text(program_report, "stdout") if program_report is not None else (
            report.stdout if report is not None else ""),
        "stderr": _text(program_report, "stderr") if program_report is not None else (
            report.stderr if report is not None and "stderr" in sent else facts.stderr),
    }
    if program_report is not None:
        common["files"] = {str(k): v for k, v in (program_report.files or {}).items() if isinstance(v, str)}
    step = _compile_result(report.compile) if report is not None and report.compile is not None else None
    common["compile"] = step

    def result(verdict: Verdict, message: str = "", **extra: Any) -> RunResult:
        return RunResult(verdict=verdict, message=message, **{**common, **extra})

    if report is not None and report.phase == PHASE_COMPILE:
        # Before the limits: a compiler killed by the memory limit, its deadline or
        # its output cap is the code's compile error (nothing of it ran).
        return result(Verdict.COMPILE_ERROR, _compile_message(step, facts.oom_killed))
    collect_errors = [r for r in records if r.event == "collect_error"]
    exc_types = {r.exc_type for r in records if r.exc_type}
    # A program that did not compile never ran: a MemoryError on its stderr is the parser's (too deeply nested).
    died_of_memory_error = (program_report is not None and not program_report.syntax_error
                            and _died_of_memory_error(common["exit_code"], common["stderr"]))
    if facts.oom_killed or exc_types & _MEMORY_ERRORS or died_of_memory_error:
        return result(Verdict.OUT_OF_MEMORY, "memory limit exceeded")
    if facts.deadline_hit or (report is not None and report.timed_out):
        return result(Verdict.TIMEOUT, "deadline exceeded")
    if facts.output_capped or (report is not None and report.output_exceeded):
        return result(Verdict.OUTPUT_LIMIT, "output limit exceeded", output_truncated=True)
    if report is None:
        return result(Verdict.KILLED, f"the harness did not report (container exit code {facts.exit_code})")
    if report.phase == PHASE_HARNESS_ERROR and report.harness_attacked:
        return result(Verdict.KILLED, "the run changed the harness's limits or scheduling, and the harness failed: "
                                      f"{report.message}")
    if program_report is not None:
        return _program_verdict(program_report, common["exit_code"], result)
    if report.phase == PHASE_SYNTAX:
        error = report.syntax_error or {}
        return result(Verdict.SYNTAX_ERROR, f"{error.get('type', 'SyntaxError')}: {error.get('message', '')}")
    if collect_errors:
        first = collect_errors[0]
        verdict = Verdict.IMPORT_ERROR if first.exc_type in _IMPORT_ERRORS else Verdict.COLLECTION_ERROR
        return result(verdict, first.message or "")
    collected = [r for r in records if r.event == "collected"]
    returncode = report.returncode
    if not collected and isinstance(returncode, int) and returncode < 0:
        # Killed by a signal while collecting: the solution's process (same uid) can send one.
        return result(Verdict.KILLED, f"the test process was killed by signal {-returncode} before it collected "
                                      "the tests")
    if not collected or not collected[0].nodeids:
        last_line = (report.stdout or "").strip().rsplit("\n", 1)[-1]
        return result(Verdict.COLLECTION_ERROR,
                      f"pytest collected no tests (exit status {report.returncode}): {last_line}"[:2000])
    # Crashes before tampering: editing the tests must not turn an exit's penalty into a plain failure.
    tampered = bool(report.rejected_records or report.tests_modified)
    if isinstance(returncode, int) and returncode < 0:
        return result(Verdict.KILLED, f"the test process was killed by signal {-returncode}", tampered=tampered)
    ended = next((t for t in tests if t.exc_type in _PROCESS_ENDED), None)
    if ended is not None:
        return result(Verdict.KILLED, f"the solution's process ended without answering ({ended.nodeid}): "
                                      f"{ended.message or ''}"[:2000], tampered=tampered)
    unreported = set(collected[0].nodeids) - {t.nodeid for t in tests}
    if unreported:
        # The deadline is checked above: an exit before it, by the code under test, is a crash.
        return result(Verdict.KILLED, f"{len(unreported)} collected test(s) never reported (the test process "
                                      f"ended early, exit status {returncode})", tampered=tampered)
    if tampered:
        failed = tuple(t.model_copy(update={"outcome": Outcome.FAILED}) for t in tests)
        return result(Verdict.FAILED, "tampering detected: forged results or edited tests",
                      tests=failed, tampered=True)
    passed = bool(tests) and all(t.outcome is Outcome.PASSED for t in tests)
    return result(Verdict.PASSED if passed else Verdict.FAILED)


def _program_verdict(report: Report, returncode: int | None, result: Callable[..., RunResult]) -> RunResult:
    """A program run's verdict: its exit status, and whether it compiled."""
    omitted = report.files_omitted or []
    note = f"; fetch_files over the size budget, left out: {', '.join(map(str, omitted))}" if omitted else ""
    error = report.syntax_error
    if error:
        return result(Verdict.SYNTAX_ERROR, f"{error.get('type', 'SyntaxError')}: {error.get('message', '')}{note}")
    if not isinstance(returncode, int):
        return result(Verdict.KILLED, f"the harness reported no exit status{note}")
    if returncode < 0:
        return result(Verdict.KILLED, f"the program was killed by signal {-returncode}{note}")
    if returncode == 0:
        return result(Verdict.PASSED, note.removeprefix("; "))
    return result(Verdict.FAILED, f"the program exited with status {returncode}{note}")


def _compile_result(record: dict[str, Any]) -> CompileResult:
    """The harness's record of a compile step (rbcompile.py) as a result; a
    field of another type (the record is the harness's, signed) reads as unknown."""
    def flag(key: str) -> bool:
        return record.get(key) is True

    returncode, duration = record.get("returncode"), record.get("duration_s")
    return CompileResult(
        returncode=returncode if isinstance(returncode, int) and not isinstance(returncode, bool) else None,
        timed_out=flag("timed_out"), output_truncated=flag("output_exceeded"),
        duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
        stdout=_decoded(record.get("stdout_b64")), stderr=_decoded(record.get("stderr_b64")))


def _compile_message(step: CompileResult | None, oom_killed: bool) -> str:
    """What went wrong while compiling, as a person (or a model) reads it."""
    if step is None:
        return "the compile step did not report"
    if step.timed_out:
        return f"the compiler ran past its deadline ({step.duration_s:.1f} s)"
    if step.output_truncated:
        return "the compiler wrote more than its output cap"
    if oom_killed:
        return "the compiler ran out of memory"
    status = f"signal {-step.returncode}" if step.returncode is not None and step.returncode < 0 \
        else f"status {step.returncode}"
    head = safe_text((step.stderr or step.stdout).strip(), MESSAGE_HEAD_CHARS)
    return f"the compiler exited with {status}" + (f": {head}" if head else "")


def _died_of_memory_error(exit_code: int | None, stderr: str) -> bool:
    """An uncaught MemoryError: Python's last stderr line names it. The program
    could print that line itself, but then it failed on its own anyway."""
    if exit_code in (0, None):
        return False
    lines = stderr.rstrip().rsplit("\n", 1)
    return lines[-1].startswith("MemoryError")


def _text(report: Report, stream: str) -> str:
    return _decoded(getattr(report, f"{stream}_b64"))


def _decoded(data: object) -> str:
    """Base64 text of the harness's as UTF-8 (invalid bytes replaced); "" for anything else."""
    if not isinstance(data, str):
        return ""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _test_results(records: list[Record]) -> Iterator[TestResult]:
    for record in records:
        # A record without a nodeid or outcome is no test's (a forged one, say): dropped.
        if record.event != "test" or "nodeid" not in record.model_fields_set or record.outcome is None:
            continue
        try:
            yield TestResult(
                nodeid=str(record.nodeid),
                name=record.name,
                cls=record.cls,
                outcome=Outcome(record.outcome),
                duration_s=float(record.duration_s or 0.0),
                message=record.message,
                exc_type=record.exc_type,
            )
        except (ValueError, TypeError):
            continue
