"""`rewardbox.sandbox.verdict.judge`: host facts + harness report -> `RunResult`, one branch at a time."""

import base64
import hashlib
import hmac
import json

import pytest

from rewardbox.sandbox import Outcome, RunResult, Verdict, verdict
from rewardbox.sandbox.errors import HarnessError
from rewardbox.sandbox.protocol import PROTOCOL_VERSION, REPORT_PREFIX, Report, parse_report, validate_report
from rewardbox.sandbox.verdict import ContainerFacts


def judge(rep: dict | Report | None, facts: ContainerFacts) -> RunResult:
    """`verdict.judge` of a report written here as the wire's dict (of this
    protocol version unless it says otherwise), read as the host reads it."""
    if isinstance(rep, dict):
        rep = validate_report({"version": PROTOCOL_VERSION, **rep})
    return verdict.judge(rep, facts)


NODE_A = "test_solution.py::test_a"
NODE_B = "test_solution.py::test_b"


def collected(*nodeids: str) -> dict:
    return {"event": "collected", "nodeids": list(nodeids)}


def outcome_record(nodeid: str, outcome: str, exc_type: str | None = None, **extra) -> dict:
    return {"event": "test", "nodeid": nodeid, "name": nodeid.rsplit("::", 1)[-1].split("[")[0], "cls": None,
            "outcome": outcome, "duration_s": 0.01, "message": None if outcome == "passed" else "boom",
            "exc_type": exc_type, **extra}


def report(*records: dict, finished: bool = True, **fields) -> dict:
    """A pytest-phase report as the supervisor sends it."""
    end = [{"event": "finished", "exitstatus": fields.get("returncode", 0)}] if finished else []
    return {"version": PROTOCOL_VERSION, "phase": "pytest", "returncode": 0, "timed_out": False, "output_exceeded": False,
            "duration_s": 0.25, "stdout": "..\n2 passed in 0.01s", "stderr": "", "rejected_records": 0,
            "tests_modified": False, "records": [*records, *end], **fields}


PASSING = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"), outcome_record(NODE_B, "passed"))
HALF = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"),
              outcome_record(NODE_B, "failed", "AssertionError"), returncode=1)
CLEAN = ContainerFacts(exit_code=0, duration_s=1.5)


