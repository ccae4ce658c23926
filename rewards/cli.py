"""`rewardbox`: the command line."""

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from concurrent.futures import Future
from typing import IO, Any

from pydantic import ValidationError
from tqdm import tqdm

from rewards.base import RewardOutput, Sample
from rewards.registry import UnknownRewardError, configured_registry
from rewards.server.app import ServerSettings
from sandbox import DEFAULT_IMAGE, LazySandbox, Limits, SandboxError
from sandbox.modes import DEFAULT_MODE, DEFAULT_REUSE, MODES, make_sandbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rewardbox", description="Sandboxed code-execution rewards.")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score a JSONL file of rollouts",
                                description="Score rollouts {id, completion, label, prompt?}, one JSON object per line. "
                                            "Labels may be of any format (pytest, asserts, check, stdio, call, open-r1, "
                                            "math), mixed in one file.")
    score.add_argument("input", help="JSONL of rollouts, or - for standard input")
    score.add_argument("-o", "--output", default="-", help="JSONL of results, or - for standard output (default)")
    score.add_argument("-r", "--reward", default="correctness",
                       help="a registered reward or a mix such as 'correctness=0.9,format_one_code_block=0.1' "
                            f"(built in: {', '.join(configured_registry().names())}; default: correctness)")
    _sandbox_arguments(score)
    score.add_argument("--no-progress", action="store_true", help="no progress bar")
    score.add_argument("-v", "--verbose", action="store_true")
    serve = commands.add_parser("serve", help="serve rewards over HTTP",
                                description="The reward service: OpenRLHF's /get_reward, SandboxFusion's /run_code (verl), "
                                            "/v1/rewards, /healthz and /metrics.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("-r", "--reward", default="correctness", help="the reward when a request names none")
    _sandbox_arguments(serve)
    serve.add_argument("--max-waiting", type=int, default=ServerSettings().max_waiting_samples,
                       help="samples waiting before requests are refused with 503 and Retry-After")
    serve.add_argument("--max-completion-bytes", type=int, default=ServerSettings().max_completion_bytes)
    serve.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return _score(args) if args.command == "score" else _serve(args)
    except (SandboxError, UnknownRewardError) as exc:
        print(f"rewardbox: {exc}", file=sys.stderr)
        return 2


def _sandbox_arguments(command: argparse.ArgumentParser) -> None:
    """The options of the sandbox, the same for `score` and `serve`."""
    command.add_argument("-j", "--workers", type=int, default=None,
                         help="containers at once (default: the CPU count); with --ray, on each sandbox node")
    command.add_argument("--timeout-s", type=float, default=Limits().timeout_s, help="deadline per sample")
    command.add_argument("--memory-mb", type=int, default=Limits().memory_mb, help="memory limit per sample")
    command.add_argument("--image", default=DEFAULT_IMAGE, help="sandbox image")
    command.add_argument("--runtime", default=None, help="OCI runtime, e.g. runsc for gVisor")
    command.add_argument("--mode", choices=MODES, default=DEFAULT_MODE,
                         help="pooled: warm containers serving many samples each, from a clean slate (fastest); "
                              "fresh: a new container per sample, started ahead; cold: a new container per sample, "
                              "on demand (README, Sandbox modes)")
    command.add_argument("--reuse", type=int, default=DEFAULT_REUSE, help="pooled: samples per container at most")
    command.add_argument("--ray", metavar="ADDRESS", default=None,
                         help="run the samples on the sandbox nodes of this Ray cluster ('auto': the one this machine "
                              "belongs to); needs rewardbox[ray] (README, Scaling out on Ray)")


def _score(args: argparse.Namespace) -> int:
    limits = Limits(timeout_s=args.timeout_s, memory_mb=args.memory_mb)
    sandbox = LazySandbox(image=args.image, runtime=args.runtime, **_mode(args, limits))
    reward = configured_registry(sandbox=sandbox, limits=limits).resolve(args.reward)
    with _open(args.input, "r") as source, _open(args.output, "w") as sink:
        samples = [_sample(line, n) for n, line in enumerate(source, 1) if line.strip()]
        try:
            started = time.monotonic()
            bar = tqdm(total=len(samples), unit="sample", disable=args.no_progress or not sys.stderr.isatty(),
                       file=sys.stderr)
            futures = [s if isinstance(s, Future) else reward.submit(s) for s in samples]
            for f in futures:
                f.add_done_callback(lambda _: bar.update())
            outputs = []
            for sample, future in zip(samples, futures):
                out = _answer(future)
                outputs.append(out)
                sink.write(json.dumps(_record(sample, out)) + "\n")
                sink.flush()
            bar.close()
            elapsed = time.monotonic() - started
        finally:
            reward.close()
            sandbox.close()
    print(_summary(outputs, elapsed), file=sys.stderr)
    unscored = sum(1 for o in outputs if o.metadata.get("sandbox_error"))
    if unscored:
        print(f"rewardbox: {unscored} sample(s) not scored because the sandbox failed (see their 'error'); "
              "score them again once the cause is fixed", file=sys.stderr)
        return 3
    return 0


def _answer(future: "Future[RewardOutput]") -> RewardOutput:
    """The sample's output; a failure of ours answers it unscored (never penalised), and the rest go on."""
    try:
        return future.result()
    except SandboxError as exc:
        return RewardOutput.unscorable(f"sandbox error: {exc}", verdict=None, sandbox_error=True)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from rewards.server import Service, create_app

    limits = Limits(timeout_s=args.timeout_s, memory_mb=args.memory_mb)
    sandbox = make_sandbox(image=args.image, runtime=args.runtime, **_mode(args, limits))  # fails now if no engine
    registry = configured_registry(sandbox=sandbox, limits=limits)
    registry.resolve(args.reward)  # an unknown default fails at start, not at the first request
    settings = ServerSettings(max_waiting_samples=args.max_waiting, max_completion_bytes=args.max_completion_bytes,
                              default_reward=args.reward)
    try:
        uvicorn.run(create_app(Service(registry, sandbox, settings)), host=args.host, port=args.port,
                    log_level="info" if args.verbose else "warning")
    finally:
        sandbox.close()
    return 0


def _mode(args: argparse.Namespace, limits: Limits) -> dict:
    """The sandbox options of --mode, --reuse, --workers and --ray; a pool
    warms its first containers with the run's limits. On Ray, a node's worker
    runs as many containers as its node has CPUs unless --workers says."""
    if args.reuse < 1:
        raise SandboxError("--reuse must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise SandboxError("--workers must be at least 1")
    options: dict = {"mode": args.mode}
    if args.workers is not None or not args.ray:
        options["max_containers"] = args.workers or os.cpu_count() or 2
    if args.mode != "cold":
        options.update(reuse=args.reuse, limits=limits)
    if args.ray:
        options["ray"] = args.ray
    return options


def _sample(line: str, number: int) -> Sample | Future:
    """A sample, or for a line we cannot read, an answered error (nothing is dropped)."""
    try:
        data = json.loads(line)
        if isinstance(data, dict) and isinstance(data.get("completion"), list):
            data = {**data, "completion": _last_assistant(data["completion"])}
        return Sample.model_validate(data)
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors())
        return _answered(line, f"line {number}: not a rollout record: {reason}")
    except ValueError as exc:
        return _answered(line, f"line {number}: not JSON: {exc}")


def _last_assistant(messages: list[Any]) -> Any:
    """A chat-format completion's text: its last assistant message."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return messages  # left for validation to refuse


def _answered(line: str, error: str) -> Future:
    done: Future[RewardOutput] = Future()
    done.set_result(RewardOutput.unscorable(error, verdict=None))
    done.sample_id = _guess_id(line)  # type: ignore[attr-defined]
    return done


def _guess_id(line: str) -> object:
    try:
        return json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None


def _record(sample: Sample | Future, out: RewardOutput) -> dict:
    """One result line: the id, the numbers, then the reward's metadata
    (messages cut to 500 characters, tests to their outcomes)."""
    sample_id = sample.id if isinstance(sample, Sample) else getattr(sample, "sample_id", None)
    metadata = dict(out.metadata)
    if isinstance(metadata.get("message"), str):
        metadata["message"] = metadata["message"][:500]
    if isinstance(metadata.get("duration_s"), float):
        metadata["duration_s"] = round(metadata["duration_s"], 4)
    if isinstance(metadata.get("tests"), list):
        metadata["tests"] = [{k: t.get(k) for k in ("nodeid", "outcome", "duration_s")} for t in metadata["tests"]]
    return {"id": sample_id, "reward": out.reward, "score": out.score, "verdict": metadata.pop("verdict", None),
            "error": metadata.pop("error", None), **metadata}


def _summary(outputs: list[RewardOutput], elapsed_s: float) -> str:
    scored = [o.reward for o in outputs if o.reward is not None]
    verdicts = Counter(str(o.metadata.get("verdict") or "unscorable") for o in outputs)
    mean = sum(scored) / len(scored) if scored else 0.0
    lines = [
        f"samples      {len(outputs)}",
        f"mean reward  {mean:.3f}",
        f"pass rate    {verdicts['passed'] / len(outputs) if outputs else 0.0:.3f}",
        "verdicts     " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
        f"throughput   {len(outputs) / elapsed_s if elapsed_s > 0 else 0.0:.2f} samples/s ({elapsed_s:.1f} s)",
    ]
    return "\n".join(lines)


def _open(path: str, mode: str) -> IO[str]:
    if path == "-":
        stream = sys.stdin if mode == "r" else sys.stdout
        return os.fdopen(os.dup(stream.fileno()), mode, encoding="utf-8")
    return open(path, mode, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
