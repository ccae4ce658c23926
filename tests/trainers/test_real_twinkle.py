"""twinkle-kit 0.5.1's own reward and advantage call sites with `TwinkleReward`.

The path of a twinkle GRPO run (its cookbook, `cookbook/rl/grpo/`): a
`twinkle.dataset.Dataset` mapped through a twinkle processor, encoded by a
`twinkle.template.Template`; the sampler turns each prompt's features into a
trajectory with `Template.concat_input_feature(feature, sampled_tokens)` (what
`VLLMSampler` does with the tokens vLLM returns), the rewards score the
trajectories, and `GRPOAdvantage()(rewards, num_generations=G, scale=...)`
makes the advantages. Everything here is twinkle's released code but the
model: the sampled tokens are real completions with known outcomes, encoded
by a small tokenizer built here (no hub), scored in real containers.
"""

import copy
from typing import Any

import pytest
from transformers import LlamaConfig
from twinkle.advantage import GRPOAdvantage
from twinkle.data_format import Message, Trajectory, pack_value
from twinkle.dataset import Dataset, DatasetMeta
from twinkle.preprocessor import CompetitionMathGRPOProcessor, GSM8KProcessor, Preprocessor
from twinkle.template import Template

from rewardbox.adapters.twinkle import TwinkleReward, grpo_advantage
from rewardbox.rewards.correctness import CorrectnessReward
from tests.trainers.conftest import byte_level_bpe

G = 3  # completions per prompt

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


class CodeTaskProcessor(Preprocessor):
    """A user's processor for code tasks, written as twinkle's own are
    (twinkle/preprocessor/llm.py): prompt-only messages, the label in
    `user_data`, encoded with twinkle's `pack_value` as its `Trajectory` type asks."""

    def __call__(self, rows: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return self.map_row_to_col([self.preprocess(row) for row in self.map_col_to_row(rows)])

    def preprocess(self, row: dict[str, Any]) -> Trajectory:
        return Trajectory(messages=[Message(role="user", content=row["task"])],
                          user_data=[("ground_truth", pack_value({"tests": row["tests"]}))])


MATH_ROWS = [  # CompetitionMathGRPOProcessor keeps `solution` raw in user_data
    {"problem": "For which x is x^2 - 5x + 6 <= 0? Give an interval.", "solution": "[2, 3]"},
    {"problem": "What is 6 * 7?", "solution": "42"},
]
MATH_COMPLETIONS = [
    ["The roots are 2 and 3, so x \\in \\boxed{[2, 3]}.", "\\boxed{[2, 3)}", "\\boxed{[1, 6]}"],
    ["6 * 7 = \\boxed{42}", "\\boxed{48}", "It is \\boxed{42}."],
]
MATH_REWARDS = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]

GSM8K_ROWS = [{"question": "A farm has 12 rows of 150 trees. How many trees?", "answer": "12 * 150 = 1,800\n#### 1,800"}]
GSM8K_COMPLETIONS = [["12 * 150 = 1800 trees. \\boxed{1800}", "\\boxed{1650}", "There are \\boxed{1,800} trees."]]
GSM8K_REWARDS = [1.0, 0.0, 1.0]

