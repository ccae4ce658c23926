"""The Ray backend on a local cluster of two node processes: the same rewards
as the local backend on a mixed batch, through every interface (the reward
objects, the OpenRLHF file loaded by path, the TRL and verl adapters,
`rewardbox score --ray`, `rewardbox serve --ray` over HTTP), work spread over
both nodes, and the dispatcher's bounds on work in flight and waiting."""

import importlib.util
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from local_cluster import LocalCluster
from test_modes import LIMITS, SAMPLES

from rewardbox.adapters import openrlhf
from rewardbox.rewards import CorrectnessReward, Sample
from rewardbox.sandbox import RunRequest, SandboxError
from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.modes import make_sandbox
from rewardbox.sandbox.ray_backend import RaySandbox

ROOT = Path(__file__).parents[2]
MIXED = ROOT / "examples" / "mixed.jsonl"
REWARDBOX = Path(sys.executable).with_name("rewardbox")
MIXED_SAMPLES = [Sample.model_validate(json.loads(line)) for line in MIXED.read_text().splitlines() if line.strip()]
BATCH = SAMPLES + MIXED_SAMPLES  # every label format, passing to failing, misbehaving code, math


def graded(outputs) -> list[tuple]:
    """What must agree between backends: verdict, numbers and each test's outcome (not timings)."""
    return [(o.verdict, o.reward, o.score, o.metadata.get("error"),
             [(t["name"], t["outcome"]) for t in o.metadata.get("tests", [])]) for o in outputs]


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(nodes=2, cpus=1) as running:
        yield running


@pytest.fixture(scope="module")
def ray_box(cluster):
    box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=20))
    yield box
    box.close()


@pytest.fixture(scope="module")
def local_grades():
    with make_sandbox("pooled", limits=LIMITS, max_containers=2, retry_s=20) as box:
        return graded(CorrectnessReward(box, limits=LIMITS).score_many(BATCH))


def test_the_cluster_is_two_node_processes_on_loopback(cluster):
    nodes = cluster.alive_nodes()
    assert len(nodes) == 2
    assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
    assert all(n["Resources"].get("rewardbox_sandbox") == 1 for n in nodes)
    assert cluster.node_id(0) != cluster.node_id(1)


def test_ray_grades_a_mixed_batch_exactly_like_the_local_backend(ray_box, local_grades):
    outputs = CorrectnessReward(ray_box, limits=LIMITS).score_many(BATCH)

    assert len(outputs) == len(BATCH)
    assert graded(outputs) == local_grades
    verdicts = {o.verdict for o in outputs}
    assert {"passed", "failed", "syntax_error", "timeout", "out_of_memory", "output_limit", "killed"} <= verdicts


def test_both_nodes_get_work(ray_box, cluster):
    requests_ = [RunRequest(files={"solution.py": "import time\ntime.sleep(0.3)\nx = 1"},
                            tests={"test_x.py": "from solution import x\ndef test_x(): assert x == 1"}, limits=LIMITS)
                 for _ in range(16)]
    ray_box.poll()
    before = {w["node_id"]: w.get("runs", 0) for w in ray_box.cluster_stats()["workers"]}
    assert all(r.verdict.value == "passed" for r in ray_box.run_many(requests_))

    ray_box.poll()
    workers = ray_box.cluster_stats()["workers"]
    assert {w["node_id"] for w in workers} == {cluster.node_id(0), cluster.node_id(1)}
    ran = {w["node_id"]: w["runs"] - before.get(w["node_id"], 0) for w in workers}
    assert sum(ran.values()) == 16 and min(ran.values()) >= 4, ran  # by load: neither node is left idle


def test_backpressure_bounds_work_in_flight_and_waiting(cluster):
    # Workers of their own (other options): one container each, two requests in flight, four waiting.
    box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=1, retry_s=20),
                     in_flight_per_worker=2, max_queued=4)
    slow = RunRequest(files={"solution.py": "import time\ntime.sleep(0.25)\nx = 1"},
                      tests={"test_x.py": "from solution import x\ndef test_x(): assert x == 1"}, limits=LIMITS)
    submitted, futures = [], []

    def submit_all():
        for _ in range(24):
            futures.append(box.submit(slow))
            submitted.append(time.monotonic())

    submitter = threading.Thread(target=submit_all)
    started = time.monotonic()
    submitter.start()
    seen_in_flight, seen_queued, early = 0, 0, None
    while submitter.is_alive() or any(not f.done() for f in futures):
        stats = box.cluster_stats()
        seen_in_flight = max([seen_in_flight, *(w["in_flight"] for w in stats["workers"])])
        seen_queued = max(seen_queued, stats["queued"])
        if early is None and time.monotonic() - started > 0.5:
            early = (len(submitted), sum(f.done() for f in futures))
        time.sleep(0.01)
    submitter.join()

    assert [f.result().verdict.value for f in futures] == ["passed"] * 24
    assert seen_in_flight <= 2 and seen_queued <= 4
    assert box.cluster_stats()["peak_queued"] == 4
    # submit() blocked: half a second in, no more were handed over than fit in flight and waiting, plus those done.
    handed, done = early
    assert handed <= 2 * 2 + 4 + done + 1, early
    box.poll()
    assert all(w["peak_in_flight"] <= 2 for w in box.cluster_stats()["workers"])  # as the workers saw it
    box.close()


