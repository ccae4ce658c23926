"""A session whose container dies during a call (under gVisor, memory run out
by processes together takes the sandbox down) and whose exec stream the engine
leaves open: the call ends with SessionEnded as soon as the engine says its
exec is gone, not at the call's deadline. A fake engine; the real one is
tests/docker/adversarial/test_sessions.py's parallel hogs.

And a call whose deadline the session's lifetime cut: the watchdog ends the
container at that same moment, so the cleanup after the call may find it gone
(CI's loaded machine did, in tests/docker/test_session.py's lifetime test).
The call is still answered with its timeout, and the next call is refused."""

import socket
import time

import pytest

from rewardbox.sandbox.engine import FRAME_HEADER, AttachChannel
from rewardbox.sandbox.errors import ContainerLost
from rewardbox.sandbox.models import Limits
from rewardbox.sandbox.session import CALL_POLL_S, Session, SessionEnded, SessionLimits, gvisor_call_limits


class DiesInACallEngine:
    """The cleanup execs answer; the call's exec writes nothing and never ends its
    stream, and its container is gone after `dies_after_s`."""

    def __init__(self, dies_after_s: float):
        self.dies_after_s = dies_after_s
        self.call_started: float | None = None
        self.open: list[socket.socket] = []
        self.inspected = 0
        self.removed = 0

    def create(self, *args, **kwargs):
        return "c" * 64

    def start(self, container_id):
        pass

    def exec(self, container_id, command, user=None, workdir=None):
        ours, theirs = socket.socketpair()
        if command[:2] == ["sh", "-c"]:  # the call: silent, its stream held open
            self.call_started = time.monotonic()
            self.open.append(theirs)
            return "call", AttachChannel(ours)
        theirs.sendall(FRAME_HEADER.pack(1, 2) + b"0\n")
        theirs.close()
        return "cleanup", AttachChannel(ours)

    def exec_exit_code(self, exec_id):
        if exec_id == "cleanup":
            return 0
        self.inspected += 1
        assert self.call_started is not None
        if time.monotonic() - self.call_started >= self.dies_after_s:
            raise ContainerLost("exec call is gone with its container")
        return None

    def remove(self, container_id):
        self.removed += 1

    def kill(self, container_id, signal=None):
        pass


def test_a_container_lost_under_a_silent_call_ends_it_at_once_not_at_its_deadline():
    engine = DiesInACallEngine(dies_after_s=1.0)
    session = Session(engine, "image")  # type: ignore[arg-type]
    began = time.monotonic()
    with pytest.raises(SessionEnded, match="gone with its container"):
        session.shell("python3 hog.py", timeout_s=60)
    took = time.monotonic() - began
    assert 1.0 <= took < 1.0 + 3 * CALL_POLL_S
    assert session.closed and engine.removed >= 1
    with pytest.raises(SessionEnded):
        session.shell("true")
    for sock in engine.open:
        sock.close()


def test_a_silent_call_in_a_live_container_runs_to_its_deadline():
    engine = DiesInACallEngine(dies_after_s=1e9)
    session = Session(engine, "image")  # type: ignore[arg-type]
    result = session.shell("sleep 100", timeout_s=1.2)
    assert result.verdict.value == "timeout" and engine.inspected >= 1 and not session.closed
    for sock in engine.open:
        sock.close()


def test_a_gvisor_call_s_address_space_is_under_the_memory_limit():
    for memory_mb in (32, 64, 128, 512, 4096):
        limit = int(gvisor_call_limits(Limits(memory_mb=memory_mb))[2].removeprefix("--as="))
        assert memory_mb << 19 <= limit < memory_mb << 20


LIFETIME_S = 1.0


class EndsAtItsLifetimeEngine(DiesInACallEngine):
    """A silent call that never ends its stream; from `LIFETIME_S` after the
    start on, the container is gone: no exec starts (as the engine's 409)."""

    def __init__(self):
        super().__init__(dies_after_s=1e9)
        self.started = time.monotonic()

    def exec(self, container_id, command, user=None, workdir=None):
        if time.monotonic() - self.started >= LIFETIME_S:
            raise ContainerLost("container is not running")
        return super().exec(container_id, command, user, workdir)

    def exec_exit_code(self, exec_id):
        return 0 if exec_id == "cleanup" else None


@pytest.fixture
def engine():
    engine = EndsAtItsLifetimeEngine()
    yield engine
    for sock in engine.open:
        sock.close()


def test_a_call_cut_by_the_lifetime_is_its_timeout_though_the_container_went_first(engine):
    session = Session(engine, "image", session_limits=SessionLimits(lifetime_s=LIFETIME_S, idle_s=60))  # type: ignore[arg-type]

    cut = session.shell("sleep 30", timeout_s=30)

    assert cut.verdict.value == "timeout"
    assert cut.duration_s < 5
    with pytest.raises(SessionEnded):
        session.shell("true")
    assert engine.removed >= 1


def test_a_container_gone_before_a_call_s_own_deadline_is_still_the_session_s_end(engine):
    # The call's own deadline (0.5 s) comes before the lifetime: a container gone at the cleanup is lost.
    session = Session(engine, "image", session_limits=SessionLimits(lifetime_s=60, idle_s=60))  # type: ignore[arg-type]
    engine.started -= LIFETIME_S - 0.3  # the container goes 0.3 s from now, during the call

    with pytest.raises(SessionEnded, match="not running"):
        session.shell("sleep 30", timeout_s=0.5)
