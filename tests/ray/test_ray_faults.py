"""Faults of the Ray backend, each on a cluster of its own: a node process
killed mid-batch loses no sample and answers each once, with a warning; a
worker killed alone is replaced; a node without the resource (a GPU node
without an engine) gets no worker; with no sandbox node left, a clear error
after the bounded wait."""

import time
import warnings

import pytest
import ray
from local_cluster import LocalCluster
from test_modes import LIMITS, SAMPLES

from rewardbox.rewards import CodeReward, Sample
from rewardbox.sandbox import ClusterUnavailable, RunRequest, SandboxError
from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.ray_backend import RaySandbox, WorkerLost

SLOW_PASS = "import time\ntime.sleep(0.4)\n"  # keeps requests in flight long enough to kill a node under them


def slow(i: int) -> RunRequest:
    return RunRequest(files={"solution.py": f"{SLOW_PASS}x = {i}"},
                      tests={"test_x.py": f"from solution import x\ndef test_x(): assert x == {i}"}, limits=LIMITS)


def wait_until(condition, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def in_flight_on(box: RaySandbox, node_id: str) -> int:
    return sum(w["in_flight"] for w in box.cluster_stats()["workers"] if w["node_id"] == node_id)


def test_a_node_killed_mid_batch_loses_no_sample():
    with LocalCluster(nodes=2) as cluster:
        box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=20))
        doomed = cluster.node_id(1)
        reward = CodeReward(box, limits=LIMITS)
        batch = [Sample(id=i, completion=f"{SLOW_PASS}def add(a, b):\n    return a + b\n", label=SAMPLES[0].label)
                 for i in range(40)] + SAMPLES
        answered = {i: 0 for i in range(len(batch))}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            futures = [reward.submit(sample) for sample in batch]
            for i, future in enumerate(futures):
                future.add_done_callback(lambda _, i=i: answered.__setitem__(i, answered[i] + 1))
            wait_until(lambda: in_flight_on(box, doomed) >= 2, what="work on the doomed node")
            cluster.kill_node(1)  # raylet, its workers and `ray start`: SIGKILL, mid-batch
            outputs = [f.result(timeout=240) for f in futures]

        assert list(answered.values()) == [1] * len(batch)  # every sample answered, and once
        assert [o.verdict for o in outputs[:40]] == ["passed"] * 40
        with RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=20)) as again:
            expected = CodeReward(again, limits=LIMITS).score_many(SAMPLES)  # the survivor alone
        assert [(o.verdict, o.reward) for o in outputs[40:]] == \
               [(o.verdict, o.reward) for o in expected]
        lost = [w for w in caught if issubclass(w.category, WorkerLost)]
        assert lost and doomed[:12] in str(lost[0].message)  # a warning, not an error
        stats = box.cluster_stats()
        assert stats["workers_lost"] == 1 and stats["redispatched"] >= 2
        assert {w["node_id"] for w in stats["workers"]} == {cluster.node_id(0)}
        box.close()


def test_a_worker_killed_alone_is_replaced_on_its_node():
    with LocalCluster(nodes=2) as cluster:
        box = RaySandbox(SandboxConfig(ray=cluster.address, mode="cold", limits=LIMITS, max_containers=2, retry_s=20))
        node = cluster.node_id(1)
        [victim] = [w for w in box.cluster_stats()["workers"] if w["node_id"] == node]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            futures = [box.submit(slow(i)) for i in range(16)]
            wait_until(lambda: in_flight_on(box, node) >= 1, what="work on the worker")
            ray.kill(ray.get_actor(victim["name"], namespace="rewardbox"), no_restart=True)
            results = [f.result(timeout=240) for f in futures]
        assert [r.verdict.value for r in results] == ["passed"] * 16
        assert any(issubclass(w.category, WorkerLost) for w in caught)
        # The node is alive: the next look for nodes gives it a new worker.
        wait_until(lambda: any(w["node_id"] == node and w["ready"] for w in box.cluster_stats()["workers"]),
                   timeout_s=60, what="a new worker on the node")
        assert box.run(slow(7)).verdict.value == "passed"
        box.close()


def test_only_sandbox_nodes_get_workers_and_none_left_is_a_clear_error():
    # The head advertises no sandbox resource, as a GPU node without an engine would not.
    with LocalCluster(nodes=2, sandbox=[0, 1]) as cluster:
        box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=20),
                         wait_for_workers_s=3)
        assert {w["node_id"] for w in box.cluster_stats()["workers"]} == {cluster.node_id(1)}
        assert box.run(slow(1)).verdict.value == "passed"

        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            futures = [box.submit(slow(i)) for i in range(8)]
            cluster.kill_node(1)
            started = time.monotonic()
            for future in futures:
                with pytest.raises(ClusterUnavailable, match="rewardbox_sandbox"):
                    future.result(timeout=120)
            waited = time.monotonic() - started
        assert waited < 60, waited  # Ray's failure detection, then the 3 s wait: bounded
        with pytest.raises(ClusterUnavailable, match="rewardbox_sandbox"):
            box.run(slow(2))  # a new request gets its own bounded wait, then the same error
        box.close()

        # A sandbox asked for on a cluster with no sandbox node fails at once.
        with pytest.raises(ClusterUnavailable, match="no sandbox worker could start"):
            RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS), wait_for_workers_s=3)


def test_a_node_whose_engine_does_not_answer_gets_no_worker_and_a_warning():
    # The second node's workers reach no engine (as on a node whose engine is down).
    with LocalCluster(nodes=2, node_env={1: {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}}) as cluster:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=2, retry_s=2))
            results = box.run_many([slow(i) for i in range(8)])
            wait_until(lambda: box.cluster_stats()["workers_lost"] >= 1, what="the broken node's worker to fail")
        assert [r.verdict.value for r in results] == ["passed"] * 8
        assert {w["node_id"] for w in box.cluster_stats()["workers"]} == {cluster.node_id(0)}
        lost = [str(w.message) for w in caught if issubclass(w.category, WorkerLost)]
        assert any(cluster.node_id(1)[:12] in m and "could not start" in m for m in lost), lost
        box.close()


def test_leaving_the_cluster_answers_what_waits_and_starts_no_ray_of_its_own():
    cluster = LocalCluster(nodes=1)
    cluster.start()
    try:
        box = RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=1, retry_s=20))
        futures = [box.submit(slow(i)) for i in range(6)]
    finally:
        cluster.stop()  # ray.shutdown() in this process, then every node process killed
    for future in futures:  # answered, not left waiting: done, or our failure
        try:
            assert future.result(timeout=30).verdict.value == "passed"
        except ClusterUnavailable as exc:
            assert "left the Ray cluster" in str(exc)
    time.sleep(1.5)  # the dispatcher's next steps
    assert not ray.is_initialized()
    with pytest.raises(SandboxError, match="closed"):
        box.submit(slow(0))
