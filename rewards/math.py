r"""Math answers: is the completion's final answer the label's?

Two steps, as everywhere here: find the answer (`extract_answer`, a pure
function of the text), then judge it with math-verify's `parse` and `verify`.
Judging runs in a pool of worker processes: a pathological answer
(`\boxed{9^{9^{9^{9^{9}}}}}`) is killed at its deadline and scores as wrong,
and no signal-based timeout ever runs (those fail outside the main thread).

Where the answer is looked for, first found wins: the last `\boxed{...}`
(nested braces), the last `<answer>...</answer>` block, GSM8K's `#### 42`,
else the whole text, where math-verify itself looks for "the answer is X",
"final answer is X", LaTeX environments and, failing those, the last number.
What math-verify decides, the reward keeps: `1,800` = `1800`, `18.0` = `18`,
`\frac{1}{2}` = `0.5`, `$42$` = `42`, and a percentage matches both readings
(`42%` equals a gold answer of `42` and of `0.42`).

>>> extract_answer("<think>maybe \\boxed{41}</think>So it is \\boxed{\\frac{1}{2}}.<|im_end|>")
'\\frac{1}{2}'
>>> extract_answer("40 + 2 = 42\n#### 1,800"), extract_answer("The answer is 42.")
('1,800', 'The answer is 42.')
"""

import logging
import multiprocessing
import os
import re
import threading
import time
import weakref
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeoutError
from concurrent.futures.process import BrokenProcessPool
from decimal import Decimal
from functools import lru_cache
from typing import Any

from pebble import ProcessExpired, ProcessFuture, ProcessPool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewards.base import Reward, RewardOutput, Sample, done
from rewards.extract import strip_completion
from rewards.labels import LabelError, MathLabel, parse_label

__all__ = ["MathConfig", "MathReward", "extract_answer"]

_SHOWN_CHARS = 200
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_HASHES = re.compile(r"####[ \t]*\n?[ \t]*([^\n]*)")
_MATH_DELIMITERS = ("$", "\\(", "\\[", "\\boxed", "\\fbox")
# A word of two or more letters that is not a LaTeX command: prose, which must
# not be read as a product of symbols ("$apples$" is a*p*p*l*e*s).
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
# Digit-group spacing math-verify misreads: "1\,800" parses as 801.
_DIGIT_GROUP_SPACE = re.compile(r"(?<=\d)(?:\\[,;:! ]|\{,\})(?=\d{3}(?!\d))")
_PLAIN_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


class MathConfig(BaseModel):
    """How a math answer is rewarded and how long judging it may take.

    `timeout_s` bounds parse plus verify of one answer in a worker (the clock
    starts when a worker picks it up, not while it queues); `memory_mb` caps
    each worker's address space, so an answer that builds a giant integer
    fails inside the worker instead of exhausting the host (None: no cap).
    """

    model_config = ConfigDict(frozen=True)

    correct_reward: float = 1.0
    wrong_reward: float = 0.0
    timeout_s: float = Field(default=5.0, gt=0)
    workers: int = Field(default_factory=lambda: min(4, os.cpu_count() or 1), ge=1)
    memory_mb: int | None = Field(default=2048, ge=256)

    @model_validator(mode="after")
    def _ordered(self) -> "MathConfig":
        if self.correct_reward <= self.wrong_reward:
            raise ValueError("correct_reward must be greater than wrong_reward")
        return self


def extract_answer(completion: str, prompt: str | None = None) -> str | None:
    r"""The part of a completion that holds its final answer (see the module
    docstring for the order); None when the response is empty.

    >>> extract_answer(r"First \boxed{3}, then \boxed{\sqrt{\frac{1}{2}}}")
    '\\sqrt{\\frac{1}{2}}'
    >>> extract_answer("<answer> 7 </answer> I counted 3 apples")
    '7'
    """
    text = strip_completion(completion, prompt)
    for find in (_last_boxed, _last_answer_tag, _last_hashes):
        answer = find(text)
        if answer:
            return answer
    return text.strip() or None


def _last_boxed(text: str) -> str | None:
    starts = [match.end() for match in _BOXED.finditer(text)]
    # A box that has not closed where the next one opens never closes (that one
    # would sit inside it): scanning up to there keeps this linear.
    for start, end in reversed(list(zip(starts, [*starts[1:], len(text)]))):
        depth, i = 1, start
        while i < end:
            char = text[i]
            if char == "\\":
                i += 1  # an escaped brace, \{ or \}, is content
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
            i += 1
    return None


