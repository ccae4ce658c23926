"""rewardbox: sandboxed code-execution rewards for RL on code.

The public API, imported on first use (so that `import rewardbox.sandbox.protocol`
or the command line's `--help` loads nothing else):

    from rewardbox import CorrectnessReward, Sandbox, Limits

The sandbox is `rewardbox.sandbox`, the rewards `rewardbox.rewards`, the trainers'
interfaces `rewardbox.adapters` (`rewardbox.adapters.trl`, `.verl`, `.openrlhf`, ...).
"""

import importlib
from typing import Any

__version__ = "0.1.0"

# Each public name and the subpackage that defines it.
_SANDBOX = (
    "ClusterUnavailable", "ContainerLost", "DEFAULT_IMAGE", "EngineUnavailable", "HarnessError", "ImageMissing",
    "InvalidRequest", "LazySandbox", "Limits", "Outcome", "RunRequest", "RunResult", "RuntimeMissing", "Sandbox",
    "SandboxBackend", "SandboxError", "TestResult", "Verdict",
)
_REWARDS = (
    "AssertLabel", "CallLabel", "CheckLabel", "CodeReward", "CompositeReward", "CorrectnessReward", "ExpectedTests",
    "FormatReward", "FormatSpec", "FunctionReward", "Grade", "GradingPolicy", "Label", "LabelError", "LengthReward",
    "LengthSpec", "MathConfig", "MathLabel", "MathReward", "PytestLabel", "Registry", "Reward", "RewardOutput", "Sample",
    "StdioLabel", "UnknownRewardError", "configured_registry", "expected_tests", "extract_answer", "extract_code", "grade",
    "grade_no_code", "parse_label", "resolve", "reward", "strip_completion",
)
_HOME = {**{name: "rewardbox.sandbox" for name in _SANDBOX}, **{name: "rewardbox.rewards" for name in _REWARDS}}

__all__ = sorted(_HOME) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rewardbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
