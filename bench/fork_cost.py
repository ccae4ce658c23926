"""What a fork of the pooled container's zygote costs, against a fork of an
interpreter holding only the solution's worker's modules (and the standard
ones solutions commonly import, which the zygote holds too): the price of the
zygote's size (pytest, its plugins and the harness imported, a session run).

Each kind runs in a container of the sandbox image (no pooled sandbox, no
host client), `--forks` times: a child that exits at once (the fork and the
exit alone), then a child that does a worker's small job (imports a
HumanEval solution from a file, calls it three times, encodes the results).
Prints the process's anonymous memory, and per child its CPU (user + system,
from wait4) and minor faults, and the parent's CPU per fork.

Usage: .venv/bin/python bench/fork_cost.py [--rounds 2] [--forks 200]
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

SOLUTION = '''
from typing import List
def has_close_elements(numbers: List[float], threshold: float) -> bool:
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2 and abs(elem - elem2) < threshold:
                return True
    return False
'''


def inside(kind: str, forks: int) -> None:
    """In the container: `zygote` warms up as rbzygote does; `lean` imports the
    worker's modules and the standard ones solutions commonly import only."""
    import gc
    import importlib
    import importlib.util
    import json
    import resource

    sys.path.insert(0, "/opt/rewardbox")
    if kind == "zygote":
        import rbzygote

        rbzygote.warm_up()
    import rbworker  # noqa: F401 - what a worker holds, in both kinds

    # What the zygote holds that solutions commonly import (a lean parent would import them ahead too).
    for name in ("collections", "functools", "itertools", "math", "re", "typing"):
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    path = "/tmp/solution.py"
    with open(path, "w") as f:
        f.write(SOLUTION)

    def job():
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases = (([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3), ([1.0, 2.0, 5.9, 4.0, 5.0], 0.95), ([1.0, 2.0, 3.0], 0.5))
        json.dumps([module.has_close_elements(*args) for args in cases])

    with open("/proc/self/status") as f:
        anon = next(line.split()[1] for line in f if line.startswith("RssAnon"))
    for name, work in (("exit at once", None), ("a worker's job", job)):
        child_cpu = faults = 0.0
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(forks):
            pid = os.fork()
            if pid == 0:
                if work:
                    work()
                os._exit(0)
            usage = os.wait4(pid, 0)[2]
            child_cpu += usage.ru_utime + usage.ru_stime
            faults += usage.ru_minflt
        after = resource.getrusage(resource.RUSAGE_SELF)
        parent_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"{kind:6s} {anon:>6s} KiB anonymous | {name:15s} | child {child_cpu * 1000 / forks:5.2f} ms "
              f"{faults / forks:4.0f} faults | parent {parent_cpu * 1000 / forks:4.2f} ms a fork")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--forks", type=int, default=200)
    parser.add_argument("--inside", choices=["zygote", "lean"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.inside, args.forks)
        return 0
    from rewardbox.sandbox.runner import DEFAULT_IMAGE

    image = os.environ.get("RBBENCH_IMAGE") or DEFAULT_IMAGE
    here = Path(__file__).resolve()
    for _ in range(args.rounds):
        for kind in ("zygote", "lean"):
            subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{here}:/bench/fork_cost.py:ro",
                            "--entrypoint", "python3", image, "-I", "-B", "/bench/fork_cost.py",
                            "--inside", kind, "--forks", str(args.forks)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
