"""verl: `compute_score` for `custom_reward_function`.

verl loads a file by path and takes one function from it
(`reward.custom_reward_function.path` / `.name`; the classic
`custom_reward_function.*` keys are migrated to those), then calls it the way
its reward manager does. In verl 0.9.1 the trainer picks a manager of its
reward loop (`reward.reward_manager.name`):

- `naive`, `dapo`, `gdpo`, `rate_limited`: `compute_score(data_source=,
  solution_str=, ground_truth=, extra_info=)`, one sample per call, awaited
  when it is an `async def` (`compute_score_async`), else run in a thread pool;
- `remote`: the same call, synchronous only, in Ray actors (`compute_score`);
- any of them may add keywords (`reward_kwargs` from the config,
  `reward_router_address`), which are ignored here.

0.9.1 still ships the classic managers of `verl.workers.reward_manager`, which
its trainer no longer selects (its config accepts only the names above), for
code that builds them itself:

- `batch`: `compute_score(data_sources=, solution_strs=, ground_truths=,
  extra_infos=)`, a list of results for the whole batch
  (`compute_score_batch`);
- `prime`: `compute_score(data_source, solution_str, ground_truth,
  extra_info)`, positionally, in a process pool of forked workers that it
  terminates afterwards; it needs a number (`float(result)`, else
  `float(result[0])`), so our dict scored 0.0 everywhere: `compute_score_float`.
  Each worker makes a sandbox of its own, whose containers go with the
  worker, however it is ended (sandbox/pool.py).

A result is a dict with `"score"` (the reward) and extra keys that verl
gathers across samples into `reward_extra_info`: the reward loop takes the key
set from the first sample and indexes every other sample by it, so every
result has the same keys: `score`, `acc` (solved), `pass_rate`, `unscorable`,
`duration_s` (numbers, averaged in metrics) and `verdict` (a string: verl's
validation metrics skip string keys, and generation dumps keep them).

`ground_truth` is read as a rewardbox label (section 3 of the design), which
covers verl's own formats: a JSON string of `{"inputs", "outputs"}` (and
`"fn_name"`) for codecontests / apps / taco, a plain answer string for math.

verl needs a number: an unusable label scores 0.0 with `unscorable` = 1.0 and
a logged warning. For GRPO that is no penalty: every completion of a prompt
shares its label, so the whole group scores 0.0 and its advantage is zero.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardbox.adapters import default_reward, outcome_stats, score_async
from rewardbox.rewards.base import Reward, RewardOutput, Sample

__all__ = ["VerlReward", "compute_score", "compute_score_async", "compute_score_batch", "compute_score_float",
           "make_compute_score", "result"]

log = logging.getLogger(__name__)


class VerlReward:
    """verl's calling conventions over one `Reward` (default: the process's
    `CorrectnessReward`, made on the first call; in each forked worker of its
    own)."""

    def __init__(self, reward: Reward | None = None):
        self.reward = reward

    def compute_score(self, data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                      **kwargs: Any) -> dict[str, Any]:
        return result(self._reward().score(sample(data_source, solution_str, ground_truth, extra_info)))

    async def compute_score_async(self, data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                                  **kwargs: Any) -> dict[str, Any]:
        (output,) = await score_async(self._reward(), [sample(data_source, solution_str, ground_truth, extra_info)])
        return result(output)

    def compute_score_float(self, data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                            **kwargs: Any) -> float:
        """The reward alone, for managers that need a number (`prime`)."""
        score: float = self.compute_score(data_source, solution_str, ground_truth, extra_info)["score"]
        return score

    def compute_score_batch(self, data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                            extra_infos: Sequence[Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
        samples = [sample(*row) for row in zip(data_sources, solution_strs, ground_truths, infos, strict=True)]
        return [result(o) for o in self._reward().score_many(samples)]

    def _reward(self) -> Reward:
        return self.reward if self.reward is not None else default_reward()


def make_compute_score(reward: Reward | None = None) -> Callable[..., dict[str, Any]]:
    """A `compute_score` over `reward`, for a file verl loads:
    `compute_score = make_compute_score(MyReward())`. For the async reward loop,
    the batch or the prime manager use `VerlReward(reward).compute_score_async`
    / `.compute_score_batch` / `.compute_score_float`."""
    return VerlReward(reward).compute_score


_DEFAULT = VerlReward()


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, Any]:
    """One sample, with the default reward (`name: compute_score`)."""
    return _DEFAULT.compute_score(data_source, solution_str, ground_truth, extra_info)


async def compute_score_async(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                              **kwargs: Any) -> dict[str, Any]:
    """One sample, awaited by verl's reward loop; many run at once without a
    thread each (`name: compute_score_async`)."""
    return await _DEFAULT.compute_score_async(data_source, solution_str, ground_truth, extra_info)


def compute_score_batch(data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """A batch, scored in parallel, for the classic `batch` manager (`name: compute_score_batch`)."""
    return _DEFAULT.compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)


def compute_score_float(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                        **kwargs: Any) -> float:
    """One sample's reward as a number, for the classic `prime` manager
    (`name: compute_score_float`)."""
    return _DEFAULT.compute_score_float(data_source, solution_str, ground_truth, extra_info)


def sample(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None) -> Sample:
    """verl's arguments as a `Sample`: the response is the completion (verl
    decodes it without the prompt), `ground_truth` the label, `data_source` and
    `extra_info` the columns.

    >>> s = sample("apps", "print(1)", '{"inputs": ["\\\\n"], "outputs": ["1\\\\n"]}', {"index": 7, "split": "train"})
    >>> s.id, s.columns
    (7, {'data_source': 'apps', 'index': 7, 'split': 'train'})
    """
    info = plain(extra_info) if isinstance(extra_info, Mapping) else {}
    index = info.get("index")
    return Sample(id=index if isinstance(index, (str, int)) and not isinstance(index, bool) else None,
                  completion=solution_str, label=plain(ground_truth),
                  columns={"data_source": plain(data_source), **info})


def result(output: RewardOutput) -> dict[str, Any]:
    """A reward's output as verl's result dict; the same keys for every sample.

    >>> result(RewardOutput(reward=None, score=None, metadata={"error": "bad label"}))
    {'score': 0.0, 'acc': 0.0, 'pass_rate': 0.0, 'unscorable': 1.0, 'duration_s': 0.0, 'verdict': 'unscorable'}
    """
    if output.reward is None:
        log.warning("verl: scoring 0.0 for an unusable label: %s", output.metadata.get("error"))
    verdict = output.verdict.value if output.verdict is not None else None
    return {
        "score": float(output.reward) if output.reward is not None else 0.0,
        **outcome_stats(output),
        "duration_s": output.duration_s if output.duration_s is not None else 0.0,
        "verdict": verdict or ("unscorable" if output.reward is None else "unknown"),
    }


def plain(value: Any) -> Any:
    """`value` with numpy arrays and scalars (verl's non-tensor batch holds
    them) turned into lists and Python numbers, so labels parse as JSON would."""
    if isinstance(value, str):
        return str(value)  # numpy.str_ is a str, but not a plain one
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if not isinstance(value, bytes) and hasattr(value, "tolist"):
        return plain(value.tolist())
    return value
