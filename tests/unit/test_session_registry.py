"""The service's registry of sessions (rewardbox.rewards.server.session_registry):
ids, the bound, idle expiry and the stop, over stand-in sessions and a clock
the test moves. The routes on real containers: tests/docker/test_session_service.py."""

import threading

import pytest

from rewardbox.rewards.server.session_registry import SessionRegistry, TooManySessions, UnknownSession


class StandIn:
    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def registry(clock):
    reg = SessionRegistry(2, clock=clock)
    yield reg
    reg.close_all()


def test_ids_are_long_random_and_name_their_own_session(registry):
    a, b = StandIn(), StandIn()
    ida, idb = registry.create(lambda: a, 10), registry.create(lambda: b, 10)
    assert ida != idb and min(len(ida), len(idb)) >= 43
    with registry.use(ida) as got:
        assert got is a
    for other in ("", "x", ida[:-1], ida + "x", ida.upper() if ida.upper() != ida else ida.lower()):
        with pytest.raises(UnknownSession), registry.use(other):
            pass


def test_past_the_bound_refused_and_a_slot_given_back_by_a_drop(registry):
    first = registry.create(StandIn, 10)
    registry.create(StandIn, 10)
    with pytest.raises(TooManySessions, match="2 sessions are open already"):
        registry.create(StandIn, 10)
    assert registry.drop(first) is not None and registry.drop(first) is None
    registry.create(StandIn, 10)


def test_sessions_being_made_count_against_the_bound(registry):
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(10)
        return StandIn()

    making = threading.Thread(target=registry.create, args=(slow, 10))
    making.start()
    started.wait(10)
    registry.create(StandIn, 10)
    with pytest.raises(TooManySessions):
        registry.create(StandIn, 10)
    release.set()
    making.join(10)
    assert len(registry) == 2


def test_an_idle_session_is_swept_and_closed_one_in_a_call_is_not(registry, clock):
    idle, busy = StandIn(), StandIn()
    idle_id, busy_id = registry.create(lambda: idle, 5), registry.create(lambda: busy, 5)
    clock.now = 4.9
    assert registry.sweep() == 0
    with registry.use(busy_id):
        clock.now = 5.0
        assert registry.sweep() == 1  # the idle one; the other is in a call
        clock.now = 100.0
        assert registry.sweep() == 0
    assert (idle.closed, busy.closed) == (1, 0)
    with pytest.raises(UnknownSession), registry.use(idle_id):
        pass
    clock.now = 104.9  # idle from the end of its call
    assert registry.sweep() == 0
    clock.now = 105.0
    assert registry.sweep() == 1 and busy.closed == 1 and len(registry) == 0


def test_created_closed_and_expired_are_counted_once_each(clock):
    reg = SessionRegistry(4, clock=clock)
    a, b = reg.create(StandIn, 5), reg.create(StandIn, 5)
    reg.create(StandIn, 50)
    assert (reg.created, reg.closed, reg.expired) == (3, 0, 0)
    reg.drop(a)
    reg.drop(a)  # already gone: not counted again
    clock.now = 5.0
    assert reg.sweep() == 1  # b
    assert reg.drop(b) is None
    assert (reg.created, reg.closed, reg.expired) == (3, 1, 1)
    reg.close_all()
    assert (reg.created, reg.closed, reg.expired) == (3, 2, 1) and len(reg) == 0


def test_close_all_closes_every_session_and_refuses_new_ones(clock):
    registry = SessionRegistry(4, clock=clock)
    held = [StandIn() for _ in range(3)]
    for s in held:
        registry.create(lambda s=s: s, 10)
    registry.close_all()
    assert [s.closed for s in held] == [1, 1, 1] and len(registry) == 0
    late = StandIn()
    with pytest.raises(UnknownSession):
        registry.create(lambda: late, 10)
    registry.close_all()  # idempotent


def test_a_session_made_while_the_service_stopped_is_closed(clock):
    registry = SessionRegistry(4, clock=clock)
    late = StandIn()

    def make():
        registry.close_all()  # the stop comes while the container is made
        return late

    with pytest.raises(UnknownSession):
        registry.create(make, 10)
    assert late.closed == 1


def test_a_session_past_its_lifetime_is_swept_unless_in_a_call(registry, clock):
    old, calling = StandIn(), StandIn()
    registry.create(lambda: old, 100, 10)
    calling_id = registry.create(lambda: calling, 100, 10)
    clock.now = 9.9
    assert registry.sweep() == 0
    with registry.use(calling_id):
        clock.now = 10.0
        assert registry.sweep() == 1 and old.closed == 1  # the call itself ends at the lifetime: 410
    assert registry.sweep() == 1 and calling.closed == 1


# The routes' mapping of a session call's failures (rewardbox.rewards.server.sessions_api).

def _service_with(session):
    from rewardbox.rewards.registry import Registry
    from rewardbox.rewards.server.service import Service

    service = Service(Registry(), sandbox=None)  # type: ignore[arg-type]
    return service, service.sessions.create(lambda: session, 10)


@pytest.mark.parametrize("raised, status", [
    (RuntimeError("500 Server Error: Removal In Progress"), 410),  # the engine failed under the call
    ("ended", 410), ("refused", 400), ("unknown", 404)])
def test_a_failed_call_is_answered_and_an_unknown_failure_ends_the_session(raised, status):
    import asyncio

    from fastapi import HTTPException

    from rewardbox.rewards.server.sessions_api import _on_session
    from rewardbox.sandbox.session import SessionEnded, SessionRefused

    session = StandIn()
    service, sid = _service_with(session)
    error = {"ended": SessionEnded("gone"), "refused": SessionRefused("no"), "unknown": None}.get(raised, raised)

    def call(s):
        raise error

    try:
        with pytest.raises(HTTPException) as answer:
            asyncio.run(_on_session(service, "not-it" if raised == "unknown" else sid, call))
        assert answer.value.status_code == status
        held = len(service.sessions)
        assert (held, session.closed) == ((1, 0) if status in (400, 404) else (0, 1))
    finally:
        service.close_sessions()


def test_our_failure_under_a_call_keeps_the_session_for_a_retry():
    import asyncio

    from rewardbox.rewards.server.sessions_api import _on_session
    from rewardbox.sandbox import SandboxError

    session = StandIn()
    service, sid = _service_with(session)

    def call(s):
        raise SandboxError("the engine is down")

    try:
        with pytest.raises(SandboxError):  # the app's handler answers 503
            asyncio.run(_on_session(service, sid, call))
        assert (len(service.sessions), session.closed) == (1, 0)
    finally:
        service.close_sessions()
