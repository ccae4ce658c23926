"""Throughput and latency of the reward service over a real loopback socket.

Two runs against one server (uvicorn in this process, real containers behind):

- `mixed`: the load test's mix (tests/docker/test_service_load.py): OpenRLHF
  `/get_reward` requests, one sample each or small batches, honest code of
  every label format, math answers and hostile completions, from 64 clients;
- `openrlhf`: `/get_reward` with one sample per request as the newest
  OpenRLHF sends it, honest code samples only, from 32 clients.

    python bench/service_load.py [--requests 2000] [--openrlhf-requests 400] [--workers 4]

Prints JSON: samples/s, requests/s, p50/p99 latency per request (waits for
503 retries included), container runs, 503s retried.
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "docker"))  # the load test's mix and its real-server helper

from server import running_server  # noqa: E402
from test_service_load import HONEST_CODE, LIMITS, SETTINGS, load_plan, run_load, wrong_answers  # noqa: E402

from rewardbox.sandbox import Sandbox  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(url: str, plan, clients: int) -> dict:
    answers, wall_s = run_load(url, plan, clients)
    latencies = [a.latency_s for a in answers]
    samples = sum(map(len, plan))
    # Requests with no container to wait for (math, no code, bad labels) apart.
    cheap = [a.latency_s for kinds, a in zip(plan, answers) if not any(k.container for k in kinds)]
    return {
        "requests": len(plan),
        "samples": samples,
        "container_runs": sum(k.container for kinds in plan for k in kinds),
        "hostile_samples": sum(k.hostile for kinds in plan for k in kinds),
        "clients": clients,
        "wall_s": round(wall_s, 1),
        "samples_per_s": round(samples / wall_s, 2),
        "requests_per_s": round(len(plan) / wall_s, 2),
        "latency_p50_s": round(percentile(latencies, 0.50), 3),
        "latency_p99_s": round(percentile(latencies, 0.99), 3),
        "latency_mean_s": round(statistics.fmean(latencies), 3),
        **({"no_container_requests": len(cheap), "no_container_latency_p50_s": round(percentile(cheap, 0.50), 3),
            "no_container_latency_p99_s": round(percentile(cheap, 0.99), 3)} if cheap else {}),
        "busy_503_retried": sum(a.busy for a in answers),
        "wrong_or_lost": len(wrong_answers(plan, answers)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests of the mixed run (0: skip it)")
    parser.add_argument("--clients", type=int, default=64, help="clients of the mixed run")
    parser.add_argument("--openrlhf-requests", type=int, default=400, help="one-sample honest requests (0: skip)")
    parser.add_argument("--openrlhf-clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4, help="containers at once")
    args = parser.parse_args()

    # Other work on the machine slows the containers down: the load average says how much there was.
    result: dict = {"workers": args.workers, "cpus": os.cpu_count(), "load_average_before": round(os.getloadavg()[0], 2),
                    "limits": LIMITS.model_dump(include={"timeout_s", "memory_mb"})}
    with Sandbox(max_containers=args.workers, retry_s=20) as sandbox, running_server(sandbox, SETTINGS, LIMITS) as url:
        if args.openrlhf_requests:
            plan = [[HONEST_CODE[i % len(HONEST_CODE)]] for i in range(args.openrlhf_requests)]
            result["openrlhf"] = measure(url, plan, args.openrlhf_clients)
        if args.requests:
            result["mixed"] = measure(url, load_plan(args.requests), args.clients)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
