"""What gVisor costs: the same batch under the engine's default runtime (runc)
and under gVisor (runsc), side by side in one run. Rounds alternate which
runtime goes first, so drift on the machine falls on both alike.

    python bench/gvisor_cost.py [--samples 64] [--workers 4] [--rounds 3]

Samples: the first HumanEval problems' canonical solutions (tests/data) with
their check labels, through `CodeReward` with the same `max_containers`.
Latency is each sample's own run (container create to removal). The rewards
must be identical under both runtimes; the run fails otherwise.
"""

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from rewardbox.rewards import CodeReward, Sample
from rewardbox.sandbox import Sandbox

ROOT = Path(__file__).parents[1]
RUNTIMES = {"runc": None, "runsc": "runsc"}  # None: the engine's default


def samples(n: int) -> list[Sample]:
    with gzip.open(ROOT / "tests" / "data" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:n]
    return [Sample(id=row["task_id"], completion=row["canonical_solution"],
                   label={"test": row["test"], "entry_point": row["entry_point"], "prompt": row["prompt"]})
            for row in rows]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--workers", type=int, default=4, help="max_containers of each runtime's sandbox")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    batch = samples(args.samples)

    rewards = {name: CodeReward(Sandbox(max_containers=args.workers, runtime=runtime, sweep=False))
               for name, runtime in RUNTIMES.items()}
    wall = {name: 0.0 for name in RUNTIMES}
    latencies: dict[str, list[float]] = {name: [] for name in RUNTIMES}
    seen: dict[str, list] = {}
    try:
        for reward in rewards.values():
            reward.score_many(batch[:args.workers])  # warm-up: image layers and runtime binaries in the page cache
        for round_ in range(args.rounds):
            order = list(RUNTIMES) if round_ % 2 == 0 else list(reversed(RUNTIMES))
            for name in order:
                started = time.monotonic()
                outputs = rewards[name].score_many(batch)
                wall[name] += time.monotonic() - started
                latencies[name] += [out.duration_s or 0.0 for out in outputs]
                got = [(out.reward, out.verdict.value if out.verdict is not None else None) for out in outputs]
                if seen.setdefault("rewards", got) != got:
                    diff = [(s.id, a, b) for s, a, b in zip(batch, seen["rewards"], got) if a != b]
                    print(f"rewards differ under {name} in round {round_ + 1}: {diff[:5]}", file=sys.stderr)
                    return 1
            print(f"round {round_ + 1}/{args.rounds} done ({', '.join(order)})", file=sys.stderr)
    finally:
        for reward in rewards.values():
            reward.sandbox.close()

    passed = sum(verdict == "passed" for _, verdict in seen["rewards"])
    print(f"{args.samples} HumanEval canonical solutions (check labels), {args.workers} containers at once, "
          f"{args.rounds} rounds alternating; rewards identical under both runtimes ({passed} passed)")
    print(f"{'runtime':8} {'samples/s':>10} {'p50 s':>7} {'p99 s':>7}")
    figures = {}
    for name in RUNTIMES:
        rate = args.samples * args.rounds / wall[name]
        figures[name] = (rate, percentile(latencies[name], 50), percentile(latencies[name], 99))
        print(f"{name:8} {figures[name][0]:10.2f} {figures[name][1]:7.3f} {figures[name][2]:7.3f}")
    runc, runsc = figures["runc"], figures["runsc"]
    print(f"runsc/runc: throughput x{runsc[0] / runc[0]:.2f}, p50 latency x{runsc[1] / runc[1]:.2f}, "
          f"p99 latency x{runsc[2] / runc[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
