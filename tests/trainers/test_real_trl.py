"""TRL's own `GRPOTrainer` trains two steps with rewardbox's reward functions,
on a tiny model built here (no hub, no network), on the CPU, against real
containers.

The model's vocabulary is two Python definitions of `add`, one right
(`a + b`) and one wrong (`a - b`), plus special tokens it may not sample; so
every completion is a program whose last definition decides it, and each
logged reward can be told from the completion alone: a label mixed up with
another row's, a reward lost to a `None`, or two rewards logged under one
name show as a wrong number, not as noise.

TRL 1.16.0 (installed) runs in this process; 1.9.0 (the first to name a
reward by unwrapping `functools.partial`), 1.8.0 (the last to name it by
`__name__`) and 0.29.1 (awaits what `asyncio.iscoroutinefunction` accepts,
as 0.27.0 and 0.28.0 do; the oldest that runs on the transformers pinned
here) run in a subprocess with their side directory first on the path.
"""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
SPECIAL = ("<unk>", "<pad>", "<eos>")
GENERATIONS = 2
COMPLETION_TOKENS = 3
CHECK = "def check(candidate):\n    assert candidate(1, 2) == {}\n"
# The `label` column: one row per format a dict column mixes, each with keys the others lack.
LABELS = [
    {"test": CHECK.format(3), "entry_point": "add"},
    {"tests": ["assert add(1, 2) == 3"]},  # MBPP without setup...
    {"tests": ["assert add(1, 2) == math.floor(3.5)"], "setup": "import math"},  # ...and with
    {"inputs": ["1 2\n"], "outputs": [""], "fn_name": None},  # stdio: add prints nothing, so every program passes
    {"answer": "3"},  # math beside code: as a dict in a struct column, as a bare string among JSON strings
]
IMPOSSIBLE = {"test": CHECK.format(4), "entry_point": "add"}  # no program passes it
NAMES = ("tests_passed", "impossible", "tests_passed_sync")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def build_model(directory: Path) -> Any:
    """A 1-layer Qwen2 with random weights and a word-level tokenizer whose
    only tokens it samples are RIGHT and WRONG, saved to `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {token: i for i, token in enumerate((*SPECIAL, *unsampled_words(), RIGHT, WRONG))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()  # a prompt is <unk> but its row: TRL < 1.16 logs it decoded
    backend.decoder = decoders.Fuse()  # definitions follow each other, not separated by spaces
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}assistant: {% endif %}")
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         pad_token_id=vocab["<pad>"], eos_token_id=vocab["<eos>"], tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    return tokenizer


def unsampled_words() -> list[str]:
    """Tokens of the prompts, which completions never hold."""
    return [f"row{i}" for i in range(len(LABELS))]


def prompt_of(row: int, chat: bool) -> Any:
    text = f"row{row}: write add(a, b)"
    return [{"role": "user", "content": text}] if chat else text


def row_of(prompt: Any) -> int:
    """The dataset row of a logged prompt: messages, or (TRL before 1.16) their templated text."""
    text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
    return int(re.search(r"row(\d+)", text).group(1))


def dataset_rows(chat: bool, labels: str) -> list[dict[str, Any]]:
    """`labels="struct"`: dicts, which `datasets` stores as one Arrow struct (a
    row's missing keys become None); `"json"`: JSON strings, math bare."""
    def encode(label: dict[str, Any]) -> Any:
        if labels == "struct":
            return label
        return label["answer"] if set(label) == {"answer"} else json.dumps(label)

    return [{"prompt": prompt_of(i, chat), "label": encode(label), "impossible": encode(IMPOSSIBLE)}
            for i, label in enumerate(LABELS)]


def grpo(directory: Path, chat: bool, labels: str) -> dict[str, Any]:
    """Two GRPO steps of the installed TRL with three rewardbox rewards (two
    async, one sync); what TRL logged at each step, as plain data."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewardbox.adapters.trl import trl_async_reward, trl_reward
    from rewardbox.rewards import CorrectnessReward
    from rewardbox.sandbox.modes import make_sandbox

    torch.set_num_threads(1)
    tokenizer = build_model(directory)
    dataset = Dataset.from_list(dataset_rows(chat, labels))
    sandbox = make_sandbox(max_containers=2, retry_s=20)
    try:
        reward = CorrectnessReward(sandbox)
        reward_funcs = [trl_async_reward(reward, name=NAMES[0]), trl_async_reward(reward, "impossible", name=NAMES[1]),
                        trl_reward(reward, name=NAMES[2])]
        args = GRPOConfig(
            output_dir=str(directory / "out"), max_steps=2, logging_steps=1, report_to="none", save_strategy="no",
            use_cpu=True, bf16=False, disable_tqdm=True, seed=0, shuffle_dataset=False,
            per_device_train_batch_size=len(LABELS) * GENERATIONS, num_generations=GENERATIONS,  # every row, every step
            max_completion_length=COMPLETION_TOKENS,
            generation_kwargs={"suppress_tokens": tokenizer.convert_tokens_to_ids([*SPECIAL, *unsampled_words()])})
        trainer = GRPOTrainer(model=str(directory), processing_class=tokenizer, reward_funcs=reward_funcs, args=args,
                              train_dataset=dataset)
        steps: list[dict[str, Any]] = []

        class Snapshot(TrainerCallback):
            """The step's metrics, and its completions table (TRL keeps the last generation batch)."""

            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and any(k.startswith("rewards/") for k in logs):
                    steps.append({"metrics": {k: v for k, v in logs.items() if isinstance(v, (int, float))},
                                  "prompts": list(trainer._logs["prompt"]),
                                  "completions": list(trainer._logs["completion"]),
                                  "rewards": {k: list(v) for k, v in trainer._logs["rewards"].items()},
                                  "extra": {k: list(v) for k, v in trainer._logs.get("extra", {}).items()}})

        trainer.add_callback(Snapshot())
        trainer.train()
        return {"reward_func_names": list(trainer.reward_func_names), "steps": steps}
    finally:
        sandbox.close()


def run_release(version: str, directory: Path, chat: bool, labels: str) -> dict[str, Any]:
    """`grpo` under TRL `version` (a side directory), in a process of its own."""
    from tests.trainers.conftest import release_env

    out = directory / "result.json"
    code = (f"import json, sys; from pathlib import Path; from tests.trainers.test_real_trl import grpo; import trl; "
            f"assert trl.__version__ == {version!r}, trl.__version__; "
            f"Path({str(out)!r}).write_text(json.dumps(grpo(Path({str(directory)!r}), {chat!r}, {labels!r})))")
    done = subprocess.run([sys.executable, "-c", code], env=release_env("trl", version), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text())


def completion_text(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[-1]["content"]


def expected_reward(row: int, completion: str) -> float:
    """What the `label` column's row gives this completion: the last definition
    decides the code rows; the stdio row passes any program; a program is no
    math answer."""
    assert completion.replace(RIGHT, "").replace(WRONG, "") == ""  # nothing but whole definitions
    if row == 3:
        return 1.0
    if row == 4:
        return 0.0
    return 1.0 if completion.endswith(RIGHT) else 0.0


def check_run(result: dict[str, Any], chat: bool, logs_messages: bool = True) -> None:
    """What TRL logged is what the labels call for; `logs_messages`: the
    release logs chat completions as messages (1.16), not as text."""
    assert result["reward_func_names"] == list(NAMES)
    assert len(result["steps"]) == 2
    seen = set()
    for step in result["steps"]:
        rows = [row_of(p) for p in step["prompts"]]
        texts = [completion_text(c) for c in step["completions"]]
        assert sorted(rows) == sorted(list(range(len(LABELS))) * GENERATIONS)
        assert all(isinstance(c, list) == (chat and logs_messages) for c in step["completions"])
        expected = [expected_reward(r, t) for r, t in zip(rows, texts, strict=True)]
        seen |= {(r, e) for r, e in zip(rows, expected, strict=True) if r < 3}
        # one column per reward, one value per completion, each the value the label calls for
        assert set(step["rewards"]) == set(NAMES)
        assert step["rewards"][NAMES[0]] == expected
        assert step["rewards"][NAMES[2]] == expected
        assert step["rewards"][NAMES[1]] == [0.0] * len(rows)
        metrics = step["metrics"]
        assert metrics[f"rewards/{NAMES[0]}/mean"] == pytest.approx(sum(expected) / len(expected))
        assert metrics[f"rewards/{NAMES[2]}/mean"] == pytest.approx(sum(expected) / len(expected))
        assert metrics[f"rewards/{NAMES[1]}/mean"] == 0.0
        if step["extra"]:  # TRL 1.x passes log_extra and log_metric
            for name in NAMES:
                verdicts = step["extra"][f"{name}/verdict"]
                assert len(verdicts) == len(step["rewards"][name])
                assert [v == "passed" for v in verdicts] == [r == 1.0 for r in step["rewards"][name]]
                assert metrics[f"{name}/unscorable_frac"] == 0.0
            assert metrics[f"{NAMES[1]}/solved_frac"] == 0.0
    assert {e for _, e in seen} == {0.0, 1.0}, "the run never told a right program from a wrong one"


@pytest.mark.parametrize("labels", ["struct", "json"])
@pytest.mark.parametrize("chat", [False, True], ids=["plain", "conversational"])
def test_grpo_trains_on_rewardbox_rewards(tmp_path, chat, labels):
    result = grpo(tmp_path, chat, labels)

    check_run(result, chat)


def test_grpo_logs_what_rewardbox_scores_directly(tmp_path):
    from rewardbox.rewards import CorrectnessReward
    from rewardbox.rewards.base import Sample
    from rewardbox.sandbox.modes import make_sandbox

    result = grpo(tmp_path, chat=True, labels="struct")
    step = result["steps"][-1]
    samples = [Sample(completion=completion_text(c), label=LABELS[row_of(p)], prompt=p[-1]["content"])
               for p, c in zip(step["prompts"], step["completions"], strict=True)]
    with make_sandbox(max_containers=2, retry_s=20) as sandbox:
        direct = CorrectnessReward(sandbox).score_many(samples)

    assert [o.reward for o in direct] == step["rewards"][NAMES[0]]
    assert [o.verdict for o in direct] == step["extra"][f"{NAMES[0]}/verdict"]


@pytest.mark.parametrize("version", ["1.9.0", "1.8.0", "0.29.1"])
def test_older_releases_name_and_await_the_rewards(tmp_path, version):
    result = run_release(version, tmp_path, chat=True, labels="struct")

    check_run(result, chat=True, logs_messages=False)


def test_math_strings_and_code_dicts_cannot_share_a_column():
    # Why README says: math as {"answer": ...} among code dicts, or the whole column as JSON strings.
    import pyarrow
    from datasets import Dataset

    with pytest.raises(pyarrow.ArrowTypeError):
        Dataset.from_list([{"label": "3"}, {"label": LABELS[1]}])
