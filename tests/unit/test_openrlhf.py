"""The OpenRLHF adapter, loaded and called the way OpenRLHF does, against a fake reward.

The reward file is imported by path (`spec_from_file_location`, as OpenRLHF
does) and called with one sample per call from many threads at once (the newest
releases) or with whole batches (0.8-0.9). The agent file is imported against a
stand-in for `openrlhf.utils.agent` whose episode loop mirrors the real one.
"""

import asyncio
import copy
import importlib.util
import json
import logging
import os
import pickle
import select
import signal
import sys
import threading
import time
import types
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from rewardbox.adapters import openrlhf as adapter
from rewardbox.adapters import openrlhf_scoring as scoring
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.sandbox import DEFAULT_IMAGE, EngineUnavailable, SandboxError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "openrlhf"
PROMPT = "<|im_start|>user\nWrite add(a, b).<|im_end|>\n<|im_start|>assistant\n"
LABEL = json.dumps({"pytest": "from solution import add\ndef test_a(): assert add(1, 2) == 3"})


class FakeReward(Reward):
    """Answers by a keyword in the completion; a label "broken" is unusable;
    "ENGINE_DOWN" raises like a dead engine. Records what it was given."""

    name = "fake"

    def __init__(self):
        self.samples: list[Sample] = []
        self._lock = threading.Lock()

    def score(self, sample: Sample) -> RewardOutput:
        with self._lock:
            self.samples.append(sample)
        text = sample.completion
        if "ENGINE_DOWN" in text:
            raise EngineUnavailable("the Docker engine does not answer")
        if sample.label == "broken":
            return RewardOutput.unscorable("the label holds no tests")
        if "PASS" in text:
            return _out(1.0, 1.0, "passed", 2, 2, 0.25, [_test("test_a", "passed"), _test("test_b", "passed")])
        if "HALF" in text:
            return _out(0.5, 0.75, "failed", 1, 2, 0.5,
                        [_test("test_a", "passed"), _test("test_b", "failed", "AssertionError: assert 3 == 4")])
        if "SLOW" in text:
            return _out(-0.5, 0.25, "timeout", 0, 2, 10.5, [])
        if "CRASH" in text:
            return _out(-1.0, 0.0, "syntax_error", 0, 2, 0.125, [], error="SyntaxError: invalid syntax (solution.py, line 1)")
        return _out(-1.0, 0.0, "no_code", 0, 2, 0.0, [])


def _test(name: str, outcome: str, message: str | None = None) -> dict:
    return {"nodeid": f"test_solution.py::{name}", "name": name, "outcome": outcome, "message": message}


def _out(reward, score, verdict, passed, total, duration_s, tests, error=None) -> RewardOutput:
    return RewardOutput(reward=reward, score=score, metadata={
        "verdict": verdict, "passed": passed, "total": total, "duration_s": duration_s, "tests": tests, "error": error})


KINDS = ["PASS", "HALF", "SLOW", "CRASH", "prose only"]


def _response(i: int) -> str:
    return f"```python\n# {KINDS[i % len(KINDS)]} {i}\n```<|im_end|>"


def _load(path: Path, name: str) -> types.ModuleType:
    """Exactly how OpenRLHF loads a reward or agent file."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clean_env(monkeypatch):
    for var in [*adapter.ENV_VARS, "REWARDBOX_CONFIG"]:
        monkeypatch.delenv(var, raising=False)
    adapter.reset()
    yield monkeypatch
    adapter.reset()


@pytest.fixture
def fake(clean_env):
    """The adapter's builder replaced: every build counted, all share one FakeReward."""
    reward = FakeReward()
    builds: list[adapter.OpenRLHFSettings] = []

    def build(settings):
        time.sleep(0.05)  # a slow start, so concurrent first calls pile up at the lock
        builds.append(settings)
        return reward

    clean_env.setattr(scoring, "build_reward", build)
    reward.builds = builds
    return reward


@pytest.fixture
def reward_file(fake):
    return _load(EXAMPLES / "reward_func.py", "reward_func")


