"""rewardbox's reward for OpenRLHF. Pass this file's path to the trainer:

    --reward.remote_url /path/to/reward_func.py    (OpenRLHF 0.10.2 and later)
    --remote_rm_url /path/to/reward_func.py        (earlier releases)

OpenRLHF imports the file by path, so it imports only the installed rewardbox,
absolutely. Settings come from REWARDBOX_* environment variables (README.md).
"""

from rewardbox.adapters import openrlhf as rewardbox_openrlhf

# Check the settings while OpenRLHF loads this file, where an error stops the run
# with our message; the newest OpenRLHF swallows errors raised by reward_func.
rewardbox_openrlhf.settings_from_env()


def reward_func(queries, prompts, labels, **kwargs):
    """`{"rewards", "scores", "extra_logs"}`, float32 tensors of length len(queries)."""
    return rewardbox_openrlhf.reward_func(queries, prompts, labels, **kwargs)
