"""The line for the sandbox: what the service holds while containers are busy.

The bound under load is the client's patience, not the queue's length. The
trainers' clients give up on their own schedule and ignore `Retry-After`:

- OpenRLHF's HTTP reward client (0.8.11 `openrlhf/utils/remote_rm_utils.py:10-27`,
  0.9.0 the same; 0.9.10 `openrlhf/utils/agent.py:262-288`, 0.11.2
  `openrlhf/utils/agent.py:331-362`) waits 180 s per attempt and makes 5
  attempts, 1 s apart, whatever the status; then the sample gets no reward.
- verl 0.9.1's SandboxFusion client (`verl/utils/reward_score/sandbox_fusion/utils.py:115-165`)
  waits `compile_timeout + run_timeout + 10` s per attempt, retries only a
  504 (3 attempts, 1 s then 2 s apart) and counts anything else, its own
  timeout included, as a failed test case.

So a request is never refused because the queue is long: it waits in line,
in arrival order, for room among `max_waiting` samples in the sandbox. When
it has waited as long as its client will (`hold_s`, just under the client's
timeout), it is answered 503 (504 on `/run_code`) and its work keeps its
place: the client's retry, the same request, attaches to that work instead of
queueing again from the back, and gets the answer as soon as there is one
(kept `keep_s` for a retry that is still on its way). Scoring is
deterministic per request content, which is what makes sharing it sound.
Work that nobody comes back for within `keep_s` leaves the line unrun. Only
past `max_held` samples held in line (a bound on memory) is a request refused
at once (`Busy`).

One event loop drives it (the service's); nothing here is thread-safe.
"""

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

_T = TypeVar("_T")


class Busy(Exception):
    """More samples are held in line than the settings allow."""


class Held(Exception):
    """The request waited as long as its client does; its work keeps its place
    in line for the retry."""


class _Work:
    """One request's content, run once for every request that waits for it."""

    def __init__(self, key: Hashable, samples: int, future: "asyncio.Future[Any]"):
        self.key = key
        self.samples = samples
        self.future = future
        self.waiters = 0
        self.started = False  # admitted to the sandbox: runs to the end whoever waits
        self.task: asyncio.Task[None] | None = None
        self.expiry: asyncio.TimerHandle | None = None


class Line:
    """Room for `max_waiting` samples in the sandbox; the rest held in
    arrival order, at most `max_held` samples (`Busy` beyond)."""

    def __init__(self, max_waiting: int, max_held: int, keep_s: float):
        self.max_waiting = max_waiting
        self.max_held = max_held
        self.keep_s = keep_s
        self.waiting = 0  # samples admitted to the sandbox and not yet scored
        self.held = 0  # samples in line for room
        self._room: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self._work: dict[Hashable, _Work] = {}

    @contextlib.asynccontextmanager
    async def admitted(self, samples: int) -> AsyncIterator[None]:
        """Room for `samples` in the sandbox, waiting in arrival order while
        there is none. A batch larger than the bound is let in when nothing
        else is in the sandbox; otherwise it could never be scored."""
        if self._room or not self._fits(samples):
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (samples, turn)
            self._room.append(entry)
            self.held += samples
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():  # let in, then cancelled: hand the room on
                    self.waiting -= samples
                elif entry in self._room:  # still in line (`_let_in` drops a cancelled turn it meets)
                    self._room.remove(entry)
                    self.held -= samples
                self._let_in()  # the one behind may fit now
                raise
        else:
            self.waiting += samples
        try:
            yield
        finally:
            self.waiting -= samples
            self._let_in()

    def _fits(self, samples: int) -> bool:
        return not self.waiting or self.waiting + samples <= self.max_waiting

    def _let_in(self) -> None:
        while self._room and self._fits(self._room[0][0]):
            samples, turn = self._room.popleft()
            self.held -= samples
            if not turn.done():
                self.waiting += samples
                turn.set_result(None)

    async def wait(self, key: Hashable, samples: int, run: Callable[[], Awaitable[_T]], hold_s: float) -> _T:
        """What `run()` returns for this content, run once however many
        requests (and retries) wait for it; `Held` after `hold_s`, the work
        kept in line; `Busy` when the line is full. An exception of `run`
        reaches every waiter and is not kept: a retry runs again."""
        work = self._work.get(key)
        if work is None:
            if self.held and self.held + samples > self.max_held:
                raise Busy()
            work = _Work(key, samples, asyncio.get_running_loop().create_future())
            work.future.add_done_callback(lambda f: f.cancelled() or f.exception())  # read by waiters, if any
            work.task = asyncio.get_running_loop().create_task(self._run(work, run))
            self._work[key] = work
        work.waiters += 1
        if work.expiry is not None:
            work.expiry.cancel()
            work.expiry = None
        try:
            await asyncio.wait({work.future}, timeout=hold_s)  # never cancels the work
        finally:
            work.waiters -= 1
            if work.future.done():
                self._forget(work)  # answered: a later identical request is new work
            elif not work.waiters:
                work.expiry = asyncio.get_running_loop().call_later(self.keep_s, self._expire, work)
        if not work.future.done():
            raise Held()
        # Work is keyed by its content: the work under this key was made by a `run` of the caller's kind.
        return cast(_T, work.future.result())

    async def _run(self, work: _Work, run: Callable[[], Awaitable[Any]]) -> None:
        try:
            async with self.admitted(work.samples):
                work.started = True
                result = await run()
        except asyncio.CancelledError:
            work.future.cancel()
            self._forget(work)
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the waiters
            work.future.set_exception(exc)
            self._forget(work)
        else:
            work.future.set_result(result)
            if work.waiters or work.expiry is None:
                self._forget(work)

    def _expire(self, work: _Work) -> None:
        """Nobody came back for `keep_s`: an answer is dropped, and work still
        in line leaves it unrun (its client gave up)."""
        work.expiry = None
        if work.waiters:
            return
        if work.future.done():
            self._forget(work)
        elif not work.started and work.task is not None:
            work.task.cancel()

    def _forget(self, work: _Work) -> None:
        if self._work.get(work.key) is work:
            del self._work[work.key]
