"""Adapters: any rewardbox `Reward` behind a trainer's own reward interface.

One module per trainer (`openrlhf`, `trl`, `verl`, `flux`, `agentfly`,
`twinkle`; OpenRLHF's jobs in `openrlhf_settings`, `openrlhf_scoring` and
`openrlhf_agent` beside it; verl's multi-turn tools in `verl_tool`; AgentFly's
session resource in `agentfly_session`), each
matching that trainer's calling convention duck-typed: no trainer is a
dependency. The names below load their module on first use, so
importing this package pulls in no trainer and no torch (only the OpenRLHF
adapter needs it).

What the adapters share lives here: the process-wide default reward, the
reading of chat messages, the numbers every sample reports and scoring from
async code.
"""

import asyncio
import importlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.sandbox import Verdict

log = logging.getLogger(__name__)

_PROMPT_ANCHOR_CHARS = 256
_MIN_PROMPT_SUFFIX_CHARS = 16  # shorter suffixes ("\n", "assistant") match by chance

_EXPORTS = {
    "CodingEpisode": "openrlhf",
    "FluxReward": "flux",
    "OpenRLHFReward": "openrlhf",
    "RewardBatch": "flux",
    "RunCodeTool": "verl_tool",
    "RunTestsTool": "verl_tool",
    "SessionEnv": "agentfly_session",
    "TrlReward": "trl",
    "TwinkleReward": "twinkle",
    "VerlReward": "verl",
    "agentfly_async_reward": "agentfly",
    "agentfly_reward": "agentfly",
    "agentfly_session_reward": "agentfly_session",
    "grpo_advantage": "twinkle",
    "make_compute_score": "verl",
    "trl_async_reward": "trl",
    "trl_reward": "trl",
}

__all__ = [
    "CodingEpisode",
    "FluxReward",
    "OpenRLHFReward",
    "RewardBatch",
    "RunCodeTool",
    "RunTestsTool",
    "SessionEnv",
    "TrlReward",
    "TwinkleReward",
    "VerlReward",
    "agentfly_async_reward",
    "agentfly_reward",
    "agentfly_session_reward",
    "completion_text",
    "default_reward",
    "grpo_advantage",
    "last_message",
    "make_compute_score",
    "message_text",
    "outcome_stats",
    "prompt_text",
    "score_async",
    "split_response",
    "trl_async_reward",
    "trl_reward",
]

_default: tuple[int, Reward] | None = None
_default_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def default_reward() -> Reward:
    """The reward adapters use when given none: one per process, made on
    first use (loading an adapter costs nothing) from the settings
    (`rewardbox.settings`: REWARDBOX_* variables and the REWARDBOX_CONFIG
    file): the `reward` on a sandbox of the `image`, `workers`, `mode`,
    limits and `ray` they name, started on its first run. A setting that
    cannot be used raises `SettingsError` naming it."""
    global _default
    with _default_lock:
        # A forked worker (Ray, a process pool) inherits the parent's reward with
        # its engine connection and threads, none of which work in the child.
        if _default is None or _default[0] != os.getpid():
            from rewardbox.settings import build_reward, build_sandbox, load_settings

            settings = load_settings()
            _default = (os.getpid(), build_reward(settings, build_sandbox(settings)))
        return _default[1]


def message_text(message: Any) -> str:
    """The text of a chat message or of its content; content may be a string
    or a list of parts (`{"type": "text", "text": ...}`).

    >>> message_text({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    'ab'
    >>> message_text("plain"), message_text(None)
    ('plain', '')
    """
    if isinstance(message, dict) and "content" in message:
        message = message["content"]
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    if isinstance(message, dict):
        return str(message.get("text") or "")
    if isinstance(message, Sequence):
        return "".join(message_text(part) for part in message)
    return str(message)


def last_message(messages: Sequence[Any], role: str) -> Any:
    """The last message with `role`, else the last message, else None."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == role:
            return message
    return messages[-1] if messages else None


def completion_text(completion: Any) -> str:
    """A completion as text: a string, or a chat list whose last assistant
    message is the completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        return message_text(last_message(completion, "assistant"))
    return message_text(completion)


def prompt_text(prompt: Any) -> str | None:
    """A prompt as text: a string, or a chat list whose last user message is
    what the model answered (code to continue, for HumanEval-style prompts).

    >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "def f():"}])
    'def f():'
    """
    if prompt is None or isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return message_text(last_message(prompt, "user")) if prompt else None
    return message_text(prompt)


