"""Soak: thousands of runs, honest and hostile completions mixed, at full
concurrency; afterwards nothing of ours is left on the host and the scoring
process's memory is flat.

    python bench/soak.py [--runs 2000] [--hostile-share 0.3] [--workers 4] [--mode pooled] [--json PATH]

One `CodeReward` over one sandbox of the mode (default: the default mode); samples go in through `submit`, with
twice as many in flight as there are containers, so every slot stays busy.
The mix is fixed by a seed. Every sample has an expected verdict class:
honest answers (every label format, right, partly right and wrong) must get
exactly their reward; hostile ones (fork and memory bombs, loops, 1 GB of
output, filling the disk and the inodes, a detached background process,
SIGTERM ignored, killing everything or the harness, exiting at import,
always-equal objects, ...) must get one of the verdicts their limit decides
and never more than an honest wrong answer (0.0).

The engine is shared with other processes, so leaks are counted for this
process's own containers only: each container it creates is written down at
creation (its id, its overlay mount id, its volumes) in a file of a private
directory, kept with its path in the figures when something leaked. After
the runs and the sandbox's close (a pool's warm containers go with it) none
of them may remain as a container, a process on the host (by cgroup), a mount in the host's mount namespace, a directory under the
engine's root, or a volume; the private temp dir this process uses must be
empty; its threads at the end no more than in the first half of the run;
and its open files after the sandbox's close no more than before it was
made. The host checks read the engine's data root, so the engine must run on this machine (as root, or readable).

Memory is flat when the RSS at the end is within `--rss-bound-mib` of the RSS
after the warm-up, and the least-squares slope over the later half of the
points (intermediate ones and the end; in the first half the allocator is
still settling) is below `--slope-bound-mib` per 1,000 runs.

Exit status 1 when a sample got a wrong verdict, something leaked or memory
grew.
"""

import argparse
import gc
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "docker"))  # the add(a, b) task most docker tests grade

from add_task import LABEL as PYTEST  # noqa: E402

from rewardbox.rewards import CodeReward, RewardOutput, Sample  # noqa: E402
from rewardbox.sandbox import Limits, Verdict  # noqa: E402
from rewardbox.sandbox.engine import OWNER_LABEL, DockerEngine, owner_alive  # noqa: E402
from rewardbox.sandbox.modes import DEFAULT_MODE, MODES, make_sandbox  # noqa: E402
from rewardbox.sandbox.runner import DEFAULT_MAX_CONTAINERS  # noqa: E402

MIB = 1 << 20
HONEST_WRONG_REWARD = 0.0  # what a wrong answer that runs earns: no hostile sample may earn more

# -- the samples --------------------------------------------------------------------------------

ASSERTS = {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-2, 5) == 3"]}
CHECK = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
                 "    assert candidate(-2, 5) == 3\n", "entry_point": "add"}
CALL = {"fn_name": "add", "inputs": [[1, 2], [0, 0], [-2, 5]], "outputs": [3, 0, 3]}
STDIO = {"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"]}
# Hostile samples of the generated formats: a looping case costs half a second, not the run's timeout.
QUICK = {"case_timeout_s": 0.5}

RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b + 7\n"  # 9, 7, -3: no case right
STDIO_RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
STDIO_WRONG = "a, b = map(int, input().split())\nprint(a * b + 7)\n"


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}```\n"


@dataclass(frozen=True)
class Kind:
    """One kind of completion and the outcome it must get, every time."""

    name: str
    completion: str
    label: object
    verdicts: frozenset[Verdict]
    reward: float | None = None  # honest kinds: exactly this
    hostile: bool = False
    out_of_time: bool = False  # meant to run out of time: graded under the short timeout

    def mismatch(self, out: RewardOutput) -> str | None:
        """Why this output is not what the kind must get; None when it is."""
        verdict, reward = out.verdict.value if out.verdict is not None else None, out.reward
        if reward is None or verdict not in {v.value for v in self.verdicts}:
            return f"verdict {verdict} (error {out.metadata.get('error')!r}), expected one of {sorted(self.verdicts)}"
        if self.hostile and (reward > HONEST_WRONG_REWARD or out.passed):
            return f"hostile sample earned {reward} with {out.passed} passed"
        if not self.hostile and reward != self.reward:
            return f"reward {reward}, expected {self.reward}"
        return None


PASSED, FAILED = frozenset({Verdict.PASSED}), frozenset({Verdict.FAILED})


def honest(name: str, completion: str, label: object, reward: float) -> Kind:
    verdicts = PASSED if reward == 1.0 else FAILED if reward >= 0 else frozenset({Verdict.SYNTAX_ERROR})
    return Kind(name, completion, label, verdicts, reward)


def hostile(name: str, completion: str, label: object, *verdicts: Verdict) -> Kind:
    return Kind(name, completion, label, frozenset(verdicts), hostile=True, out_of_time=Verdict.TIMEOUT in verdicts)


HONEST = [
    honest("pytest_right", RIGHT, PYTEST, 1.0),
    honest("pytest_right_fenced", fenced(RIGHT), json.dumps(PYTEST), 1.0),
    honest("pytest_partial", "def add(a, b):\n    return a + b if a and b else -1\n", PYTEST, 2 / 3),
    honest("pytest_wrong", WRONG, PYTEST, 0.0),
    honest("asserts_right", fenced(RIGHT), ASSERTS, 1.0),
    honest("asserts_wrong", WRONG, json.dumps(ASSERTS), 0.0),
    honest("check_right", RIGHT, CHECK, 1.0),
    honest("check_continues_prompt", "    return a + b\n", {**CHECK, "prompt": "def add(a, b):\n"}, 1.0),
    honest("check_wrong", fenced(WRONG), CHECK, 0.0),
    honest("call_right", RIGHT, json.dumps(CALL), 1.0),
    honest("call_partial", "def add(a, b):\n    return a + b if a and b else -1\n", CALL, 2 / 3),
    honest("call_wrong", WRONG, CALL, 0.0),
    honest("stdio_right", fenced(STDIO_RIGHT), STDIO, 1.0),
    honest("stdio_wrong", STDIO_WRONG, json.dumps(STDIO), 0.0),
    honest("syntax_error", "def add(a, b)\n    return a + b\n", PYTEST, -1.0),
]

FILL = '''\
def fill(path):
    chunk = b"x" * (1 << 20)
    try:
        with open(path, "wb") as f:
            while True:
                f.write(chunk)
                f.flush()
    except OSError:
        pass

def add(a, b):
    for path in ("/work/fill", "/tmp/fill", "/dev/shm/fill"):
        fill(path)
    return a * b + 7
'''
INODES = '''\
import os

def add(a, b):
    for root in ("/work", "/tmp"):
        try:
            for i in range(1 << 16):
                open(os.path.join(root, "f%d" % i), "w").close()
        except OSError:
            pass
    return a * b + 7
'''
DAEMON = '''\
import os, time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)

def add(a, b):
    return a * b + 7
'''
SIGTERM_IGNORED = '''\
import os, signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:  # a child that ignores it too, and spins
    while True:
        pass

def add(a, b):
    while True:
        pass
'''
ALWAYS_EQUAL = '''\
class Anything(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 0
    def strip(self, *args):
        return self

def add(a, b):
    return Anything("3")
'''
THREADS = '''\
import threading, time

def add(a, b):
    try:
        for _ in range(100000):
            threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    except RuntimeError:
        pass
    return a * b + 7
'''
CRASHES = (Verdict.COLLECTION_ERROR, Verdict.KILLED)
HOSTILE = [
    # Resources: each ends the way its limit decides.
    hostile("fork_bomb", "import os\n\ndef add(a, b):\n    while True:\n        os.fork()\n", PYTEST,
            Verdict.FAILED, Verdict.TIMEOUT, Verdict.OUT_OF_MEMORY, Verdict.KILLED, Verdict.OUTPUT_LIMIT),
    hostile("memory_bomb", "def add(a, b):\n    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 20))\n",
            PYTEST, Verdict.OUT_OF_MEMORY),
    hostile("infinite_loop", "def add(a, b):\n    while True:\n        pass\n", PYTEST, Verdict.TIMEOUT),
    hostile("infinite_loop_asserts", "def add(a, b):\n    while True:\n        pass\n", {**ASSERTS, **QUICK},
            Verdict.TIMEOUT),
    hostile("sleep_stdio", "import time\ntime.sleep(10 ** 6)\n", {**STDIO, **QUICK}, Verdict.TIMEOUT),
    # Right answers after 1 GB of output: only the output cap stands between them and a pass.
    hostile("stdout_1gb", "import sys\n\ndef add(a, b):\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n"
                          "        sys.stdout.write(chunk)\n    return a + b\n", PYTEST, Verdict.OUTPUT_LIMIT),
    hostile("stdout_no_newline_stdio", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
            {**STDIO, **QUICK}, Verdict.TIMEOUT, Verdict.FAILED, Verdict.OUTPUT_LIMIT),
    hostile("disk_fill", FILL, PYTEST, Verdict.FAILED),
    hostile("inode_exhaustion", INODES, PYTEST, Verdict.FAILED),
    hostile("many_threads", THREADS, PYTEST, Verdict.FAILED),
    hostile("detached_background_process", DAEMON, PYTEST, Verdict.FAILED),
    hostile("sigterm_ignored", SIGTERM_IGNORED, PYTEST, Verdict.TIMEOUT),
    hostile("close_stdout_then_spin", "import os\n\ndef add(a, b):\n    os.close(1)\n    os.close(2)\n"
                                      "    while True:\n        pass\n", PYTEST, Verdict.TIMEOUT),
    hostile("block_on_stdin", "import sys\n\ndef add(a, b):\n    sys.stdin.read()\n    return a * b + 7\n",
            PYTEST, Verdict.FAILED),
    # Killing: every process it may signal, the harness above it, init; then the right answer.
    hostile("kill_everything", "import os\n\ndef add(a, b):\n    os.kill(-1, 9)\n    return a + b\n", PYTEST,
            Verdict.FAILED, *CRASHES),
    hostile("kill_the_harness", "import os\n\ndef add(a, b):\n    os.kill(os.getppid(), 9)\n    return a + b\n",
            PYTEST, Verdict.FAILED, *CRASHES),
    hostile("kill_init", "import os\n\ndef add(a, b):\n    os.kill(1, 9)\n    return a * b + 7\n", PYTEST,
            Verdict.FAILED),
    # Reward hacks.
    hostile("sys_exit_at_import", "import sys\nsys.exit(0)\n\n" + RIGHT, PYTEST, Verdict.COLLECTION_ERROR),
    hostile("sys_exit_at_import_call", "import sys\nsys.exit(0)\n\n" + RIGHT, CALL, Verdict.IMPORT_ERROR),
    hostile("os_exit_in_function", "import os\n\ndef add(a, b):\n    os._exit(0)\n", PYTEST, Verdict.KILLED),
    hostile("always_equal_call", ALWAYS_EQUAL, CALL, Verdict.FAILED),
    hostile("always_equal_asserts", ALWAYS_EQUAL, ASSERTS, Verdict.FAILED),
    hostile("always_equal_check", ALWAYS_EQUAL, CHECK, Verdict.FAILED),
    hostile("fake_pytest_summary_stdio", "print('=' * 20 + ' 3 passed in 0.01s ' + '=' * 20)\n", STDIO,
            Verdict.FAILED),
]


def plan(runs: int, hostile_share: float, seed: int) -> list[Kind]:
    """`runs` samples, `hostile_share` of them hostile, every kind in turn, shuffled by `seed`."""
    hostile_runs = round(runs * hostile_share)
    kinds = [HOSTILE[i % len(HOSTILE)] for i in range(hostile_runs)]
    kinds += [HONEST[i % len(HONEST)] for i in range(runs - hostile_runs)]
    random.Random(seed).shuffle(kinds)
    return kinds


# -- this process -------------------------------------------------------------------------------

def process_figures() -> dict:
    """RSS, threads and open files of this process."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {"rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 2), "threads": int(status["Threads"]),
            "fds": len(os.listdir("/proc/self/fd")) - 1}  # minus listdir's own


def least_squares_slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


# -- what the engine leaves on the host ---------------------------------------------------------

class RecordingEngine(DockerEngine):
    """A `DockerEngine` that writes down each container it creates, with the
    host paths the engine made for it: one JSON line per container, appended
    to a file (so the record does not grow this process's memory)."""

    def __init__(self, record: Path, docker_root: Path, driver: str, **options):
        super().__init__(**options)
        self.docker_root, self.driver = docker_root, driver
        self._record = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def create(self, *args, **kwargs) -> str:
        container_id = super().create(*args, **kwargs)
        os.write(self._record, (json.dumps(self.footprint(container_id)) + "\n").encode())  # one write: atomic
        return container_id

    def footprint(self, container_id: str) -> dict:
        footprint = {"id": container_id, "mount_id": None, "volumes": []}
        try:
            footprint["mount_id"] = (self.docker_root / "image" / self.driver / "layerdb" / "mounts" / container_id
                                     / "mount-id").read_text().strip()
            config = json.loads((self.docker_root / "containers" / container_id / "config.v2.json").read_text())
            footprint["volumes"] = [m["Name"] for m in (config.get("MountPoints") or {}).values() if m.get("Name")]
        except (OSError, ValueError):
            pass  # counted as unrecorded: the checks would be blind to this one
        return footprint

    def close(self) -> None:
        super().close()
        os.close(self._record)


def recorded(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()]


CGROUP_CONTAINER = re.compile(r"[/-]([0-9a-f]{64})(?:\.scope)?$", re.M)


def host_processes() -> list[tuple[int, str | None, str]]:
    """Every process on this host: pid, the container its cgroup names (None
    outside containers), command line. Container processes show in the host's /proc."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cgroup = (proc / "cgroup").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue  # exited while we looked, or not ours to read
        match = CGROUP_CONTAINER.search(cgroup)
        found.append((int(proc.name), match.group(1) if match else None, cmdline))
    return found


def footprints_left(client: docker.APIClient, owner: str, containers: list[dict], docker_root: Path,
                    driver: str) -> dict[str, list[str]]:
    """What is still there of these containers (and of any container of `owner`)."""
    ids = {c["id"] for c in containers}
    mount_ids = {c["mount_id"] for c in containers if c["mount_id"]}
    names = ids | mount_ids
    volumes = {v for c in containers for v in c["volumes"]}
    listed = client.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    processes = [f"{pid} in {cid[:12] if cid else 'no container'}: {cmdline}"
                 for pid, cid, cmdline in host_processes()
                 # the harness outside any container cannot be another engine's either
                 if cid in ids or (cid is None and "/opt/rewardbox/" in cmdline)]
    mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if names & set(line.split()[4].split("/"))]
    dirs = [str(path) for path in
            [docker_root / "containers" / i for i in ids]
            + [docker_root / "image" / driver / "layerdb" / "mounts" / i for i in ids]
            + [docker_root / driver / m for m in mount_ids] + [docker_root / driver / f"{m}-init" for m in mount_ids]
            if path.exists()]
    return {
        "containers": [f"{c['Id'][:12]} {c.get('Names')} {c.get('State')}" for c in listed],
        "processes": processes,
        "mounts": mounts,
        "docker_dirs": dirs,
        "volumes": sorted(volumes & {v["Name"] for v in client.volumes().get("Volumes") or []}),
    }


SEEN = ("containers", "processes", "mounts", "docker_dirs")  # what the checks must see of running containers


def wait_for_none_left(find, wait_s: float = 10.0) -> dict[str, list[str]]:
    """Removal has returned before we look: give the engine and the kernel a moment."""
    deadline = time.monotonic() + wait_s
    while True:
        left = find()
        if not any(left.values()) or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def files_in(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def dead_owner_containers(client: docker.APIClient) -> list[str]:
    """`rewardbox` containers whose owner process on this host has died: not
    ours while we run, and swept by the next `Sandbox` to start (this soak
    sweeps nothing: the engine is shared). Reported, not counted."""
    return [f"{c['Id'][:12]} {c['Labels'].get(OWNER_LABEL)}" for c in client.containers(
        all=True, filters={"label": "rewardbox"}) if not owner_alive(c["Labels"].get(OWNER_LABEL, ""))]


# -- the run ------------------------------------------------------------------------------------

class Soak:
    """Submits samples with `window` in flight and tallies what comes back.
    Keeps only verdicts and mismatches, not the outputs: the soak itself must
    not grow the memory it measures."""

    def __init__(self, reward: CodeReward, short: CodeReward, window: int):
        self.reward, self.short = reward, short
        self.window = window
        self._slots = threading.Semaphore(window)
        self._lock = threading.Lock()
        self.verdicts: Counter[str] = Counter()
        self.mismatches: list[str] = []
        self.done = 0

    def submit(self, index: int, kind: Kind) -> None:
        self._slots.acquire()
        reward = self.short if kind.out_of_time else self.reward
        future = reward.submit(Sample(id=index, completion=kind.completion, label=kind.label))
        future.add_done_callback(partial(self._tally, kind))

    def _tally(self, kind: Kind, future: "Future[RewardOutput]") -> None:
        try:
            out = future.result()
            verdict, problem = str(out.verdict.value if out.verdict is not None else None), kind.mismatch(out)
        except Exception as exc:  # noqa: BLE001 - a failure of ours is a mismatch too
            verdict, problem = "error", f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.verdicts[verdict] += 1
            self.done += 1
            if problem:
                self.mismatches.append(f"{kind.name}: {problem}")
        self._slots.release()

    def drain(self) -> None:
        """Wait until nothing is in flight."""
        for _ in range(self.window):
            self._slots.acquire()
        for _ in range(self.window):
            self._slots.release()


def memory_figures(points: list[dict], rss_bound_mib: float, slope_bound_mib: float) -> dict:
    """Whether memory stayed flat, by the criterion of the module's docstring."""
    start, end = points[0], points[-1]
    growth = end["rss_mib"] - start["rss_mib"]
    later = points[len(points) // 2:]
    slope = least_squares_slope([p["runs_done"] for p in later], [p["rss_mib"] for p in later]) * 1000
    return {
        "rss_start_mib": start["rss_mib"], "rss_end_mib": end["rss_mib"], "rss_growth_mib": round(growth, 2),
        "rss_slope_mib_per_1000_runs": round(slope, 2),
        "criterion": f"RSS at the end minus after warm-up <= {rss_bound_mib} MiB and least-squares slope "
                     f"over the later half of the points <= {slope_bound_mib} MiB per 1,000 runs",
        "flat": growth <= rss_bound_mib and slope <= slope_bound_mib, "points": points,
    }


def open_files() -> dict[str, str]:
    """This process's open files: fd -> what it points to."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # listdir's own, closed by now
    return found


SPARE_FDS = 1  # one socket, in every mode, outlives the sandbox's close (not yet traced); a leak grows per run


def fds_added(before: dict[str, str]) -> list[str]:
    """Open files after the sandbox's close beyond those before it was made
    (and the one spare). Not a comparison while it runs: a pool's engine
    client opens connections as its calls overlap, up to its pool size, and
    keeps them idle."""
    gc.collect()
    after = open_files()
    if len(after) <= len(before) + SPARE_FDS:
        return []
    return [f"fds {len(before)} before the sandbox, {len(after)} after its close: "
            f"{sorted(v for k, v in after.items() if before.get(k) != v)}"]


def grown(points: list[dict], key: str) -> list[str]:
    """A count that ends above all its values in the first half of the run
    (from the warm-up on): growing, not swinging. Open files do swing a little:
    the engine client's connection pools keep a few idle connections."""
    first_half = [p[key] for p in points[:max(1, len(points) // 2)]]
    end = points[-1][key]
    return [f"{key} {min(first_half)}..{max(first_half)} in the first half, {end} at the end"] if end > max(first_half) else []


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs measured, after the warm-up")
    parser.add_argument("--warmup", type=int, default=50, help="runs before the first memory point")
    parser.add_argument("--hostile-share", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=DEFAULT_MAX_CONTAINERS, help="containers at once")
    parser.add_argument("--timeout-s", type=float, default=2.0, help="Limits.timeout_s of the samples meant to run "
                        "out of time (the others keep the default, so that a loaded machine does not fail them)")
    parser.add_argument("--memory-mb", type=int, default=256, help="each run's memory limit")
    parser.add_argument("--points", type=int, default=8, help="intermediate memory points")
    parser.add_argument("--rss-bound-mib", type=float, default=8.0, help="flat: RSS at the end minus after warm-up")
    parser.add_argument("--slope-bound-mib", type=float, default=2.0,
                        help="flat: RSS slope over the later half of the points, MiB per 1,000 runs")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--mode", choices=MODES, default=DEFAULT_MODE, help="the sandbox mode soaked")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not 0 <= args.hostile_share <= 1 or args.runs < 1 or args.warmup < 2:
        parser.error("--hostile-share is a fraction; --runs at least 1; --warmup at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    # Whatever this process writes to the temp dir lands in a private one, which must end empty.
    private = Path(tempfile.mkdtemp(prefix="rewardbox-soak-"))
    temp_dir = private / "tmp"
    temp_dir.mkdir()
    os.environ["TMPDIR"] = tempfile.tempdir = str(temp_dir)
    record = private / "containers.jsonl"

    # For the checks; kept open, so its connection is counted from the start, and one at most.
    client = docker.from_env(timeout=60, max_pool_size=1).api
    info = client.info()
    docker_root, driver = Path(info["DockerRootDir"]), info["Driver"]
    if not os.access(docker_root / "containers", os.R_OK | os.X_OK):
        sys.exit(f"cannot read the engine's data root {docker_root}: the soak checks the host the engine runs on")
    volumes_before = {v["Name"] for v in client.volumes().get("Volumes") or []}

    limits = Limits(memory_mb=args.memory_mb)
    short = limits.model_copy(update={"timeout_s": args.timeout_s})
    gc.collect()
    fds_before = open_files()  # the sandbox's own, connections and streams, come after
    engine = RecordingEngine(record, docker_root, driver, retry_s=20, pool_size=args.workers * 2 + 4)
    # Sweeping is not ours to do here.
    sandbox = make_sandbox(args.mode, max_containers=args.workers, engine=engine, sweep=False, limits=limits)
    soak = Soak(CodeReward(sandbox, limits=limits), CodeReward(sandbox, limits=short), window=2 * args.workers)
    owner = engine.owner
    result: dict = {
        "mode": args.mode, "runs": args.runs, "warmup_runs": args.warmup, "workers": args.workers,
        "in_flight": soak.window,
        "cpus": os.cpu_count(), "seed": args.seed, "owner": owner,
        "limits": limits.model_dump(include={"timeout_s", "memory_mb", "pids", "work_mb", "tmp_mb", "inodes"}),
        "timeout_s_of_samples_meant_to_run_out_of_time": args.timeout_s,
        "load_average_before": round(os.getloadavg()[0], 2),
    }

    def find_left() -> dict[str, list[str]]:
        return footprints_left(client, owner, recorded(record), docker_root, driver)

    try:
        # Warm-up. From half way through, while containers run, the checks must see them: else they prove nothing.
        warmup = plan(args.warmup, args.hostile_share, args.seed + 1)
        seen_running: Counter[str] = Counter()
        for i, kind in enumerate(warmup):
            soak.submit(i, kind)
            if i >= len(warmup) // 2 and not all(seen_running[k] for k in SEEN):
                seen_running |= Counter({k: len(v) for k, v in find_left().items()})
        soak.drain()
        gc.collect()
        points = [{"runs_done": 0, **process_figures()}]

        kinds = plan(args.runs, args.hostile_share, args.seed)
        marks = {round(args.runs * k / (args.points + 1)) for k in range(1, args.points + 1)}
        started = time.monotonic()
        for i, kind in enumerate(kinds):
            if i in marks:
                gc.collect()
                points.append({"runs_done": soak.done - args.warmup, **process_figures()})
            soak.submit(args.warmup + i, kind)
        soak.drain()
        wall_s = time.monotonic() - started
        getattr(sandbox, "settle", lambda: True)()  # a pool: no replacement half made at the last point
        gc.collect()
        points.append({"runs_done": args.runs, **process_figures()})

    finally:
        sandbox.close()  # a pool's warm containers go with it
    extra_fds = fds_added(fds_before)  # before the checks below, whose client is not the sandbox's
    left = wait_for_none_left(find_left)
    containers = recorded(record)

    memory = memory_figures(points, args.rss_bound_mib, args.slope_bound_mib)
    leaks = {
        **left,
        "temp_files": files_in(temp_dir),
        "threads_added": grown(points, "threads"),
        "fds_added": extra_fds,
        "unrecorded_containers": [c["id"][:12] for c in containers if not c["mount_id"]],
    }
    hostile_runs = sum(k.hostile for k in kinds)
    result.update({
        "hostile_runs": hostile_runs,
        "hostile_share": round(hostile_runs / args.runs, 3),
        "containers_created": len(containers),
        "wall_s": round(wall_s, 1),
        "samples_per_s": round(args.runs / wall_s, 2),
        "verdicts": dict(soak.verdicts.most_common()),
        "mismatches": len(soak.mismatches),
        "mismatch_examples": sorted(Counter(soak.mismatches).items(), key=lambda kv: -kv[1])[:20],
        "memory": memory,
        "leaks": leaks,
        "leaks_total": sum(map(len, leaks.values())),
        "seen_while_running": dict(seen_running),
        "volumes_new": sorted({v["Name"] for v in client.volumes().get("Volumes") or []} - volumes_before),
        "not_ours_dead_owner_containers": dead_owner_containers(client),
        "load_average_after": round(os.getloadavg()[0], 2),
    })
    client.close()
    if not result["leaks_total"]:
        record.unlink()
        temp_dir.rmdir()
        private.rmdir()
    else:
        result["record"] = str(record)
    text = json.dumps(result, indent=2)
    print(text)
    print(f"soak: {args.runs} runs ({result['hostile_share']:.0%} hostile) in {result['wall_s']} s, "
          f"{result['samples_per_s']} samples/s; {result['mismatches']} mismatches, {result['leaks_total']} leaks; "
          f"RSS {memory['rss_start_mib']} -> {memory['rss_end_mib']} MiB ({'flat' if memory['flat'] else 'NOT flat'}: "
          f"{memory['rss_growth_mib']:+} MiB, {memory['rss_slope_mib_per_1000_runs']:+} MiB per 1,000 runs late)",
          file=sys.stderr)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if memory["flat"] and not result["mismatches"] and not result["leaks_total"] else 1


if __name__ == "__main__":
    sys.exit(main())
