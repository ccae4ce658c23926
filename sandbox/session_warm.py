"""A small warm set of sessions: containers created and started ahead, so
that `Sandbox.session()` hands one out at once (`Sandbox(warm_sessions=N)`).

Each warm container is a session's container as a cold one is (the same
hardening, limits and labels: `Session`), made with `warm_wait_s`: its
lifetime and idle limits count from its hand-out (`Session.arm`), not from
its making, and unarmed it ends itself after `warm_wait_s` (so that one
whose owner was `kill -9`'d goes without the host; the engine's sweep
removes it sooner). A container goes to one session only and never comes
back: the set refills from a thread of its own. A session asked for with
other limits than the set's, or while the set is empty, is made cold: a
caller never waits for the refill. `close` removes what is still warm.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from rewardbox.sandbox.models import Limits
from rewardbox.sandbox.session import Session, SessionLimits

__all__ = ["WARM_WAIT_S", "WarmSessions"]

log = logging.getLogger(__name__)

# How long a warm container waits unarmed before it ends itself; the set
# replaces it before then (HAND_OUT_MARGIN_S), so waiting costs nothing.
WARM_WAIT_S = 600.0
# A warm container this close to its own end is replaced, not handed out.
HAND_OUT_MARGIN_S = 60.0
# After a failed making (the engine down), the refill waits this long, doubling to the most.
RETRY_S, RETRY_MAX_S = 1.0, 30.0


@dataclass
class _Warm:
    session: Session
    made: float  # on the set's clock


class WarmSessions:
    """Up to `size` sessions of `limits` and `session_limits`, made ahead by
    `make(warm_wait_s)` on a thread of its own. Thread-safe; `clock` is a
    seam for tests."""

    def __init__(self, make: Callable[[float], Session], size: int, limits: Limits, session_limits: SessionLimits,
                 *, wait_s: float = WARM_WAIT_S, clock: Callable[[], float] = time.monotonic):
        if size < 1:
            raise ValueError(f"a warm set holds at least one session, not {size}")
        if wait_s <= HAND_OUT_MARGIN_S:
            raise ValueError(f"wait_s must be over {HAND_OUT_MARGIN_S:g} s, not {wait_s:g}")
        self.size = size
        self.limits = limits
        self.session_limits = session_limits
        self.wait_s = wait_s
        self._make = make
        self._clock = clock
        self._ready: deque[_Warm] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self.handed_out = 0  # sessions taken from the set since it was made
        self.made = 0  # warm containers made
        self._thread = threading.Thread(target=self._refill, name="rewardbox-warm-sessions", daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        """Warm containers ready to hand out."""
        with self._changed:
            return len(self._ready)

    def matches(self, limits: Limits, session_limits: SessionLimits) -> bool:
        return limits == self.limits and session_limits == self.session_limits

    def take(self, limits: Limits, session_limits: SessionLimits) -> Session | None:
        """A warm session of these limits, armed (its limits count from now),
        or None at once: other limits, the set empty or closed."""
        if not self.matches(limits, session_limits):
            return None
        while True:
            with self._changed:
                if self._closed or not self._ready:
                    return None
                warm = self._ready.popleft()
                self.handed_out += 1
                self._changed.notify_all()  # the refill makes its successor
            if self._old(warm):
                _close(warm.session)  # about to end itself: not worth handing out
                continue
            try:
                warm.session.arm()
            except Exception as exc:  # noqa: BLE001 - the engine failed: the caller makes a cold one
                log.warning("a warm session could not be armed (%s); made cold instead", exc)
                _close(warm.session)
                return None
            return warm.session

    def close(self) -> None:
        """Stops the refill and removes every warm container. Idempotent."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=120)
        with self._changed:
            left, self._ready = list(self._ready), deque()
        for warm in left:
            _close(warm.session)

    def _refill(self) -> None:
        backoff = RETRY_S
        while True:
            with self._changed:
                while not self._closed and len(self._ready) >= self.size and not self._stale():
                    self._changed.wait(timeout=HAND_OUT_MARGIN_S / 2)
                if self._closed:
                    return
                stale = [w for w in self._ready if self._old(w)]
                self._ready = deque(w for w in self._ready if not self._old(w))
            for warm in stale:
                _close(warm.session)
            if len(self) >= self.size:
                continue
            try:
                session = self._make(self.wait_s)
            except Exception as exc:  # noqa: BLE001 - the engine down: try again later, callers go cold meanwhile
                log.warning("making a warm session failed (%s); retrying in %g s", exc, backoff)
                with self._changed:
                    self._changed.wait_for(lambda: self._closed, timeout=backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
                continue
            backoff = RETRY_S
            if not self._keep(session):
                _close(session)  # made while the set closed
                return

    def _keep(self, session: Session) -> bool:
        with self._changed:
            if self._closed:
                return False
            self._ready.append(_Warm(session, self._clock()))
            self.made += 1
            return True

    def _old(self, warm: _Warm) -> bool:
        return self._clock() - warm.made >= self.wait_s - HAND_OUT_MARGIN_S

    def _stale(self) -> bool:
        return any(self._old(w) for w in self._ready)


def _close(session: Session) -> None:
    # A close that fails (the engine down) leaves the container to its own
    # unarmed bound and the engine's sweep.
    with suppress(Exception):
        session.close()
