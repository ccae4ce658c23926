"""The OpenRLHF adapter's settings: read from the environment, as the trainer passes no options.

Part of `rewardbox.adapters.openrlhf` (which re-exports these names); the
reward file and the agent episode read their settings here.
"""

from collections.abc import Mapping

from rewardbox.rewards.base import Reward
from rewardbox.settings import Settings, build_sandbox, env_var, load_settings
from rewardbox.settings import build_reward as build_settings_reward

__all__ = ["ENV_VARS", "OpenRLHFSettings", "build_reward", "settings_from_env"]


OpenRLHFSettings = Settings
"""The settings this adapter reads: `rewardbox.settings.Settings` (the name is kept for existing imports)."""

ENV_VARS: dict[str, str] = {env_var(key): key for key in Settings.model_fields}
"""Each environment variable and the settings key it sets."""


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from REWARDBOX_* variables and the REWARDBOX_CONFIG file
    (default: `os.environ`), as every other way in reads them.

    >>> settings_from_env({"REWARDBOX_TIMEOUT_S": "4", "REWARDBOX_CRASH_REWARD": ""}).limits.timeout_s
    4.0
    >>> settings_from_env({"REWARDBOX_WORKERS": "0"})
    Traceback (most recent call last):
    ...
    rewardbox.settings.SettingsError: REWARDBOX_WORKERS='0': Input should be greater than or equal to 1
    """
    return load_settings(environ=environ)


def build_reward(settings: Settings) -> Reward:
    """The reward the settings describe (`rewardbox.settings.build_reward`)
    on their sandbox, which starts here, whatever the reward, so that a dead
    engine shows at the first call; tests replace this function (where
    `OpenRLHFReward` reads it: `rewardbox.adapters.openrlhf_scoring`)."""
    from rewardbox.sandbox import modes

    return build_settings_reward(settings, build_sandbox(settings, modes.make_sandbox))
