"""What the session tests share (tests/docker/test_session.py and
tests/docker/adversarial/test_sessions.py): the runtimes they run under, the
`add` task, a container's going and a session's processes."""

import textwrap
import time

import docker
import pytest

from rewardbox.sandbox import Verdict
from rewardbox.sandbox.session import Session

ADD_LABEL = {"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def runsc_registered() -> bool:
    client = docker.from_env()
    try:
        return "runsc" in (client.info().get("Runtimes") or {})
    finally:
        client.close()


# runc, and gVisor when the engine lists it.
RUNTIMES = [pytest.param(None, id="runc"),
            pytest.param("runsc", id="gvisor", marks=pytest.mark.skipif(
                not runsc_registered(), reason="the engine lists no runsc runtime (`make gvisor`)"))]


def gone(client: docker.DockerClient, container_id: str, wait_s: float = 10.0) -> bool:
    """Whether the container is gone from the engine, waiting up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        if not client.api.containers(all=True, filters={"id": container_id}):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def procs(session: Session) -> set[str]:
    """The command lines of the session's processes but PID 1, the lister and
    its call's shell (which runs the clean-up once the lister ends)."""
    listing = session.run(textwrap.dedent("""\
        import os
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid()):
                try:
                    print(open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode().strip())
                except OSError:
                    pass
    """))
    assert listing.verdict is Verdict.PASSED, listing
    return {line for line in listing.stdout.splitlines() if line}
