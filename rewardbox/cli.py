"""`rewardbox`: the command line."""

import argparse
import gzip
import io
import json
import logging
import os
import signal
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import IO, Any

from pydantic import ValidationError

from rewardbox import __version__
from rewardbox.images import image_tag
from rewardbox.images.build import add_command as add_image_command
from rewardbox.rewards import safe_json
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.lifecycle import StoppableSandbox
from rewardbox.rewards.registry import UnknownRewardError, configured_registry
from rewardbox.sandbox import SandboxError
from rewardbox.sandbox.modes import MODES
from rewardbox.settings import Settings, SettingsError, build_reward, build_sandbox, load_settings, server_settings

INTERRUPTED = 130  # the shell's status for a process ended by SIGINT
GZIP_MAGIC = b"\x1f\x8b"
# The flags that set a key of the settings: each has the key's name, and
# defaults to None so that an unset flag leaves the key to the settings.
SETTING_FLAGS = ("image", "language_images", "language", "mode", "runtime", "workers", "reuse", "pin_cpus", "timeout_s",
                 "memory_mb", "ray", "reward",
                 "max_waiting", "max_held", "max_completion_bytes", "max_sessions", "session_idle_s",
                 "session_lifetime_s", "warm_sessions")


class UsageError(Exception):
    """An input or setting the run cannot start with; nothing is written."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rewardbox", description="Sandboxed code-execution rewards.")
    parser.add_argument("--version", action="version", version=f"rewardbox {__version__} (sandbox image {image_tag()})")
    _config_argument(parser, None)
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score a JSONL file of rollouts",
                                description="Score rollouts {id, completion, label, prompt?}, one JSON object per line. "
                                            "Labels may be of any format (pytest, asserts, check, stdio, call, open-r1, "
                                            "math), mixed in one file.")
    score.add_argument("input", help="JSONL of rollouts, or - for standard input")
    score.add_argument("-o", "--output", default="-", help="JSONL of results, or - for standard output (default)")
    score.add_argument("-r", "--reward", default=None,
                       help="a registered reward or a mix such as 'correctness=0.9,format_one_code_block=0.1' "
                            f"(built in: {', '.join(configured_registry().names())}; default: the settings' "
                            "reward, correctness)")
    _sandbox_arguments(score)
    score.add_argument("--no-progress", action="store_true", help="no progress bar")
    score.add_argument("-v", "--verbose", action="store_true")
    serve = commands.add_parser("serve", help="serve rewards over HTTP",
                                description="The reward service: OpenRLHF's /get_reward, SandboxFusion's /run_code (verl), "
                                            "/v1/rewards, /healthz and /metrics.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("-r", "--reward", default=None,
                       help="the reward when a request names none (default: the settings' reward, correctness)")
    _sandbox_arguments(serve)
    serve.add_argument("--max-waiting", type=int, default=None,
                       help="samples in the sandbox at once; more wait in line, as long as their clients wait "
                            "(default: the settings', 4096)")
    serve.add_argument("--max-held", type=int, default=None,
                       help="samples waiting in line; beyond, requests are refused at once (503, 504 on /run_code) "
                            "(default: the settings', 32768)")
    serve.add_argument("--max-completion-bytes", type=int, default=None,
                       help="a longer completion is refused (413) (default: the settings', 1 MiB)")
    serve.add_argument("--max-sessions", type=int, default=None,
                       help="sessions (/v1/sessions) open at once; one more is refused (429) (default: the settings', 64)")
    serve.add_argument("--session-idle-s", type=float, default=None,
                       help="a session no call came for this long is closed; the most a session may ask for "
                            "(default: the settings', 300)")
    serve.add_argument("--session-lifetime-s", type=float, default=None,
                       help="a session's container ends this long after it was handed out; the most a session may "
                            "ask for (default: the settings', 3600)")
    serve.add_argument("--warm-sessions", type=int, default=None,
                       help="session containers made ahead, so that a session starts at once (default: the "
                            "settings', 0)")
    serve.add_argument("-v", "--verbose", action="store_true")
    doctor = commands.add_parser("doctor", help="check this machine and print the effective settings",
                                 description="Check the engine, its storage and cgroups, the sandbox image (present, "
                                             "this version's harness, what it holds), the runtimes, a one-second "
                                             "container run under the default limits, and Ray if configured; each "
                                             "line ok or fail with the fix, then every effective setting and where "
                                             "it came from. Exits 1 if a check failed.")
    _sandbox_arguments(doctor)
    score.set_defaults(run=_score)
    serve.set_defaults(run=_serve)
    doctor.set_defaults(run=_doctor)
    add_image_command(commands)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    run: Callable[[argparse.Namespace], int] = args.run  # the subcommand's, set by set_defaults
    try:
        return run(args)
    except (SandboxError, SettingsError, UnknownRewardError, UsageError) as exc:
        print(f"rewardbox: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a run began (reading the input, starting the service): nothing to answer
        print("rewardbox: interrupted", file=sys.stderr)
        return INTERRUPTED


def _config_argument(command: argparse.ArgumentParser, default: Any) -> None:
    command.add_argument("--config", metavar="FILE", default=default,
                         help="a TOML settings file (default: $REWARDBOX_CONFIG); flags override the environment, "
                              "which overrides the file")


def _sandbox_arguments(command: argparse.ArgumentParser) -> None:
    """The options of the sandbox, the same for `score`, `serve` and
    `doctor`. Each defaults to None: unset, the settings decide
    (`rewardbox.settings`: REWARDBOX_* variables, --config, defaults)."""
    # SUPPRESS: given before the command (`rewardbox --config F score`), it is not reset here.
    _config_argument(command, argparse.SUPPRESS)
    command.add_argument("-j", "--workers", type=int, default=None,
                         help="containers at once (default: the CPU count); with --ray, on each sandbox node")
    command.add_argument("--timeout-s", type=float, default=None,
                         help="deadline per sample (default: 10 s plus 0.5 s per test, at most 120 s)")
    command.add_argument("--memory-mb", type=int, default=None, help="memory limit per sample (default: 512)")
    command.add_argument("--image", default=None,
                         help="sandbox image: a variant name (python, scientific) or an image reference "
                              "(default: python, the lean image)")
    command.add_argument("--language-images", metavar="LANG=IMAGE,...", default=None,
                         help="images of other languages than Python (default: each one's toolchain image built "
                              "here by `rewardbox image build --language LANG`)")
    command.add_argument("--language", default=None,
                         help="the language of a stdio label that names none (default: python)")
    command.add_argument("--runtime", default=None, help="OCI runtime, e.g. runsc for gVisor")
    command.add_argument("--mode", choices=MODES, default=None,
                         help="pooled: warm containers serving many samples each, from a clean slate (fastest, the "
                              "default); fresh: a new container per sample, started ahead; cold: a new container per "
                              "sample, on demand")
    command.add_argument("--reuse", type=int, default=None,
                         help="pooled: samples per container at most (default: 1000)")
    command.add_argument("--pin-cpus", metavar="all|CPUS", default=None,
                         help="pin each container to its own CPUs, spread evenly over this set: all, or a list such "
                              "as 0-3,8 (default: not pinned)")
    command.add_argument("--ray", metavar="ADDRESS", default=None,
                         help="run the samples on the sandbox nodes of this Ray cluster ('auto': the one this machine "
                              "belongs to); needs rewardbox[ray]")


def _settings(args: argparse.Namespace) -> Settings:
    """The settings with this command's flags over them."""
    return load_settings({key: getattr(args, key, None) for key in SETTING_FLAGS}, config=args.config)


