"""The command line's fixed cost: `rewardbox score` on a one-sample input,
from process start to the first sample's reward, and where it goes.

Each run is a fresh `python -m rewardbox score` process. The wall clock is
the parent's (spawn to the first output line, spawn to exit); the phases
come from the child, which times a few of our own calls by wrapping them
(when the tree has them) and writes the marks at exit:

    imported     `rewardbox.cli` imported (the interpreter's start included)
    engine       the Docker client connected (ping)
    image        the image inspected
    swept        left-behind containers looked for
    created      the first container created (the engine's call returned)
    attached     its attach connection open
    started      the engine's start call returned (the container's process runs)
    container    the first pooled container answered "ready" (after `started`:
                 the supervisor's imports and its warm-up session, in the container)
    run          the first sample's run returned
    first line   (parent) the first result line read from the child's stdout
    exit         (parent) the process ended (the pool's containers removed)

Usage: .venv/bin/python bench/cli_cost.py [--runs 7] [--tree DIR] [-j 2]
`--tree` puts DIR first on PYTHONPATH (a tree with `rewardbox/` laid out as
installed, e.g. a worktree of an older commit linked into place), so that
before and after are measured side by side, alternating.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SAMPLE = {"id": 1, "completion": "```python\ndef add(a, b):\n    return a + b\n```",
          "label": {"pytest": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}}

# Runs in the child: wraps a few calls to mark when they end, then runs the CLI.
CHILD = r"""
import json, os, sys, time
T0 = float(os.environ["CLI_COST_T0"])
marks = {}
def mark(name):
    marks.setdefault(name, time.time() - T0)
import atexit
atexit.register(lambda: open(os.environ["CLI_COST_MARKS"], "w").write(json.dumps(marks)))
import rewardbox.cli
mark("imported")
def wrap(module, owner, name, label):
    try:
        mod = __import__(module, fromlist=["_"])
    except ImportError:
        return
    cls = getattr(mod, owner, None)
    original = getattr(cls, name, None) if cls is not None else None
    if original is None:
        return
    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        mark(label)
        return result
    static = isinstance(cls.__dict__.get(name), staticmethod)
    setattr(cls, name, staticmethod(wrapped) if static else wrapped)
wrap("rewardbox.sandbox.engine", "DockerEngine", "_connect", "engine")
wrap("rewardbox.sandbox.engine", "DockerEngine", "require_image", "image")
wrap("rewardbox.sandbox.engine", "DockerEngine", "sweep", "swept")
wrap("rewardbox.sandbox.engine", "DockerEngine", "create", "created")
wrap("rewardbox.sandbox.engine", "DockerEngine", "attach", "attached")
wrap("rewardbox.sandbox.engine", "DockerEngine", "start", "started")
wrap("rewardbox.sandbox.pool", "PooledSandbox", "_start", "container")
wrap("rewardbox.sandbox.pool", "PooledSandbox", "_run_on", "run")
sys.exit(rewardbox.cli.main(sys.argv[1:]))
"""

PHASES = ("imported", "engine", "image", "swept", "created", "attached", "started", "container", "run", "first line", "exit")


def one_run(python: str, input_path: str, workers: int, tree: str | None, image: str | None) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        marks_path = f.name
    env = dict(os.environ, CLI_COST_MARKS=marks_path)
    if tree:
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    argv = [python, "-c", CHILD, "score", input_path, "--no-progress", "-j", str(workers)]
    if image:
        argv += ["--image", image]
    t0 = time.time()
    env["CLI_COST_T0"] = repr(t0)
    # Not from the checkout: `-c` puts the working directory first on sys.path.
    child = subprocess.Popen(argv, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdout is not None
    line = child.stdout.readline()
    first = time.time() - t0
    _, err = child.communicate()
    ended = time.time() - t0
    if child.returncode != 0 or not line:
        raise SystemExit(f"rewardbox score failed ({child.returncode}): {err.decode()[-2000:]}")
    if json.loads(line)["reward"] != 1.0:
        raise SystemExit(f"unexpected result: {line!r}")
    try:
        with open(marks_path) as f:
            marks = json.load(f)
    finally:
        os.unlink(marks_path)
    return {**marks, "first line": first, "exit": ended}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--image", default=None, help="the sandbox image for every tree (default: each tree's own)")
    parser.add_argument("--tree", action="append", default=[],
                        help="a tree to put first on PYTHONPATH (repeat to compare; 'installed' is the installed one)")
    args = parser.parse_args()
    trees = args.tree or ["installed"]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps(SAMPLE) + "\n")
        input_path = f.name
    try:
        one_run(sys.executable, input_path, args.workers, None, args.image)  # warms the page cache and the .pyc files
        runs: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
        for _ in range(args.runs):
            for tree in trees:  # alternating: the machine's noise falls on both alike
                runs[tree].append(one_run(sys.executable, input_path, args.workers,
                                          None if tree == "installed" else tree, args.image))
    finally:
        os.unlink(input_path)
    print(f"rewardbox score, one sample, -j {args.workers}: median of {args.runs} runs, seconds from process start")
    print(f"{'phase':<12}" + "".join(f"{tree[-24:]:>26}" for tree in trees))
    for phase in PHASES:
        cells = []
        for tree in trees:
            values = [r[phase] for r in runs[tree] if phase in r]
            cells.append(f"{statistics.median(values):26.3f}" if values else f"{'-':>26}")
        print(f"{phase:<12}" + "".join(cells))


if __name__ == "__main__":
    main()
