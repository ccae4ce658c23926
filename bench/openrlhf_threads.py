"""Samples per second through the OpenRLHF reward file (one sample per call
from 32 threads, as the newest OpenRLHF calls it) against the batch API
(`score_many`), side by side on the same samples and the same sandbox settings.

    python bench/openrlhf_threads.py [--samples 164] [--workers 4] [--mode pooled]

Samples: HumanEval's canonical solutions (tests/data), as chat completions.
"""

import argparse
import gzip
import importlib.util
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).parents[1]
PROMPT = "<|im_start|>user\nComplete the function.<|im_end|>\n<|im_start|>assistant\n"


def samples(n: int) -> list[tuple[str, dict]]:
    with gzip.open(ROOT / "tests" / "data" / "HumanEval.jsonl.gz") as source:
        rows = [json.loads(line) for line in source]
    out = []
    for row in (rows * (n // len(rows) + 1))[:n]:
        label = {"test": row["test"], "entry_point": row["entry_point"], "prompt": row["prompt"]}
        out.append((PROMPT + row["prompt"] + row["canonical_solution"] + "<|im_end|>", label))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=164)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--mode", default="pooled", help="sandbox mode of both sides")
    args = parser.parse_args()
    os.environ["REWARDBOX_WORKERS"] = str(args.workers)
    os.environ["REWARDBOX_MODE"] = args.mode
    data = samples(args.samples)

    from rewardbox.rewards import CorrectnessReward, Sample
    from rewardbox.sandbox import Limits
    from rewardbox.sandbox.modes import make_sandbox

    with make_sandbox(args.mode, max_containers=args.workers, limits=Limits()) as sandbox:
        reward = CorrectnessReward(sandbox)
        started = time.monotonic()
        batch = reward.score_many(Sample(completion=c, prompt=PROMPT, label=label) for c, label in data)
        batch_s = time.monotonic() - started

    spec = importlib.util.spec_from_file_location("reward_func", str(ROOT / "examples" / "openrlhf" / "reward_func.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.reward_func([data[0][0]], [PROMPT], [data[0][1]])  # build the reward once, as the first call does
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        threaded = list(pool.map(lambda s: module.reward_func([s[0]], [PROMPT], [s[1]]), data))
    threaded_s = time.monotonic() - started

    same = sum(abs(o.reward - t["rewards"].item()) < 1e-9 for o, t in zip(batch, threaded))
    result = {
        "mode": args.mode, "samples": len(data), "workers": args.workers, "threads": args.threads,
        "batch_samples_per_s": round(len(data) / batch_s, 2),
        "openrlhf_file_samples_per_s": round(len(data) / threaded_s, 2),
        "ratio_file_to_batch": round(batch_s / threaded_s, 3),
        "same_rewards": same,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
