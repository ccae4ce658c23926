"""The reward service under load: 64 concurrent clients, 2,000 requests of
OpenRLHF's `/get_reward` (one sample each, as the newest client sends them, or
small batches), honest completions of every label format mixed with math
answers and hostile ones (infinite loops, memory bombs, huge output, fork
attempts). Every request answered, every sample's reward the one its kind must
get, no container left behind, the server's memory flat. Then the line:
more samples than the sandbox takes wait in it, a request held longer than
its client waits gets 503 + Retry-After, and the retry picks up its
samples, scored once.

The load itself (`KINDS`, `load_plan`, `run_load`) is shared with
bench/service_load.py, which measures what this test only checks.
"""

import json
import random
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from add_task import LABEL as ADD_LABEL
from server import running_server

from rewardbox.rewards.server import ServerSettings
from rewardbox.sandbox import Limits

# Limits that make hostile samples end fast: 128 MB for the memory bombs, a
# short per-case time for the loops. Honest samples keep the default per-case
# time (3 s): the first case of a generated label also starts the solution's
# worker process, which under this load can take over 0.5 s.
LIMITS = Limits(timeout_s=5, memory_mb=128)
HOSTILE_CASE_TIMEOUT_S = 0.5  # an infinite loop costs ~1 s, not the whole timeout_s
SETTINGS = ServerSettings(retry_after_s=1)
PROMPT = "<|im_start|>system\nYou write Python.<|im_end|>\n<|im_start|>user\nSolve the task.<|im_end|>\n<|im_start|>assistant\n"
END = "<|im_end|>"


def _json(**label) -> str:
    return json.dumps(label)  # OpenRLHF hands the label column over as it is: often a JSON string