def _sandbox(settings: Settings) -> StoppableSandbox:
    # One process scores for the whole machine: as many containers as CPUs unless told.
    return build_sandbox(settings, StoppableSandbox, default_workers=os.cpu_count() or 2)


def _score(args: argparse.Namespace) -> int:
    # Every check before anything runs or is written: a run that cannot start leaves the output as it was.
    settings = _settings(args)
    sandbox = _sandbox(settings)
    reward = build_reward(settings, sandbox)
    lines = _read_lines(args.input)
    _check_output(args.output, args.input)
    samples = [_sample(line, n) for n, line in lines]
    interrupt = _Interrupt()
    finished = False
    with interrupt.caught():
        try:
            started = time.monotonic()
            bar = _progress_bar(len(samples), shown=not args.no_progress and sys.stderr.isatty())
            futures = _submit_all(reward, samples, interrupt.requested)
            for f in futures:
                if f is not None and bar is not None:
                    f.add_done_callback(lambda _: bar.update())
            with _open_output(args.output) as sink:
                outputs = _write_answers(samples, futures, sink, interrupt.requested)
            if bar is not None:
                bar.close()
            elapsed = time.monotonic() - started
            finished = not interrupt.requested.is_set()
        finally:
            sandbox.stop()  # at once: what is unfinished was answered as interrupted
            if finished:
                reward.close()  # math workers, once idle; on a stop they end with the process
    print(_summary(outputs, elapsed), file=sys.stderr)
    if interrupt.requested.is_set():
        left = sum(1 for o in outputs if o.metadata.get("error") == INTERRUPTED_ERROR)
        print(f"rewardbox: interrupted: {left} sample(s) not scored (see their 'error'); score them again",
              file=sys.stderr)
        return INTERRUPTED
    return _failures(outputs)


