"""rewardbox: sandboxed code-execution rewards for RL on code.

The public API, imported on first use (so that `import rewardbox.sandbox.protocol`
or the command line's `--help` loads nothing else):

    from rewardbox import CorrectnessReward, Sandbox, Limits

The sandbox is `rewardbox.sandbox`, the rewards `rewardbox.rewards`, the trainers'
interfaces `rewardbox.adapters` (`rewardbox.adapters.trl`, `.verl`, `.openrlhf`, ...).
"""

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"


def _lazy_exports(namespace: dict[str, Any],
                  homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` (PEP 562) for names loaded on
    first use: each name in `homes` from the module named there, then kept in
    `namespace` (the package's globals) so that the next lookup is plain.
    Here because the package root imports nothing of its own; the lazy
    subpackages (`rewardbox.rewards.server`) take it from here."""
    package = namespace["__name__"]

    def get(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *homes})

    return get, listing


# Each public name and the subpackage that defines it.
_SANDBOX = (
    "AsyncSession", "CallResult", "ClusterUnavailable", "ContainerLost", "CpusMissing", "DEFAULT_IMAGE", "EngineUnavailable",
    "HarnessError", "ImageMissing", "LANGUAGES", "Language", "LazySandbox", "Limits", "NoSuchFile", "Outcome",
    "RunRequest", "RunResult", "RuntimeMissing", "Sandbox", "SandboxBackend", "SandboxError", "Session",
    "SessionEnded", "SessionError", "SessionLimits", "SessionRefused", "TestResult", "UnknownLanguage", "Verdict",
    "language",
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

__getattr__, __dir__ = _lazy_exports(globals(), _HOME)
