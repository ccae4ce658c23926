r"""Math answers: is the completion's final answer the label's?

Two steps, as everywhere here: find where the answer is (`extract_answer`, a
pure function of the text), then judge it with math-verify's `parse` and
`verify`, with the label's options (`MathLabel`: `precision`, `match_types`,
`strict`, `allow_set_relation_comp`). Judging runs in a pool of worker
processes: a pathological answer (`\boxed{9^{9^{9^{9^{9}}}}}`) is killed at
its deadline and scores as wrong, and no signal-based timeout ever runs
(those fail outside the main thread).

Where the answer is read: a response holding a `\boxed{...}` is read whole,
by math-verify, which takes the final-answer statement ("The final answer is
$5$") over boxes before it, and the last box with the boxes listed just before
it (`\boxed{1}, \boxed{2}` and `\boxed{6 \text{ and } 8}` are the set
{1, 2} and {6, 8}); else the last `<answer>...</answer>` block; else GSM8K's
`#### 42`; else the whole text, where math-verify looks for "the answer is
X", LaTeX and, failing those, the last number. The gold answer is read the
same way, so a MATH solution's boxes are read as a set where listed, and a
gold that math-verify reads only as text is compared as text.

What math-verify decides, the reward keeps: `1,800` = `1800`, `18.0` = `18`,
`\frac{1}{2}` = `0.5`, `$42$` = `42`, and a percentage matches both readings
(`42%` equals a gold answer of `42` and of `0.42`). Where math-verify alone
would pass an answer that is not one, the reward does not:
- a hedge, several candidates for one answer (`3 \lor 5`, "3 or 5"), is
  read as the set of its candidates, as math-verify reads `3 \text{ or } 5`,
  so it matches only a gold that is that set;
- a computation between numbers whose stated result is wrong (`2+2=5` for
  a gold answer of 5) fails, where math-verify would compare its right side
  alone; assignments keep math-verify's reading (`x = 5+5+1 = 11` is x = 11).

>>> extract_answer("<think>maybe \\boxed{41}</think>So it is \\boxed{\\frac{1}{2}}.<|im_end|>")
'So it is \\boxed{\\frac{1}{2}}.'
>>> extract_answer("40 + 2 = 42\n#### 1,800"), extract_answer("The answer is 42.")
('1,800', 'The answer is 42.')
"""

import contextlib
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

from pebble import ProcessExpired, ProcessPool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardbox.rewards.base import Reward, RewardOutput, Sample, done
from rewardbox.rewards.extract import strip_completion
from rewardbox.rewards.label_formats import LabelError, MathLabel
from rewardbox.rewards.labels import parse_label
from rewardbox.sandbox import Verdict

__all__ = ["MathConfig", "MathReward", "extract_answer"]

_SHOWN_CHARS = 200
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)  # an escaped brace, \{ or \}, is content
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_HASHES = re.compile(r"####[ \t]*\n?[ \t]*([^\n]*)")
_MATH_DELIMITERS = ("$", "\\(", "\\[", "\\boxed", "\\fbox")
# A word of two or more letters that is not a LaTeX command: prose, which must
# not be read as a product of symbols ("$apples$" is a*p*p*l*e*s).
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
# Words in \text{...} are LaTeX's own: `6 \text{ and } 8` is the set {6, 8}, not prose.
_TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{[^{}]*\}")
# Digit-group spacing math-verify misreads: "1\,800" parses as 801.
_DIGIT_GROUP_SPACE = re.compile(r"(?<=\d)(?:\\[,;:! ]|\{,\})(?=\d{3}(?!\d))")
_SPACED_NUMBER = re.compile(r"-?\d{1,3}(?: \d{3})+(?:\.\d+)?")
_PLAIN_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
# LaTeX's "or": math-verify reads `3 \lor 5` as 5; `3 \text{ or } 5` it reads as the set {3, 5}.
_LATEX_OR = re.compile(r"\\(?:lor|vee)(?![A-Za-z])")
# "3 or 5", "x = 3, or maybe x = 5" in prose, where math-verify would read the last number alone.
_CANDIDATE = r"(?:[A-Za-z]\s*=\s*)?-?\d+(?:[.,]\d+)*"
_PROSE_OR = re.compile(rf"(?<![\w.,$\\])({_CANDIDATE})\s*,?\s+or\s+(?:(?:maybe|perhaps|possibly)\s+)?({_CANDIDATE})(?![\w$])")
_MATH_SPAN = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL)


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
    r"""The part of a completion its final answer is read from (see the module
    docstring for the order); None when the response is empty. A box cut off
    before it closes is dropped with what follows it.

    >>> extract_answer(r"First \boxed{3}, then \boxed{\sqrt{\frac{1}{2}}}")
    'First \\boxed{3}, then \\boxed{\\sqrt{\\frac{1}{2}}}'
    >>> extract_answer("<answer> 7 </answer> I counted 3 apples")
    '7'
    >>> extract_answer(r"So \boxed{3}, or rather \boxed{\frac{1}{2")
    'So \\boxed{3}, or rather'
    """
    text = _before_unclosed_box(strip_completion(completion, prompt)).strip()
    if _BOXED.search(text):
        return text
    for find in (_last_answer_tag, _last_hashes):
        answer = find(text)
        if answer:
            return answer
    return text or None


