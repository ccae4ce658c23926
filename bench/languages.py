"""Compiled languages (issue 23): stdio samples through `CodeReward` against
the same compile and runs on the host with no isolation, side by side, one run.

    python bench/languages.py [--languages cpp,java,javascript,go,rust] [--modes pooled,fresh,cold]
                              [--workers 2] [--timeout-s 10] [--case-timeout-s 2] [--rounds 1] [--json PATH]
    python bench/languages.py --quick          # C++ only, every other problem, pooled against bare

Corpus (languages_corpus.py, written for rewardbox): 12 contest-style
problems in C++ (44 samples: accepted, accepted without bits/stdc++.h, wrong,
compile errors, runtime errors, one time limit) and 4 of them in Java,
JavaScript, Go and Rust (12 samples each: accepted, wrong, compile error),
3 to 5 inputs a sample, expected outputs from Python references.

Contestants, per language:
    bare        the language table's own argv (`rewardbox.sandbox.languages`:
                compile, or JavaScript's check, then run) on the host, in a temp
                dir, once per sample, then the program once per input through
                `subprocess`, its stdout compared as rewardbox compares it
                (rbcompare, tokens), stopping at the first failure; an input
                past its time limit fails (as its test fails in the
                sandbox), past the sample's deadline the sample times out. No
                isolation, no memory limit (the JVM and Go reserve more address
                space than an RLIMIT_AS would allow). The host's toolchain:
                its versions may differ from the image's (printed)
    bare-pch    C++ only: the same argv with `-I DIR`, DIR holding
                bits/stdc++.h precompiled with the table's flags (as the cpp
                image holds it; the host's g++ has none), so both sides parse
                the header the same way
    rewardbox-<mode>   CodeReward over make_sandbox(mode, max_containers=workers):
                the label {"language", "inputs", "outputs"}; compile time is
                `RunResult.compile.duration_s` (the compile in the container),
                run time per input the harness's per-test duration

Every contestant gets `workers` threads and the same time limits: an input's
(`--case-timeout-s`, the label's case_timeout_s) and a sample's runs'
(`--timeout-s`, the sandbox's Limits.timeout_s); the compile has the table's.
Samples/s over the whole batch after a warm-up of `workers` accepted samples
(the median over `--rounds`); a contestant's ratio is its samples/s over
bare's (and bare-pch's). Compile and per-input run times: median and p90 over
every round's samples. Every sample's class (passed, failed, compile_error)
must be the one it was written for, in every contestant: the run fails
otherwise.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from languages_corpus import LANGUAGES, LangSample, samples  # noqa: E402

from rewardbox.images import image_tag  # noqa: E402
from rewardbox.sandbox.languages import Language, default_image, language  # noqa: E402

REPO = Path(__file__).parents[1]
HARNESS = REPO / "images" / "python" / "harness"
MODES = ("pooled", "fresh", "cold")
CPP = ("cpp", "cpp20")


def percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def image_present(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", "--format", ".", tag], capture_output=True).returncode == 0


def host_tool(lang: Language) -> str | None:
    """The host's path of the program the language's first step (or run) starts; None: absent."""
    argv = lang.first_step(False) or lang.run
    return shutil.which(argv[0])


def tool_version(argv0: str) -> str:
    flag = "-version" if Path(argv0).name in ("javac", "java") else ("version" if Path(argv0).name == "go" else "--version")
    run = subprocess.run([argv0, flag], capture_output=True, text=True)
    return ((run.stdout or run.stderr).strip().splitlines() or ["?"])[0]


def image_version(tag: str, argv0: str) -> str:
    flag = "-version" if argv0 in ("javac", "java") else ("version" if argv0 == "go" else "--version")
    run = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, argv0, flag], capture_output=True,
                         text=True)
    return ((run.stdout or run.stderr).strip().splitlines() or ["?"])[0]


# -- bare: the table's argv on the host ----------------------------------------

def build_pch(lang: Language, into: Path) -> Path:
    """bits/stdc++.h precompiled with `lang`'s compile flags, as the cpp image
    holds it, in a directory that goes first on the include path (`-I`)."""
    compile_argv = lang.compile or ()
    flags = [a for a in compile_argv[1:] if a.startswith(("-std=", "-O", "-D", "-pipe"))]
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    version = subprocess.run(["g++", "-dumpversion"], capture_output=True, text=True).stdout.strip().split(".")[0]
    source = Path(f"/usr/include/{multiarch}/c++/{version}/bits/stdc++.h")
    (into / "bits").mkdir(parents=True, exist_ok=True)
    subprocess.run([compile_argv[0], *flags, "-x", "c++-header", str(source), "-o", str(into / "bits" / "stdc++.h.gch")],
                   check=True)
    return into


class Bare:
    def __init__(self, lang: Language, timeout_s: float, case_timeout_s: float, pch: Path | None = None):
        sys.path.insert(0, str(HARNESS))  # rbcompare: the judge's own comparison rules, stdlib only
        import rbcompare

        self.same_output = rbcompare.same_output
        self.lang = lang
        self.timeout_s = timeout_s
        self.case_timeout_s = case_timeout_s
        self.pch = pch
        # HOME as it is: a rustup-installed rustc finds its toolchain there.
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
                    "LANG": "C.UTF-8", **lang.env}

    def _run(self, argv: list[str], cwd: Path, stdin: str, timeout_s: float) -> tuple[bool, int | None, str]:
        child = subprocess.Popen(argv, cwd=cwd, env=self.env, text=True, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, _ = child.communicate(stdin, timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return True, None, ""
        return False, child.returncode, out

    def __call__(self, sample: LangSample) -> dict:
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="rbbench-lang-"))
        result: dict = {"compile_s": None, "runs_s": []}
        try:
            source = self.lang.source_name(sample.code)
            (work / source).write_text(sample.code)
            first = self.lang.first_step(False)
            if first is not None:
                argv = self.lang.argv(first, source)
                if self.pch is not None:
                    argv[1:1] = ["-I", str(self.pch)]
                began = time.monotonic()
                timed_out, code, _ = self._run(argv, work, "", self.lang.compile_timeout_s)
                result["compile_s"] = time.monotonic() - began
                if timed_out or code != 0:
                    return {**result, "verdict": "compile_error", "latency_s": time.monotonic() - started}
            deadline = time.monotonic() + self.timeout_s
            verdict = "passed"
            for stdin, want in zip(sample.inputs, sample.outputs):
                began = time.monotonic()
                left = deadline - time.monotonic()
                timed_out, code, out = self._run(self.lang.argv(self.lang.run, source), work, stdin,
                                                 min(left, self.case_timeout_s))
                if timed_out:
                    verdict = "timeout" if left <= self.case_timeout_s else "failed"
                elif code != 0 or not self.same_output(out, want):
                    verdict = "failed"
                else:
                    result["runs_s"].append(time.monotonic() - began)
                if verdict != "passed":
                    break
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return {**result, "verdict": verdict, "latency_s": time.monotonic() - started}

    def close(self) -> None:
        pass


# -- rewardbox: CodeReward over a sandbox mode ---------------------------------

class RewardBox:
    def __init__(self, mode: str, workers: int, timeout_s: float, case_timeout_s: float, images: dict[str, str]):
        from rewardbox.rewards import CodeReward
        from rewardbox.sandbox import Limits
        from rewardbox.sandbox.modes import make_sandbox

        # The images named when the run began: a tag follows the harness files' digest, which
        # may change under a long run while the checkout is edited.
        self.sandbox = make_sandbox(mode, max_containers=workers, sweep=False, image=images["python"],
                                    images={k: v for k, v in images.items() if k != "python"})
        # The run results by the code they ran: the compile's and the runs' own times.
        self.results: dict[frozenset[str], object] = {}
        self._lock = threading.Lock()
        submit = self.sandbox.submit

        def recording_submit(request):
            future = submit(request)
            codes = frozenset(text.strip() for text in request.files.values())
            future.add_done_callback(lambda done: self._note(codes, done))
            return future

        self.sandbox.submit = recording_submit  # type: ignore[method-assign]
        self.reward = CodeReward(self.sandbox, limits=Limits(timeout_s=timeout_s))
        self.case_timeout_s = case_timeout_s

    def _note(self, codes: frozenset[str], done: Future) -> None:
        if done.exception() is None:
            with self._lock:
                self.results[codes] = done.result()

    def __call__(self, sample: LangSample) -> dict:
        from rewardbox.rewards import Sample

        started = time.monotonic()
        grade = self.reward.submit_grade(Sample(id=sample.id, completion=sample.completion(),
                                                label=sample.label(self.case_timeout_s))).result()
        latency = time.monotonic() - started
        if grade.verdict is None:
            return {"verdict": f"unscored: {grade.error}", "compile_s": None, "runs_s": [], "latency_s": latency}
        with self._lock:
            run = next((r for codes, r in self.results.items() if sample.code.strip() in codes), None)
        compile_s = run.compile.duration_s if run is not None and run.compile is not None else None  # type: ignore[attr-defined]
        runs = [t.duration_s for t in run.tests if t.outcome.value == "passed"] if run is not None else []  # type: ignore[attr-defined]
        return {"verdict": grade.verdict.value, "compile_s": compile_s, "runs_s": runs, "latency_s": latency}

    def close(self) -> None:
        self.sandbox.close()


# -- one contestant over one language's batch ----------------------------------

def measure(contestant, batch: list[LangSample], workers: int) -> dict:
    warm = [s for s in batch if s.kind == "ok"][:workers]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(contestant, warm))
        started = time.monotonic()
        rows = list(pool.map(contestant, batch))
        wall = time.monotonic() - started
    compiles = [r["compile_s"] for r in rows if r["compile_s"] is not None]
    runs = [t for r in rows for t in r["runs_s"]]
    return {"samples": len(batch), "wall_s": wall, "samples_per_s": len(batch) / wall,
            "compile_s": compiles, "run_s": runs,
            "verdicts": {s.id: r["verdict"] for s, r in zip(batch, rows)},
            "off_expected": [(s.id, s.expected, r["verdict"]) for s, r in zip(batch, rows) if r["verdict"] != s.expected]}


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--modes", default="pooled,fresh,cold", help="rewardbox's modes for C++; other languages: pooled")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=10.0, help="deadline of a sample's runs, every contestant")
    parser.add_argument("--case-timeout-s", type=float, default=2.0, help="an input's time limit, every contestant")
    parser.add_argument("--rounds", type=int, default=1, help="repeat each contestant, order reversed every other round")
    parser.add_argument("--quick", action="store_true", help="C++ only, every other problem, pooled against bare")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = ["cpp"] if args.quick else [language(n).name for n in args.languages.split(",") if n]
    modes = ["pooled"] if args.quick else [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)} (modes: {', '.join(MODES)})")

    images = {"python": image_tag(), **{name: default_image(name) for name in names}}
    if not image_present(images["python"]):
        print(f"the sandbox image {images['python']} is missing: rewardbox image build", file=sys.stderr)
        return 1
    report: dict = {"workers": args.workers, "timeout_s": args.timeout_s, "case_timeout_s": args.case_timeout_s,
                    "languages": {}}
    failures = 0
    pch_dir = Path(tempfile.mkdtemp(prefix="rbbench-pch-"))
    try:
        for name in names:
            lang = language(name)
            image = images[name]
            batch = samples(name, every=2 if args.quick else 1)
            if not image_present(image):
                print(f"\n{name}: image {image} missing (rewardbox image build --language {name}): skipped")
                failures += name in CPP
                continue
            contestants: dict[str, object] = {}
            tool = host_tool(lang)
            argv0 = (lang.first_step(False) or lang.run)[0]
            versions = {"image": image_version(image, argv0)}
            if tool is None:
                print(f"\n{name}: no {argv0} on this host: rewardbox only")
            else:
                versions["host"] = tool_version(tool)
                contestants["bare"] = lambda lang=lang: Bare(lang, args.timeout_s, args.case_timeout_s)
                if name in CPP:
                    pch = build_pch(lang, pch_dir / name)
                    contestants["bare-pch"] = lambda lang=lang, pch=pch: Bare(lang, args.timeout_s, args.case_timeout_s, pch)
            for mode in modes if name in CPP else ["pooled"]:
                contestants[f"rewardbox-{mode}"] = lambda mode=mode: RewardBox(mode, args.workers, args.timeout_s,
                                                                                  args.case_timeout_s, images)
            figures: dict[str, list[dict]] = {c: [] for c in contestants}
            for round_ in range(args.rounds):
                order = list(contestants) if round_ % 2 == 0 else list(reversed(contestants))
                for contestant_name in order:
                    contestant = contestants[contestant_name]()  # type: ignore[operator]
                    try:
                        figures[contestant_name].append(measure(contestant, batch, args.workers))
                    finally:
                        contestant.close()
                    print(f"{name} {contestant_name} round {round_ + 1}: "
                          f"{figures[contestant_name][-1]['samples_per_s']:.2f} samples/s", file=sys.stderr)
            failures += print_language(name, batch, versions, figures)
            report["languages"][name] = {"samples": len(batch), "versions": versions, "contestants": figures}
    finally:
        shutil.rmtree(pch_dir, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


def print_language(name: str, batch: list[LangSample], versions: dict[str, str], figures: dict[str, list[dict]]) -> int:
    kinds = {k: sum(s.kind == k for s in batch) for k in dict.fromkeys(s.kind for s in batch)}
    print(f"\n{name}: {len(batch)} samples ({', '.join(f'{k} {v}' for k, v in kinds.items())}), "
          f"{sum(len(s.inputs) for s in batch)} inputs; " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    base = {c: statistics.median(r["samples_per_s"] for r in runs) for c, runs in figures.items()}  # over rounds
    print(f"{'contestant':18} {'samples/s':>9} {'/bare':>6} {'/pch':>6} {'compile ms p50':>14} {'p90':>5} "
          f"{'run/input ms p50':>16} {'p90':>5} {'off expected':>12}")
    failures = 0
    for contestant, runs in figures.items():
        # Times over every round's samples.
        compiles = [t for r in runs for t in r["compile_s"]]
        run_times = [t for r in runs for t in r["run_s"]]
        rate = base[contestant]
        ratio = f"{rate / base['bare']:.2f}" if "bare" in base else "-"
        ratio_pch = f"{rate / base['bare-pch']:.2f}" if "bare-pch" in base else "-"
        off = [o for r in runs for o in r["off_expected"]]
        failures += bool(off)
        print(f"{contestant:18} {rate:9.2f} {ratio:>6} {ratio_pch:>6} {ms(percentile(compiles, 50)):>14} "
              f"{ms(percentile(compiles, 90)):>5} {ms(percentile(run_times, 50)):>16} {ms(percentile(run_times, 90)):>5} "
              f"{len(off):>12}")
        for sample_id, want, got in off[:5]:
            print(f"    {sample_id}: {got}, written for {want}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
