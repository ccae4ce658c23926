"""The Ray backend's dispatcher without a cluster: its choice of worker and
its handling of what comes back, over workers that are records only (the
Ray tier, tests/ray, runs the same code on real nodes)."""

import threading
import warnings
from concurrent.futures import Future

import pytest

pytest.importorskip("ray")

from rewardbox.sandbox.config import SandboxConfig  # noqa: E402 - after the skip: these import Ray
from rewardbox.sandbox.errors import ClusterUnavailable, EngineUnavailable, SandboxError  # noqa: E402
from rewardbox.sandbox.models import RunRequest, RunResult, Verdict  # noqa: E402
from rewardbox.sandbox.ray_dispatch import Dispatcher, Finished, Job, Send, Step, settle  # noqa: E402
from rewardbox.sandbox.ray_lifecycle import WorkerHandle, WorkerLost, Workers, config_digest  # noqa: E402
from rewardbox.sandbox.ray_worker import RunOutcome  # noqa: E402

REQUEST = RunRequest(files={"solution.py": "x = 1"}, tests={"test_x.py": "def test_x(): pass"})
LATER = float("inf")  # no refresh due


def dispatcher(*workers: WorkerHandle, max_attempts: int = 3) -> Dispatcher:
    pool = Workers(threading.Condition(), SandboxConfig(), "test", "rewardbox_sandbox", 1, None)
    pool.by_name = {w.name: w for w in workers}
    return Dispatcher(pool, max_queued=10, wait_for_workers_s=1.0, max_attempts=max_attempts)


def worker(name: str, *, containers: int = 2, in_flight: int = 0, ready: bool = True) -> WorkerHandle:
    return WorkerHandle(name=name, node_id=f"node-{name}", actor=None, ready=ready, capacity=2 * containers,
                        containers=containers, in_flight=in_flight)


def answered(outcome: RunOutcome | BaseException) -> "Future[RunOutcome]":
    future: Future[RunOutcome] = Future()
    if isinstance(outcome, RunResult | SandboxError):
        future.set_result(outcome)
    else:
        future.set_exception(outcome)
    return future


def sent(box: Dispatcher) -> Send:
    box.submit(REQUEST)
    step = box._next_step(LATER)
    assert isinstance(step, Send)
    return step


def test_a_request_goes_to_the_ready_worker_with_the_least_work_per_container():
    busy, roomy, starting = worker("a", containers=1, in_flight=1), worker("b", containers=4, in_flight=2), worker(
        "c", ready=False)
    box = dispatcher(busy, roomy, starting)
    step = sent(box)
    assert step.worker is roomy and roomy.in_flight == 3 and step.job.attempts == 1 and box.sent == {step.job}


def test_a_worker_at_capacity_gets_nothing_more():
    box = dispatcher(worker("a", containers=1, in_flight=2))
    box.submit(REQUEST)
    assert box._next_step(LATER) is Step.IDLE and len(box.queue) == 1


def test_the_steps_without_a_request_to_send():
    assert dispatcher()._next_step(LATER) is Step.NO_WORKERS
    assert dispatcher(worker("a"))._next_step(0.0) is Step.REFRESH
    closed = dispatcher(worker("a"))
    closed.close()
    assert closed._next_step(LATER) is Step.CLOSED


def test_a_result_and_the_sandboxs_own_failure_are_the_callers():
    box = dispatcher(worker("a"))
    step = sent(box)
    result = RunResult(verdict=Verdict.PASSED, exit_code=0, stdout="1\n")
    box._finished(Finished(step.worker, step.job, answered(result)))
    assert step.job.future.result() is result and step.worker.in_flight == 0 and not box.sent
    step = sent(box)
    box._finished(Finished(step.worker, step.job, answered(SandboxError("ours"))))
    assert isinstance(step.job.future.exception(), SandboxError) and step.worker.alive


@pytest.mark.parametrize("outcome", [ConnectionError("the node died"), EngineUnavailable("no engine")],
                         ids=["worker died", "engine gone"])
def test_a_lost_worker_sends_its_request_back_to_the_front_of_the_queue(outcome):
    box = dispatcher(worker("a"), worker("b"))
    step = sent(box)
    box.submit(REQUEST)
    with pytest.warns(WorkerLost):
        box._finished(Finished(step.worker, step.job, answered(outcome)))
    assert not step.worker.alive and box.workers.lost == 1 and box.redispatched == 1
    assert box.queue[0] is step.job and not step.job.future.done()


def test_a_request_that_could_not_be_sent_is_sent_again():
    box = dispatcher(worker("a"), worker("b"))
    step = sent(box)
    with pytest.warns(WorkerLost):
        box._finished(Finished(step.worker, step.job, RuntimeError("the handle is unusable")))
    assert list(box.queue) == [step.job]


def test_a_request_that_lost_too_many_workers_fails_as_ours():
    box = dispatcher(worker("a"), max_attempts=1)
    step = sent(box)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkerLost)
        box._finished(Finished(step.worker, step.job, answered(ConnectionError("gone"))))
    assert isinstance(step.job.future.exception(), ClusterUnavailable) and not box.queue


def test_a_future_is_settled_once():
    job = Job(REQUEST, Future())
    settle(job.future, SandboxError("first"))
    settle(job.future, SandboxError("second"))
    assert str(job.future.exception()) == "first"


def test_workers_are_shared_by_configuration_not_by_address():
    assert config_digest(SandboxConfig(ray="auto")) == config_digest(SandboxConfig(ray="127.0.0.1:1"))
    assert config_digest(SandboxConfig(max_containers=2)) != config_digest(SandboxConfig(max_containers=3))


def test_a_workers_row_shows_its_own_counters_once_polled_but_not_its_sandboxs():
    from rewardbox.sandbox.ray_backend import _row

    polled = worker("a")
    assert set(_row(polled)) == {"name", "node_id", "ready", "in_flight", "capacity", "containers"}
    polled.counters = {"sandbox": {"run_retries": 1}, "runs": 5, "running": 1, "peak_in_flight": 3}
    row = _row(polled)
    assert (row.get("runs"), row.get("running"), row.get("peak_in_flight")) == (5, 1, 3) and "sandbox" not in row