ASSERTS = {"tests": ["assert f(1) == 2", "assert f(2) == 3", "assert f(5) == 0"]}
CALL = {"fn_name": "f", "inputs": [[1], [2], [3], [4]], "outputs": [2, 3, 4, 5]}
STDIO = {"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "4\n"]}
CHECK = {"test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n", "entry_point": "f"}
OPEN_R1 = {"language": "python", "test_cases": [{"input": "3\n", "output": "6\n", "type": "stdin_stdout"},
                                                {"input": "5\n", "output": "10\n", "type": "stdin_stdout"}]}
HOSTILE_ASSERTS = {**ASSERTS, "case_timeout_s": HOSTILE_CASE_TIMEOUT_S}
HOSTILE_STDIO = {**STDIO, "case_timeout_s": HOSTILE_CASE_TIMEOUT_S}


@dataclass(frozen=True)
class Kind:
    """One kind of completion and the numbers it must get, every time."""

    name: str
    response: str  # what the model wrote, after the prompt
    label: object
    reward: float  # /get_reward's: a label that cannot be used answers 0.0
    score: float
    container: bool = True  # runs in a container (math, no code and bad labels do not)
    hostile: bool = False


def _fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}```{END}"


FORK = ("import os, time\n\ndef f(x):\n    for _ in range(1000):\n        try:\n            if os.fork() == 0:\n"
        "                time.sleep(3600)\n        except OSError:\n            break\n    time.sleep(3600)\n")

KINDS = {k.name: k for k in [
    # Honest code, every label format, passing and failing.
    Kind("pytest_pass", "def add(a, b):\n    return a + b\n" + END, ADD_LABEL, 1.0, 1.0),
    Kind("pytest_partial", _fenced("def add(a, b):\n    return a + b if a >= 0 else 0\n"), json.dumps(ADD_LABEL), 2 / 3, 5 / 6),
    Kind("asserts_pass", _fenced("def f(x):\n    return 0 if x == 5 else x + 1\n"), _json(**ASSERTS), 1.0, 1.0),
    Kind("asserts_partial", _fenced("def f(x):\n    return x + 1\n"), ASSERTS, 2 / 3, 5 / 6),
    Kind("call_pass", _fenced("def f(x):\n    return x + 1\n"), _json(**CALL), 1.0, 1.0),
    Kind("call_partial", _fenced("def f(x):\n    return x * 2\n"), CALL, 0.25, 0.625),
    Kind("stdio_pass", _fenced("a, b = map(int, input().split())\nprint(a + b)\n"), _json(**STDIO), 1.0, 1.0),
    Kind("stdio_fail", _fenced("a, b = map(int, input().split())\nprint(a - b)\n"), STDIO, 0.0, 0.5),
    Kind("check_pass", _fenced("def f(x):\n    return x + 1\n"), _json(**CHECK), 1.0, 1.0),
    Kind("open_r1_pass", _fenced("print(int(input()) * 2)\n"), _json(**OPEN_R1), 1.0, 1.0),
    Kind("syntax_error", _fenced("def f(x)\n    return x\n"), ASSERTS, -1.0, 0.0),
    # No container: math answers, no code, a label that cannot be used.
    Kind("math_boxed", "So the answer is $\\boxed{\\frac{1}{2}}$." + END, "0.5", 1.0, 1.0, container=False),
    Kind("math_gsm8k", "40 + 2 = 42 apples.\n#### 1,800" + END, "1800", 1.0, 1.0, container=False),
    Kind("math_wrong", "The answer is 41." + END, _json(answer="42"), 0.0, 0.0, container=False),
    Kind("no_code", "I do not know." + END, ASSERTS, -1.0, 0.0, container=False),
    Kind("bad_label", _fenced("x = 1\n"), _json(inputs=["1"], outputs=[]), 0.0, 0.0, container=False),
    # Hostile: each ends the one way its limit decides.
    Kind("infinite_loop", _fenced("def f(x):\n    while True:\n        pass\n"), HOSTILE_ASSERTS, -0.5, 0.25, hostile=True),
    Kind("sleep_forever", _fenced("import time\ntime.sleep(10**6)\n"), _json(**HOSTILE_STDIO), -0.5, 0.25, hostile=True),
    Kind("memory_bomb", _fenced("def add(a, b):\n    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 20))\n"),
         ADD_LABEL, -1.0, 0.0, hostile=True),
    Kind("huge_output", _fenced("import sys\n\ndef add(a, b):\n    chunk = 'x' * (1 << 20)\n    for _ in range(100):\n"
                                "        sys.stdout.write(chunk)\n    return a + b\n"), ADD_LABEL, -1.0, 0.0, hostile=True),
    # Forks until the pids limit refuses, then hangs: its case's deadline ends it.
    Kind("fork_attempt", _fenced(FORK), _json(tests=["assert f(1) == 2"], case_timeout_s=HOSTILE_CASE_TIMEOUT_S), -0.5, 0.25,
         hostile=True),
]}
HONEST_CODE = [k for k in KINDS.values() if k.container and not k.hostile]
CHEAP = [k for k in KINDS.values() if not k.container]
HOSTILE = [k for k in KINDS.values() if k.hostile]


def load_plan(requests_total: int = 2000, seed: int = 4) -> list[list[Kind]]:
    """The requests, each a list of the kinds of its samples: one sample per
    request mostly (the newest OpenRLHF), one in eight a batch of 2-4 (older
    OpenRLHF's micro-batches: one code sample, the rest cheap). 10.5% of the
    requests are hostile singles, 30% honest code singles, the rest cheap
    singles: about 1,060 container runs in 2,000 requests, which is what a
    2-core machine with 4 containers at once scores in a few minutes.
    Shuffled with a fixed seed, so every run sends the same load."""
    rng = random.Random(seed)
    hostile, batches, code = requests_total * 21 // 200, requests_total // 8, requests_total * 30 // 100
    cheap = requests_total - hostile - batches - code
    plan = [[HOSTILE[i % len(HOSTILE)]] for i in range(hostile)]
    plan += [[HONEST_CODE[i % len(HONEST_CODE)]] for i in range(code)]
    plan += [[CHEAP[i % len(CHEAP)]] for i in range(cheap)]
    for i in range(batches):
        batch = [HONEST_CODE[(code + i) % len(HONEST_CODE)]] + [CHEAP[(i + j) % len(CHEAP)] for j in range(1 + i % 3)]
        rng.shuffle(batch)
        plan.append(batch)
    rng.shuffle(plan)
    return plan


def body(kinds: Sequence[Kind], n: int = 0) -> dict:
    """OpenRLHF's body: the query is the templated prompt plus the response.
    The prompt is numbered: the service scores identical requests in flight
    at once only once, and the load is meant to cost what its samples do."""
    prompt = PROMPT.replace("Solve the task.", f"Solve task {n}.")
    return {"query": [prompt + k.response for k in kinds], "prompts": [prompt] * len(kinds),
            "labels": [k.label for k in kinds]}


@dataclass
class Answer:
    """What one request got, after the client's retries."""

    status: int | None = None  # of the last attempt; None: no HTTP answer at all
    payload: dict | None = None
    busy: int = 0  # 503s with Retry-After that the client waited out and retried
    retry_after: list[str] = field(default_factory=list)
    latency_s: float = 0.0  # first attempt to final answer, waits included
    error: str | None = None


def post_retrying(session: requests.Session, url: str, payload: dict, max_attempts: int = 60,
                  timeout_s: float = 180) -> Answer:
    """As OpenRLHF's client: a non-2xx is tried again after a pause (here the
    server's Retry-After), a bounded number of times."""
    answer = Answer()
    started = time.monotonic()
    for _ in range(max_attempts):
        try:
            response = session.post(url, json=payload, timeout=timeout_s)
        except requests.RequestException as exc:
            answer.error = f"{type(exc).__name__}: {exc}"
            break
        answer.status = response.status_code
        if response.status_code == 503 and "Retry-After" in response.headers:
            answer.busy += 1
            answer.retry_after.append(response.headers["Retry-After"])
            time.sleep(float(response.headers["Retry-After"]))
            continue
        answer.payload = response.json() if response.headers.get("content-type", "").startswith("application/json") else None
        break
    answer.latency_s = time.monotonic() - started
    return answer


def run_load(url: str, plan: Sequence[Sequence[Kind]], clients: int,
             on_tick: Callable[[], None] | None = None) -> tuple[list[Answer], float]:
    """Sends every request of `plan` to `url`/get_reward from `clients`
    threads, each with its own session, taking the next request as it is
    free. Returns the answers in plan order and the wall time."""
    answers: list[Answer | None] = [None] * len(plan)
    next_index = iter(range(len(plan)))
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client() -> None:
        with requests.Session() as session:
            start.wait()
            while True:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                answers[i] = post_retrying(session, f"{url}/get_reward", body(plan[i], i))
                if on_tick is not None:
                    on_tick()

    threads = [threading.Thread(target=client, name=f"load-client-{n}", daemon=True) for n in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [a if a is not None else Answer(error="never sent") for a in answers], time.monotonic() - started


def wrong_answers(plan: Sequence[Sequence[Kind]], answers: Sequence[Answer]) -> list[str]:
    """Every way a request's answer differs from what its samples must get."""
    problems = []
    for i, (kinds, answer) in enumerate(zip(plan, answers)):
        names = [k.name for k in kinds]
        if answer.status != 200 or answer.payload is None:
            problems.append(f"request {i} {names}: status {answer.status}, error {answer.error}")
            continue
        rewards, scores = answer.payload.get("rewards"), answer.payload.get("scores")
        if not (isinstance(rewards, list) and isinstance(scores, list) and len(rewards) == len(scores) == len(kinds)):
            problems.append(f"request {i} {names}: {len(kinds)} samples but answer {answer.payload}")
            continue
        for kind, reward, score in zip(kinds, rewards, scores):
            if reward != pytest.approx(kind.reward) or score != pytest.approx(kind.score):
                problems.append(f"request {i}: {kind.name} got reward {reward}, score {score}; "
                                f"expected {kind.reward}, {kind.score}")
    return problems


class RssSampler:
    """This process's resident memory, sampled over time: the server runs in
    it, so its memory is the server's (plus the clients', which do not grow)."""

    def __init__(self) -> None:
        self.samples_mb: list[float] = []
        self._lock = threading.Lock()

    def sample(self) -> None:
        text = Path("/proc/self/status").read_text()
        rss_kb = int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE).group(1))
        with self._lock:
            self.samples_mb.append(rss_kb / 1024)

    def quarters(self) -> tuple[float, float]:
        """Medians of the first and the last quarter of the samples."""
        with self._lock:
            samples = list(self.samples_mb)
        quarter = max(1, len(samples) // 4)
        return statistics.median(samples[:quarter]), statistics.median(samples[-quarter:])


def test_the_plan_is_the_load_the_issue_asks_for():
    plan = load_plan()
    samples = [k for kinds in plan for k in kinds]

    assert len(plan) >= 2000
    assert sum(k.container for k in samples) >= 1000
    assert sum(any(k.hostile for k in kinds) for kinds in plan) >= len(plan) // 10
    assert {k.name for k in samples} == set(KINDS)
    assert Counter(len(kinds) for kinds in plan)[1] > len(plan) // 2


@pytest.mark.timeout(1200)  # the whole run, as a backstop: every request also has its own timeout
def test_64_clients_2000_requests_mixed_with_hostile_completions(sandbox, leftovers):
    plan = load_plan()
    rss = RssSampler()
    ticks = Counter()
    lock = threading.Lock()

    def tick() -> None:
        # Sample memory every 20 answered requests: time-based sampling would weigh slow phases more.
        with lock:
            ticks["answered"] += 1
            due = ticks["answered"] % 20 == 0
        if due:
            rss.sample()

    with running_server(sandbox, SETTINGS, LIMITS) as url:
        answers, wall_s = run_load(url, plan, clients=64, on_tick=tick)

    assert wrong_answers(plan, answers) == []
    assert all(a.status == 200 for a in answers)
    # The default bound (4,096 samples) is over what 64 clients can have waiting; still, retried is answered.
    assert all(r == str(SETTINGS.retry_after_s) for a in answers for r in a.retry_after)
    assert leftovers() == {"containers": [], "processes": []}
    first, last = rss.quarters()
    assert len(rss.samples_mb) >= 80
    assert last <= first * 1.25 + 30, f"RSS grew from {first:.0f} MB to {last:.0f} MB (medians of first and last quarter)"
    print(f"\n{len(plan)} requests, {sum(map(len, plan))} samples in {wall_s:.1f} s; "
          f"{sum(a.busy for a in answers)} busy answers retried; RSS {first:.0f} -> {last:.0f} MB")


def test_a_full_sandbox_holds_requests_and_a_retry_picks_up_its_samples_where_they_were(sandbox, leftovers):
    # Room for 8 samples in the sandbox, the rest in line; a request held 2 s
    # is told to come back (503 + Retry-After) and its sample keeps its place.
    settings = ServerSettings(max_waiting_samples=8, hold_s=2, retry_after_s=1)
    # Honest, and slow to import: 32 of them take about 10 s on 4 containers.
    slow = Kind("slow_pass", "import time\ntime.sleep(1)\n\ndef add(a, b):\n    return a + b\n" + END, ADD_LABEL, 1.0, 1.0)
    plan = [[slow] for _ in range(32)]

    with running_server(sandbox, settings, LIMITS) as url:
        answers, _ = run_load(url, plan, clients=32)
        scored = requests.get(f"{url}/metrics", timeout=30).text

    assert wrong_answers(plan, answers) == []
    assert sum(a.busy > 0 for a in answers) >= 8, [a.busy for a in answers]  # the later ones waited over 2 s
    assert {r for a in answers for r in a.retry_after} == {"1"}
    # However often a request came back, its sample ran once.
    assert re.search(r'^rewardbox_samples_scored_total\{verdict="passed"\} 32\.0$', scored, re.M), scored
    assert leftovers() == {"containers": [], "processes": []}
