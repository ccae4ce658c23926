"""`rewardbox`: the command line."""

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from concurrent.futures import Future
from typing import IO

from pydantic import ValidationError
from tqdm import tqdm

from rewards.code import CodeReward, Sample
from rewards.grade import Grade, ungradable
from rewards.policy import GradingPolicy
from sandbox import DEFAULT_IMAGE, Limits, Sandbox, SandboxError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rewardbox", description="Sandboxed code-execution rewards.")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="grade a JSONL file of rollouts",
                                description="Grade rollouts {id, completion, label, prompt?}, one JSON object per line.")
    score.add_argument("input", help="JSONL of rollouts, or - for standard input")
    score.add_argument("-o", "--output", default="-", help="JSONL of results, or - for standard output (default)")
    score.add_argument("-j", "--workers", type=int, default=os.cpu_count() or 2, help="containers at once")
    score.add_argument("--timeout-s", type=float, default=Limits().timeout_s, help="deadline per sample")
    score.add_argument("--memory-mb", type=int, default=Limits().memory_mb, help="memory limit per sample")
    score.add_argument("--image", default=DEFAULT_IMAGE, help="sandbox image")
    score.add_argument("--runtime", default=None, help="OCI runtime, e.g. runsc for gVisor")
    score.add_argument("--no-progress", action="store_true", help="no progress bar")
    score.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return _score(args)
    except SandboxError as exc:
        print(f"rewardbox: {exc}", file=sys.stderr)
        return 2


def _score(args: argparse.Namespace) -> int:
    limits = Limits(timeout_s=args.timeout_s, memory_mb=args.memory_mb)
    with _open(args.input, "r") as source, _open(args.output, "w") as sink:
        samples = [_sample(line, n) for n, line in enumerate(source, 1) if line.strip()]
        with Sandbox(image=args.image, max_containers=args.workers, runtime=args.runtime) as sandbox:
            reward = CodeReward(sandbox, GradingPolicy(), limits)
            started = time.monotonic()
            bar = tqdm(total=len(samples), unit="sample", disable=args.no_progress or not sys.stderr.isatty(),
                       file=sys.stderr)
            futures = [s if isinstance(s, Future) else reward.submit(s) for s in samples]
            for f in futures:
                f.add_done_callback(lambda _: bar.update())
            grades = []
            for sample, future in zip(samples, futures):
                g = future.result()
                grades.append(g)
                sink.write(json.dumps(_record(sample, g)) + "\n")
                sink.flush()
            bar.close()
            elapsed = time.monotonic() - started
    print(_summary(grades, elapsed), file=sys.stderr)
    return 0


def _sample(line: str, number: int) -> Sample | Future:
    """A sample, or for a line we cannot read, an answered error (nothing is dropped)."""
    try:
        data = json.loads(line)
        return Sample.model_validate(data)
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors())
        return _answered(line, f"line {number}: not a rollout record: {reason}")
    except ValueError as exc:
        return _answered(line, f"line {number}: not JSON: {exc}")


def _answered(line: str, error: str) -> Future:
    done: Future[Grade] = Future()
    done.set_result(ungradable(error))
    done.sample_id = _guess_id(line)  # type: ignore[attr-defined]
    return done


def _guess_id(line: str) -> object:
    try:
        return json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None


def _record(sample: Sample | Future, g: Grade) -> dict:
    sample_id = sample.id if isinstance(sample, Sample) else getattr(sample, "sample_id", None)
    return {
        "id": sample_id,
        "reward": g.reward,
        "score": g.score,
        "verdict": g.verdict.value if g.verdict else None,
        "passed": g.passed,
        "total": g.total,
        "duration_s": round(g.duration_s, 4),
        "message": g.message[:500],
        "error": g.error,
        "tests": [{"nodeid": t.nodeid, "outcome": t.outcome.value, "duration_s": t.duration_s} for t in g.tests],
    }


def _summary(grades: list[Grade], elapsed_s: float) -> str:
    graded = [g for g in grades if g.reward is not None]
    verdicts = Counter(g.verdict.value if g.verdict else "ungradable" for g in grades)
    mean = sum(g.reward for g in graded) / len(graded) if graded else 0.0
    passed = sum(g.verdict is not None and g.verdict.value == "passed" for g in grades)
    lines = [
        f"samples      {len(grades)}",
        f"mean reward  {mean:.3f}",
        f"pass rate    {passed / len(grades) if grades else 0.0:.3f}",
        "verdicts     " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
        f"throughput   {len(grades) / elapsed_s if elapsed_s > 0 else 0.0:.2f} samples/s ({elapsed_s:.1f} s)",
    ]
    return "\n".join(lines)


def _open(path: str, mode: str) -> IO[str]:
    if path == "-":
        stream = sys.stdin if mode == "r" else sys.stdout
        return os.fdopen(os.dup(stream.fileno()), mode, encoding="utf-8")
    return open(path, mode, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
