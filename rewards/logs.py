"""Per-sample numbers for trainers' logs and tensors: the rates OpenRLHF
averages in `extra_logs`, and a reward/score pair a trainer can always use.
Torch-free: the adapters and the HTTP service share it."""

import logging
import math

from rewardbox.rewards.base import RewardOutput
from rewardbox.rewards.policy import CRASHES

log = logging.getLogger(__name__)

CRASH_VERDICTS = frozenset(v.value for v in CRASHES)
LOG_KEYS = ("pass_rate", "timeout_rate", "crash_rate", "format_rate", "sandbox_latency_s", "label_error_rate")


def sample_logs(output: RewardOutput) -> dict[str, float]:
    """One sample's share of each rate in `extra_logs`: OpenRLHF averages
    these per-sample values over the batch it logs.

    `format_rate` is the format component's `format_ok` when the reward mixes
    one in; otherwise whether the completion held code to run (verdict other
    than "no_code"). `sandbox_latency_s` is 0.0 when no container ran: for a
math answer (`kind` "math": math-verify's time is not the sandbox's).

    >>> from rewardbox.sandbox import Verdict
    >>> logs = sample_logs(RewardOutput(reward=1.0, score=1.0, verdict=Verdict.PASSED, duration_s=0.5))
    >>> logs["pass_rate"], logs["crash_rate"], logs["format_rate"], logs["sandbox_latency_s"]
    (1.0, 0.0, 1.0, 0.5)
    >>> sample_logs(RewardOutput(reward=1.0, score=1.0, verdict=Verdict.PASSED, duration_s=0.02,
    ...                          metadata={"kind": "math"}))["sandbox_latency_s"]
    0.0
    """
    verdict = verdict_of(output)
    format_ok = output.first_metadata("format_ok")
    if format_ok is None:
        format_ok = verdict not in (None, "no_code")
    # A math answer's duration_s is math-verify's time, not a container's.
    duration = output.first("duration_s") if output.first_metadata("kind") != "math" else None
    return {
        "pass_rate": float(verdict == "passed"),
        "timeout_rate": float(verdict == "timeout"),
        "crash_rate": float(verdict in CRASH_VERDICTS),
        "format_rate": float(bool(format_ok)),
        "sandbox_latency_s": float(duration) if isinstance(duration, (int, float)) and math.isfinite(duration) else 0.0,
        "label_error_rate": float(output.reward is None),
    }


def verdict_of(output: RewardOutput) -> str | None:
    """The verdict's word: the output's, else a composite component's."""
    verdict = output.first("verdict")
    return verdict.value if verdict is not None else None


def trainer_numbers(output: RewardOutput, where: str) -> tuple[float, float]:
    """(reward, score) as numbers OpenRLHF can train on; errors logged."""
    if output.reward is None:
        log.error("%s: no reward (the label cannot be used), reward 0.0: %s", where, output.metadata.get("error"))
        return 0.0, 0.0
    reward, score = float(output.reward), float(output.score if output.score is not None else 0.0)
    if not (math.isfinite(reward) and math.isfinite(score)):
        log.error("%s: a non-finite reward (%r, score %r), reward 0.0", where, output.reward, output.score)
        return 0.0, 0.0
    return reward, min(1.0, max(0.0, score))