def _before_unclosed_box(text: str) -> str:
    """The text up to the first box that never closes (a generation cut off mid-answer)."""
    box_at = {match.end(): match.start() for match in _BOXED.finditer(text)}  # by where its content begins
    if not box_at:
        return text
    open_boxes: list[tuple[int, int]] = []  # (where the box starts, the brace depth of its content)
    depth = 0
    for token in _BRACE_TOKEN.finditer(text):  # braces and escapes only: linear in the text
        if token.group() == "{":
            depth += 1
            if token.end() in box_at:
                open_boxes.append((box_at[token.end()], depth))
        elif token.group() == "}":
            if open_boxes and open_boxes[-1][1] == depth:
                open_boxes.pop()
            depth = max(depth - 1, 0)
    return text[:open_boxes[0][0]] if open_boxes else text


def _last_answer_tag(text: str) -> str | None:
    blocks = [block.strip() for block in _ANSWER_TAG.findall(text)]
    return next((block for block in reversed(blocks) if block), None)


def _last_hashes(text: str) -> str | None:
    lines = [line.strip() for line in _HASHES.findall(text)]
    return next((line for line in reversed(lines) if line), None)


def _plain_number(text: str) -> Decimal | None:
    text = text.strip().strip("$").strip().removesuffix(".")
    return Decimal(text.replace(",", "")) if _PLAIN_NUMBER.fullmatch(text) else None


def _candidates_as_sets(text: str) -> str:
    r"""Disjunctions written the way math-verify reads as the set of their
    candidates: `3 \lor 5` and, in prose, "3 or 5" become `3 \text{ or } 5`.

    >>> _candidates_as_sets(r"$3 \lor 5$ or, in words, x = 3 or maybe x = 5")
    '$3 \\text{ or } 5$ or, in words, $x = 3 \\text{ or } x = 5$'
    """
    text = _LATEX_OR.sub(r"\\text{ or }", text)
    pieces, last = [], 0
    for span in [*_MATH_SPAN.finditer(text), None]:  # prose only: inside math "or" is LaTeX's business
        prose = text[last:span.start() if span else len(text)]
        pieces.append(_PROSE_OR.sub(r"$\1 \\text{ or } \2$", prose))
        if span:
            pieces.append(span.group())
            last = span.end()
    return "".join(pieces)


# --- in the worker processes -------------------------------------------------

