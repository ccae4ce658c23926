"""Sessions' pure rules: the verdict of a call, the paths a call may name, and
the host's own idle and lifetime limits (over a fake engine whose container
always answers, so only the host can end the session)."""

import socket
import time

import pytest

from rewardbox.sandbox.engine import FRAME_HEADER, AttachChannel
from rewardbox.sandbox.models import Verdict
from rewardbox.sandbox.session import (
    Session,
    SessionEnded,
    SessionLimits,
    SessionRefused,
    call_verdict,
    checked_path,
)


@pytest.mark.parametrize(("facts", "verdict"), [
    ({"exit_code": 0}, Verdict.PASSED),
    ({"exit_code": 3}, Verdict.FAILED),
    ({"exit_code": 137}, Verdict.KILLED),
    ({"exit_code": None}, Verdict.KILLED),
    # Limits the host enforced come first, whatever the status.
    ({"exit_code": 0, "oom": True, "deadline_hit": True}, Verdict.OUT_OF_MEMORY),
    ({"exit_code": None, "deadline_hit": True, "capped": True}, Verdict.TIMEOUT),
    ({"exit_code": None, "capped": True}, Verdict.OUTPUT_LIMIT),
    # Python's own last words, for Python runs only.
    ({"exit_code": 1, "stderr": "x\nIndentationError: bad\n", "python": True}, Verdict.SYNTAX_ERROR),
    ({"exit_code": 1, "stderr": "x\nIndentationError: bad\n", "python": False}, Verdict.FAILED),
    ({"exit_code": 1, "stderr": "MemoryError\n", "python": True}, Verdict.OUT_OF_MEMORY),
])
def test_call_verdict(facts, verdict):
    assert call_verdict(**facts)[0] is verdict


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../b", "a//b", ".env", "", "a/" * 9 + "b", "x\0y"])
def test_paths_out_of_the_work_dir_are_refused(path):
    with pytest.raises(SessionRefused):
        checked_path(path)


def test_plain_paths_are_kept():
    assert checked_path("./pkg/mod.py") == "pkg/mod.py"
    assert checked_path("solution.py") == "solution.py"


class AlwaysUpEngine:
    """Creates nothing; every exec answers as the cleanup does (no OOM kill)."""

    def __init__(self):
        self.removed = 0
        self.execs = 0

    def create(self, *args, **kwargs):
        return "c" * 64

    def start(self, container_id):
        pass

    def exec(self, container_id, command, user=None, workdir=None):
        self.execs += 1
        ours, theirs = socket.socketpair()
        theirs.sendall(FRAME_HEADER.pack(1, 2) + b"0\n")
        theirs.close()
        return "e" * 64, AttachChannel(ours)

    def exec_exit_code(self, exec_id):
        return 0

    def remove(self, container_id):
        self.removed += 1

    def kill(self, container_id, signal=None):
        pass


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.mark.parametrize(("limits", "wait_s", "why"), [
    (SessionLimits(idle_s=5), 6, "idle"),
    (SessionLimits(lifetime_s=10, idle_s=60), 11, "lifetime"),
])
def test_the_host_ends_an_idle_or_expired_session_itself(limits, wait_s, why):
    engine, clock = AlwaysUpEngine(), Clock()
    session = Session(engine, "image", session_limits=limits, clock=clock)  # type: ignore[arg-type]
    assert session.shell("true").verdict is Verdict.PASSED
    clock.now += wait_s - 2
    session.shell("true")  # within both limits
    clock.now += wait_s
    execs = engine.execs
    with pytest.raises(SessionEnded, match=why):
        session.shell("true")
    assert engine.execs == execs and engine.removed == 1 and session.closed
    with pytest.raises(SessionEnded):
        session.read_file("x")


def test_a_call_s_deadline_is_checked_and_cut_to_the_lifetime():
    clock = Clock()
    session = Session(AlwaysUpEngine(), "image", session_limits=SessionLimits(lifetime_s=10, max_call_timeout_s=60),
                      clock=clock)  # type: ignore[arg-type]
    with pytest.raises(SessionRefused, match="timeout_s"):
        session.shell("true", timeout_s=61)
    with pytest.raises(SessionRefused, match="timeout_s"):
        session.shell("true", timeout_s=0)
    clock.now += 8
    assert session._deadline(30) - time.monotonic() <= 2.01


def test_run_takes_code_or_a_file():
    session = Session(AlwaysUpEngine(), "image")  # type: ignore[arg-type]
    with pytest.raises(SessionRefused, match="either"):
        session.run("print(1)", file="a.py")
    with pytest.raises(SessionRefused, match="either"):
        session.run()
    with pytest.raises(SessionRefused):
        session.run(file="../a.py")
