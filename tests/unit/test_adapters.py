"""Adapters for TRL, verl, flux, AgentFly and twinkle, each called the way its
trainer calls it, against a fake reward: the adapter must hand the reward the
samples the trainer's data describe, and return the reward's own numbers in
the shape the trainer reads."""

import asyncio
import functools
import importlib.util
import inspect
import json
import math
import pickle
import statistics
import subprocess
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rewardbox.adapters as adapters
from rewardbox.adapters import agentfly, flux, trl, twinkle, verl
from rewardbox.rewards.base import Reward, RewardOutput, Sample

ROOT = Path(__file__).resolve().parents[2]


class FakeReward(Reward):
    """Reward = len(completion) % 3 / 2 with a verdict; labels None and "bad"
    are unusable. Records every sample it is given."""

    name = "fake"

    def __init__(self) -> None:
        self.seen: list[Sample] = []
        self._lock = threading.Lock()

    def score(self, sample: Sample) -> RewardOutput:
        with self._lock:
            self.seen.append(sample)
        return expected_output(sample)

    def __getstate__(self) -> dict[str, Any]:  # picklable, as a reward handed to TRL's async worker must be
        return {"seen": self.seen}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.seen, self._lock = state["seen"], threading.Lock()


def expected_output(sample: Sample) -> RewardOutput:
    if sample.label is None or sample.label == "bad":
        return RewardOutput.unscorable("unusable label", verdict=None)
    reward = len(sample.completion) % 3 / 2
    return RewardOutput(reward=reward, score=reward, metadata={
        "verdict": "passed" if reward == 1.0 else "failed", "passed": int(reward * 2), "total": 2, "duration_s": 0.25})


class DeferredReward(Reward):
    """Answers through futures that stay pending until `finish()`, like a
    sandbox still running containers."""

    name = "deferred"

    def __init__(self) -> None:
        self.pending: list[tuple[Future, Sample]] = []

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        future: Future[RewardOutput] = Future()
        self.pending.append((future, sample))
        return future

    def finish(self) -> None:
        for future, sample in self.pending:
            future.set_result(expected_output(sample))


