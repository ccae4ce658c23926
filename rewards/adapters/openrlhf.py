"""OpenRLHF: `reward_func(queries, prompts, labels)` and a multi-step coding episode.

OpenRLHF imports a reward file by path (`--reward.remote_url reward_func.py`;
before 0.10.2 `--remote_rm_url`) and calls its `reward_func`: 0.9.1 and
later with one sample per call from many threads at once
(`asyncio.to_thread`), 0.8.11 and 0.9.0 with a micro-batch per Ray task. The agent path
(`--train.agent_func_path`; before 0.10.2 `--agent_func_path`) drives a
`CodingEpisode`. The two files to pass are in `examples/openrlhf/`.

The trainer passes no options, so the settings come from the environment
and the file it names (`rewardbox.settings`: REWARDBOX_* variables such as
REWARDBOX_IMAGE, REWARDBOX_WORKERS, REWARDBOX_TIMEOUT_S, REWARDBOX_REWARD,
REWARDBOX_MAX_STEPS, and REWARDBOX_CONFIG, a TOML file of the same keys; an
empty value counts as unset; a bad value raises `SettingsError` naming it).
Unset, each process runs 4 containers at once (with REWARDBOX_RAY, each
sandbox node as many as it has CPUs).

The reward is resolved by a registry whose built-ins (code, math,
correctness) use the sandbox, limit and policy settings. The sandbox starts
on the first call, whatever the reward.

What the model did is always a number. A sample whose label cannot be used
gets reward 0.0 and score 0.0, logged at ERROR: OpenRLHF needs a number, and
this one is no penalty. A failure of ours (a `SandboxError`, after the
sandbox's own bounded retries) is logged at ERROR and raised.

This module is the reward file itself (its module-level `reward_func` works
when OpenRLHF loads it by path from site-packages) and the adapter's public
names; its jobs live beside it: the settings read from the environment
(`openrlhf_settings`), the scoring into tensors with this process's reward
(`openrlhf_scoring`) and the agent episode (`openrlhf_agent`).
"""

from collections.abc import Sequence
from typing import Any

from rewardbox.adapters import split_response
from rewardbox.adapters.openrlhf_agent import CodingEpisode, feedback
from rewardbox.adapters.openrlhf_scoring import _PROCESS, OpenRLHFReward, Scores
from rewardbox.adapters.openrlhf_settings import ENV_VARS, OpenRLHFSettings, build_reward, settings_from_env
from rewardbox.rewards.logs import LOG_KEYS, sample_logs
from rewardbox.settings import FEEDBACK_TEMPLATES, SettingsError

__all__ = [
    "CodingEpisode",
    "ENV_VARS",
    "FEEDBACK_TEMPLATES",
    "LOG_KEYS",
    "OpenRLHFReward",
    "OpenRLHFSettings",
    "Scores",
    "SettingsError",
    "build_reward",
    "feedback",
    "reset",
    "reward_func",
    "sample_logs",
    "settings_from_env",
    "split_response",
]


def reward_func(queries: Sequence[str], prompts: Sequence[str | None] | None = None,
                labels: Sequence[Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's `reward_func(queries, prompts, labels)`, with this process's
    reward (see `OpenRLHFReward`)."""
    return _PROCESS(queries, prompts, labels, **kwargs)


def reset() -> None:
    """Forget this process's reward and settings; the next call builds them again."""
    _PROCESS.reset()
