"""The warm set of sessions (sandbox/session_warm.py) on the real engine:
handed out at once and working, refilled, never handed out twice, its limits
counted from the hand-out, removed with the sandbox, and gone after its
owner's `kill -9` (by the sweep, or by its own unarmed bound)."""

import signal
import subprocess
import sys
import time

import docker
import pytest
from session_support import ADD_LABEL, RUNTIMES

from rewardbox.rewards import CodeReward
from rewardbox.sandbox import Sandbox, SessionEnded, SessionLimits, Verdict
from rewardbox.sandbox.engine import OWNER_LABEL, DockerEngine
from rewardbox.sandbox.pool import PooledSandbox


@pytest.fixture(scope="module")
def client():
    made = docker.from_env()
    yield made
    made.close()


@pytest.fixture
def box():
    made = Sandbox(max_containers=2, retry_s=20, sweep=False, warm_sessions=2)
    yield made
    made.close()


def _until(predicate, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _exists(client, container_id: str) -> bool:
    return bool(client.api.containers(all=True, filters={"id": container_id}))


def _sessions_of(client, owner: str) -> list[str]:
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
            if any(name.startswith("/rewardbox-session-") for name in c.get("Names") or [])]


def test_handed_out_at_once_and_an_episode_works(box, client):
    _until(lambda: box.warm_sessions == 2)
    began = time.monotonic()
    s = box.session(grader=CodeReward(box))
    took = time.monotonic() - began
    with s:
        assert took < 0.3, took  # a cold one takes a container's creation and start
        s.write_file("solution.py", "def add(a, b):\n    return a - b\n")
        wrong = s.run("from solution import add\nassert add(1, 2) == 3, add(1, 2)")
        assert wrong.verdict is Verdict.FAILED and "AssertionError: -1" in wrong.stderr
        s.write_file("solution.py", "def add(a, b):\n    return a + b\n")
        assert s.score(ADD_LABEL).reward == 1.0
    assert not _exists(client, s.container_id)


def test_refilled_and_never_handed_out_twice(box, client):
    _until(lambda: box.warm_sessions == 2)
    handed = []
    for _ in range(5):
        with box.session() as s:
            assert s.run("print(1)").stdout == "1\n"
            handed.append(s.container_id)
    assert len(set(handed)) == 5
    _until(lambda: box.warm_sessions == 2)
    left = _sessions_of(client, box.engine.owner)
    assert len(left) == 2 and not set(left) & set(handed)


def test_other_limits_get_a_cold_one_and_leave_the_set(box):
    _until(lambda: box.warm_sessions == 2)
    with box.session(session_limits=SessionLimits(idle_s=30)) as s:
        assert s.run("print(2)").stdout == "2\n"
    assert box.warm_sessions == 2


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_limits_count_from_the_hand_out(client, runtime):
    # The hand-out's signal reaches PID 1 under gVisor too.
    # A lifetime with room for two calls on a loaded host (a gVisor call took over a second there).
    limits = SessionLimits(lifetime_s=8, idle_s=3)
    made = Sandbox(max_containers=1, retry_s=20, sweep=False, runtime=runtime)
    try:
        made.keep_sessions_warm(1, session_limits=limits)
        _until(lambda: made.warm_sessions == 1)
        time.sleep(9)  # past both limits, had they counted from the making
        s = made.session(session_limits=limits)
        assert s.run("print(3)").stdout == "3\n"
        time.sleep(1.5)
        assert s.run("print(4)").stdout == "4\n"  # the idle limit counts from the last call
        # Then, without calls, the container ends itself (idle), as a cold one does.
        _until(lambda: not _exists(client, s.container_id), 15)
        with pytest.raises(SessionEnded):
            s.run("print(5)")
        s.close()
    finally:
        made.close()


@pytest.mark.parametrize("kind", [Sandbox, PooledSandbox], ids=["sandbox", "pooled"])
def test_closing_the_sandbox_removes_the_warm_containers(client, kind):
    made = kind(max_containers=1, retry_s=20, sweep=False, warm_sessions=2)
    _until(lambda: made.warm_sessions == 2)
    warm = _sessions_of(client, made.engine.owner)
    assert len(warm) >= 2
    made.close()
    assert not any(_exists(client, c) for c in warm)


OWNER = """\
import sys, time
from rewardbox.sandbox import Sandbox, SessionLimits
from rewardbox.sandbox.session import Session
box = Sandbox(sweep=False, warm_sessions=1)
while box.warm_sessions < 1:
    time.sleep(0.05)
# And one made as the warm set makes them, with a short unarmed bound (the set's is minutes).
short = Session(box.engine, box.image, session_limits=SessionLimits(lifetime_s=2, idle_s=2), warm_wait_s=8)
print(box._warm._ready[0].session.container_id, short.container_id, flush=True)
time.sleep(600)
"""


def test_the_unarmed_bound_and_the_owner_s_kill_9_leave_nothing(client):
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        warm, short = owner.stdout.readline().split()
        made = time.monotonic()
        # Its owner alive (so no one's sweep touches them), past the short one's
        # lifetime and idle limits, unarmed: both still there.
        time.sleep(max(0.0, made + 4 - time.monotonic()))
        assert _exists(client, short) and _exists(client, warm)
        # Its own unarmed bound ends the short one, its owner still alive.
        _until(lambda: not _exists(client, short), 20)
        assert _exists(client, warm)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    engine = DockerEngine(retry_s=20)
    try:
        engine.sweep()  # the warm set's (its own bound is minutes away); anyone's sweep would do
    finally:
        engine.close()
    _until(lambda: not _exists(client, warm), 15)


def test_the_trainer_adapters_sandbox_keeps_the_settings_warm_set(monkeypatch, client):
    """REWARDBOX_WARM_SESSIONS reaches the process sandbox that verl's tools,
    AgentFly's resource and OpenRLHF's agent open their sessions on."""
    from rewardbox.adapters import session_tools

    monkeypatch.setenv("REWARDBOX_WARM_SESSIONS", "1")
    monkeypatch.setattr(session_tools, "_shared", None)
    box, _ = session_tools.process_sandbox()
    try:
        _until(lambda: box.warm_sessions == 1)
        warm = _sessions_of(client, box.engine.owner)
        with box.session() as s:
            assert s.container_id in warm
    finally:
        box.close()
        monkeypatch.setattr(session_tools, "_shared", None)