def _check_shapes(result: dict, n: int) -> None:
    assert set(result) == {"rewards", "scores", "extra_logs"}
    assert set(result["extra_logs"]) == set(adapter.LOG_KEYS)
    for tensor in [result["rewards"], result["scores"], *result["extra_logs"].values()]:
        assert isinstance(tensor, torch.Tensor)
        assert tensor.dtype == torch.float32
        assert tensor.shape == (n,)
    assert bool(((result["scores"] >= 0) & (result["scores"] <= 1)).all())


def _direct(reward: Reward, i: int) -> RewardOutput:
    return reward.score(Sample(completion=_response(i), label=LABEL, prompt=PROMPT))


def test_one_sample_per_call_from_32_threads_at_once(reward_file, fake):
    start = threading.Barrier(32)

    def call(i):
        start.wait()
        return reward_file.reward_func([PROMPT + _response(i)], [PROMPT], [LABEL])

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, range(32)))

    assert len(fake.builds) == 1  # built once, lazily, although 32 first calls raced
    for i, result in enumerate(results):
        _check_shapes(result, 1)
        expected = _direct(fake, i)
        assert result["rewards"].tolist() == [expected.reward]
        assert result["scores"].tolist() == [expected.score]
        assert result["extra_logs"]["pass_rate"].item() == float(KINDS[i % 5] == "PASS")
        assert result["extra_logs"]["timeout_rate"].item() == float(KINDS[i % 5] == "SLOW")
        assert result["extra_logs"]["crash_rate"].item() == float(KINDS[i % 5] == "CRASH")
        assert result["extra_logs"]["format_rate"].item() == float(KINDS[i % 5] != "prose only")
        assert result["extra_logs"]["sandbox_latency_s"].item() == expected.duration_s
        assert result["extra_logs"]["label_error_rate"].item() == 0.0


def test_a_batch_of_64_matches_the_reward_called_directly(reward_file, fake):
    queries = [PROMPT + _response(i) for i in range(64)]
    result = reward_file.reward_func(queries, [PROMPT] * 64, [LABEL] * 64)

    _check_shapes(result, 64)
    expected = [_direct(fake, i) for i in range(64)]
    assert result["rewards"].tolist() == [e.reward for e in expected]
    assert result["scores"].tolist() == [e.score for e in expected]
    logs = result["extra_logs"]
    # OpenRLHF logs the mean of each per-sample tensor: the means are the rates.
    assert logs["pass_rate"].mean().item() == pytest.approx(sum(KINDS[i % 5] == "PASS" for i in range(64)) / 64)
    assert logs["timeout_rate"].mean().item() == pytest.approx(sum(KINDS[i % 5] == "SLOW" for i in range(64)) / 64)
    assert logs["sandbox_latency_s"].tolist() == [e.duration_s for e in expected]


def test_the_reward_gets_the_response_and_the_prompt(reward_file, fake):
    reward_file.reward_func([PROMPT + "PASS"], [PROMPT], [LABEL])
    sample = fake.samples[-1]
    assert (sample.completion, sample.prompt, sample.label) == ("PASS", PROMPT, LABEL)


def test_a_prompt_cut_on_the_left_by_the_trainer_is_still_split_off():
    prompt = "Some long task statement. " * 20 + "Show ```python\nprint('PASS')\n``` as an example.\nassistant:\n"
    assert adapter.split_response(prompt[100:] + "my answer", prompt) == "my answer"
    assert adapter.split_response(prompt[-40:] + "my answer", prompt) == "my answer"
    assert adapter.split_response("no prompt here", prompt) == "no prompt here"


def test_labels_are_passed_on_as_any_json_value(reward_file, fake):
    labels = [LABEL, {"answer": "42"}, 42, None]
    result = reward_file.reward_func(["PASS"] * 4, [""] * 4, labels)
    assert [s.label for s in fake.samples] == labels
    assert result["rewards"].tolist() == [1.0] * 4


