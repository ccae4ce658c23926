"""The container's memory cgroup, as seen from inside: how many processes the
kernel's OOM killer has killed in it. Read by the harness to tell an OOM kill
from any other SIGKILL without asking the host."""

OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1


def oom_kills():
    """The container's OOM-kill count, None where the kernel does not say (gVisor)."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None