class BlockingReward(FakeReward):
    """Scores only (no `submit` of its own) and blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def score(self, sample: Sample) -> RewardOutput:
        assert self.release.wait(10), "never released"
        return super().score(sample)


# Rewards 1.0, 0.5, 0.0, then two unusable labels.
COMPLETIONS = ["```python\ndef add(a, b):\n    return a + b\n```\n.", "def add(a, b): return a - b\n", "no code here", "x", "y"]
LABELS = [{"pytest": "from solution import add\ndef test_a(): assert add(1, 2) == 3"}, '{"tests": ["assert add(1, 1) == 2"]}',
          "42", "bad", None]
N = len(COMPLETIONS)


def rewards_of(samples: list[Sample]) -> list[float | None]:
    return [expected_output(s).reward for s in samples]


# ---------------------------------------------------------------- TRL


def trl_kwargs(chat: bool = False) -> dict[str, Any]:
    """What GRPOTrainer._calculate_rewards passes: prompts, completions,
    completion_ids, every dataset column but `prompt`, and its own objects."""
    if chat:
        prompts = [[{"role": "system", "content": "Write Python."}, {"role": "user", "content": f"task {i}"}] for i in range(N)]
        completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    else:
        prompts = [f"task {i}\n" for i in range(N)]
        completions = list(COMPLETIONS)
    return {"prompts": prompts, "completions": completions, "completion_ids": [[1, 2, 3]] * N, "label": list(LABELS),
            "task_id": [f"t{i}" for i in range(N)], "difficulty": [i + 1 for i in range(N)], "trainer_state": object(),
            "log_extra": None, "log_metric": None}


def trl_expected(kwargs: dict[str, Any]) -> list[Sample]:
    return [Sample(id=f"t{i}", completion=COMPLETIONS[i], label=LABELS[i], prompt=f"task {i}" + ("" if isinstance(
        kwargs["prompts"][i], list) else "\n"), columns={"task_id": f"t{i}", "difficulty": i + 1}) for i in range(N)]


@pytest.mark.parametrize("chat", [False, True], ids=["text", "chat"])
def test_trl_scores_the_batch_as_the_reward_would(chat):
    fake = FakeReward()
    kwargs = trl_kwargs(chat)
    out = trl.trl_reward(fake)(**kwargs)
    expected = trl_expected(kwargs)
    assert fake.seen == expected
    assert out == rewards_of(expected)
    assert out == [1.0, 0.5, 0.0, None, None]  # unusable labels: no reward, never a penalty


def test_trl_async_reward_is_a_coroutine_function_that_trl_awaits():
    fake = FakeReward()
    f = trl.trl_async_reward(fake, name="code")
    assert inspect.iscoroutinefunction(f)  # TRL >= 0.2x and the async GRPO worker
    assert asyncio.iscoroutinefunction(f)  # older TRL
    assert f.__name__ == "code"
    kwargs = trl_kwargs(chat=True)
    assert asyncio.run(f(**kwargs)) == trl.trl_reward(FakeReward())(**kwargs)
    assert fake.seen == trl_expected(kwargs)


@pytest.mark.parametrize("reward_type", [DeferredReward, BlockingReward], ids=["submits", "scores-only"])
def test_trl_async_reward_leaves_the_event_loop_free_while_scoring(reward_type, monkeypatch):
    reward = reward_type()
    f = trl.trl_async_reward(reward)
    threads = []
    if reward_type is DeferredReward:  # its futures are awaited: one thread hands the batch out, none waits per sample
        to_thread = asyncio.to_thread

        async def counted(func, *args, **kwargs):
            threads.append(func)
            return await to_thread(func, *args, **kwargs)

        monkeypatch.setattr(asyncio, "to_thread", counted)

    async def main():
        task = asyncio.create_task(f(**trl_kwargs()))
        for _ in range(20):
            await asyncio.sleep(0.01)  # the loop keeps running other work meanwhile
        assert not task.done()
        if isinstance(reward, DeferredReward):
            assert len(reward.pending) == N  # all submitted at once, in parallel
            reward.finish()
        else:
            reward.release.set()
        return await task

    assert asyncio.run(main()) == rewards_of(trl_expected(trl_kwargs()))
    assert len(threads) == (1 if reward_type is DeferredReward else 0)


def test_trl_reward_functions_survive_pickling_for_the_async_worker():
    for f in (trl.trl_reward(FakeReward(), "label", name="n"), trl.trl_async_reward(FakeReward(), name="n"),
              trl.correctness_reward, trl.correctness_reward_async):
        copy = pickle.loads(pickle.dumps(f))
        assert copy.__name__ == f.__name__
        assert inspect.iscoroutinefunction(copy) == inspect.iscoroutinefunction(f)
    copy = pickle.loads(pickle.dumps(trl.trl_reward(FakeReward())))
    assert copy(**trl_kwargs()) == rewards_of(trl_expected(trl_kwargs()))


def _trl_callable_name(func):
    """TRL 1.9+'s `trl.trainer.utils.get_callable_name` (1.16.0's text)."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def _trl_is_async_callable(func):
    """TRL 1.14+'s `trl.trainer.utils.is_async_callable` (1.16.0's text)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(func.__call__)


@pytest.mark.parametrize("pickled", [False, True], ids=["made", "pickled"])
def test_trl_names_and_awaits_async_rewards_by_every_releases_rule(pickled):
    fs = [trl.trl_async_reward(FakeReward(), name="tests_passed"), trl.trl_async_reward(FakeReward(), name="format"),
          trl.correctness_reward_async]
    if pickled:  # as the async GRPO worker's child gets them
        fs = [pickle.loads(pickle.dumps(f)) for f in fs]
    names = ["tests_passed", "format", "correctness"]
    assert [f.__name__ for f in fs] == names  # TRL 0.27-1.8
    assert [_trl_callable_name(f) for f in fs] == names  # TRL 1.9 and later
    assert all(asyncio.iscoroutinefunction(f) for f in fs)  # TRL 0.27-0.29
    assert all(inspect.iscoroutinefunction(f) for f in fs)  # TRL 1.0-1.13
    assert all(_trl_is_async_callable(f) for f in fs)  # TRL 1.14 and later
    kwargs = trl_kwargs()
    assert asyncio.run(fs[0](**kwargs)) == rewards_of(trl_expected(kwargs))


def test_trl_async_reward_refuses_a_name_its_holder_answers_otherwise():
    with pytest.raises(ValueError, match="cannot name an async TRL reward"):
        trl.trl_async_reward(FakeReward(), name="__init__")


def test_trl_logs_verdicts_and_rates_when_trl_offers_to():
    extra, metrics = {}, {}
    kwargs = {**trl_kwargs(), "log_extra": extra.__setitem__, "log_metric": metrics.__setitem__}
    out = trl.trl_reward(FakeReward(), name="code")(**kwargs)
    verdicts = [expected_output(s).verdict or "unscorable" for s in trl_expected(kwargs)]
    assert extra == {"code/verdict": verdicts}
    assert out.count(None) == 2 and out.count(1.0) == 1
    assert metrics == {"code/solved_frac": 1 / N, "code/unscorable_frac": 2 / N}


def test_trl_ignores_the_async_workers_group_prompt_and_non_column_keywords():
    fake = FakeReward()
    kwargs = {**trl_kwargs(chat=True), "prompt": [{"role": "user", "content": "a"}] * N, "environments": [object()] * N}
    trl.trl_reward(fake)(**kwargs)
    assert all(set(s.columns) == {"task_id", "difficulty"} for s in fake.seen)


@pytest.mark.parametrize(("columns", "label"), [
    ({"reward_model": [{"ground_truth": "7", "style": "rule"}]}, "7"),
    ({"ground_truth": ['{"inputs": ["1\\n"], "outputs": ["2\\n"]}']}, '{"inputs": ["1\\n"], "outputs": ["2\\n"]}'),
    ({"verification_info": [{"language": "python", "test_cases": []}]}, {"language": "python", "test_cases": []}),
    ({"input_output": ['{"fn_name": "f", "inputs": [[1]], "outputs": [2]}']},
     '{"fn_name": "f", "inputs": [[1]], "outputs": [2]}'),
    ({"test_list": [["assert f(1) == 2"]], "test_setup_code": ["import math"], "test_imports": [["import os"]]},
     {"tests": ["assert f(1) == 2"], "setup": "import os\nimport math"}),
    ({"test_list": [["assert f(1) == 2"]], "test_setup_code": [""]}, {"tests": ["assert f(1) == 2"]}),
    ({"test": ["def check(candidate): assert candidate(1) == 2"], "entry_point": ["f"]},
     {"test": "def check(candidate): assert candidate(1) == 2", "entry_point": "f"}),
    ({"test": ["from solution import f\ndef test_f(): assert f(1) == 2"]},
     {"pytest": "from solution import f\ndef test_f(): assert f(1) == 2"}),
    ({"tests": [["assert f(1) == 2"]]}, {"tests": ["assert f(1) == 2"]}),
    ({"solution": ["so \\boxed{2}"], "answer": ["2"]}, "so \\boxed{2}"),
    ({"answer": ["2"]}, "2"),
], ids=["verl-parquet", "ground_truth", "open-r1", "apps", "mbpp", "mbpp-no-setup", "humaneval", "kodcode", "tests",
        "math", "gsm8k"])
def test_trl_finds_the_label_where_real_datasets_keep_it(columns, label):
    fake = FakeReward()
    trl.trl_reward(fake)(prompts=["p"], completions=["c"], completion_ids=[[1]], **columns, topic=["x"])
    assert fake.seen[0].label == label
    _, used = trl.labels_from(columns)
    assert set(fake.seen[0].columns) == {"topic"} | (set(columns) - used)  # label columns are not repeated


def test_trl_label_column_wins_and_a_missing_one_is_a_configuration_error():
    fake = FakeReward()
    trl.trl_reward(fake, label_column="tests_json")(prompts=["p"], completions=["c"], tests_json=["{}"], answer=["2"])
    assert fake.seen[0].label == "{}"
    with pytest.raises(ValueError, match="no label column"):
        trl.trl_reward(fake)(prompts=["p"], completions=["c"], completion_ids=[[1]], question=["q"])


def test_trl_builds_the_default_reward_on_first_call_only(monkeypatch):
    made = []
    monkeypatch.setattr(trl, "default_reward", lambda: made.append(1) or FakeReward())
    f = trl.trl_reward()
    assert made == [] and f.__name__ == "correctness"
    f(**trl_kwargs())
    assert made == [1]


# ---------------------------------------------------------------- verl

VERL_KEYS = ["score", "acc", "pass_rate", "unscorable", "duration_s", "verdict"]


def verl_rows() -> list[dict[str, Any]]:
    """What the naive reward manager reads per sample (non_tensor_batch holds numpy values)."""
    return [{"data_source": np.str_("codecontests"), "solution_str": c, "ground_truth": g,
             "extra_info": {"index": np.int64(i), "split": "train", "num_turns": None, "rollout_reward_scores": {}}}
            for i, (c, g) in enumerate(zip(COMPLETIONS, [
                {"inputs": np.array(["1\n"]), "outputs": np.array(["2\n"])}, '{"inputs": ["1\\n"], "outputs": ["2\\n"]}',
                np.str_("42"), "bad", None], strict=True))]


def verl_expected() -> list[Sample]:
    labels = [{"inputs": ["1\n"], "outputs": ["2\n"]}, '{"inputs": ["1\\n"], "outputs": ["2\\n"]}', "42", "bad", None]
    return [Sample(id=i, completion=COMPLETIONS[i], label=labels[i], columns={
        "data_source": "codecontests", "index": i, "split": "train", "num_turns": None, "rollout_reward_scores": {}})
        for i in range(N)]


def test_verl_compute_score_as_the_naive_manager_calls_it():
    fake = FakeReward()
    compute_score = verl.make_compute_score(fake)
    results = [compute_score(**row) for row in verl_rows()]
    assert fake.seen == verl_expected()
    assert type(fake.seen[2].label) is str and type(fake.seen[0].columns["index"]) is int  # numpy values made plain
    for res, sample in zip(results, verl_expected(), strict=True):
        out = expected_output(sample)
        assert list(res) == VERL_KEYS  # the reward loop indexes every sample by the first one's keys
        assert res["score"] == (out.reward if out.reward is not None else 0.0)
        assert all(type(res[k]) is float for k in VERL_KEYS[:-1]) and type(res["verdict"]) is str
    assert [r["score"] for r in results] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert [r["unscorable"] for r in results] == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert [r["verdict"] for r in results] == ["passed", "failed", "failed", "unscorable", "unscorable"]
    assert results[1]["pass_rate"] == 0.5 and results[0]["duration_s"] == 0.25


def test_verl_batch_and_async_agree_with_the_single_call():
    single = [verl.make_compute_score(FakeReward())(**row) for row in verl_rows()]
    rows = verl_rows()
    batch = verl.VerlReward(FakeReward()).compute_score_batch(
        data_sources=np.array([r["data_source"] for r in rows], dtype=object), solution_strs=[r["solution_str"] for r in rows],
        ground_truths=[r["ground_truth"] for r in rows], extra_infos=[r["extra_info"] for r in rows])
    assert batch == single
    scorer = verl.VerlReward(DeferredReward())

    async def main():
        tasks = [asyncio.create_task(scorer.compute_score_async(**row)) for row in verl_rows()]
        await asyncio.sleep(0.05)
        assert len(scorer.reward.pending) == N  # the reward loop's samples all run at once
        scorer.reward.finish()
        return await asyncio.gather(*tasks)

    assert asyncio.run(main()) == single


def test_verl_module_functions_use_the_default_reward_and_ignore_extra_keywords(monkeypatch):
    fake = FakeReward()
    monkeypatch.setattr(verl, "default_reward", lambda: fake)
    row = verl_rows()[0]
    expected = verl.make_compute_score(FakeReward())(**row)
    # verl merges custom_reward_function.reward_kwargs and reward-router keywords into the call
    assert verl.compute_score(**row, reward_router_address=None, some_reward_kwarg=1) == expected
    assert asyncio.run(verl.compute_score_async(**row)) == expected
    assert inspect.iscoroutinefunction(verl.compute_score_async)
    assert verl.compute_score_batch([row["data_source"]], [row["solution_str"]], [row["ground_truth"]]) == [expected]


def test_verl_loads_the_example_file_by_path_as_verl_does(monkeypatch):
    fake = FakeReward()
    monkeypatch.setattr(verl, "default_reward", lambda: fake)
    spec = importlib.util.spec_from_file_location("custom_module", ROOT / "examples" / "verl" / "reward_fn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("compute_score", "compute_score_async", "compute_score_batch", "compute_score_float"):
        assert callable(getattr(module, name))
    assert module.compute_score(**verl_rows()[1])["score"] == expected_output(verl_expected()[1]).reward


def test_verl_compute_score_float_as_the_prime_manager_calls_it(monkeypatch):
    """verl's PrimeRewardManager calls `fn(data_source, solution_str, ground_truth,
    extra_info)` positionally and keeps `float(result)` (of a dict: `result[0]`)."""
    monkeypatch.setattr(verl, "default_reward", FakeReward)
    rows = verl_rows()
    scores = [verl.compute_score_float(r["data_source"], r["solution_str"], r["ground_truth"], r["extra_info"])
              for r in rows]
    assert scores == [verl.make_compute_score(FakeReward())(**r)["score"] for r in rows] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert all(type(s) is float for s in scores)


# ---------------------------------------------------------------- flux
# Minimal stand-ins shaped exactly like flux's (flux/core/trajectory.py, flux/rewards/base.py).


@dataclass
class Trajectory:
    id: str = ""
    prompt: str = ""
    response: str = ""
    reward: float = 0.0
    token_rewards: list[float] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class FluxRewardOutput:
    reward: float
    token_rewards: list[float] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.reward, (int, float)):
            raise ValueError(f"Reward must be numeric, got {type(self.reward)}")


class LengthReward:
    name = "length"

    def compute_reward(self, trajectory):
        return FluxRewardOutput(reward=len(trajectory.response) / 100)


class CompositeReward:
    """flux's CompositeReward: weights normalised to sum 1, parts' compute_reward."""

    def __init__(self, rewards, name="composite", normalize=True):
        self.reward_functions = rewards
        total = sum(w for _, w in rewards)
        self.weights = [w / total for _, w in rewards] if normalize else [w for _, w in rewards]

    def compute_reward(self, trajectory):
        total, components = 0.0, {}
        for (fn, _), weight in zip(self.reward_functions, self.weights, strict=True):
            output = fn.compute_reward(trajectory)
            total += output.reward * weight
            components[fn.name] = {"raw": output.reward, "weighted": output.reward * weight, "weight": weight}
        return FluxRewardOutput(reward=total, metadata={"components": components})


def flux_trajectories() -> list[Trajectory]:
    return [Trajectory(id=f"traj-0-{i}", prompt=f"task {i}", response=c, metadata={"label": g, "difficulty": i})
            for i, (c, g) in enumerate(zip(COMPLETIONS, LABELS, strict=True))]


def flux_expected() -> list[Sample]:
    return [Sample(id=f"traj-0-{i}", completion=COMPLETIONS[i], label=LABELS[i], prompt=f"task {i}", columns={"difficulty": i})
            for i in range(N)]


def test_flux_compute_reward_as_the_coordinator_uses_it():
    fake = FakeReward()
    fn = flux.FluxReward(fake)
    for traj in flux_trajectories():
        output = fn(traj)  # FluxCoordinator._compute_rewards
        traj.reward, traj.token_rewards = output.reward, output.token_rewards
        FluxRewardOutput(output.reward, output.token_rewards, output.metadata)  # flux's own checks pass
    assert fake.seen == flux_expected()
    raw = [r if r is not None else 0.0 for r in rewards_of(flux_expected())]
    assert [fn.compute_reward(t).reward for t in flux_trajectories()] == raw
    # flux logs what metadata holds: the verdict and counts, flat, as before they became fields.
    assert [fn.compute_reward(t).metadata.get("verdict") for t in flux_trajectories()] == \
           [expected_output(s).details().get("verdict") for s in flux_expected()]
    unusable = fn.compute_reward(flux_trajectories()[3])
    assert unusable.reward == 0.0 and unusable.metadata["unscorable"] is True and unusable.metadata["error"]


@pytest.mark.parametrize(("scale", "clip"), [(1.0, None), (4.0, 1.5), (-4.0, 1.5), (3.0, None)])
def test_flux_call_scales_then_clips(scale, clip):
    fn = flux.FluxReward(FakeReward(), scale=scale, clip=clip)
    for traj, sample in zip(flux_trajectories(), flux_expected(), strict=True):
        raw = expected_output(sample).reward or 0.0
        want = raw * scale if clip is None else max(-clip, min(clip, raw * scale))
        assert fn(traj).reward == want
        assert fn.compute_reward(traj).reward == raw  # compute_reward stays raw, as flux's


def test_flux_composes_with_a_flux_composite_reward():
    fn = flux.FluxReward(FakeReward(), name="tests", scale=10.0)
    composite = CompositeReward([(fn, 3.0), (LengthReward(), 1.0)], normalize=True)
    for traj, sample in zip(flux_trajectories(), flux_expected(), strict=True):
        output = composite.compute_reward(traj)
        raw = expected_output(sample).reward or 0.0
        assert math.isclose(output.reward, 0.75 * raw + 0.25 * len(traj.response) / 100)
        assert output.metadata["components"]["tests"]["weight"] == 0.75


def test_flux_batch_and_labels_by_prompt_for_the_stock_trainer():
    trajectories = flux_trajectories()
    batch = flux.FluxReward(FakeReward()).compute_rewards(trajectories)
    assert batch.rewards == [flux.FluxReward(FakeReward()).compute_reward(t).reward for t in trajectories]
    assert batch.batch_size == N and len(batch.metadata["samples"]) == N
    # Each sample's metadata flat, as before the verdict and counts became fields.
    assert [s.get("verdict") for s in batch.metadata["samples"]] == \
           [expected_output(s).details().get("verdict") for s in flux_expected()]
    assert any(s.get("total") == 2 for s in batch.metadata["samples"])
    fake = FakeReward()
    bare = Trajectory(id="t", prompt="task 0", response=COMPLETIONS[0])  # FluxTrainer fills no metadata
    flux.FluxReward(fake, labels={"task 0": LABELS[0]}).compute_reward(bare)
    assert fake.seen[0].label == LABELS[0]


def flux_fit_prompts(prompts: list[Any], max_prompt_length: int = 32768) -> list[str]:
    """What `FluxTrainer.fit(prompts=...)` hands its coordinator, whose
    trajectories carry it as `.prompt`: `FluxTrainer._prepare_prompts`
    (github.com/Ivis4ml/flux, flux/trainer.py at c20d58c: fit() calls it with
    the default max_prompt_length=32768 at line 315; lines 529-541: cut to the
    limit, then strip, drop empty prompts; lines 546-550: a dict gives its
    "prompt", else "text"). The coordinator keeps it as it is
    (flux/coordinator/coordinator.py lines 743-748, flux/rollout/manager.py
    lines 242 and 451: the request's prompt becomes the trajectory's; no chat
    template)."""
    out = []
    for p in prompts:
        text = str(p.get("prompt", p.get("text", str(p)))) if isinstance(p, dict) else str(p)
        text = text[:max_prompt_length] if len(text) > max_prompt_length else text
        if text := text.strip():
            out.append(text)
    return out


FLUX_TASKS = [("  Write add(a, b).\n", "42"), ({"prompt": "\tWhat is 6 * 7?  "}, "6 * 7"),
              (" " * 3 + "x" * 40000, "long"), ("Plain prompt", "plain")]


def test_flux_labels_found_by_the_prompt_fit_passes():
    labels = {p["prompt"] if isinstance(p, dict) else p: label for p, label in FLUX_TASKS}
    fake = FakeReward()
    fn = flux.FluxReward(fake, labels=labels)
    for prompt in flux_fit_prompts([p for p, _ in FLUX_TASKS]):
        fn.compute_reward(Trajectory(id="t", prompt=prompt, response="r"))  # what FluxCoordinator scores
    assert [s.label for s in fake.seen] == [label for _, label in FLUX_TASKS]


def test_flux_labels_of_a_prompt_cut_shorter_only_when_unambiguous():
    labels = {"Sum 1..n for n = 3 " + "." * 50: "6", "Sum 1..n for n = 4 " + "." * 50: "10", "Other task " + "." * 50: "x"}
    fake = FakeReward()
    fn = flux.FluxReward(fake, labels=labels)
    for prompt in flux_fit_prompts(list(labels), max_prompt_length=30):
        fn.compute_reward(Trajectory(id="t", prompt=prompt, response="r"))
    assert [s.label for s in fake.seen] == ["6", "10", "x"]  # cut at 30: each still begins one prompt
    fake.seen.clear()
    for prompt in flux_fit_prompts(list(labels), max_prompt_length=12):
        fn.compute_reward(Trajectory(id="t", prompt=prompt, response="r"))
    assert [s.label for s in fake.seen] == [None, None, "x"]  # "Sum 1..n for": two labels, so none


def test_flux_prompts_flux_cannot_tell_apart():
    fake = FakeReward()
    flux.FluxReward(fake, labels={"Q ": "1", " Q": "1", "R\n": "1", "R": "2"}).compute_rewards(
        [Trajectory(id="a", prompt="Q", response="r"), Trajectory(id="b", prompt="R", response="r")])
    assert [s.label for s in fake.seen] == ["1", "2"]  # "R" as given wins; "Q"'s two spellings agree
    fake.seen.clear()
    flux.FluxReward(fake, labels={"R ": "1", "R\n": "2"}).compute_reward(Trajectory(id="b", prompt="R", response="r"))
    assert fake.seen[0].label is None


# ---------------------------------------------------------------- AgentFly


def agentfly_call(function, **kwargs):
    """AgentFly's BaseReward: keep only the keywords the signature names, await
    a coroutine function, accept a float or a dict with "reward"."""
    names = inspect.signature(function).parameters
    filtered = {k: v for k, v in kwargs.items() if k in names}
    result = asyncio.run(function(**filtered)) if inspect.iscoroutinefunction(function) else function(**filtered)
    assert isinstance(result, dict) and isinstance(result["reward"], float), result
    return result


def chain_kwargs(i: int, response_keyword: str = "prediction") -> dict[str, Any]:
    """ChainRollout._finalize_chain: the final response, the row's fields, trajectory and id."""
    trajectory = [{"role": "user", "content": [{"type": "text", "text": f"task {i}"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "Thought: easy.\n"},
                                                    {"type": "text", "text": COMPLETIONS[i]}]}]
    return {response_keyword: COMPLETIONS[i], "question": f"task {i}", "tests": LABELS[i], "entry_point": "add",
            "group_id": "g", "trajectory": trajectory, "id": f"chain-{i}"}


@pytest.mark.parametrize("make", [agentfly.agentfly_reward, agentfly.agentfly_async_reward], ids=["sync", "async"])
@pytest.mark.parametrize("keyword", ["prediction", "final_response"])
def test_agentfly_reward_called_as_agentfly_calls_it(make, keyword):
    fake = FakeReward()
    function = make(fake, name="rewardbox_code", label_column="tests", columns=["entry_point"])
    results = [agentfly_call(function, **chain_kwargs(i, keyword)) for i in range(N)]
    expected = [Sample(id=f"chain-{i}", completion=COMPLETIONS[i], label=LABELS[i], columns={"entry_point": "add"})
                for i in range(N)]
    assert fake.seen == expected  # question and group_id are not named, so AgentFly does not pass them
    for res, sample in zip(results, expected, strict=True):
        out = expected_output(sample)
        assert res == {"reward": out.reward if out.reward is not None else 0.0, **adapters.outcome_stats(out)}
        assert all(type(v) is float for v in res.values())
    assert [r["reward"] for r in results] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert [r["unscorable"] for r in results] == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert function.__name__ == "rewardbox_code"


def test_agentfly_falls_back_to_the_trajectory_and_rejects_bad_columns():
    fake = FakeReward()
    kwargs = chain_kwargs(0)
    del kwargs["prediction"]
    agentfly_call(agentfly.agentfly_async_reward(fake, label_column="tests"), **kwargs)
    assert fake.seen[0].completion == "Thought: easy.\n" + COMPLETIONS[0]  # the last assistant turn, all its parts
    with pytest.raises(ValueError):
        agentfly.agentfly_reward(fake, label_column="id")
    with pytest.raises(ValueError):
        agentfly.agentfly_reward(fake, columns=["not an identifier"])


# ---------------------------------------------------------------- twinkle


def twinkle_trajectories(with_user_data: bool = True) -> list[dict[str, Any]]:
    return [{"messages": [{"role": "system", "content": "Write Python."}, {"role": "user", "content": f"task {i}"},
                          {"role": "assistant", "content": c}],
             "user_data": [("ground_truth", json.dumps(g)), ("difficulty", json.dumps(i))] if with_user_data else []}
            for i, (c, g) in enumerate(zip(COMPLETIONS, LABELS, strict=True))]


def test_twinkle_reward_as_the_cookbook_calls_it():
    fake = FakeReward()
    out = twinkle.TwinkleReward(fake)(twinkle_trajectories(), [])  # ground truth rides in user_data
    # json.dumps'd (twinkle's pack_value): objects and strings decode; the other columns stay text, as twinkle reads them
    labels = [LABELS[0], json.loads(LABELS[1]), {"answer": "42"}, {"answer": "bad"}, None]
    expected = [Sample(completion=COMPLETIONS[i], label=labels[i], prompt=f"task {i}", columns={"difficulty": str(i)})
                for i in range(N)]
    assert fake.seen == expected
    assert out == [r if r is not None else 0.0 for r in rewards_of(expected)]
    assert all(type(r) is float for r in out)


def test_twinkle_ground_truths_argument_wins_in_either_shape():
    fake = FakeReward()
    in_message = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "42"}]}
    in_user_data = {"messages": [{"role": "user", "content": "q"}], "user_data": [("ground_truth", '{"tests": ["assert 1"]}')]}
    twinkle.TwinkleReward(fake)(twinkle_trajectories(with_user_data=False), ['{"tests": []}', in_message, in_user_data, None])
    assert [s.label for s in fake.seen] == [{"tests": []}, {"answer": "42"}, {"tests": ["assert 1"]}, None, None]


# What twinkle-kit 0.5.1's processors store (twinkle/preprocessor/llm.py, mm.py, olympiad_bench.py): raw values.
TWINKLE_RAW = [
    ("solution", "[2, 3]", {"answer": "[2, 3]"}),  # CompetitionMathGRPOProcessor: an interval, not a JSON list
    ("solution", "(-\\infty, 1]", {"answer": "(-\\infty, 1]"}),
    ("ground_truth", "{1, 2}", {"answer": "{1, 2}"}),  # a set: not JSON, not an object
    ("ground_truth", "1800", {"answer": "1800"}),  # GSM8KProcessor
    ("ground_truth", "42", {"answer": "42"}),
    ("solution", "So $x \\in \\boxed{[2, 3]}$.\nDone.", {"answer": "So $x \\in \\boxed{[2, 3]}$.\nDone."}),
    # pack_value (json.dumps) of a string and of a label object
    ("ground_truth", json.dumps("[2, 3]"), {"answer": "[2, 3]"}),
    ("ground_truth", json.dumps({"tests": ["assert f() == 1"]}), {"tests": ["assert f() == 1"]}),
]


@pytest.mark.parametrize(("key", "stored", "label"), TWINKLE_RAW)
def test_twinkle_reads_user_data_as_twinkle_stores_it(key, stored, label):
    from rewardbox.rewards.labels import parse_label

    fake = FakeReward()
    trajectory = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "\\boxed{[2, 3]}"}],
                  "user_data": [[key, stored]]}  # a list, as datasets returns the processor's tuple
    twinkle.TwinkleReward(fake)([trajectory], [])
    assert fake.seen[0].label == label
    parse_label(fake.seen[0].label)  # a label rewardbox reads, of the kind meant


def test_twinkle_countdown_dict_entries_and_label_key():
    # CountdownProcessor (twinkle-kit 0.5.1) stores one dict entry of raw values.
    fields = twinkle.user_data([{"target": 6, "nums": [1, 2, 3]}])
    assert fields == {"target": 6, "nums": [1, 2, 3]}
    fake = FakeReward()
    trajectory = {"messages": [{"role": "assistant", "content": "x"}], "user_data": [("ground_truth", "4"), ("solution", "5")]}
    twinkle.TwinkleReward(fake)([trajectory])
    twinkle.TwinkleReward(fake, label_key="solution")([trajectory])
    assert [s.label for s in fake.seen] == [{"answer": "4"}, {"answer": "5"}]
    assert fake.seen[0].columns == {"solution": "5"}


def test_grpo_advantage_matches_the_design():
    rewards = [0.0, 1.0, 0.5, 1.0, -1.0, -1.0, 0.5, 1.0]
    got = twinkle.grpo_advantage(rewards, num_generations=4)
    for start in (0, 4):
        group = rewards[start:start + 4]
        mean, std = statistics.fmean(group), statistics.stdev(group)
        assert got[start:start + 4] == pytest.approx([(r - mean) / (std + 1e-8) for r in group])
    batch_std = statistics.stdev(rewards)
    assert twinkle.grpo_advantage(rewards, 4, "batch") == pytest.approx(
        [(r - statistics.fmean(rewards[s:s + 4])) / (batch_std + 1e-8) for s in (0, 4) for r in rewards[s:s + 4]])
    assert twinkle.grpo_advantage([1.0, 1.0], 2) == [0.0, 0.0]  # a group that agrees teaches nothing
    with pytest.raises(ValueError):
        twinkle.grpo_advantage(rewards, 3)


# ---------------------------------------------------------------- shared


def test_default_reward_is_one_per_process(monkeypatch):
    monkeypatch.setattr(adapters, "_default", None)
    first = adapters.default_reward()
    assert type(first).__name__ == "CorrectnessReward" and adapters.default_reward() is first
    monkeypatch.setattr(adapters.os, "getpid", lambda: -1)  # as in a forked worker
    assert adapters.default_reward() is not first


def test_package_names_load_their_adapter_on_first_use():
    assert adapters.trl_reward is trl.trl_reward and adapters.FluxReward is flux.FluxReward
    assert adapters.make_compute_score is verl.make_compute_score and adapters.grpo_advantage is twinkle.grpo_advantage
    assert adapters.agentfly_async_reward is agentfly.agentfly_async_reward
    with pytest.raises(AttributeError):
        _ = adapters.no_such_adapter


def test_importing_the_adapters_imports_no_trainer_and_no_torch():
    code = ("import sys, rewardbox.adapters, rewardbox.adapters.trl, rewardbox.adapters.verl, rewardbox.adapters.flux, "
            "rewardbox.adapters.agentfly, rewardbox.adapters.twinkle; from rewardbox.adapters import trl_reward, FluxReward; "
            "print(sorted(m for m in ('torch', 'trl', 'verl', 'flux', 'agentfly', 'twinkle') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_default_reward_goes_to_ray_when_rewardbox_ray_is_set(monkeypatch):
    import rewardbox.adapters as adapters

    monkeypatch.setattr(adapters, "_default", None)
    monkeypatch.setenv("REWARDBOX_RAY", "127.0.0.1:6379")
    reward = adapters.default_reward()
    options = reward.code.sandbox.options
    # On Ray, each sandbox node runs as many containers as it has CPUs.
    assert options["ray"] == "127.0.0.1:6379" and "max_containers" not in options
    assert not reward.code.sandbox.started

    monkeypatch.setattr(adapters, "_default", None)
    monkeypatch.delenv("REWARDBOX_RAY")
    assert "ray" not in adapters.default_reward().code.sandbox.options