def test_an_unusable_label_scores_zero_and_is_logged(reward_file, caplog):
    with caplog.at_level(logging.ERROR, logger=adapter.__name__):
        result = reward_file.reward_func([PROMPT + "PASS", PROMPT + "PASS"], [PROMPT] * 2, ["broken", LABEL])

    assert result["rewards"].tolist() == [0.0, 1.0]
    assert result["scores"].tolist() == [0.0, 1.0]
    assert result["extra_logs"]["label_error_rate"].tolist() == [1.0, 0.0]
    assert result["extra_logs"]["pass_rate"].tolist() == [0.0, 1.0]
    assert any(r.levelno == logging.ERROR and "the label holds no tests" in r.getMessage() for r in caplog.records)


def test_our_failure_is_logged_and_raised(reward_file, caplog):
    with caplog.at_level(logging.ERROR, logger=adapter.__name__), pytest.raises(EngineUnavailable):
        reward_file.reward_func([PROMPT + "ENGINE_DOWN"], [PROMPT], [LABEL])
    assert any(r.levelno == logging.ERROR and "does not answer" in r.getMessage() for r in caplog.records)


def test_a_failed_start_is_not_kept_the_next_call_builds_again(clean_env):
    reward, attempts = FakeReward(), []

    def build(settings):
        attempts.append(settings)
        if len(attempts) == 1:
            raise EngineUnavailable("the engine is still starting")
        return reward

    clean_env.setattr(scoring, "build_reward", build)
    with pytest.raises(SandboxError):
        adapter.reward_func(["PASS"], [""], [LABEL])
    assert adapter.reward_func(["PASS"], [""], [LABEL])["rewards"].tolist() == [1.0]
    assert len(attempts) == 2


