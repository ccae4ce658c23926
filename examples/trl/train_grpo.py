"""GRPO on a few coding tasks and one math problem, with rewardbox as the reward.

    pip install trl  # 0.27.0 or later (tested: 0.29.1-1.16.0); plus rewardbox, a Docker engine, `make sandbox-image`
    python examples/trl/train_grpo.py [--model Qwen/Qwen2.5-0.5B-Instruct] [--max-steps 10] [--cpu]

The labels sit in one dict column, which `datasets` stores as an Arrow
struct: keys a row lacks arrive as None and are read as absent, and the math
answer is a dict too (`{"answer": ...}`), since a bare string cannot share the
column with dicts. Any label format rewardbox reads works (see the main
README). A real run loads a dataset instead.
"""

import argparse

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from rewardbox.adapters.trl import trl_async_reward

FENCE = "Answer with one ```python block."
TASKS = [
    (f"Write a Python function `add(a, b)` that returns the sum of a and b.\n{FENCE}",
     {"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}),
    (f"Write a Python function `is_even(n)` that returns True when n is even.\n{FENCE}",
     {"test": "def check(candidate):\n    assert candidate(2)\n    assert not candidate(3)\n", "entry_point": "is_even"}),
    (f"Write a Python function `circle_area(r)`.\n{FENCE}",
     {"tests": ["assert abs(circle_area(1) - math.pi) < 1e-9"], "setup": "import math"}),
    ("What is 6 * 7? Put the final answer in \\boxed{}.", {"answer": "42"}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a hub name or a local directory")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--output-dir", default="grpo-rewardbox")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (a smoke run with a tiny model)")
    args = parser.parse_args()
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": task}], "label": label} for task, label in TASKS])
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[trl_async_reward(label_column="label", name="tests_passed")],
        args=GRPOConfig(output_dir=args.output_dir, per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=256, max_steps=args.max_steps, logging_steps=1, log_completions=True,
                        report_to="none", **({"use_cpu": True, "bf16": False} if args.cpu else {})),
        train_dataset=dataset,
    )
    trainer.train()


if __name__ == "__main__":
    main()
