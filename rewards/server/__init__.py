"""The reward service over HTTP: `rewardbox serve`.

Its names are imported on first use: `rewardbox.rewards.server.config` (the
service's settings, read by `rewardbox.settings`) loads no web framework.
"""

from rewardbox import _lazy_exports

_HOME = {"ServerSettings": "rewardbox.rewards.server.config", "Service": "rewardbox.rewards.server.service",
         "create_app": "rewardbox.rewards.server.app"}

__all__ = ["ServerSettings", "Service", "create_app"]

__getattr__, __dir__ = _lazy_exports(globals(), _HOME)
