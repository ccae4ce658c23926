"""The service's sessions (`/v1/sessions`): who holds which, how many, how
long they may sit idle.

A session's id is its capability: `secrets.token_urlsafe(32)` (256 random
bits), handed to whoever created it and to no one else; a request naming an
id the registry does not hold (never made, closed, expired, or mistyped) is
answered the same way, so that no answer tells which ids exist.

Sessions are bounded in number (`ServerSettings.max_sessions`, those being
made counted too, so that a burst of creates cannot overshoot), and dropped
and closed once idle past their limit (or past their lifetime) by `sweep`, which the app runs every
`SWEEP_S`; a session in a call is never idle. `close_all` ends them all when
the service stops. `created`, `closed` (DELETE, ended, the stop) and
`expired` (idle or past its lifetime) count sessions for the metrics. Every blocking call on a session runs on the registry's
own threads (`executor`), never on the event loop's or the default executor's
(a call may take up to `SessionLimits.max_call_timeout_s`).
"""

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from rewardbox.sandbox.session import Session

__all__ = ["SWEEP_S", "SessionRegistry", "TooManySessions", "UnknownSession"]

log = logging.getLogger(__name__)

# How often the app looks for idle sessions: a dict scan, cheap; an idle
# session then goes within a second of its limit.
SWEEP_S = 1.0


class UnknownSession(LookupError):
    """No session of this id is held (never made, closed, expired)."""


class TooManySessions(RuntimeError):
    """The registry holds (or is making) `max_sessions` sessions already."""


@dataclass
class _Held:
    session: Session
    idle_s: float
    last: float
    ends: float  # its lifetime: the container ends itself then, and the registry lets it go
    calls: int = 0  # under way: a session in a call is not idle


class SessionRegistry:
    """Sessions by id. Thread-safe; `clock` is a seam for tests."""

    def __init__(self, max_sessions: int, *, clock: Callable[[], float] = time.monotonic):
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._making = 0
        self._closed = False
        self.created = self.closed = self.expired = 0  # sessions, since the registry was made
        # One call at a time per session (a session serialises its calls), plus
        # creates and closes: a thread per session, a few more for the rest.
        self.executor = ThreadPoolExecutor(max_sessions + 4, thread_name_prefix="rewardbox-session")

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def create(self, make: Callable[[], Session], idle_s: float, lifetime_s: float = float("inf")) -> str:
        """Makes a session with `make` (blocking: call it on `executor`) and
        holds it; its new id. TooManySessions past the bound."""
        with self._lock:
            if self._closed:
                raise UnknownSession("the service is stopping")
            if len(self._held) + self._making >= self.max_sessions:
                raise TooManySessions(f"{self.max_sessions} sessions are open already, the most this service holds; "
                                      "close one (DELETE /v1/sessions/{id}) or retry later")
            self._making += 1
        try:
            session = make()
        finally:
            with self._lock:
                self._making -= 1
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        if not self._hold(session_id, _Held(session, idle_s, now, now + lifetime_s)):
            session.close()  # made while the service stopped
            raise UnknownSession("the service is stopping")
        return session_id

    def _hold(self, session_id: str, held: _Held) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._held[session_id] = held
            self.created += 1
            return True

    @contextmanager
    def use(self, session_id: str) -> Iterator[Session]:
        """The session of `session_id` for one call (not idle meanwhile);
        UnknownSession if none is held."""
        with self._lock:
            held = self._held.get(session_id)
            if held is None:
                raise UnknownSession("no such session")
            held.calls += 1
        try:
            yield held.session
        finally:
            with self._lock:
                held.calls -= 1
                held.last = self._clock()

    def drop(self, session_id: str) -> Session | None:
        """Takes the session out of the registry (the caller closes it)."""
        with self._lock:
            held = self._held.pop(session_id, None)
            if held is not None:
                self.closed += 1
        return None if held is None else held.session

    def idle(self) -> list[Session]:
        """Takes out every session idle past its limit, or past its lifetime
        and not in a call (which then ends it: 410), for the caller to close."""
        now = self._clock()
        with self._lock:
            gone = [sid for sid, h in self._held.items() if not h.calls and (now - h.last >= h.idle_s or now >= h.ends)]
            self.expired += len(gone)
            return [self._held.pop(sid).session for sid in gone]

    def sweep(self) -> int:
        """Closes the sessions `idle` takes out (blocking); how many."""
        gone = self.idle()
        for session in gone:
            _close(session)
        if gone:
            log.info("closed %d idle session(s)", len(gone))
        return len(gone)

    def close_all(self) -> None:
        """Refuses new sessions and closes every one held (blocking, several at
        once); then lets the registry's threads go. Idempotent."""
        with self._lock:
            self._closed = True
            held, self._held = list(self._held.values()), {}
            self.closed += len(held)
        with ThreadPoolExecutor(max(1, min(len(held), 8)), thread_name_prefix="rewardbox-session-close") as closing:
            list(closing.map(_close, [h.session for h in held]))
        self.executor.shutdown(wait=False, cancel_futures=True)


def _close(session: Session) -> None:
    # A close that fails (the engine down) leaves the container to its own
    # idle limit and the next sweep of the engine: nothing more to do here.
    with suppress(Exception):
        session.close()
