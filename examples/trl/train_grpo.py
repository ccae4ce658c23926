"""GRPO on a few coding tasks with rewardbox as the reward.

    pip install trl  # plus rewardbox; a Docker engine and `make sandbox-image`
    python examples/trl/train_grpo.py

The tasks are MBPP-style assert lists; any label format rewardbox reads works
(see the main README). A real run loads a dataset instead.
"""

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from rewards.adapters.trl import trl_async_reward

TASKS = [
    ("Write a Python function `add(a, b)` that returns the sum of a and b.",
     ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]),
    ("Write a Python function `is_even(n)` that returns True when n is even.",
     ["assert is_even(2)", "assert not is_even(3)"]),
    ("Write a Python function `reverse(s)` that returns the string s reversed.",
     ["assert reverse('abc') == 'cba'", "assert reverse('') == ''"]),
]


def main() -> None:
    dataset = Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"{task}\nAnswer with one ```python block."}], "label": {"tests": tests}}
        for task, tests in TASKS
    ])
    trainer = GRPOTrainer(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        reward_funcs=[trl_async_reward(label_column="label", name="tests_passed")],
        args=GRPOConfig(output_dir="grpo-rewardbox", per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=256, max_steps=10, logging_steps=1, log_completions=True),
        train_dataset=dataset,
    )
    trainer.train()


if __name__ == "__main__":
    main()
