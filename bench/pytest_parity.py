"""Real pytest modules graded both ways: the completion in its own process
behind the stand-in `solution` (the default) and imported into the tests'
process (`in_process: true`). Prints the share that grade the same and every
difference.

    .venv/bin/python bench/pytest_parity.py FILE.json...

FILE: KodCode's published demo sets (github.com/KodCode-AI/kodcode,
`demo/Complete_Verified_KodCode_*/…_Complete.json`: per task a `test_code`
and `response`, and per trial a `solution_code` with its own `test_code`).
A module that names no `solution` gets `from solution import *` first, as
KodCode's released data does. The data is not vendored (its licence is not ours).
"""

import argparse
import json
import sys
from collections import Counter

from rewards import CodeReward, Sample
from sandbox import Limits
from sandbox.modes import make_sandbox


def pairs(paths):
    for path in paths:
        with open(path, encoding="utf-8") as f:
            tasks = json.load(f)
        for i, task in enumerate(tasks):
            yield f"{path.rsplit('/', 1)[-1][:40]}#{i}", task["test_code"], task["response"]
            for name, trial in sorted(task.get("trials", {}).items()):
                yield f"{path.rsplit('/', 1)[-1][:40]}#{i}/{name}", trial["test_code"], trial["solution_code"]


def module(test_code):
    return test_code if "solution" in test_code else "from solution import *\n" + test_code


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", help="write every pair's two grades here")
    args = parser.parse_args()
    items = list(pairs(args.files))
    with make_sandbox(max_containers=args.workers) as sandbox:
        reward = CodeReward(sandbox, limits=Limits(timeout_s=20))
        samples = []
        for _, test, code in items:
            for in_process in (False, True):
                samples.append(Sample(completion=f"```python\n{code}\n```",
                                      label={"pytest": module(test), "in_process": in_process}))
        outs = reward.score_many(samples)
    same, differ, kinds = 0, [], Counter()
    rows = []
    for n, (key, _, _) in enumerate(items):
        out, old = outs[2 * n], outs[2 * n + 1]
        a = (out.metadata.get("verdict"), out.metadata.get("passed"), out.metadata.get("total"))
        b = (old.metadata.get("verdict"), old.metadata.get("passed"), old.metadata.get("total"))
        rows.append({"key": key, "stand_in": a, "in_process": b})
        if a == b:
            same += 1
            kinds[a[0]] += 1
            continue
        failed = [(t["name"], (t.get("message") or "")[-300:]) for t in out.metadata.get("tests", [])
                  if t["outcome"] != "passed"]
        differ.append((key, a, b, out.metadata.get("message", "")[-300:], failed[:2]))
    print(f"{len(items)} (module, completion) pairs: {same} graded the same ({same / len(items):.1%}), "
          f"{len(differ)} differ; same verdicts: {dict(kinds)}")
    for key, a, b, message, failed in differ:
        print(f"- {key}: stand-in {a} vs in process {b}\n    {message!r}\n    {failed!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
