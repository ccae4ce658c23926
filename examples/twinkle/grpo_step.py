"""One GRPO scoring step as in twinkle's cookbook, without twinkle: two
prompts, three sampled answers each, scored by rewardbox, then group advantages.

    python examples/twinkle/grpo_step.py

The math group runs anywhere; the code group needs a Docker engine and the
sandbox image (`make sandbox-image`).
"""

import json

from rewardbox.adapters.twinkle import TwinkleReward, grpo_advantage

NUM_GENERATIONS = 3

GROUPS = [
    ("For which x is x^2 - 5x + 6 <= 0? Put the interval in \\boxed{}.", "[2, 3]",
     ["x \\in \\boxed{[2, 3]}", "It is \\boxed{(2, 3)}.", "\\boxed{[2,3]}"]),
    ("Write add(a, b) in Python.", {"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]},
     ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a - b\n```", "I can't."]),
]


def main() -> None:
    trajectories = [
        {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
         # as twinkle's processors store them: a math answer raw, a label object JSON-encoded (its pack_value)
         "user_data": [("ground_truth", label if isinstance(label, str) else json.dumps(label))]}
        for prompt, label, answers in GROUPS for answer in answers
    ]
    rewards = TwinkleReward()(trajectories)
    advantages = grpo_advantage(rewards, num_generations=NUM_GENERATIONS, scale="group")
    for trajectory, reward, advantage in zip(trajectories, rewards, advantages, strict=True):
        answer = trajectory["messages"][-1]["content"].replace("\n", " ")[:40]
        print(f"reward {reward:+.2f}  advantage {advantage:+.2f}  {answer}")


if __name__ == "__main__":
    main()