def _start_worker(memory_mb: int | None) -> None:
    if memory_mb is not None:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_mb * 2**20 if hard == resource.RLIM_INFINITY else min(memory_mb * 2**20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    # Its only warnings say that its own timeouts are off, which is on purpose here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _judge("1", MathLabel(answer="1"))  # imports sympy and the LaTeX grammar before the first real answer arrives


def _judge(answer: str | None, label: MathLabel) -> tuple[bool | None, str | None]:
    """(passed, the answer as read); passed is None when math-verify reads nothing in the gold answer."""
    from math_verify import verify

    expected = _gold_reading(label.answer, label.match_types)
    if not expected:
        return None, None
    predicted = _reading(_candidates_as_sets(answer), label.match_types) if answer else []
    if not predicted:
        return False, None
    shown = predicted[-1] if isinstance(predicted[-1], str) else str(predicted[0])
    if any(_states_a_false_equation(item, label.precision) for item in predicted):
        return False, shown
    passed = verify(list(expected), predicted, float_rounding=label.precision, strict=label.strict,
                    allow_set_relation_comp=label.allow_set_relation_comp, timeout_seconds=None)
    return passed, shown


@lru_cache(maxsize=4096)
def _gold_reading(gold: str, match_types: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(_reading(_candidates_as_sets(gold), match_types))


def _reading(text: str, match_types: tuple[str, ...]) -> list[Any]:
    """math-verify's reading of an answer: the first form of it that parses
    to math, else the first that it matched as text only."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    text = _DIGIT_GROUP_SPACE.sub("", _BOXED.sub(r"\\boxed{", text.replace("\\$", ""))).strip()  # math-verify knows \boxed only
    if _SPACED_NUMBER.fullmatch(text):
        text = text.replace(" ", "")  # "1 000": as LaTeX that is 1*000
    wrapped = f"${text}$"
    if any(mark in text for mark in _MATH_DELIMITERS) or "latex" not in match_types:
        forms = [text]
    elif _PROSE_WORD.search(_TEXT_COMMAND.sub("", text)):
        forms = [text] if "\n" in text else [text, wrapped]  # a one-line word answer: "Monday"
    else:
        forms = [wrapped, text]  # bare LaTeX: "3\sqrt{3}" unwrapped would be read as 3
    # math-verify's own priorities: a final-answer statement ties with a box, and the later one wins.
    targets = [LatexExtractionConfig() if kind == "latex" else ExprExtractionConfig() for kind in match_types]
    fallback: list[Any] = []
    for form in forms:
        parsed: list[Any] = parse(form, extraction_config=targets, parsing_timeout=None)
        if any(not isinstance(item, str) for item in parsed):
            return parsed
        fallback = fallback or parsed
    return fallback


def _states_a_false_equation(reading: Any, precision: int) -> bool:
    """Whether an answer (or a member of an answer set) is a computation between
    numbers whose stated result is wrong (`2+2=5`, `2 \\times 3 = 7 = 8`), which
    math-verify would judge by its right side alone.

    Left alone, as math-verify means them: assignments, whose intermediate
    steps it ignores by design (`x = 5+5+1 = 11` is x = 11), equations with
    unknowns, and a number set equal to a number (`1 \\text{ hour} = 60
    \\text{ min}` is `1 = 60` once math-verify drops the units)."""
    from math_verify.grader import is_assignment_relation, is_equation, sympy_expr_eq
    from sympy import And, Basic, FiniteSet, Tuple

    if not isinstance(reading, Basic):
        return False
    for item in reading.args if isinstance(reading, (FiniteSet, Tuple)) else (reading,):
        if not is_equation(item) or is_assignment_relation(item):
            continue
        # In the order written, as math-verify reads chains (And sorts its args).
        links = list(getattr(item, "_unsorted_args", item.args)) if isinstance(item, And) else [item]
        computed = links[0].lhs
        if computed.is_Number or any(link.lhs.free_symbols or link.rhs.free_symbols for link in links):
            continue
        try:
            if not all(sympy_expr_eq(computed, link.rhs, precision, 15) for link in links):
                return True
        except Exception:  # noqa: BLE001 - sympy cannot tell: leave the equation to math-verify
            continue
    return False


class _Job:
    """One answer on its way through the pool."""

    def __init__(self, answer: str | None, label: MathLabel):
        self.answer = answer
        self.label = label
        self.gold = label.answer
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

    The output's `verdict` is passed or failed and its `duration_s` runs from
    submission to verdict (queueing included); `metadata` holds `answer`
    (what was judged, at most 200 characters; None when nothing was found),
    `expected` and `timeout` (judging was killed at `timeout_s`).
    """

    name = "math"

    def __init__(self, config: MathConfig | None = None):
        self.config = config or MathConfig()
        self._lock = threading.Lock()
        self._pool: ProcessPool | None = None
        self._finalizer: weakref.finalize[[ProcessPool], MathReward] | None = None
        self._closed = False

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        try:
            label = parse_label(sample.label)
        except LabelError as exc:
            return done(RewardOutput.unscorable(str(exc)))
        if not isinstance(label, MathLabel):
            return done(RewardOutput.unscorable(f"not a math label but a {label.kind} label"))
        job = _Job(extract_answer(sample.completion, sample.prompt), label)
        number = _plain_number(job.answer) if job.answer is not None else None
        if number is not None and number == _plain_number(job.gold) and "expr" in label.match_types:
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
            pool.close()  # type: ignore[no-untyped-call]  # pebble leaves close() unannotated
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
            running = pool.schedule(self._judge, args=(job.answer, job.label), timeout=self.config.timeout_s)
        except RuntimeError:  # pebble gave up on this pool (a worker died while idle): start afresh, once
            if job.attempts > 1:
                raise
            self._discard(pool)
            return self._schedule(job)
        running.add_done_callback(lambda finished: self._finished(job, pool, finished))

    def _finished(self, job: _Job, pool: ProcessPool, finished: Future[tuple[bool | None, str | None]]) -> None:
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
                    error = f"math-verify reads no answer in the gold answer {job.gold[:_SHOWN_CHARS]!r}"
                    self._set(job, RewardOutput.unscorable(error, expected=job.gold[:_SHOWN_CHARS]))
                else:
                    self._settle(job, passed=passed, shown=shown)
        except BaseException as exc:  # noqa: BLE001 - our failure: raised to whoever waits on the future
            with contextlib.suppress(InvalidStateError):
                job.future.set_exception(exc)

    def _settle(self, job: _Job, *, passed: bool, shown: str | None, timeout: bool = False, error: str | None = None) -> None:
        metadata: dict[str, Any] = {
            "kind": "math",  # the label's format, as a code grade's kind
            "answer": shown[:_SHOWN_CHARS] if shown is not None else None,
            "expected": job.gold[:_SHOWN_CHARS],
            "timeout": timeout,
        }
        if error is not None:
            metadata["error"] = error
        reward = self.config.correct_reward if passed else self.config.wrong_reward
        self._set(job, RewardOutput(reward=reward, score=1.0 if passed else 0.0,
                                    verdict=Verdict.PASSED if passed else Verdict.FAILED,
                                    duration_s=round(time.monotonic() - job.started, 6), metadata=metadata))

    @staticmethod
    def _set(job: _Job, output: RewardOutput) -> None:
        with contextlib.suppress(InvalidStateError):  # the caller cancelled it
            job.future.set_result(output)

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
    pool.stop()  # type: ignore[no-untyped-call]  # pebble leaves stop() unannotated
    pool.join()