def test_close_answers_every_request_it_took(cluster):
    box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=20))
    futures = [box.submit(RunRequest(files={"solution.py": f"import time\ntime.sleep(0.2)\nx = {i}"},
                                     tests={"test_x.py": f"from solution import x\ndef test_x(): assert x == {i}"},
                                     limits=LIMITS)) for i in range(12)]
    box.close()  # as Sandbox.close: what was taken is run, nothing new is taken
    assert all(f.done() for f in futures)
    assert [f.result().verdict.value for f in futures] == ["passed"] * 12
    with pytest.raises(SandboxError, match="closed"):
        box.submit(RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"}))


def test_the_openrlhf_file_loaded_by_path_scores_on_ray(cluster, ray_box, monkeypatch):
    monkeypatch.setenv("REWARDBOX_RAY", cluster.address)
    monkeypatch.setenv("REWARDBOX_TIMEOUT_S", str(LIMITS.timeout_s))
    monkeypatch.setenv("REWARDBOX_MEMORY_MB", str(LIMITS.memory_mb))
    openrlhf.reset()
    spec = importlib.util.spec_from_file_location("reward_func", str(ROOT / "examples" / "openrlhf" / "reward_func.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as OpenRLHF loads it: by path, then the attribute
    samples = MIXED_SAMPLES
    try:
        out = module.reward_func([s.completion for s in samples], [""] * len(samples), [s.label for s in samples])
        built = openrlhf._PROCESS.reward  # the reward the file built from the environment
        assert isinstance(built.code.sandbox, RaySandbox)
        built.code.sandbox.close()
    finally:
        openrlhf.reset()
    expected = CorrectnessReward(ray_box, limits=LIMITS).score_many(samples)
    assert out["rewards"].tolist() == pytest.approx([o.reward if o.reward is not None else 0.0 for o in expected])


def test_the_openrlhf_file_inside_a_ray_actor_scores_on_its_cluster(cluster, ray_box):
    """As OpenRLHF runs it: imported by path inside a Ray actor of the job,
    REWARDBOX_RAY=auto from the job's runtime environment."""
    import ray

    env = {"REWARDBOX_RAY": "auto", "REWARDBOX_TIMEOUT_S": str(LIMITS.timeout_s),
           "REWARDBOX_MEMORY_MB": str(LIMITS.memory_mb)}

    @ray.remote(num_cpus=0, runtime_env={"env_vars": env})
    class RewardActor:
        def __init__(self, path: str):
            spec = importlib.util.spec_from_file_location("reward_func", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.reward_func = module.reward_func

        def score(self, queries, prompts, labels):
            out = self.reward_func(queries, prompts, labels)
            return out["rewards"].tolist(), type(openrlhf._PROCESS.reward.code.sandbox).__name__

    samples = MIXED_SAMPLES
    actor = RewardActor.remote(str(ROOT / "examples" / "openrlhf" / "reward_func.py"))
    rewards, sandbox_type = ray.get(actor.score.remote([s.completion for s in samples], [""] * len(samples),
                                                       [s.label for s in samples]), timeout=240)
    ray.kill(actor)
    expected = CorrectnessReward(ray_box, limits=LIMITS).score_many(samples)
    assert sandbox_type == "RaySandbox"
    assert rewards == pytest.approx([o.reward if o.reward is not None else 0.0 for o in expected])


def test_trl_and_verl_adapters_score_on_ray(cluster, monkeypatch, local_grades):
    import rewardbox.adapters as adapters
    from rewardbox.adapters import make_compute_score, trl_reward

    monkeypatch.setenv("REWARDBOX_RAY", cluster.address)
    monkeypatch.setattr(adapters, "_default", None)
    samples = MIXED_SAMPLES
    with make_sandbox("pooled", max_containers=2) as local:
        expected = [o.reward for o in CorrectnessReward(local).score_many(samples)]
    try:
        trl = trl_reward()(prompts=[""] * len(samples), completions=[s.completion for s in samples],
                           label=[s.label for s in samples])
        assert isinstance(adapters.default_reward().code.sandbox.sandbox, RaySandbox)
        compute_score = make_compute_score()
        verl = [compute_score("rewardbox", s.completion, s.label)["score"] for s in samples]
    finally:
        adapters.default_reward().code.sandbox.close()
        monkeypatch.setattr(adapters, "_default", None)
    assert trl == pytest.approx(expected)
    assert verl == pytest.approx([0.0 if r is None else r for r in expected])  # verl needs a number


def test_rewardbox_score_with_ray_writes_what_the_local_run_writes(cluster, tmp_path):
    def score(*flags):
        out = tmp_path / f"out{len(flags)}.jsonl"
        subprocess.run([str(REWARDBOX), "score", str(MIXED), "-o", str(out), "--no-progress", "-j", "2", *flags],
                       check=True, timeout=240, capture_output=True)
        return [{k: r[k] for k in ("id", "reward", "score", "verdict", "error")}
                for r in map(json.loads, out.read_text().splitlines())]

    assert score("--ray", cluster.address) == score()


def test_rewardbox_serve_with_ray_answers_over_http(cluster, tmp_path):
    from server import free_port

    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 (the server's output while it runs)
    server = subprocess.Popen([str(REWARDBOX), "serve", "--ray", cluster.address, "--port", str(port), "-j", "2"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.5)
        health = requests.get(f"{url}/healthz", timeout=10).json()
        samples = MIXED_SAMPLES
        answer = requests.post(f"{url}/get_reward", json={"query": [s.completion for s in samples],
                                                          "labels": [s.label for s in samples]}, timeout=240)
        assert answer.status_code == 200, answer.text
    finally:
        server.terminate()
        server.wait(timeout=60)
    with make_sandbox("pooled", max_containers=2) as local:
        expected = [o.reward if o.reward is not None else 0.0 for o in CorrectnessReward(local).score_many(samples)]
    assert answer.json()["rewards"] == pytest.approx(expected)
    assert health["engine"]["reachable"] is True, health