def _progress_bar(total: int, shown: bool) -> Any:
    """tqdm's bar on stderr, or None when none is shown: tqdm is then not
    even imported (a run with no terminal, as a trainer's, starts sooner)."""
    if not shown:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="sample", file=sys.stderr)


def _failures(outputs: list[RewardOutput]) -> int:
    """3 when a failure of ours left samples unscored (never a reward), else 0."""
    sandbox = sum(1 for o in outputs if o.metadata.get("sandbox_error"))
    internal = sum(1 for o in outputs if o.metadata.get("internal_error"))
    if sandbox:
        print(f"rewardbox: {sandbox} sample(s) not scored because the sandbox failed (see their 'error'); "
              "score them again once the cause is fixed", file=sys.stderr)
    if internal:
        print(f"rewardbox: {internal} sample(s) not scored because of an error on our side (see their 'error')",
              file=sys.stderr)
    return 3 if sandbox or internal else 0


class _Interrupt:
    """Ctrl-C as a request: the run stops waiting, answers every line and
    removes its containers. A second one quits at once."""

    def __init__(self) -> None:
        self.requested = threading.Event()

    @contextmanager
    def caught(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _handle(self, signum: int, frame: Any) -> None:
        # os.write: the handler may run in the middle of a write to sys.stderr (the progress bar).
        if self.requested.is_set():
            os.write(2, b"rewardbox: interrupted again: quitting; containers may be left behind "
                        b"(the next run removes them)\n")
            os._exit(INTERRUPTED)
        self.requested.set()
        os.write(2, b"rewardbox: interrupted: writing what is done, stopping the rest (Ctrl-C again to quit now)\n")


def _submit_all(reward: Reward, samples: list[Sample | Future[RewardOutput]],
                stop: threading.Event) -> list[Future[RewardOutput] | None]:
    """Each sample's future; None for those not submitted before a stop."""
    return [None if stop.is_set() else s if isinstance(s, Future) else _submit(reward, s) for s in samples]


def _submit(reward: Reward, sample: Sample) -> "Future[RewardOutput]":
    try:
        return reward.submit(sample)
    except SandboxError:
        raise  # no sandbox to run in (engine down, image missing): a clear error for the whole run
    except Exception as exc:  # noqa: BLE001 - this sample's failure, answered on its line
        return _failed(exc)


def _failed(exc: Exception) -> Future[RewardOutput]:
    future: Future[RewardOutput] = Future()
    future.set_exception(exc)
    return future


def _write_answers(samples: list[Sample | Future[RewardOutput]], futures: list[Future[RewardOutput] | None], sink: IO[str],
                   stop: threading.Event) -> list[RewardOutput]:
    """One line per sample, in order, as each is answered; after a stop,
    those not yet answered are written as interrupted."""
    outputs = []
    for sample, future in zip(samples, futures):
        while future is not None and not future.done() and not stop.is_set():
            wait([future], timeout=0.1)  # short: a stop is noticed at once
        out = _answer(future) if future is not None and future.done() else _interrupted()
        outputs.append(out)
        sink.write(_line(sample, out) + "\n")
        sink.flush()
    return outputs


INTERRUPTED_ERROR = "interrupted before it was scored"


def _interrupted() -> RewardOutput:
    return RewardOutput.unscorable(INTERRUPTED_ERROR, verdict=None)


def _answer(future: "Future[RewardOutput]") -> RewardOutput:
    """The sample's output; a failure of ours answers it unscored (never penalised), and the rest go on."""
    try:
        return future.result()
    except SandboxError as exc:
        return RewardOutput.unscorable(f"sandbox error: {exc}", verdict=None, sandbox_error=True)
    except Exception as exc:  # noqa: BLE001 - a bug, or a reward function that raised: this sample only
        return RewardOutput.unscorable(f"internal error: {type(exc).__name__}: {exc}", verdict=None,
                                       internal_error=True)


def _serve(args: argparse.Namespace) -> int:
    from rewardbox.rewards.server import Service, create_app
    from rewardbox.rewards.server.stopping import serve

    settings = _settings(args)
    sandbox = _sandbox(settings)
    try:
        _ = sandbox.sandbox  # made now: a missing engine fails at start, not at the first request
        registry = configured_registry(sandbox=sandbox, policy=settings.policy, limits=settings.limits,
                                       language=settings.language)
        build_reward(settings, registry=registry)  # an unknown default fails at start, not at the first request
        serve(create_app(Service(registry, sandbox, server_settings(settings))), sandbox, host=args.host,
              port=args.port, log_level="info" if args.verbose else "warning")
    finally:
        sandbox.stop()
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from rewardbox.doctor import report, run_checks

    settings = _settings(args)
    checks = run_checks(settings)
    print(report(checks, settings))
    return 1 if any(not check.ok for check in checks) else 0


def _sample(line: bytes | str, number: int) -> Sample | Future[RewardOutput]:
    """A sample, or for a line we cannot read, an answered error (nothing is dropped)."""
    try:
        text = line if isinstance(line, str) else line.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        return _answered(line, f"line {number}: not UTF-8: {exc.reason} at byte {exc.start}")
    try:
        data = safe_json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("completion"), list):
            data = {**data, "completion": _last_assistant(data["completion"])}
        return Sample.model_validate(data)
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors())
        return _answered(line, f"line {number}: not a rollout record: {reason}")
    except ValueError as exc:  # not JSON, or nested too deep to read safely
        return _answered(line, f"line {number}: not JSON: {exc}")


