"""Overload that the trainers' own HTTP clients survive: OpenRLHF 0.11.2's
remote reward client and verl 0.9.1's SandboxFusion client, driven at once
against one saturated `rewardbox serve` (2 containers, room for 4 samples in
the sandbox, everything else in line), every sample honest with a known
reward: each must come back with that reward, none missing, none wrong.

What the clients tolerate (read in their code):
- OpenRLHF 0.11.2 `SingleTurnAgentExecutor._fetch_rewards_via_http`
  (openrlhf/utils/agent.py:327-362): 180 s per attempt, 5 attempts 1 s
  apart, any non-2xx retried; then it raises, and `execute` (:303-304) logs it
  and leaves the sample without a reward.
- verl 0.9.1 `default_compute_score` -> `sandbox_fusion.compute_score`
  (timeout 10 s, verl/utils/reward_score/sandbox_fusion/__init__.py:29) ->
  `check_correctness` -> `call_sandbox_api` (utils.py:115-171): a request
  times out after compile + run + 10 = 30 s, only a 504 is retried (3
  attempts, 1 s then 2 s apart), anything else is a failed test case (-1),
  so a correct answer scores below 1.

The load is sized within what those schedules allow with 2 containers here
(README, "The reward service": the sizing rule), and over what verl's 30 s
allow without retries: the later verl requests are answered 504 and their
retries pick up the runs they left in line.
"""

import asyncio
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.trainers.conftest import rewardbox_serve

pytestmark = pytest.mark.timeout(600)

WORKERS, MAX_WAITING = 2, 4
OPENRLHF_SAMPLES = 24  # one request each, all in flight at once, as 0.11.2's rollout sends them
VERL_CLIENTS, VERL_SAMPLES, VERL_CASES = 3, 10, 4  # reward workers, samples each, test cases per sample
# Each program sleeps, so that a run costs about the same however busy this machine is: about
# 110 container-seconds in all, 50-70 s on 2 containers, over verl's 30 s per attempt and under its 84 s
# with retries (3 x (30 - 3) + 1 + 2).
RUN_S = 0.4
CASES = [(f"{a} {b}\n", f"{a + b}\n") for a, b in ((1, 2), (5, 7), (40, 2), (-3, 9))][:VERL_CASES]


def program(n: int, right: bool) -> str:
    """An honest solution, numbered so that no two samples are the same run."""
    return (f"# sample {n}\nimport time\ntime.sleep({RUN_S})\n"
            f"a, b = map(int, input().split())\nprint(a {'+' if right else '-'} b)\n")


def completion(n: int, right: bool) -> str:
    return f"Reading two integers.\n```python\n{program(n, right)}```\n"


def drive_openrlhf(url: str, results: dict) -> None:
    """0.11.2's executor scores each rollout as it finishes: many coroutines at
    once on one event loop, one sample per request."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(remote_rm_url=f"{url}/get_reward")
    label = {"inputs": [i for i, _ in CASES], "outputs": [o for _, o in CASES]}
    prompt = "<|user|>Add two integers read from one line.<|assistant|>"

    async def one(n: int) -> None:
        right = n % 2 == 0
        try:
            info = (await executor._fetch_rewards_via_http([prompt + completion(n, right)], [prompt], [label]))[0]
            got = (info["rewards"][0], info["scores"][0])
        except Exception as exc:  # noqa: BLE001 - what `execute` does: no reward for this sample
            got = f"missing: {exc}"
        results[("openrlhf", n)] = (got, (1.0, 1.0) if right else (0.0, 0.5))  # every test fails: reward 0, score 0.5

    async def all_of_them() -> None:
        await asyncio.gather(*(one(n) for n in range(OPENRLHF_SAMPLES)))

    asyncio.run(all_of_them())


def drive_verl(url: str, client: int, results: dict) -> None:
    """What a verl reward worker runs per sample (verl/trainer/ppo/reward.py:138-147:
    `default_compute_score` with the sandbox URL and a semaphore of
    `max_concurrent`, 64), its samples at once."""
    from verl.utils.reward_score import default_compute_score

    semaphore = threading.Semaphore(64)
    ground_truth = json.dumps({"inputs": [i for i, _ in CASES], "outputs": [o for _, o in CASES]})

    def one(n: int) -> None:
        right = n % 2 == 0
        score = default_compute_score("codecontests", completion(1000 * (client + 1) + n, right), ground_truth,
                                      sandbox_fusion_url=f"{url}/run_code", concurrent_semaphore=semaphore,
                                      memory_limit_mb=256)
        results[("verl", client, n)] = (score, 1.0 if right else 0.0)

    with ThreadPoolExecutor(VERL_SAMPLES) as pool:
        list(pool.map(one, range(VERL_SAMPLES)))


def counted(metrics: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


def test_the_real_clients_get_every_reward_from_a_saturated_server():
    results: dict = {}
    peak_held = 0
    with rewardbox_serve("--workers", str(WORKERS), "--max-waiting", str(MAX_WAITING)) as url:
        started = time.monotonic()
        clients = [threading.Thread(target=drive_openrlhf, args=(url, results))]
        clients += [threading.Thread(target=drive_verl, args=(url, c, results)) for c in range(VERL_CLIENTS)]
        for thread in clients:
            thread.start()
        while any(t.is_alive() for t in clients):
            held = re.search(r"^rewardbox_samples_held (\S+)$", requests.get(f"{url}/metrics", timeout=10).text, re.M)
            peak_held = max(peak_held, int(float(held.group(1))) if held else 0)
            time.sleep(0.5)
        wall_s = time.monotonic() - started
        metrics = requests.get(f"{url}/metrics", timeout=10).text

    samples = OPENRLHF_SAMPLES + VERL_CLIENTS * VERL_SAMPLES
    wrong = {key: got for key, (got, expected) in results.items() if got != expected}
    held_503 = counted(metrics, "rewardbox_http_requests_total", route="/get_reward", status="503")
    held_504 = counted(metrics, "rewardbox_http_requests_total", route="/run_code", status="504")
    print(f"\nclients: 1 OpenRLHF 0.11.2 executor ({OPENRLHF_SAMPLES} requests at once), {VERL_CLIENTS} verl 0.9.1 "
          f"reward workers ({VERL_SAMPLES} samples x {VERL_CASES} test cases each); {samples} samples, "
          f"{OPENRLHF_SAMPLES + VERL_CLIENTS * VERL_SAMPLES * VERL_CASES} container runs on {WORKERS} containers; "
          f"wrong or missing rewards: {len(wrong) + samples - len(results)}; wall {wall_s:.1f} s; "
          f"peak held in line {peak_held}; answered 503 {held_503:g} (/get_reward), 504 {held_504:g} (/run_code)")
    assert len(results) == samples
    assert wrong == {}
    assert peak_held > MAX_WAITING  # saturated: most of the load waited in line, none of it was refused