@pytest.mark.parametrize("rep, facts, verdict", [
    # Limits the host enforced come first: they explain everything after them.
    pytest.param(PASSING, ContainerFacts(oom_killed=True, exit_code=137), Verdict.OUT_OF_MEMORY, id="oom-killed"),
    pytest.param(None, ContainerFacts(oom_killed=True, exit_code=137), Verdict.OUT_OF_MEMORY, id="oom-no-report"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "MemoryError"), returncode=1), CLEAN,
                 Verdict.OUT_OF_MEMORY, id="memory-error-in-test"),
    pytest.param(report({"event": "collect_error", "nodeid": "test_solution.py", "exc_type": "MemoryError",
                         "message": "MemoryError"}, returncode=2), CLEAN,
                 Verdict.OUT_OF_MEMORY, id="memory-error-at-import"),
    pytest.param(PASSING, ContainerFacts(oom_killed=True, deadline_hit=True), Verdict.OUT_OF_MEMORY,
                 id="oom-beats-deadline"),
    pytest.param(None, ContainerFacts(deadline_hit=True, exit_code=137), Verdict.TIMEOUT, id="deadline-hit"),
    pytest.param(PASSING, ContainerFacts(deadline_hit=True), Verdict.TIMEOUT, id="deadline-beats-report"),
    pytest.param(report(collected(NODE_A), timed_out=True, returncode=-9), CLEAN, Verdict.TIMEOUT,
                 id="report-timed-out"),
    pytest.param(None, ContainerFacts(deadline_hit=True, output_capped=True), Verdict.TIMEOUT,
                 id="deadline-beats-output"),
    pytest.param(None, ContainerFacts(output_capped=True, exit_code=137), Verdict.OUTPUT_LIMIT, id="output-capped"),
    pytest.param(report(collected(NODE_A), output_exceeded=True, returncode=-9), CLEAN, Verdict.OUTPUT_LIMIT,
                 id="report-output-exceeded"),
    # Then what the harness saw.
    pytest.param(None, ContainerFacts(exit_code=0), Verdict.KILLED, id="no-report-exit-0"),
    pytest.param(None, ContainerFacts(exit_code=137), Verdict.KILLED, id="no-report-exit-137"),
    pytest.param({"version": PROTOCOL_VERSION, "phase": "syntax",
                  "syntax_error": {"file": "solution.py", "type": "SyntaxError", "message": "invalid syntax"}},
                 CLEAN, Verdict.SYNTAX_ERROR, id="syntax"),
    pytest.param(report({"event": "collect_error", "nodeid": "test_solution.py", "exc_type": "ImportError",
                         "message": "cannot import name 'add'"}, collected(), returncode=2), CLEAN,
                 Verdict.IMPORT_ERROR, id="import-error"),
    pytest.param(report({"event": "collect_error", "nodeid": "test_solution.py", "exc_type": "ModuleNotFoundError",
                         "message": "No module named 'numpy'"}, collected(), returncode=2), CLEAN,
                 Verdict.IMPORT_ERROR, id="module-not-found"),
    pytest.param(report({"event": "collect_error", "nodeid": "test_solution.py", "exc_type": "NameError",
                         "message": "name 'x' is not defined"}, collected(), returncode=2), CLEAN,
                 Verdict.COLLECTION_ERROR, id="other-collect-error"),
    pytest.param(report({"event": "collect_error", "nodeid": "test_solution.py", "exc_type": None,
                         "message": "???"}, collected(), returncode=2), CLEAN,
                 Verdict.COLLECTION_ERROR, id="collect-error-without-type"),
    pytest.param(report(collected(), returncode=5, stdout="\nno tests ran in 0.01s\n"), CLEAN,
                 Verdict.COLLECTION_ERROR, id="collected-empty"),
    pytest.param(report(returncode=4, stdout="ERROR: usage"), CLEAN, Verdict.COLLECTION_ERROR,
                 id="no-collected-record"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "passed"), returncode=-11), CLEAN, Verdict.KILLED,
                 id="negative-returncode"),
    pytest.param(PASSING, CLEAN, Verdict.PASSED, id="all-passed"),
    pytest.param(HALF, CLEAN, Verdict.FAILED, id="some-failed"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "skipped")), CLEAN, Verdict.FAILED,
                 id="skipped-is-not-passed"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "xfailed")), CLEAN, Verdict.FAILED,
                 id="xfailed-is-not-passed"),
    pytest.param(report(collected(NODE_A), returncode=0), CLEAN, Verdict.KILLED, id="collected-but-no-test-records"),
    # A generated test whose solution process ended without answering: a crash, whatever else passed.
    pytest.param(report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"),
                        outcome_record(NODE_B, "failed", "rbcheck.WorkerError"), returncode=1), CLEAN,
                 Verdict.KILLED, id="worker-ended"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "rbcheck.WorkerError"), returncode=1),
                 ContainerFacts(deadline_hit=True), Verdict.TIMEOUT, id="deadline-beats-worker-ended"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "rbcheck.OutOfMemory"), returncode=1),
                 CLEAN, Verdict.OUT_OF_MEMORY, id="worker-oom-killed"),
    # Failures that are the solution's own answer stay failures.
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "rbcheck.CaseTimeout"), returncode=1),
                 CLEAN, Verdict.FAILED, id="case-timeout-is-graded-later"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "SystemExit"), returncode=1),
                 CLEAN, Verdict.FAILED, id="pytest-caught-system-exit"),
])
def test_verdicts(rep, facts, verdict):
    assert judge(rep, facts).verdict is verdict


@pytest.mark.parametrize("tamper", [
    pytest.param({"rejected_records": 3}, id="rejected-records"),
    pytest.param({"tests_modified": True}, id="tests-modified"),
])
def test_tampering_fails_every_test(tamper):
    rep = {**PASSING, **tamper}

    result = judge(rep, CLEAN)

    assert result.verdict is Verdict.FAILED
    assert result.tampered is True
    assert "tampering" in result.message
    assert [t.nodeid for t in result.tests] == [NODE_A, NODE_B]
    assert [t.outcome for t in result.tests] == [Outcome.FAILED, Outcome.FAILED]


def test_untampered_run_is_not_flagged():
    result = judge(PASSING, CLEAN)

    assert result.tampered is False
    assert [t.outcome for t in result.tests] == [Outcome.PASSED, Outcome.PASSED]


