"""Failures of ours, as opposed to what the code under test did.

What a program did (failed, timed out, ran out of memory) is data on a
`RunResult`. Anything here means the sandbox could not do its job; the caller
must not turn it into a reward.

    SandboxError                 root of everything this package raises
    ├── EngineUnavailable        the Docker engine does not answer (or its disk is full)
    │   └── ClusterUnavailable   no sandbox worker is left in the Ray cluster
    ├── ContainerLost            a run's container was stopped or removed from outside
    ├── ImageMissing             the sandbox image is not built
    ├── RuntimeMissing           the OCI runtime asked for is not registered
    ├── CpusMissing              pin_cpus names CPUs the engine's machine does not have
    └── HarnessError             the in-container harness failed (a bug of ours)

A request that cannot be run as given is refused when it is made: `RunRequest`
is a pydantic model, so that is a `pydantic.ValidationError` (a `ValueError`).
"""


class SandboxError(Exception):
    """Root of the sandbox's own failures."""


class EngineUnavailable(SandboxError):
    """The Docker engine could not be reached, even after retrying."""


class ClusterUnavailable(EngineUnavailable):
    """No sandbox worker of the Ray backend is left to run a request (or
    none could start), even after waiting for one."""


class ContainerLost(SandboxError):
    """A run's container was killed, stopped or removed by something outside it
    (an operator, the engine restarting): nothing the code did, so the run is
    repeated in a new container."""


class ImageMissing(SandboxError):
    """The sandbox image is not present on the engine."""


class RuntimeMissing(SandboxError):
    """The OCI runtime asked for (e.g. runsc) is not registered with the engine."""


class CpusMissing(SandboxError):
    """`pin_cpus` names a CPU the Docker engine's machine does not have."""


class HarnessError(SandboxError):
    """The harness inside the container reported a failure of its own."""