CODE_ROWS = [{"task": "Write add(a, b) in Python.", "tests": ["assert add(1, 2) == 3", "assert add(2, 0) == 2"]}]
CODE_COMPLETIONS = [[
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return a - b\n```",  # passes one of the two tests
    "```python\ndef add(a, b)\n    return a + b\n```",  # a syntax error
]]
CODE_REWARDS = [1.0, 0.5, -1.0]


@pytest.fixture(scope="module", autouse=True)
def _in_tmp(tmp_path_factory):
    """twinkle's datasets take file locks in `./.locks` (twinkle/utils/parallel.py), one file per map: not in
    the checkout. (Importing twinkle makes the directory in the working directory all the same: .gitignore.)"""
    import twinkle.utils.parallel

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(twinkle.utils.parallel, "_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
        yield


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tokenizer (byte-level BPE: decodes exactly what it encodes) and a
    config, all that `Template` loads from a model directory."""
    path = tmp_path_factory.mktemp("tiny-model")
    fast = byte_level_bpe(["def add(a, b): return a + b", "\\boxed{42}"], ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
                          vocab_size=300, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    LlamaConfig(vocab_size=300, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=1,
                num_key_value_heads=1).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def reward():
    correctness = CorrectnessReward()
    yield correctness
    correctness.close()


def sampled(model_dir: str, rows: list[dict[str, Any]], processor: Any, completions: list[list[str]]) -> list[dict]:
    """Trajectories as twinkle's sampler hands them to the rewards: each
    prompt's encoded features, expanded `G` times (the cookbook's
    `expand_prompts`), with a completion's tokens concatenated by the template."""
    dataset = Dataset(DatasetMeta(data=rows))
    dataset.map(processor)
    dataset.set_template(Template, model_id=model_dir)
    dataset.encode(add_generation_prompt=True)
    template = dataset.template
    trajectories = []
    for i, answers in enumerate(completions):
        feature = dataset[i]
        assert len(answers) == G
        for answer in answers:
            tokens = template.tokenizer.encode(answer, add_special_tokens=False)
            trajectories.append(template.concat_input_feature(copy.deepcopy(feature), tokens))
    return trajectories


def test_math_rows_stored_raw_by_twinkle_processors(model_dir, reward):
    trajectories = sampled(model_dir, MATH_ROWS, CompetitionMathGRPOProcessor, MATH_COMPLETIONS)
    assert trajectories[0]["user_data"] == [["solution", "[2, 3]"]]  # raw, as twinkle stores it
    assert trajectories[0]["messages"][-1] == {"role": "assistant", "content": MATH_COMPLETIONS[0][0]}
    # the cookbook's call, ground truth in user_data: the interval is text, not a JSON list
    assert TwinkleReward(reward, label_key="solution")(trajectories, []) == MATH_REWARDS
    assert TwinkleReward(reward)(trajectories, []) == MATH_REWARDS  # by default: ground_truth, else solution
    # MathReward's convention: ground_truths[i], a trajectory holding the answer under user_data["solution"]
    ground_truths = sampled(model_dir, MATH_ROWS, CompetitionMathGRPOProcessor, [[""] * G] * 2)
    flipped = [trajectories[i] for i in (3, 4, 5, 0, 1, 2)]
    assert TwinkleReward(reward)(flipped, ground_truths) == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert TwinkleReward(reward)(trajectories, ground_truths) == MATH_REWARDS


def test_gsm8k_rows(model_dir, reward):
    trajectories = sampled(model_dir, GSM8K_ROWS, GSM8KProcessor, GSM8K_COMPLETIONS)
    assert trajectories[0]["user_data"] == [["ground_truth", "1800"]]
    assert TwinkleReward(reward)(trajectories) == GSM8K_REWARDS


def test_code_rows_in_containers(model_dir, reward):
    trajectories = sampled(model_dir, CODE_ROWS, CodeTaskProcessor, CODE_COMPLETIONS)
    assert trajectories[0]["user_data"][0][1].startswith('{"tests"')  # pack_value's JSON
    assert TwinkleReward(reward)(trajectories, []) == CODE_REWARDS


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_advantage_is_twinkles(scale):
    rewards = MATH_REWARDS + GSM8K_REWARDS + CODE_REWARDS
    theirs = GRPOAdvantage()(rewards, num_generations=G, scale=scale).tolist()
    assert grpo_advantage(rewards, num_generations=G, scale=scale) == pytest.approx(theirs, rel=1e-6, abs=1e-6)
    ones = [1.0] * (2 * G)  # a group that agrees teaches nothing
    assert grpo_advantage(ones, G, scale) == pytest.approx(GRPOAdvantage()(ones, num_generations=G, scale=scale).tolist())
    single = [0.0, 1.0, -1.0]  # num_generations=1: twinkle's own branch
    assert grpo_advantage(single, 1, scale) == pytest.approx(GRPOAdvantage()(single, num_generations=1, scale=scale).tolist())
