"""The pool supervisor's handle on the zygote (images/python/harness/pool_supervisor.py):
a zygote stopped by the code under test (SIGSTOP, same uid) is given up as
soon as the supervisor waits on it, not after ZYGOTE_ANSWER_S of waiting for
an answer that cannot come while it is stopped."""

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "python" / "harness"))
import pool_supervisor  # noqa: E402


@pytest.fixture
def zygote(monkeypatch):
    """A handle on a stand-in zygote (a sleeping process) that never answers;
    giving it up kills only that process here, not this host's others."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    handle = object.__new__(pool_supervisor.Zygote)
    handle.process, handle.sock, handle.pid, handle.alive, handle.lost_why = process, ours, process.pid, True, None
    monkeypatch.setattr(pool_supervisor.rbrun, "kill_everything_else", process.kill)
    yield handle
    process.kill()
    process.wait()
    ours.close()
    theirs.close()


def test_a_stopped_zygote_is_given_up_as_stopped(zygote):
    zygote.process.send_signal(signal.SIGSTOP)

    assert zygote.receive() is None
    assert (zygote.alive, zygote.lost_why) == (False, "it was stopped")


def test_a_zygote_that_is_only_slow_is_waited_for(zygote):
    assert zygote.receive(timeout_s=0.3) is None
    assert zygote.lost_why == "no answer in 0.3 s"