def _last_answer_tag(text: str) -> str | None:
    blocks = [block.strip() for block in _ANSWER_TAG.findall(text)]
    return next((block for block in reversed(blocks) if block), None)


def _last_hashes(text: str) -> str | None:
    lines = [line.strip() for line in _HASHES.findall(text)]
    return next((line for line in reversed(lines) if line), None)


def _plain_number(text: str) -> Decimal | None:
    text = text.strip().strip("$").strip().removesuffix(".")
    return Decimal(text.replace(",", "")) if _PLAIN_NUMBER.fullmatch(text) else None


# --- in the worker processes -------------------------------------------------

def _start_worker(memory_mb: int | None) -> None:
    if memory_mb is not None:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_mb * 2**20 if hard == resource.RLIM_INFINITY else min(memory_mb * 2**20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    # Its only warnings say that its own timeouts are off, which is on purpose here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _judge("1", "1")  # imports sympy and the LaTeX grammar before the first real answer arrives


def _judge(answer: str | None, gold: str) -> tuple[bool | None, str | None]:
    """(passed, the answer as parsed); passed is None when the gold answer is not math."""
    from math_verify import verify

    expected = _parse_gold(gold)
    if not any(not isinstance(item, str) for item in expected):
        return None, None  # only math-verify's fallback text: nothing to compare an answer with
    predicted = _parse(answer) if answer else []
    if not predicted:
        return False, None
    shown = predicted[-1] if isinstance(predicted[-1], str) else str(predicted[0])
    return verify(list(expected), predicted, timeout_seconds=None), shown


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple[Any, ...]:
    return tuple(_parse(_last_boxed(gold) or _last_hashes(gold) or gold))


def _parse(text: str) -> list[Any]:
    """math-verify's reading of an answer: the first form of it that parses
    to math, else the first that it matched as text only."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    text = _DIGIT_GROUP_SPACE.sub("", text.replace("\\$", "")).strip()
    wrapped = f"${text}$"
    if any(mark in text for mark in _MATH_DELIMITERS):
        forms = [text]
    elif _PROSE_WORD.search(text):
        forms = [text] if "\n" in text else [text, wrapped]  # a one-line word answer: "Monday"
    else:
        forms = [wrapped, text]  # bare LaTeX: "3\sqrt{3}" unwrapped would be read as 3
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    fallback: list[Any] = []
    for form in forms:
        parsed = parse(form, extraction_config=config, parsing_timeout=None)
        if any(not isinstance(item, str) for item in parsed):
            return parsed
        fallback = fallback or parsed
    return fallback


class _Job:
    """One answer on its way through the pool."""

    def __init__(self, answer: str | None, gold: str):
        self.answer = answer
        self.gold = gold
        self.started = time.monotonic()
        self.attempts = 0
        self.future: Future[RewardOutput] = Future()


class MathReward(Reward):
    """`correct_reward` when the final answer equals the answer of the label
    (a `MathLabel`), else `wrong_reward`; `None` for any other label.

    Thread-safe: `score` and `submit` may be called from many threads at once.
    Answers are judged in parallel by `config.workers` processes, started on
    first use (spawned: forking a multi-threaded caller is unsafe) and stopped
    by `close()` or at the end of a `with` block. Like every spawned process,
    a worker imports the caller's `__main__`: a script using this reward needs
    the `if __name__ == "__main__":` guard.

    A worker that dies while judging is retried once, since the death may be
    the machine's (the OOM killer); a second death is blamed on the answer,
    which scores as wrong with `metadata["error"]`.

    `metadata`: `verdict` ("passed" or "failed"), `answer` (what was judged,
    at most 200 characters; None when nothing was found), `expected`,
    `duration_s` (from submission to verdict, queueing included) and
    `timeout` (judging was killed at `timeout_s`).
    """

    name = "math"

    def __init__(self, config: MathConfig | None = None):
        self.config = config or MathConfig()
        self._lock = threading.Lock()
        self._pool: ProcessPool | None = None
        self._finalizer: weakref.finalize | None = None
        self._closed = False

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        try:
            label = parse_label(sample.label)
        except LabelError as exc:
            return done(RewardOutput.unscorable(str(exc)))
        if not isinstance(label, MathLabel):
            return done(RewardOutput.unscorable(f"not a math label but a {label.kind} label"))
        job = _Job(extract_answer(sample.completion, sample.prompt), label.answer)
        number = _plain_number(job.answer) if job.answer is not None else None
        if number is not None and number == _plain_number(job.gold):
            self._settle(job, passed=True, shown=job.answer)  # "#### 1,800" against "1800" needs no process
        else:
            self._schedule(job)
        return job.future

    def close(self) -> None:
        """Stops the workers once the answers already submitted are judged."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            if self._finalizer is not None:
                self._finalizer.detach()
        if pool is not None:
            pool.close()
            pool.join()

    def __enter__(self) -> "MathReward":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # What the workers run; a class attribute, so that a test can swap in one that crashes.
    _judge = staticmethod(_judge)

    def _schedule(self, job: _Job) -> None:
        job.attempts += 1
        pool = self._running_pool()
        try:
            running = pool.schedule(self._judge, args=(job.answer, job.gold), timeout=self.config.timeout_s)
        except RuntimeError:  # pebble gave up on this pool (a worker died while idle): start afresh, once
            if job.attempts > 1:
                raise
            self._discard(pool)
            return self._schedule(job)
        running.add_done_callback(lambda finished: self._finished(job, pool, finished))

    def _finished(self, job: _Job, pool: ProcessPool, finished: ProcessFuture) -> None:
        try:
            try:
                passed, shown = finished.result()
            except FutureTimeoutError:
                self._settle(job, passed=False, shown=job.answer, timeout=True)
            except ProcessExpired as exc:
                if job.attempts > 1:
                    error = f"the answer crashed the math parser twice (exit code {exc.exitcode})"
                    self._settle(job, passed=False, shown=job.answer, error=error)
                else:
                    self._schedule(job)
            except BrokenProcessPool:  # the pool is gone, not through the answer's fault
                if job.attempts > 1:
                    raise
                self._discard(pool)
                self._schedule(job)
            else:
                if passed is None:
                    error = f"the gold answer {job.gold[:_SHOWN_CHARS]!r} is not math that math-verify can parse"
                    self._set(job, RewardOutput.unscorable(error, expected=job.gold[:_SHOWN_CHARS]))
                else:
                    self._settle(job, passed=passed, shown=shown)
        except BaseException as exc:  # noqa: BLE001 - our failure: raised to whoever waits on the future
            try:
                job.future.set_exception(exc)
            except InvalidStateError:
                pass

    def _settle(self, job: _Job, *, passed: bool, shown: str | None, timeout: bool = False, error: str | None = None) -> None:
        metadata: dict[str, Any] = {
            "verdict": "passed" if passed else "failed",
            "answer": shown[:_SHOWN_CHARS] if shown is not None else None,
            "expected": job.gold[:_SHOWN_CHARS],
            "duration_s": round(time.monotonic() - job.started, 6),
            "timeout": timeout,
        }
        if error is not None:
            metadata["error"] = error
        reward = self.config.correct_reward if passed else self.config.wrong_reward
        self._set(job, RewardOutput(reward=reward, score=1.0 if passed else 0.0, metadata=metadata))

    @staticmethod
    def _set(job: _Job, output: RewardOutput) -> None:
        try:
            job.future.set_result(output)
        except InvalidStateError:  # the caller cancelled it
            pass

    def _running_pool(self) -> ProcessPool:
        with self._lock:
            if self._closed:
                raise RuntimeError("MathReward is closed")
            if self._pool is None:
                self._pool = ProcessPool(max_workers=self.config.workers, initializer=_start_worker,
                                         initargs=(self.config.memory_mb,), context=multiprocessing.get_context("spawn"))
                self._finalizer = weakref.finalize(self, _stop, self._pool)
            return self._pool

    def _discard(self, pool: ProcessPool) -> None:
        with self._lock:
            if self._pool is not pool:
                return  # another job already replaced it
            self._pool = None
            if self._finalizer is not None:
                self._finalizer.detach()
        # Stopped on a thread of its own: this may run on one of the pool's threads, which stopping joins.
        threading.Thread(target=_stop, args=(pool,), name="math-pool-stop", daemon=True).start()


def _stop(pool: ProcessPool) -> None:
    pool.stop()
    pool.join()
