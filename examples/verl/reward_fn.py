"""The file verl loads: `reward.custom_reward_function.path=examples/verl/reward_fn.py`.

Pick the function with `reward.custom_reward_function.name` (verl 0.9.1):

    compute_score_async  the reward loop's naive, dapo, gdpo and rate_limited managers
                         await it; the samples of a reward worker run at once
    compute_score        any of them, and `remote` (synchronous only): one sample per call
    compute_score_batch  the classic BatchRewardManager, the whole batch in one call
    compute_score_float  the classic PrimeRewardManager, which needs a number

All four score with rewardbox's default `CorrectnessReward` (code labels in
the sandbox, math answers with math-verify). For other limits or another
reward, build your own: `compute_score = VerlReward(CorrectnessReward(limits=...)).compute_score`.
"""

from rewardbox.adapters.verl import compute_score, compute_score_async, compute_score_batch, compute_score_float

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "compute_score_float"]