def test_messages_say_what_happened():
    syntax = {"version": PROTOCOL_VERSION, "phase": "syntax",
              "syntax_error": {"type": "IndentationError", "message": "unexpected indent (solution.py, line 2)"}}
    import_error = report({"event": "collect_error", "exc_type": "ImportError", "message": "cannot import name 'f'"})

    assert judge(None, ContainerFacts(exit_code=139)).message == "the harness did not report (container exit code 139)"
    assert judge(syntax, CLEAN).message == "IndentationError: unexpected indent (solution.py, line 2)"
    assert judge({"phase": "syntax"}, CLEAN).message == "SyntaxError: "
    assert judge(import_error, CLEAN).message == "cannot import name 'f'"
    assert judge(report(collected(), returncode=5, stdout="\nno tests ran in 0.01s\n"), CLEAN).message == \
        "pytest collected no tests (exit status 5): no tests ran in 0.01s"
    assert judge(report(collected(NODE_A), returncode=-9), CLEAN).message == "the test process was killed by signal 9"
    assert judge(None, ContainerFacts(oom_killed=True)).message == "memory limit exceeded"
    assert judge(None, ContainerFacts(deadline_hit=True)).message == "deadline exceeded"
    assert judge(PASSING, CLEAN).message == ""


def test_output_limit_flags_truncation():
    assert judge(None, ContainerFacts(output_capped=True)).output_truncated is True
    assert judge(PASSING, CLEAN).output_truncated is False


def test_result_carries_report_and_host_facts():
    rep = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"),
                 outcome_record(NODE_B, "failed", "AssertionError", cls="TestX", duration_s=0.5,
                                message="assert 1 == 2"),
                 returncode=1, stdout="F.", stderr="warn", duration_s=0.75)

    result = judge(rep, ContainerFacts(exit_code=0, duration_s=2.0, stderr="host stderr"))

    assert isinstance(result, RunResult)
    assert result.duration_s == 2.0
    assert result.test_duration_s == 0.75
    assert result.exit_code == 1  # pytest's status, not the container's
    assert (result.stdout, result.stderr) == ("F.", "warn")
    second = result.tests[1]
    assert (second.nodeid, second.name, second.cls) == (NODE_B, "test_b", "TestX")
    assert (second.outcome, second.duration_s, second.message, second.exc_type) == \
        (Outcome.FAILED, 0.5, "assert 1 == 2", "AssertionError")


def test_without_report_the_host_facts_are_used():
    result = judge(None, ContainerFacts(exit_code=137, duration_s=3.0, stderr="Killed"))

    assert (result.exit_code, result.stderr, result.stdout, result.duration_s) == (137, "Killed", "", 3.0)
    assert result.tests == ()
    assert result.test_duration_s == 0.0


def test_malformed_test_records_are_dropped():
    rep = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"),
                 {"event": "test", "outcome": "passed"},  # no nodeid
                 {"event": "test", "nodeid": NODE_B, "outcome": "won"},  # unknown outcome
                 {"event": "test", "nodeid": NODE_B, "outcome": "passed", "duration_s": "fast"},
                 {"event": "other", "nodeid": NODE_B, "outcome": "passed"})

    result = judge(rep, CLEAN)

    assert [t.nodeid for t in result.tests] == [NODE_A]


@pytest.mark.parametrize("returncode, finished", [
    pytest.param(0, False, id="os-exit-0"),  # os._exit(0), e.g. from a watchdog thread
    pytest.param(3, False, id="os-exit-3"),
    pytest.param(2, True, id="session-interrupted"),  # pytest.exit() or KeyboardInterrupt: the session stops
])
def test_collected_test_without_a_record_is_a_crash(returncode, finished):
    # test_a passes, then the code under test ends the process before test_b reports: a
    # crash (-1.0), never a plain failure (0.0) above the timeout (-0.5) the exit may have avoided.
    rep = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"), returncode=returncode,
                 finished=finished)

    result = judge(rep, CLEAN)

    assert result.verdict is Verdict.KILLED
    assert result.message == f"1 collected test(s) never reported (the test process ended early, exit status {returncode})"
    assert [t.outcome for t in result.tests] == [Outcome.PASSED]


def test_the_deadline_beats_the_crash_of_unreported_tests():
    # The harness's deadline stopped the tests: a timeout, with what passed before it.
    rep = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"), returncode=-9, timed_out=True,
                 finished=False)

    result = judge(rep, CLEAN)

    assert result.verdict is Verdict.TIMEOUT
    assert [(t.nodeid, t.outcome) for t in result.tests] == [(NODE_A, Outcome.PASSED)]


@pytest.mark.parametrize("tamper", [{"rejected_records": 1}, {"tests_modified": True}])
@pytest.mark.parametrize("crash", [
    pytest.param(report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"), finished=False),
                 id="unreported"),
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "rbcheck.WorkerError")), id="worker-ended"),
    pytest.param(report(collected(NODE_A), returncode=-9), id="signal"),
])
def test_tampering_does_not_turn_a_crash_into_a_failure(crash, tamper):
    result = judge({**crash, **tamper}, CLEAN)

    assert result.verdict is Verdict.KILLED
    assert result.tampered is True


