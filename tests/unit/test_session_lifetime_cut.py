"""A call whose deadline the session's lifetime cut: the watchdog ends the
container at that same moment, so the cleanup after the call may find it gone
(CI's loaded machine did). The call is still answered with its timeout, and
the next call is refused with SessionEnded. A fake engine; the real one is
tests/docker/test_session.py's lifetime test, which met this race."""

import socket
import time

import pytest

from rewardbox.sandbox.engine import FRAME_HEADER, AttachChannel
from rewardbox.sandbox.errors import ContainerLost
from rewardbox.sandbox.session import Session, SessionEnded, SessionLimits

LIFETIME_S = 1.0


class EndsAtItsLifetimeEngine:
    """A silent call that never ends its stream; from `LIFETIME_S` after the
    start on, the container is gone: no exec starts (as the engine's 409)."""

    def __init__(self):
        self.started = time.monotonic()
        self.open: list[socket.socket] = []
        self.removed = 0

    def create(self, *args, **kwargs):
        return "c" * 64

    def start(self, container_id):
        pass

    def exec(self, container_id, command, user=None, workdir=None):
        if time.monotonic() - self.started >= LIFETIME_S:
            raise ContainerLost("container is not running")
        ours, theirs = socket.socketpair()
        if command[:2] == ["sh", "-c"]:  # the call: silent, its stream held open
            self.open.append(theirs)
            return "call", AttachChannel(ours)
        theirs.sendall(FRAME_HEADER.pack(1, 2) + b"0\n")
        theirs.close()
        return "cleanup", AttachChannel(ours)

    def exec_exit_code(self, exec_id):
        return 0 if exec_id == "cleanup" else None

    def remove(self, container_id):
        self.removed += 1

    def kill(self, container_id, signal=None):
        pass


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