def _last_assistant(messages: list[Any]) -> Any:
    """A chat-format completion's text: its last assistant message."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return messages  # left for validation to refuse


def _answered(line: bytes | str, error: str) -> Future[RewardOutput]:
    done: Future[RewardOutput] = Future()
    done.set_result(RewardOutput.unscorable(error, verdict=None))
    done.sample_id = _guess_id(line)  # type: ignore[attr-defined]
    return done


def _guess_id(line: bytes | str) -> object:
    text = line if isinstance(line, str) else line.decode("utf-8", "replace")
    try:
        data = safe_json.loads(text)
    except ValueError:
        return None
    return data.get("id") if isinstance(data, dict) else None


def _record(sample: Sample | Future[RewardOutput], out: RewardOutput) -> dict[str, Any]:
    """One result line: the id, the numbers, then the reward's metadata
    (messages cut to 500 characters, tests to their outcomes)."""
    sample_id = sample.id if isinstance(sample, Sample) else getattr(sample, "sample_id", None)
    metadata = out.details()
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
    verdicts = Counter(str(o.details().get("verdict") or "unscorable") for o in outputs)
    mean = sum(scored) / len(scored) if scored else 0.0
    lines = [
        f"samples      {len(outputs)}",
        f"mean reward  {mean:.3f}",
        f"pass rate    {verdicts['passed'] / len(outputs) if outputs else 0.0:.3f}",
        "verdicts     " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
        f"throughput   {len(outputs) / elapsed_s if elapsed_s > 0 else 0.0:.2f} samples/s ({elapsed_s:.1f} s)",
    ]
    return "\n".join(lines)


def _read_lines(path: str) -> list[tuple[int, bytes]]:
    """The input's non-blank lines by number (from 1), as bytes: each is
    decoded on its own, so a bad byte spoils its line only. Gzip is read
    through, known by its suffix or its first bytes."""
    try:
        with _binary_input(path) as raw:
            if path.endswith(".gz") or raw.peek(len(GZIP_MAGIC))[:len(GZIP_MAGIC)] == GZIP_MAGIC:
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    return _numbered(unzipped)
            return _numbered(raw)
    except (OSError, EOFError, zlib.error) as exc:  # missing, a directory, a broken gzip stream
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _numbered(lines: Iterable[bytes]) -> list[tuple[int, bytes]]:
    return [(n, line) for n, line in enumerate(lines, 1) if line.strip()]


def _binary_input(path: str) -> io.BufferedReader:
    if path == "-":
        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    return open(path, "rb")


def _check_output(path: str, source: str) -> None:
    """The output can be written, and is not the input (which it would empty)."""
    if path == "-":
        return
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {path}: no directory {directory}")
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a directory")
    if not os.access(path if os.path.exists(path) else directory, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")
    if source != "-" and os.path.exists(path) and os.path.samefile(path, source):
        raise UsageError(f"cannot write {path}: it is the input")


def _open_output(path: str) -> IO[str]:
    try:
        if path == "-":
            return os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _line(sample: Sample | Future[RewardOutput], out: RewardOutput) -> str:
    """The result line; a result that is not JSON data (a reward's own
    metadata) becomes an error line for that sample."""
    try:
        return json.dumps(_record(sample, out))
    except (TypeError, ValueError) as exc:
        failed = RewardOutput.unscorable(f"internal error: the result is not JSON data: {exc}", verdict=None,
                                         internal_error=True)
        return json.dumps(_record(sample, failed))


if __name__ == "__main__":
    sys.exit(main())
