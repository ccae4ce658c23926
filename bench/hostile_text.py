"""Host-side cost of reading hostile completions (issue 15): cleaning,
extraction and everything `CodeReward` does before a container is asked
(label, the check label's joining, the request), per shape at the service's
size limit, 1 MB. No container runs: the sandbox only records the request.

    .venv/bin/python bench/hostile_text.py                # 1 MB, the code of this checkout
    .venv/bin/python bench/hostile_text.py --before 6061a46 --kib 80

`--before REV` also times `rewards/extract.py` as it was at REV, side by side
on the same texts (use a small `--kib`: the old code was quadratic).
"""

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewardbox.rewards import CodeReward, Sample  # noqa: E402
from rewardbox.rewards.extract import extract_code  # noqa: E402

F = "def f(x):\n    return x + 1\n"
CHECK = {"test": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "f", "prompt": "def f(x):\n"}


def shapes(size: int) -> dict[str, str]:
    return {
        "end tokens, then text": F + "</s> " * (size // 5) + "x",
        "a block, then end tokens": f"```python\n{F}```" + "</s>" * (size // 4),
        "fence line, no newline": "```" + "a" * size,
        "fence lines": "```a\n" * (size // 5),
        "start tokens": " <s>" * (size // 4) + F,
        "unclosed think tags": "<think>" * (size // 7),
        "nested unary operators": "def f(x):\n    return " + "- " * (size // 2) + "x\n",
        "plus chain": "def f(x):\n    return " + "x+" * (size // 2) + "x\n",
        "short lines of names": "a\n" * (size // 2),
        "code": F * (size // len(F)),
    }


class Recorder:
    """Stands in for the sandbox: the request is built, nothing runs."""

    def submit(self, request):
        future: Future = Future()
        future.set_exception(RuntimeError("not run"))
        return future


def timed(func, *args) -> float:
    started = time.perf_counter()
    func(*args)
    return time.perf_counter() - started


def old_extract(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:rewards/extract.py"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "extract_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("extract_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.extract_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kib", type=int, default=1024, help="size of each completion (default 1024: the service's limit)")
    parser.add_argument("--before", metavar="REV", help="also time rewards/extract.py as it was at this revision")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    reward = CodeReward(Recorder())
    before = old_extract(args.before) if args.before else None
    rows = []
    for name, text in shapes(args.kib * 1024).items():
        row = {"shape": name, "bytes": len(text.encode()),
               "extract_s": timed(extract_code, text),
               "reward_read_s": timed(lambda text=text: reward.submit_grade(
                   Sample(completion=text, prompt="def f(x):\n", label=CHECK)))}
        if before is not None:
            row["extract_before_s"] = timed(before, text)
        rows.append(row)
    head = (f"{'shape':26s} {'bytes':>9s} {'extract s':>10s} {'read s':>8s}"
            + (f" {'before s':>9s} {'ratio':>7s}" if before else ""))
    print(head)
    for r in rows:
        line = f"{r['shape']:26s} {r['bytes']:9d} {r['extract_s']:10.4f} {r['reward_read_s']:8.4f}"
        if before:
            line += f" {r['extract_before_s']:9.4f} {r['extract_before_s'] / max(r['extract_s'], 1e-9):6.0f}x"
        print(line)
    print(f"slowest: {max(r['reward_read_s'] for r in rows):.3f} s to read one completion of {args.kib} KiB")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
