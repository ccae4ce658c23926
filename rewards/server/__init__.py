"""The reward service over HTTP: `rewardbox serve`.

Its names are imported on first use: `rewardbox.rewards.server.config` (the
service's settings, read by `rewardbox.settings`) loads no web framework.
"""

import importlib
from typing import Any

_HOME = {"ServerSettings": "rewardbox.rewards.server.config", "Service": "rewardbox.rewards.server.service",
         "create_app": "rewardbox.rewards.server.app"}

__all__ = ["ServerSettings", "Service", "create_app"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rewardbox.rewards.server' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *globals()])
