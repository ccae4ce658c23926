"""The container's memory cgroup, as seen from inside: how many processes the
kernel's OOM killer has killed in it. Read by the harness to tell an OOM kill
from any other SIGKILL without asking the host."""

import os

OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1
# The counter file that answered, once one has; False once none did (gVisor).
# A test process asks before every call into the solution's worker: one read,
# not a failed open of the other version's file first.
_counter = None


def oom_kills():
    """The container's OOM-kill count, None where the kernel does not say (gVisor)."""
    global _counter
    if _counter is False:
        return None
    for path in (_counter,) if _counter else OOM_COUNTERS:
        count = _read_count(path)
        if count is not None:
            _counter = path
            return count
    if _counter is None:
        _counter = False
    return None


def _read_count(path):
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
    except OSError:
        return None
    for line in data.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"oom_kill":
            try:
                return int(value)
            except ValueError:
                return None
    return None
