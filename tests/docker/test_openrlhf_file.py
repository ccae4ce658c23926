"""The OpenRLHF reward file end to end: loaded by path exactly as OpenRLHF
loads it, real containers and the real math checker behind it, called from 32
threads with one sample each (the newest OpenRLHF) and with a batch of 64
(0.8-0.9). Its numbers must equal the reward's own for the same samples."""

import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from rewardbox.adapters import openrlhf
from rewardbox.rewards import CorrectnessReward, Sample

REWARD_FILE = Path(__file__).parents[2] / "examples" / "openrlhf" / "reward_func.py"
PROMPT = "<|im_start|>user\nSolve the task.<|im_end|>\n<|im_start|>assistant\n"
ASSERTS = {"tests": ["assert f(1) == 2", "assert f(2) == 3", "assert f(5) == 0"]}
CALL = json.dumps({"fn_name": "f", "inputs": [[1], [2], [3], [4]], "outputs": [2, 3, 4, 5]})
STDIO = {"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "4\n"]}

# Deterministic outcomes only: no deadlines, so every run gives the same numbers.
CASES = [
    ("```python\ndef f(x):\n    return x + 1\n```<|im_end|>", ASSERTS),           # 2 of 3
    ("```python\ndef f(x):\n    return 0 if x == 5 else x + 1\n```<|im_end|>", ASSERTS),  # 3 of 3
    ("```python\ndef f(x):\n    return x + 1\n```<|im_end|>", CALL),               # 4 of 4
    ("```python\ndef f(x):\n    return x * 2\n```<|im_end|>", CALL),               # 1 of 4
    ("```python\na, b = map(int, input().split())\nprint(a + b)\n```<|im_end|>", STDIO),
    ("```python\ndef f(x)\n    return x\n```<|im_end|>", ASSERTS),                 # syntax error
    ("I do not know.<|im_end|>", ASSERTS),                                            # no code
    ("The answer is $\\boxed{\\frac{1}{2}}$.<|im_end|>", "0.5"),                     # math, right
    ("The answer is 41.<|im_end|>", {"answer": "42"}),                               # math, wrong
    ("```python\nx = 1\n```<|im_end|>", {"inputs": ["1"], "outputs": []}),           # unusable label
]


def load_reward_file():
    """As OpenRLHF does: by path, then the module attribute `reward_func`."""
    spec = importlib.util.spec_from_file_location("reward_func", str(REWARD_FILE))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


@pytest.fixture(scope="module")
def reward_func(monkeypatch_module):
    monkeypatch_module.setenv("REWARDBOX_WORKERS", "4")
    monkeypatch_module.setenv("REWARDBOX_RETRY_S", "20")
    openrlhf.reset()
    yield load_reward_file()
    openrlhf.reset()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def direct(sandbox):
    """The same reward called directly, for the expected numbers."""
    reward = CorrectnessReward(sandbox)
    outputs = reward.score_many(Sample(completion=PROMPT + c, prompt=PROMPT, label=label) for c, label in CASES)
    yield [(o.reward if o.reward is not None else 0.0, o.score if o.score is not None else 0.0) for o in outputs]
    reward.close()


def test_the_expected_numbers_are_what_the_cases_say(direct):
    assert [r for r, _ in direct] == pytest.approx([2 / 3, 1.0, 1.0, 0.25, 1.0, -1.0, -1.0, 1.0, 0.0, 0.0])


def test_one_sample_per_call_from_32_threads(reward_func, direct):
    calls = [(i, CASES[i % len(CASES)]) for i in range(64)]

    def one(call):
        i, (completion, label) = call
        out = reward_func([PROMPT + completion], [PROMPT], [label])
        return i, out

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, calls))

    for i, out in results:
        assert set(out) == {"rewards", "scores", "extra_logs"}
        for value in [out["rewards"], out["scores"], *out["extra_logs"].values()]:
            assert isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.shape == (1,)
        expected_reward, expected_score = direct[i % len(CASES)]
        assert out["rewards"].item() == pytest.approx(expected_reward)
        assert out["scores"].item() == pytest.approx(expected_score)
        assert 0.0 <= out["scores"].item() <= 1.0


def test_a_batch_of_64(reward_func, direct):
    batch = [CASES[i % len(CASES)] for i in range(64)]

    out = reward_func([PROMPT + c for c, _ in batch], [PROMPT] * 64, [label for _, label in batch])

    assert out["rewards"].shape == out["scores"].shape == (64,)
    assert out["rewards"].tolist() == pytest.approx([direct[i % len(CASES)][0] for i in range(64)])
    logs = out["extra_logs"]
    assert set(logs) >= {"pass_rate", "timeout_rate", "crash_rate", "format_rate", "sandbox_latency_s",
                         "label_error_rate"}
    assert all(v.shape == (64,) for v in logs.values())
    per_round = len(CASES)
    # Per sample: passed = cases 1, 2, 4, 7 (code all passed, math right).
    assert logs["pass_rate"][:per_round].tolist() == [0, 1, 1, 0, 1, 0, 0, 1, 0, 0]
    assert logs["crash_rate"][:per_round].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert logs["label_error_rate"][:per_round].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert logs["sandbox_latency_s"][:5].min().item() > 0  # code samples ran in containers


def test_agent_episode_feeds_failures_back_and_ends_on_success(sandbox):
    from rewardbox.adapters.openrlhf import CodingEpisode, OpenRLHFReward

    reward = CorrectnessReward(sandbox)
    episode = CodingEpisode(scorer=OpenRLHFReward(reward=reward), max_steps=3)
    label = json.dumps(ASSERTS)
    episode.reset({"observation": PROMPT, "label": label})

    first = episode.step({"observation_text": PROMPT, "action_text": CASES[0][0], "label": label})
    second = episode.step({"observation_text": PROMPT, "action_text": CASES[1][0], "label": label})

    assert first["done"] is False
    assert "test_assert_2" in first["environment_feedback"]  # the failing test, by name
    assert "assert f(5) == 0" in first["environment_feedback"]  # and what it checked
    assert second["done"] is True and second["environment_feedback"] == ""
    # OpenRLHF adds up the step rewards: the total is the last attempt's.
    assert first["rewards"].item() + second["rewards"].item() == pytest.approx(1.0)
    assert second["scores"].item() == pytest.approx(1.0)


def test_a_cpp_episode_is_graded_in_its_image_without_a_python_session(sandbox):
    from rewardbox.adapters.openrlhf import CodingEpisode, OpenRLHFReward

    episode = CodingEpisode(scorer=OpenRLHFReward(reward=CorrectnessReward(sandbox)), max_steps=3)
    label = json.dumps({"language": "cpp", "inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42\n"]})
    broken = "```cpp\nint main() { std::cout << 1 }\n```<|im_end|>"
    right = ("```cpp\n#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; std::cout << a + b; }\n"
             "```<|im_end|>")
    episode.reset({"observation": "Add two numbers, in C++.", "label": label})

    first = episode.step({"observation_text": "", "action_text": broken, "label": label})
    assert episode.session is None  # a session is a Python container: C++ runs in its own image
    second = episode.step({"observation_text": "", "action_text": right, "label": label})

    assert first["done"] is False and "Your code did not compile." in first["environment_feedback"]
    assert "is not a member of" in first["environment_feedback"]  # g++'s own message, read back to the model
    assert second["done"] is True
    assert first["rewards"].item() + second["rewards"].item() == pytest.approx(1.0)
    assert episode.session is None
    assert "one ```cpp block" in first["environment_feedback"]  # not Python's fence
