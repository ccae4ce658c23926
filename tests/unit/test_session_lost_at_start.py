"""A session whose container ends while it starts (before the caller has it:
a gVisor sandbox on a loaded host did, in CI) is made again in a new
container within the retry budget; past the budget the caller gets
SessionEnded. A fake engine; the real container is any docker session test."""

import socket

import pytest

from rewardbox.sandbox.engine import FRAME_HEADER, AttachChannel
from rewardbox.sandbox.errors import ContainerLost
from rewardbox.sandbox.runner import Sandbox
from rewardbox.sandbox.session import SessionEnded


class LosesContainersEngine:
    """The first `lost` containers are gone at their first exec; the next ones answer."""

    retry_s = 30.0
    stats = type("Stats", (), {"errors": 0, "retries": 0})()

    def __init__(self, lost: int):
        self.lost = lost
        self.made: list[str] = []
        self.removed: list[str] = []

    def require_image(self, image):
        pass

    def require_runtime(self, runtime):
        return False

    def create(self, *args, **kwargs):
        self.made.append(f"{len(self.made):064d}")
        return self.made[-1]

    def start(self, container_id):
        pass

    def exec(self, container_id, command, user=None, workdir=None):
        if self.made.index(container_id) < self.lost:
            raise ContainerLost(f"container {container_id[:12]} was removed from outside: 404")
        ours, theirs = socket.socketpair()
        theirs.sendall(FRAME_HEADER.pack(1, 2) + b"0\n")
        theirs.close()
        return "cleanup", AttachChannel(ours)

    def exec_exit_code(self, exec_id):
        return 0

    def remove(self, container_id):
        self.removed.append(container_id)

    def kill(self, container_id, signal=None):
        pass

    def close(self):
        pass


def test_a_session_lost_while_starting_is_made_again(monkeypatch):
    monkeypatch.setattr("rewardbox.sandbox.runner.time.sleep", lambda s: None)
    engine = LosesContainersEngine(lost=2)
    box = Sandbox(engine=engine, sweep=False)  # type: ignore[arg-type]
    with box.session() as s:
        assert s.container_id == engine.made[2] and not s.closed
    assert engine.made[0] in engine.removed and engine.made[1] in engine.removed
    assert box.stats().run_retries == 2


def test_past_the_retry_budget_the_loss_reaches_the_caller(monkeypatch):
    monkeypatch.setattr("rewardbox.sandbox.runner.time.sleep", lambda s: None)
    engine = LosesContainersEngine(lost=10**6)
    engine.retry_s = 0.0
    box = Sandbox(engine=engine, sweep=False)  # type: ignore[arg-type]
    with pytest.raises(SessionEnded, match="removed from outside"):
        box.session()
    assert set(engine.removed) == set(engine.made)
