"""What the session adapters share (verl's tools, AgentFly's resource,
OpenRLHF's agent episode): the process's sandbox for sessions and the texts
a model reads of a call and of a grade.

The sandbox is the settings' (`rewardbox.settings`: REWARDBOX_* variables and
the REWARDBOX_CONFIG file: image, runtime, limits, grading policy), made on
first use, one per process (a forked worker makes its own), on this
machine's engine whatever backend the runs use, keeping the settings'
`warm_sessions` made ahead; `configure` sets another.
"""

import os
import threading

from rewardbox.rewards.code import CodeReward
from rewardbox.rewards.grade import Grade
from rewardbox.sandbox import CallResult, Sandbox

__all__ = ["MAX_OUTPUT_CHARS", "SOLUTION_FILE", "call_text", "configure", "grade_text", "process_sandbox"]

SOLUTION_FILE = "solution.py"
MAX_OUTPUT_CHARS = 4000  # of each stream in an answer; verl cuts the whole answer again (max_tool_response_length)
MAX_FAILING_TESTS = 5
MAX_TEST_MESSAGE_CHARS = 500


_shared: tuple[int, Sandbox, CodeReward] | None = None
_shared_lock = threading.Lock()


def configure(sandbox: Sandbox, grader: CodeReward | None = None) -> None:
    """Sessions of this process on `sandbox`, graded by `grader` (default:
    `CodeReward(sandbox)`), instead of the settings' sandbox."""
    global _shared
    with _shared_lock:
        _shared = (os.getpid(), sandbox, grader or CodeReward(sandbox))


def process_sandbox() -> tuple[Sandbox, CodeReward]:
    """The process's sandbox and grader: the settings', made on first use (a
    forked worker makes its own)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            from rewardbox.sandbox.config import make_local_sandbox
            from rewardbox.settings import load_settings, sandbox_config

            settings = load_settings()
            # A session needs this machine's engine, whatever backend the runs use.
            box = make_local_sandbox(sandbox_config(settings))
            if settings.warm_sessions:  # a rollout's session then starts at once
                box.keep_sessions_warm(settings.warm_sessions)
            _shared = (os.getpid(), box, CodeReward(box, policy=settings.policy, limits=settings.limits,
                                                    language=settings.language))
        return _shared[1], _shared[2]


def _clip(text: str, max_chars: int) -> str:
    """At most `max_chars`, keeping the end: an error's last line says most."""
    return text if len(text) <= max_chars else "...(cut)\n" + text[len(text) - max_chars:]


def call_text(result: CallResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """A run as the model reads it.

    >>> from rewardbox.sandbox import Verdict
    >>> print(call_text(CallResult(verdict=Verdict.FAILED, exit_code=1, stderr="NameError: x", message="exited with status 1")))
    verdict: failed (exited with status 1)
    exit status: 1
    stderr:
    NameError: x
    """
    head = f"verdict: {result.verdict.value}" + (f" ({result.message})" if result.message else "")
    lines = [head, f"exit status: {result.exit_code if result.exit_code is not None else 'none'}"]
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            lines += [f"{name}:", _clip(text.rstrip("\n"), max_chars)]
    if result.output_truncated:
        lines.append("(the output was cut at its limit)")
    return "\n".join(lines)


def grade_text(grade: Grade, file: str = SOLUTION_FILE) -> str:
    """A grade as the model reads it: the count and the failing tests' errors.

    >>> from rewardbox.sandbox import Outcome, TestResult, Verdict
    >>> print(grade_text(Grade(reward=0.5, score=0.75, verdict=Verdict.FAILED, passed=1, total=2, tests=(
    ...     TestResult(nodeid="t::test_a", name="test_a", outcome=Outcome.PASSED),
    ...     TestResult(nodeid="t::test_b", name="test_b", outcome=Outcome.FAILED, message="assert 3 == 4")))))
    solution.py passed 1 of 2 tests (verdict: failed).
    failing:
    - test_b: assert 3 == 4
    """
    if grade.reward is None:
        return f"The tests could not be run on this task ({grade.error or 'unusable label'}); not your fault."
    verdict = grade.verdict.value if grade.verdict is not None else "unknown"
    lines = [f"{file} passed {grade.passed} of {grade.total} tests (verdict: {verdict})."]
    if grade.message and grade.verdict is not None and grade.verdict.value not in ("passed", "failed"):
        lines.append(_clip(grade.message.strip(), MAX_TEST_MESSAGE_CHARS))
    failing = [t for t in grade.tests if t.outcome.value != "passed"]
    if failing:
        lines.append("failing:")
        for test in failing[:MAX_FAILING_TESTS]:
            message = _clip((test.message or test.outcome.value).strip(), MAX_TEST_MESSAGE_CHARS)
            lines.append(f"- {test.name or test.nodeid}: " + message.replace("\n", "\n  "))
        if len(failing) > MAX_FAILING_TESTS:
            lines.append(f"- ... and {len(failing) - MAX_FAILING_TESTS} more")
    return "\n".join(lines)