def test_a_worker_that_ended_names_the_test():
    rep = report(collected(NODE_A, NODE_B), outcome_record(NODE_A, "passed"),
                 outcome_record(NODE_B, "failed", "rbcheck.WorkerError",
                                message="rbcheck.WorkerError: the solution's process ended (status 0) before answering"))

    assert judge(rep, CLEAN).message == (f"the solution's process ended without answering ({NODE_B}): "
                                         "rbcheck.WorkerError: the solution's process ended (status 0) before answering")


def test_container_facts_are_frozen():
    with pytest.raises(ValueError, match="frozen"):
        CLEAN.oom_killed = True
    assert CLEAN.oom_killed is False


def program_report(returncode: int = 0, stdout: bytes = b"", stderr: bytes = b"", **fields) -> dict:
    """A program-run report as the supervisor sends it: output base64."""
    return {"version": PROTOCOL_VERSION, "phase": "program", "returncode": returncode, "timed_out": False,
            "output_exceeded": False,
            "duration_s": 0.05, "stdout_b64": base64.b64encode(stdout).decode(),
            "stderr_b64": base64.b64encode(stderr).decode(), "output_bytes": len(stdout) + len(stderr),
            "syntax_error": None, "files": {}, "files_omitted": [], **fields}


@pytest.mark.parametrize("rep, facts, verdict, message", [
    pytest.param(program_report(0, b"3\n"), CLEAN, Verdict.PASSED, "", id="exit-0"),
    pytest.param(program_report(1, stderr=b"ValueError: boom\n"), CLEAN, Verdict.FAILED,
                 "the program exited with status 1", id="exit-1"),
    pytest.param(program_report(-11), CLEAN, Verdict.KILLED, "the program was killed by signal 11", id="signal"),
    pytest.param(program_report(1, syntax_error={"type": "SyntaxError", "message": "invalid syntax (main.py, line 1)"}),
                 CLEAN, Verdict.SYNTAX_ERROR, "SyntaxError: invalid syntax (main.py, line 1)", id="syntax"),
    pytest.param(program_report(1, stderr=b"Traceback ...\nMemoryError\n"), CLEAN, Verdict.OUT_OF_MEMORY,
                 "memory limit exceeded", id="memory-error"),
    pytest.param(program_report(0, stderr=b"MemoryError\n"), CLEAN, Verdict.PASSED, "",
                 id="memory-error-printed-then-exit-0"),
    pytest.param(program_report(1, stderr=b"Traceback ...\nMemoryError\n",
                                syntax_error={"type": "MemoryError", "message": "too deeply nested"}),
                 CLEAN, Verdict.SYNTAX_ERROR, "MemoryError: too deeply nested", id="parser-memory-error"),
    pytest.param(program_report(-9), ContainerFacts(oom_killed=True, exit_code=0), Verdict.OUT_OF_MEMORY,
                 "memory limit exceeded", id="oom-killed"),
    pytest.param(program_report(-9, timed_out=True), CLEAN, Verdict.TIMEOUT, "deadline exceeded", id="timed-out"),
    pytest.param(program_report(-9, output_exceeded=True), CLEAN, Verdict.OUTPUT_LIMIT, "output limit exceeded",
                 id="output-exceeded"),
    pytest.param(program_report(0, files_omitted=["big.bin"]), CLEAN, Verdict.PASSED,
                 "fetch_files over the size budget, left out: big.bin", id="files-omitted"),
])
def test_program_verdicts(rep, facts, verdict, message):
    result = judge(rep, facts)

    assert (result.verdict, result.message) == (verdict, message)
    assert result.tests == ()


def test_program_result_carries_its_output_exit_status_and_files():
    rep = program_report(3, b"out \xff\n", b"err\n", duration_s=0.25, files={"out.txt": "aGk="})

    result = judge(rep, ContainerFacts(exit_code=0, duration_s=1.5, stderr="host stderr"))

    assert (result.stdout, result.stderr) == ("out \ufffd\n", "err\n")  # bytes that are not UTF-8 are replaced
    assert (result.exit_code, result.test_duration_s, result.duration_s) == (3, 0.25, 1.5)
    assert result.files == {"out.txt": "aGk="}


def test_program_output_that_is_not_base64_is_dropped():
    result = judge(program_report(0, stdout_b64="not base64!", stderr_b64=None), CLEAN)

    assert (result.stdout, result.stderr) == ("", "")


