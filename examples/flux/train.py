"""flux with rewardbox as the reward function.

    # flux (github.com/Ivis4ml/flux) and rewardbox installed; a Docker engine and `make sandbox-image`
    python examples/flux/train.py tasks.jsonl

`tasks.jsonl` holds one task per line: {"prompt": ..., "label": ...}, the label
in any format rewardbox reads (see the main README).
"""

import json
import sys

from flux import FluxConfig, FluxTrainer

from rewardbox.adapters.flux import FluxReward


def main(path: str) -> None:
    with open(path, encoding="utf-8") as lines:
        tasks = [json.loads(line) for line in lines if line.strip()]
    # FluxTrainer keeps only the prompt strings (cut and stripped), so the labels are found by prompt.
    reward_function = FluxReward(labels={t["prompt"]: t["label"] for t in tasks}, clip=1.0)
    config = FluxConfig(model_path="Qwen/Qwen3-8B", output_dir="./outputs/rewardbox", num_steps=1000, batch_size=32)
    trainer = FluxTrainer(config, reward_function=reward_function)
    trainer.fit(prompts=[t["prompt"] for t in tasks])


if __name__ == "__main__":
    main(sys.argv[1])
