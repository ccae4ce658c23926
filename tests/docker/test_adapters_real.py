"""Every trainer adapter on the real reward (real containers, the real math
checker), called the way its trainer calls it; the numbers must equal the
reward's own for the same samples. The unit tier checks each interface's
shape in detail against fakes; this shows the parts fit."""

import asyncio
import json

import pytest

from rewardbox.adapters.agentfly import agentfly_async_reward
from rewardbox.adapters.flux import FluxReward
from rewardbox.adapters.trl import trl_async_reward, trl_reward
from rewardbox.adapters.twinkle import TwinkleReward
from rewardbox.adapters.verl import make_compute_score
from rewardbox.rewards import CorrectnessReward, Sample

ASSERTS = {"tests": ["assert f(1) == 2", "assert f(2) == 3", "assert f(5) == 0"]}
STDIO = json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]})
# (completion text, label): passed, 2 of 3, program I/O, math right, math wrong, syntax error.
ROWS = [
    ("```python\ndef f(x):\n    return 0 if x == 5 else x + 1\n```", ASSERTS),
    ("```python\ndef f(x):\n    return x + 1\n```", ASSERTS),
    ("```python\nprint(int(input()) * 2)\n```", STDIO),
    ("So the answer is \\boxed{1800}.", "1,800"),
    ("#### 41", "42"),
    ("```python\ndef f(x) return x\n```", ASSERTS),
]
EXPECTED = [1.0, 2 / 3, 1.0, 1.0, 0.0, -1.0]


@pytest.fixture(scope="module")
def reward(sandbox):
    r = CorrectnessReward(sandbox)
    yield r
    r.close()


def test_the_reward_itself(reward):
    outputs = reward.score_many(Sample(completion=c, label=label) for c, label in ROWS)

    assert [o.reward for o in outputs] == pytest.approx(EXPECTED)


def test_trl_sync_and_async_with_chat_completions_and_columns(reward):
    prompts = [[{"role": "user", "content": "Solve it."}]] * len(ROWS)
    completions = [[{"role": "assistant", "content": c}] for c, _ in ROWS]
    columns = {"label": [label for _, label in ROWS], "difficulty": ["easy"] * len(ROWS)}

    sync = trl_reward(reward)(prompts=prompts, completions=completions, completion_ids=[[1]] * len(ROWS),
                              trainer_state=None, **columns)
    run_async = trl_async_reward(reward)(prompts=prompts, completions=completions, completion_ids=[[1]] * len(ROWS),
                                         trainer_state=None, **columns)

    assert sync == pytest.approx(EXPECTED)
    assert asyncio.run(run_async) == pytest.approx(EXPECTED)


def test_verl_compute_score_with_its_four_arguments(reward):
    compute_score = make_compute_score(reward)

    results = [compute_score(data_source="mixed", solution_str=c, ground_truth=label, extra_info={"index": i})
               for i, (c, label) in enumerate(ROWS)]

    assert [r["score"] for r in results] == pytest.approx(EXPECTED)
    assert len({tuple(sorted(r)) for r in results}) == 1  # the same keys for every sample


def test_flux_twinkle_and_agentfly(reward):
    class Trajectory:  # flux's shape: prompt, response, metadata
        def __init__(self, response, label):
            self.prompt, self.response, self.metadata = "Solve it.", response, {"label": label}

    flux = FluxReward(reward)
    assert [flux.compute_reward(Trajectory(c, label)).reward for c, label in ROWS] == pytest.approx(EXPECTED)

    trajectories = [{"messages": [{"role": "user", "content": "Solve it."}, {"role": "assistant", "content": c}],
                     "user_data": []} for c, _ in ROWS]
    assert TwinkleReward(reward)(trajectories, [label for _, label in ROWS]) == pytest.approx(EXPECTED)

    agentfly = agentfly_async_reward(reward, name="code")

    async def all_rows():
        return await asyncio.gather(*(agentfly(final_response=c, label=label) for c, label in ROWS))

    results = asyncio.run(all_rows())
    assert [r["reward"] for r in results] == pytest.approx(EXPECTED)
    assert all(type(r["reward"]) is float for r in results)