def test_a_harness_failure_the_run_caused_is_the_runs_verdict():
    """The run lowered the harness's limits (prlimit, same user) and the harness
    failed: killed, as if it had killed the harness; never a failure of ours
    that would leave the sample unscored."""
    attacked = {"version": PROTOCOL_VERSION, "phase": "harness_error", "message": "OSError: [Errno 24] Too many open files",
                "harness_attacked": True}

    result = judge(attacked, CLEAN)

    assert result.verdict is Verdict.KILLED
    assert result.message == ("the run changed the harness's limits or scheduling, and the harness failed: "
                              "OSError: [Errno 24] Too many open files")


# -- text from the container: every result serialises -------------------------------------

BAD = "\ud800 lone \udfff"


def received(rep: dict) -> dict:
    """`rep` as the host receives it: the harness's JSON (which escapes a lone
    surrogate and so lets it through) read back by parse_report."""
    body = json.dumps(rep, separators=(",", ":")).encode()
    return parse_report(REPORT_PREFIX + hmac.new(b"n", body, hashlib.sha256).hexdigest().encode() + b" " + body, "n")


@pytest.mark.parametrize("rep, verdict", [
    pytest.param(report(collected(NODE_A), outcome_record(NODE_A, "failed", "ValueError", message=f"raised {BAD}"),
                        stdout=BAD, stderr=BAD, returncode=1), Verdict.FAILED, id="test-raised"),
    pytest.param(report(collected(f"t.py::test[{BAD}]"), outcome_record(f"t.py::test[{BAD}]", "passed")),
                 Verdict.PASSED, id="test-name"),
    pytest.param(report({"event": "collect_error", "nodeid": "t.py", "exc_type": "ImportError", "message": BAD}),
                 Verdict.IMPORT_ERROR, id="import-error"),
    pytest.param(report(collected(), returncode=5, stdout=f"no tests ran {BAD}"), Verdict.COLLECTION_ERROR,
                 id="collection-error"),
    pytest.param({"version": PROTOCOL_VERSION, "phase": "syntax", "syntax_error": {"type": BAD, "message": BAD}},
                 Verdict.SYNTAX_ERROR, id="syntax"),
    pytest.param(program_report(1, syntax_error={"type": "SyntaxError", "message": BAD}, files_omitted=[BAD]),
                 Verdict.SYNTAX_ERROR, id="program"),
    pytest.param({"version": PROTOCOL_VERSION, "phase": "harness_error", "message": BAD, "harness_attacked": True},
                 Verdict.KILLED,
                 id="harness-attacked"),
])
def test_lone_surrogates_from_the_container_still_serialise(rep, verdict):
    with pytest.raises(ValueError):
        judge(rep, CLEAN).model_dump_json()  # as the container's JSON brings it back, unsafe

    result = judge(received(rep), CLEAN)

    assert result.verdict is verdict
    assert "\ufffd" in result.model_dump_json()
    assert RunResult.model_validate_json(result.model_dump_json()) == result


def test_long_text_from_the_container_is_cut():
    rep = report(collected(NODE_A), outcome_record(NODE_A, "failed", "E" * 10_000, message="m" * 100_000),
                 stdout="o" * 100_000, returncode=1)

    result = judge(received(rep), CLEAN)

    assert len(result.stdout) < 17_000 and len(result.tests[0].message) < 4100 and len(result.tests[0].exc_type) < 300


def test_forged_records_of_any_shape_give_a_verdict():
    # A pytest module's code can find the records' key and sign any JSON (README, threat model).
    rep = report({"event": "collected", "nodeids": [["unhashable"], NODE_A]},
                 {"event": "collect_error", "exc_type": ["unhashable"], "message": {"a": 1}},
                 {"event": "test", "nodeid": NODE_A, "outcome": "passed", "exc_type": {"x": 1}}, "not a record")

    with pytest.raises(HarnessError, match="malformed report"):  # unshaped, the typed report refuses them
        judge(rep, CLEAN)

    assert judge(received(rep), CLEAN).verdict is Verdict.COLLECTION_ERROR


def test_a_report_of_another_protocol_version_is_a_harness_error():
    # A stale or foreign image: its report is read by no rule of this host.
    for version in (PROTOCOL_VERSION + 1, 0, None, "1"):
        with pytest.raises(HarnessError, match="protocol version"):
            received({**PASSING, "version": version})
    del_version = {k: v for k, v in PASSING.items() if k != "version"}
    with pytest.raises(HarnessError, match="protocol version"):
        received(del_version)
    assert received(PASSING).version == PROTOCOL_VERSION
