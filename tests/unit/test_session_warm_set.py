"""The warm set of sessions (rewardbox.sandbox.session_warm) over stand-in
sessions and a clock the test moves: handed out armed and never twice,
refilled, other limits and an empty set answered None at once, stale ones
replaced, everything removed at close. On real containers:
tests/docker/test_session_warm.py."""

import threading
import time

import pytest

from rewardbox.sandbox import Limits
from rewardbox.sandbox.session import SessionLimits
from rewardbox.sandbox.session_warm import HAND_OUT_MARGIN_S, WarmSessions


class StandIn:
    def __init__(self, wait_s):
        self.wait_s = wait_s
        self.armed = 0
        self.closed = 0

    def arm(self):
        self.armed += 1

    def close(self):
        self.closed += 1


class Maker:
    """Makes stand-ins, each once `gate` lets it (set: at once)."""

    def __init__(self):
        self.made: list[StandIn] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False

    def __call__(self, wait_s):
        self.gate.wait(10)
        if self.fail:
            raise OSError("the engine is down")
        made = StandIn(wait_s)
        self.made.append(made)
        return made


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


LIMITS, SESSION = Limits(), SessionLimits()


def _until(predicate, timeout_s=5.0):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


@pytest.fixture
def maker():
    return Maker()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def warm(maker, clock):
    made = WarmSessions(maker, 2, LIMITS, SESSION, wait_s=600, clock=clock)
    yield made
    made.close()


def test_filled_ahead_with_the_unarmed_bound(warm, maker):
    _until(lambda: len(warm) == 2)
    assert [s.wait_s for s in maker.made] == [600, 600] and not any(s.armed for s in maker.made)


def test_handed_out_armed_once_each_and_refilled(warm, maker):
    _until(lambda: len(warm) == 2)
    got = [warm.take(LIMITS, SESSION) for _ in range(2)]
    assert got[0] is not got[1] and all(s.armed == 1 for s in got)
    _until(lambda: len(warm) == 2)  # the refill made two more
    more = [warm.take(LIMITS, SESSION) for _ in range(2)]
    assert len({id(s) for s in got + more}) == 4 and warm.handed_out == 4
    assert len(maker.made) >= 4 and not any(s.closed for s in got + more)


def test_other_limits_get_none_and_take_nothing(warm):
    _until(lambda: len(warm) == 2)
    assert warm.take(Limits(memory_mb=256), SESSION) is None
    assert warm.take(LIMITS, SessionLimits(idle_s=5)) is None
    assert len(warm) == 2 and warm.handed_out == 0


def test_an_empty_set_answers_none_at_once(warm, maker):
    _until(lambda: len(warm) == 2)
    maker.gate.clear()  # the refill now hangs in its making
    warm.take(LIMITS, SESSION), warm.take(LIMITS, SESSION)
    began = time.monotonic()
    assert warm.take(LIMITS, SESSION) is None
    assert time.monotonic() - began < 0.5
    maker.gate.set()


def test_a_container_near_its_unarmed_end_is_replaced_not_handed_out(warm, maker, clock):
    _until(lambda: len(warm) == 2)
    first = list(maker.made)
    clock.now = 600 - HAND_OUT_MARGIN_S  # both are now too old
    got = warm.take(LIMITS, SESSION)
    assert got is None or got not in first
    assert all(s.closed == 1 and s.armed == 0 for s in first)


def test_close_removes_what_is_warm_and_stops_the_refill(maker, clock):
    warm = WarmSessions(maker, 3, LIMITS, SESSION, wait_s=600, clock=clock)
    _until(lambda: len(warm) == 3)
    taken = warm.take(LIMITS, SESSION)
    _until(lambda: len(warm) == 3)
    warm.close()
    assert taken.closed == 0  # a handed-out session is its owner's
    assert all(s.closed == 1 for s in maker.made if s is not taken)
    count = len(maker.made)
    assert warm.take(LIMITS, SESSION) is None and len(maker.made) == count


def test_a_failing_engine_leaves_the_set_empty_and_callers_cold(maker, clock):
    maker.fail = True
    warm = WarmSessions(maker, 1, LIMITS, SESSION, wait_s=600, clock=clock)
    try:
        time.sleep(0.05)
        assert warm.take(LIMITS, SESSION) is None
    finally:
        warm.close()
