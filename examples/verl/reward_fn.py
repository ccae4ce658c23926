"""The file verl loads: `reward.custom_reward_function.path=examples/verl/reward_fn.py`.

Pick the function with `reward.custom_reward_function.name`:

    compute_score        naive / dapo managers, one sample per call
    compute_score_async  the reward loop awaits it; many samples run at once
    compute_score_batch  reward_manager=batch, the whole batch in one call

All three score with rewardbox's default `CorrectnessReward` (code labels in
the sandbox, math answers with math-verify). For other limits or another
reward, build your own: `compute_score = VerlReward(CorrectnessReward(limits=...)).compute_score`.
"""

from rewards.adapters.verl import compute_score, compute_score_async, compute_score_batch

__all__ = ["compute_score", "compute_score_async", "compute_score_batch"]