def outcome_stats(output: RewardOutput) -> dict[str, float]:
    """Numbers every sample has, for trainers that average extra keys: `acc`
    (solved), `pass_rate` (tests passed / expected) and `unscorable` (the
    label could not be used).

    >>> outcome_stats(RewardOutput(reward=0.5, score=0.75, metadata={"verdict": "failed", "passed": 1, "total": 2}))
    {'acc': 0.0, 'pass_rate': 0.5, 'unscorable': 0.0}
    """
    acc = 1.0 if output.verdict is Verdict.PASSED else 0.0
    passed, total = output.passed, output.total
    return {
        "acc": acc,
        "pass_rate": passed / total if passed is not None and total is not None and total > 0 else acc,
        "unscorable": float(output.reward is None),
    }


def split_response(query: str, prompt: str | None) -> str:
    """The response part of an OpenRLHF query (prompt + response, decoded).

    The query starts with the prompt unless the trainer cut the prompt on the
    left to fit its context: then the response starts after the prompt's end.

    >>> split_response("<|im_start|>user\\nAdd.<|im_end|>\\n<|im_start|>assistant\\nx = 1",
    ...                "<|im_start|>user\\nAdd.<|im_end|>\\n<|im_start|>assistant\\n")
    'x = 1'
    >>> split_response("the tail of a long prompt.<|im_end|>\\nanswer",
    ...                "The start and the tail of a long prompt.<|im_end|>\\n")
    'answer'
    """
    if not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt):]
    anchor = prompt[-_PROMPT_ANCHOR_CHARS:]
    at = query.find(anchor)
    if at >= 0:
        return query[at + len(anchor):]
    # Cut closer to its end than the anchor is long, the prompt survives as a
    # suffix of itself at the start of the query.
    for start in range(1, len(anchor) - _MIN_PROMPT_SUFFIX_CHARS + 1):
        if query.startswith(anchor[start:]):
            return query[len(anchor) - start:]
    log.warning("the query does not contain its prompt; scoring the whole query")
    return query


async def score_async(reward: Reward, samples: Sequence[Sample]) -> list[RewardOutput]:
    """`reward.score_many` without blocking the event loop: a reward with its
    own `submit` gets the samples in a worker thread (reading a completion is
    work: cleaning, extraction, labels) and hands out futures, which are
    awaited, no thread held per sample; one that only scores runs in a worker
    thread.

    Every sample is answered: one whose reward raised (a bug of ours or of a
    reward function) is unscored with the error, never a penalty, and the
    others keep their outputs. Only a failure of the sandbox raises (the
    first one), so that the whole batch is tried again."""
    hand_out = _submit_each if type(reward).submit is not Reward.submit else _score_each
    futures = await asyncio.to_thread(hand_out, reward, samples)
    answers = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
    from rewardbox.sandbox import SandboxError  # the sandbox package is imported only once code is scored

    if failure := next((a for a in answers if isinstance(a, SandboxError)), None):
        raise failure
    return [answer if isinstance(answer, RewardOutput) else _failed(sample, answer)
            for sample, answer in zip(samples, answers)]


def _submit_each(reward: Reward, samples: Sequence[Sample]) -> "list[Future[RewardOutput]]":
    futures = []
    for sample in samples:
        try:
            futures.append(reward.submit(sample))
        except BaseException as exc:  # noqa: BLE001 - that sample's answer, not the batch's
            failed: Future[RewardOutput] = Future()
            failed.set_exception(exc)
            futures.append(failed)
    return futures


def _score_each(reward: Reward, samples: Sequence[Sample]) -> "list[Future[RewardOutput]]":
    """A reward that only scores, one sample after another in this thread."""
    return [Reward.submit(reward, sample) for sample in samples]


def _failed(sample: Sample, error: BaseException) -> RewardOutput:
    if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit, a cancelled wait
        raise error
    log.error("sample %s: the reward failed on it: %s: %s", sample.id, type(error).__name__, error,
              exc_info=(type(error), error, error.__traceback__))
    return RewardOutput.unscorable(f"the reward failed on this sample: {type(error).__name__}: {error}"[:2000],
                                   verdict=None)