def test_a_forked_child_builds_its_own_reward(reward_file, fake):
    # A real fork (patching os.getpid would reach every thread of this process: pebble's
    # pool managers of earlier tests check their workers' parent by it, and died of it).
    reward_file.reward_func(["PASS"], [""], [LABEL])
    reward_file.reward_func(["PASS"], [""], [LABEL])
    assert len(fake.builds) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            reward_file.reward_func(["PASS"], [""], [LABEL])
            os.write(write, str(len(fake.builds)).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert select.select([read], [], [], 30)[0], "the forked child did not answer within 30 s"
        assert os.read(read, 16) == b"2"  # the child built its own
    finally:
        os.close(read)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    reward_file.reward_func(["PASS"], [""], [LABEL])
    assert len(fake.builds) == 1  # the parent goes on with its own


def test_the_adapter_module_itself_works_as_the_reward_file(fake):
    # The docs offer the installed module's own path to --remote_rm_url: loaded by
    # path under another name, its reward_func scores with the process's reward,
    # its jobs imported from the modules beside it by their absolute names.
    module = _load(Path(adapter.__file__), "reward_func")
    result = module.reward_func(["PASS", "HALF"], ["", ""], [LABEL, LABEL])
    _check_shapes(result, 2)
    assert result["rewards"].tolist() == [1.0, 0.5]
    module.reward_func(["PASS"], [""], [LABEL])
    assert len(fake.builds) == 1  # one reward for the process, however the file was loaded


def test_no_samples_give_empty_tensors_and_start_nothing(reward_file, fake):
    result = reward_file.reward_func([], [], [])
    _check_shapes(result, 0)


def test_lists_of_different_lengths_are_refused(reward_file):
    with pytest.raises(ValueError, match="2 queries, 1 prompts"):
        reward_file.reward_func(["a", "b"], ["p"], [LABEL, LABEL])


def test_an_injected_reward_is_used_and_kept_by_reset():
    reward = FakeReward()
    scorer = adapter.OpenRLHFReward(reward=reward, settings=adapter.OpenRLHFSettings())
    assert scorer(["HALF"], [None], [LABEL])["rewards"].tolist() == [0.5]
    scorer.reset()
    assert scorer.reward is reward


# ---- settings ---------------------------------------------------------------------------------------------------

def test_every_variable_reaches_its_setting():
    settings = adapter.settings_from_env({
        "REWARDBOX_REWARD": "correctness", "REWARDBOX_TIMEOUT_S": "4.5", "REWARDBOX_MEMORY_MB": "256",
        "REWARDBOX_WORKERS": "16", "REWARDBOX_IMAGE": "me/box:1", "REWARDBOX_RUNTIME": "runsc",
        "REWARDBOX_RETRY_S": "30", "REWARDBOX_TIMEOUT_REWARD": "-0.25", "REWARDBOX_CRASH_REWARD": "-0.75",
        "REWARDBOX_NO_CODE_REWARD": "-2", "REWARDBOX_FORMAT_WEIGHT": "0.1", "REWARDBOX_MAX_STEPS": "5",
        "REWARDBOX_FEEDBACK_TEMPLATE": "plain", "REWARDBOX_MODE": "cold", "REWARDBOX_REUSE": "9",
        "REWARDBOX_RAY": "auto",
    })
    assert (settings.mode, settings.reuse, settings.ray) == ("cold", 9, "auto")
    assert (settings.limits.timeout_s, settings.limits.memory_mb) == (4.5, 256)
    assert (settings.workers, settings.image, settings.runtime, settings.retry_s) == (16, "me/box:1", "runsc", 30.0)
    assert (settings.policy.timeout_reward, settings.policy.crash_reward, settings.policy.no_code_reward) == (-0.25, -0.75, -2.0)
    assert (settings.format_weight, settings.max_steps) == (0.1, 5)
    assert settings.feedback_template == adapter.FEEDBACK_TEMPLATES["plain"]
    # Every documented variable still works (the settings hold the service's keys too).
    assert set(adapter.ENV_VARS) >= {
        "REWARDBOX_REWARD", "REWARDBOX_TIMEOUT_S", "REWARDBOX_MEMORY_MB", "REWARDBOX_WORKERS", "REWARDBOX_IMAGE",
        "REWARDBOX_RUNTIME", "REWARDBOX_RETRY_S", "REWARDBOX_TIMEOUT_REWARD", "REWARDBOX_CRASH_REWARD",
        "REWARDBOX_NO_CODE_REWARD", "REWARDBOX_FORMAT_WEIGHT", "REWARDBOX_MAX_STEPS", "REWARDBOX_FEEDBACK_TEMPLATE",
        "REWARDBOX_MODE", "REWARDBOX_REUSE", "REWARDBOX_RAY"}


def test_unset_and_empty_variables_keep_the_defaults():
    settings = adapter.settings_from_env({"REWARDBOX_TIMEOUT_S": "", "REWARDBOX_IMAGE": "  "})
    assert settings == adapter.OpenRLHFSettings()
    assert settings.reward == "correctness" and settings.format_weight == 0 and settings.max_steps == 3


@pytest.mark.parametrize("var, value, message", [
    ("REWARDBOX_TIMEOUT_S", "soon", "valid number"),
    ("REWARDBOX_TIMEOUT_S", "-1", "greater than 0"),
    ("REWARDBOX_WORKERS", "2.5", "valid integer"),
    ("REWARDBOX_CRASH_REWARD", "0.5", "less than or equal to 0"),
    ("REWARDBOX_FORMAT_WEIGHT", "1", "less than 1"),
    ("REWARDBOX_FEEDBACK_TEMPLATE", "markdown", "{feedback}"),
])
def test_a_bad_value_names_its_variable(var, value, message):
    with pytest.raises(adapter.SettingsError) as error:
        adapter.settings_from_env({var: value})
    assert f"{var}={value!r}" in str(error.value) and message in str(error.value)


def test_a_bad_variable_stops_the_reward_file_while_it_loads(fake, monkeypatch):
    monkeypatch.setenv("REWARDBOX_MEMORY_MB", "lots")
    with pytest.raises(adapter.SettingsError, match="REWARDBOX_MEMORY_MB"):
        _load(EXAMPLES / "reward_func.py", "reward_func")


def test_the_settings_are_read_from_the_environment_at_the_first_call(reward_file, fake, monkeypatch):
    monkeypatch.setenv("REWARDBOX_TIMEOUT_S", "7")
    reward_file.reward_func(["PASS"], [""], [LABEL])
    assert fake.builds[0].limits.timeout_s == 7.0


# ---- building the reward ----------------------------------------------------------------------------------------

class _Recorder:
    """Records the `SandboxConfig` it is given: its mode, and its other fields given."""

    def __init__(self, config):
        self.mode = config.mode
        self.kwargs = {key: getattr(config, key) for key in config.model_fields_set - {"mode"}}


@pytest.fixture
def recorded_sandbox(monkeypatch):
    """`make_sandbox` replaced by a recorder of its arguments: nothing starts."""
    import rewardbox.sandbox.modes as sandbox_modes

    monkeypatch.setattr(sandbox_modes, "make_sandbox", _Recorder)


def _code_reward(reward: Reward) -> Reward:
    return reward.code if hasattr(reward, "code") else reward


def test_build_reward_hands_the_settings_to_the_sandbox_and_the_reward(recorded_sandbox):
    from rewardbox.rewards.correctness import CorrectnessReward

    settings = adapter.settings_from_env({"REWARDBOX_WORKERS": "8", "REWARDBOX_RUNTIME": "runsc", "REWARDBOX_RETRY_S": "5",
                                          "REWARDBOX_TIMEOUT_S": "3", "REWARDBOX_NO_CODE_REWARD": "-0.2"})
    reward = adapter.build_reward(settings)
    assert isinstance(reward, CorrectnessReward)
    code = _code_reward(reward)
    # The default image's tag; workers unset would be the sandbox's default. A pool warms up for the run's limits.
    assert code.sandbox.kwargs == {"image": DEFAULT_IMAGE, "max_containers": 8, "runtime": "runsc", "retry_s": 5.0,
                                   "reuse": 1000, "limits": settings.limits}
    assert code.sandbox.mode == "pooled"
    assert code.limits.timeout_s == 3.0 and code.policy.no_code_reward == -0.2


def test_a_composition_spec_gets_the_same_sandbox_and_policy(recorded_sandbox):
    from rewardbox.rewards.composite import CompositeReward

    reward = adapter.build_reward(adapter.settings_from_env({
        "REWARDBOX_REWARD": "correctness=0.9,format_think_answer=0.1", "REWARDBOX_IMAGE": "me/box:2",
        "REWARDBOX_CRASH_REWARD": "-0.3"}))
    assert isinstance(reward, CompositeReward)
    (_, correctness, weight), (_, _, format_weight) = reward.components
    assert (weight, format_weight) == pytest.approx((0.9, 0.1))
    code = _code_reward(correctness)
    assert code.sandbox.kwargs == {"image": "me/box:2", "runtime": None, "retry_s": 60.0, "reuse": 1000,
                                   "limits": code.limits}
    assert code.policy.crash_reward == -0.3


def test_rewardbox_ray_sends_the_sandbox_to_the_cluster(recorded_sandbox):
    reward = adapter.build_reward(adapter.settings_from_env({"REWARDBOX_RAY": "auto", "REWARDBOX_MODE": "fresh"}))
    code = _code_reward(reward)
    assert (code.sandbox.mode, code.sandbox.kwargs["ray"]) == ("fresh", "auto")


def test_a_format_weight_mixes_in_the_one_code_block_format(recorded_sandbox):
    from rewardbox.rewards.composite import CompositeReward

    reward = adapter.build_reward(adapter.settings_from_env({"REWARDBOX_FORMAT_WEIGHT": "0.2"}))
    assert isinstance(reward, CompositeReward)
    assert [(name, weight) for name, _, weight in reward.components] == [
        ("correctness", pytest.approx(0.8)), ("format_one_code_block", pytest.approx(0.2))]


def test_a_registered_reward_is_found_by_name(recorded_sandbox):
    from rewardbox.rewards import registry

    fake = FakeReward()
    registry.register("openrlhf_unit_fake", fake, replace=True)
    assert adapter.build_reward(adapter.settings_from_env({"REWARDBOX_REWARD": "openrlhf_unit_fake"})) is fake


def test_logs_read_a_composite_reward_through_its_components():
    out = RewardOutput(reward=0.9, score=0.95, metadata={"verdict": "passed", "components": {
        "correctness": {"reward": 1.0, "score": 1.0, "metadata": {"verdict": "passed", "duration_s": 1.5}},
        "format_one_code_block": {"reward": 0.0, "score": 0.0, "metadata": {"verdict": "failed", "format_ok": False}}}})
    logs = adapter.sample_logs(out)
    assert logs == {"pass_rate": 1.0, "timeout_rate": 0.0, "crash_rate": 0.0, "format_rate": 0.0,
                    "sandbox_latency_s": 1.5, "label_error_rate": 0.0}


def test_a_math_answer_reports_no_sandbox_latency():
    """math-verify's time is not a container's: sandbox_latency_s stays 0.0 for math samples."""
    from rewardbox.rewards.correctness import CorrectnessReward

    reward = CorrectnessReward(sandbox=None)
    try:
        result = adapter.OpenRLHFReward(reward)(["Q: 6*7? A: \\boxed{42}"], ["Q: 6*7? A: "], ["42"])
    finally:
        reward.close()
    assert result["rewards"].tolist() == [1.0]
    assert result["extra_logs"]["sandbox_latency_s"].tolist() == [0.0]


# ---- the agent --------------------------------------------------------------------------------------------------

def _fake_openrlhf(monkeypatch, multi_turn: bool = True, shared: bool = False) -> types.ModuleType:
    """`openrlhf.utils.agent` as OpenRLHF ships it: the base classes, and (newest)
    MultiTurnAgentExecutor, whose `execute` runs the episode on an instance of its
    own (0.9.1.post1 and later) or, `shared`, on the one built in `__init__` (0.9.1)."""
    agent = types.ModuleType("openrlhf.utils.agent")

    class AgentInstanceBase(ABC):
        @abstractmethod
        def __init__(self, *args, **kwargs):
            pass

        async def reset(self, states: dict, **kwargs):
            return states

        @abstractmethod
        async def step(self, state_dict: dict, **kwargs):
            raise NotImplementedError

    class AgentExecutorBase:  # OpenRLHF's is abstract in execute, which the executors under test define
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    agent.AgentInstanceBase, agent.AgentExecutorBase = AgentInstanceBase, AgentExecutorBase
    if multi_turn:
        class MultiTurnAgentExecutor(AgentExecutorBase):
            def __init__(self, agent_instance_cls):
                assert issubclass(agent_instance_cls, AgentInstanceBase)
                if shared:
                    self.agent_instance = agent_instance_cls()
                else:
                    self.agent_instance_cls = agent_instance_cls

            async def execute(self, prompt, label, llm_engine):
                """The loop of 0.9.1's `execute`, in text (no tokenizer, no length budget)."""
                instance = self.agent_instance if shared else self.agent_instance_cls()
                observation = (await instance.reset({"observation": prompt, "label": label}))["observation"]
                total_reward, final_scores, steps = 0, 0, 0
                while True:
                    action = await llm_engine(observation)
                    result = await instance.step({"observation_text": observation, "action_text": action,
                                                  "label": label, "sampling_params": "params"})
                    steps += 1
                    total_reward += result["rewards"].item()
                    final_scores = result.get("scores", total_reward)
                    observation = observation + action + result["environment_feedback"]
                    if result["done"]:
                        return {"prompt": prompt, "reward": total_reward, "scores": final_scores, "steps": steps}

        agent.MultiTurnAgentExecutor = MultiTurnAgentExecutor
    package, utils = types.ModuleType("openrlhf"), types.ModuleType("openrlhf.utils")
    package.utils, utils.agent = utils, agent
    for name, module in {"openrlhf": package, "openrlhf.utils": utils, "openrlhf.utils.agent": agent}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return agent


async def _episode(executor, prompt, label, actions):
    """MultiTurnAgentExecutor.execute's loop, without the tokenizer and the engine."""
    instance = executor.agent_instance_cls()
    observation = (await instance.reset({"observation": prompt, "label": label}))["observation"]
    total_reward, final_scores, steps = 0, 0, []
    for action in actions:
        states = {"observation_text": observation, "action_text": action, "label": label, "sampling_params": "params"}
        result = await instance.step(states)
        steps.append(result)
        total_reward += result["rewards"].item()
        final_scores = result.get("scores", total_reward)
        observation = observation + action + result["environment_feedback"]
        if result["done"]:
            break
    return total_reward, final_scores, steps, observation


@pytest.fixture
def agent_file(fake, monkeypatch):
    _fake_openrlhf(monkeypatch)
    return _load(EXAMPLES / "agent_func.py", "agent_module")


def test_a_failing_attempt_gets_feedback_and_the_next_one_ends_the_episode(agent_file, fake):
    executor = agent_file.AgentExecutor()  # the newest OpenRLHF builds it without arguments
    total, scores, steps, observation = asyncio.run(
        _episode(executor, PROMPT, LABEL, ["```python\n# HALF\n```<|im_end|>", "```python\n# PASS\n```<|im_end|>", "unused"]))

    first, second = steps
    assert (first["done"], second["done"]) == (False, True)
    assert "test_b" in first["environment_feedback"] and "assert 3 == 4" in first["environment_feedback"]
    assert "test_a" not in first["environment_feedback"]  # it passed
    assert first["environment_feedback"].startswith("\n<|im_start|>user\nYour code passed 1 of 2 tests.")
    assert first["environment_feedback"].endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert second["environment_feedback"] == ""
    assert total == pytest.approx(1.0) and scores.item() == 1.0  # the last attempt's, not a sum
    assert second["extra_logs"]["agent_steps"].item() == 2.0 and second["extra_logs"]["pass_rate"].item() == 1.0
    assert first["sampling_params"] == "params"
    assert [s.prompt for s in fake.samples] == [PROMPT, PROMPT]  # the task, for prompts the code continues
    assert observation.count("<|im_start|>user\n") == 2


def test_the_episode_stops_at_max_steps_with_the_last_attempts_reward(agent_file, fake, monkeypatch):
    monkeypatch.setenv("REWARDBOX_MAX_STEPS", "2")
    adapter.reset()
    executor = agent_file.AgentExecutor()
    total, scores, steps, _ = asyncio.run(_episode(executor, PROMPT, LABEL, ["HALF", "CRASH", "PASS"]))

    assert [s["done"] for s in steps] == [False, True]
    assert total == pytest.approx(-1.0) and scores.item() == 0.0
    assert steps[-1]["extra_logs"]["crash_rate"].item() == 1.0


def test_crash_timeout_and_no_code_feedback_say_what_happened(agent_file):
    executor = agent_file.AgentExecutor()
    _, _, steps, _ = asyncio.run(_episode(executor, PROMPT, LABEL, ["CRASH", "SLOW", "prose only"]))
    crash, slow, _ = (s["environment_feedback"] for s in steps)
    assert "syntax error" in crash and "invalid syntax (solution.py, line 1)" in crash
    assert "time limit" in slow


def test_an_unusable_label_ends_the_episode_at_once_with_no_reward(agent_file):
    executor = agent_file.AgentExecutor()
    total, scores, steps, _ = asyncio.run(_episode(executor, PROMPT, "broken", ["PASS", "PASS"]))
    assert len(steps) == 1 and steps[0]["done"] and steps[0]["environment_feedback"] == ""
    assert total == 0.0 and scores.item() == 0.0
    assert steps[0]["extra_logs"]["label_error_rate"].item() == 1.0


def test_our_failure_in_a_step_is_raised(agent_file):
    with pytest.raises(EngineUnavailable):
        asyncio.run(_episode(agent_file.AgentExecutor(), PROMPT, LABEL, ["ENGINE_DOWN"]))


@pytest.mark.parametrize("shared", [True, False], ids=["one instance (0.9.1)", "an instance per episode"])
def test_concurrent_episodes_keep_their_own_steps_and_rewards(fake, monkeypatch, shared):
    """OpenRLHF 0.9.1 runs every episode at once on the one instance its
    executor built; each must still end with its own reward, score and steps."""
    _fake_openrlhf(monkeypatch, shared=shared)
    executor = _load(EXAMPLES / "agent_func.py", "agent_module").AgentExecutor()
    scripts = {"fixed: ": ["HALF", "PASS"], "stuck: ": ["CRASH", "CRASH", "CRASH"], "first: ": ["PASS"]}

    async def llm(observation: str) -> str:
        for _ in range(len(observation) % 5):  # steps interleave unevenly
            await asyncio.sleep(0)
        prefix = observation.split(":")[0] + ": "
        return f"```python\n# {scripts[prefix][observation.count('<|im_start|>assistant') - 1]}\n```<|im_end|>"

    async def run():
        prompts = [prefix + PROMPT for prefix in scripts for _ in range(2)]  # GRPO: each prompt twice
        return await asyncio.gather(*[executor.execute(p, LABEL, llm) for p in prompts])

    results = asyncio.run(run())
    got = sorted((r["prompt"].split(":")[0], r["steps"], round(r["reward"], 6), r["scores"].item()) for r in results)
    assert got == [("first", 1, 1.0, 1.0)] * 2 + [("fixed", 2, 1.0, 1.0)] * 2 + [("stuck", 3, -1.0, 0.0)] * 2


def test_earlier_releases_get_an_executor_that_takes_the_trainers_arguments(fake, monkeypatch):
    agent = _fake_openrlhf(monkeypatch, multi_turn=False)
    module = _load(EXAMPLES / "agent_func.py", "agent_module")
    executor = module.AgentExecutor(max_steps=3, max_length=1024, llm_engine=None, hf_tokenizer=None, result_queue=None)
    assert isinstance(executor, agent.AgentExecutorBase)
    assert executor.args == (module.AgentInstance,) and executor.kwargs["max_length"] == 1024


def test_feedback_is_bounded():
    tests = [_test(f"test_{i}", "failed", "E" * 2000) for i in range(8)]
    text = adapter.feedback(_out(0.0, 0.5, "failed", 0, 8, 1.0, tests))
    listed = [line for line in text.splitlines() if line.startswith("- test_")]
    assert len(listed) == 5 and "and 3 more" in text
    assert all(len(line) <= len("- test_0: ") + 500 for line in listed)


def test_a_zero_score_survives_scores_or_rewards(reward_file):
    """OpenRLHF 0.9.1-0.10.0 keep `rewards_info.get("scores") or
    rewards_info.get("rewards")` for each one-sample call: a score of 0.0 must
    stay, not become the reward (-1.0)."""
    for completion, kept in [("CRASH", 0.0), ("SLOW", 0.25), ("PASS", 1.0)]:
        rewards_info = reward_file.reward_func([PROMPT + completion], [PROMPT], [LABEL])
        score_value = rewards_info.get("scores") or rewards_info.get("rewards")
        # What the trainer then stores: torch.tensor([score_val]), read as e.scores[0].item()
        assert torch.tensor([score_value])[0].item() == kept


def test_scores_are_plain_tensors_once_used_or_pickled():
    scores = torch.tensor([0.0, 1.0]).as_subclass(adapter.Scores)
    assert bool(torch.tensor([]).as_subclass(adapter.Scores)) is False  # empty is still false
    assert not bool((scores > 2).any())  # a computed tensor is a plain one, truth by value
    assert type(scores + 1) is torch.Tensor
    restored = pickle.loads(pickle.dumps(scores))
    assert type(restored) is torch.Tensor and restored.tolist() == [0.0, 1.0]
    assert copy.deepcopy(scores).tolist() == [0.0, 1.0]
