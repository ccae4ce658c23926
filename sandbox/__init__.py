"""Running untrusted code and its tests in hardened, single-use Docker containers (and, for
an agent's rollout, in a session: `Sandbox.session`)."""

from rewardbox import __version__
from rewardbox.sandbox.backend import SandboxBackend  # noqa: E402
from rewardbox.sandbox.errors import (  # noqa: E402
    ClusterUnavailable,
    ContainerLost,
    CpusMissing,
    EngineUnavailable,
    HarnessError,
    ImageMissing,
    RuntimeMissing,
    SandboxError,
)
from rewardbox.sandbox.languages import LANGUAGES, Language, UnknownLanguage, language  # noqa: E402
from rewardbox.sandbox.models import Limits, Outcome, RunRequest, RunResult, TestResult, Verdict  # noqa: E402
from rewardbox.sandbox.modes import LazySandbox  # noqa: E402
from rewardbox.sandbox.runner import DEFAULT_IMAGE, Sandbox  # noqa: E402
from rewardbox.sandbox.session import (  # noqa: E402
    AsyncSession,
    CallResult,
    NoSuchFile,
    Session,
    SessionEnded,
    SessionError,
    SessionLimits,
    SessionRefused,
)

__all__ = [
    "AsyncSession",
    "CallResult",
    "NoSuchFile",
    "ClusterUnavailable",
    "ContainerLost",
    "CpusMissing",
    "DEFAULT_IMAGE",
    "EngineUnavailable",
    "HarnessError",
    "ImageMissing",
    "LANGUAGES",
    "Language",
    "LazySandbox",
    "Limits",
    "Outcome",
    "RunRequest",
    "RunResult",
    "RuntimeMissing",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "Session",
    "SessionEnded",
    "SessionError",
    "SessionLimits",
    "SessionRefused",
    "TestResult",
    "UnknownLanguage",
    "Verdict",
    "__version__",
    "language",
]
