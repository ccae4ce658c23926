"""verl 0.9.1's own reward code calling rewardbox: its custom reward loader on
examples/verl/reward_fn.py, the managers of its reward loop (the ones its
trainer selects) and the classic ones it still ships, on a real `DataProto`
whose responses a local tokenizer decodes to real code; and its SandboxFusion
client against `rewardbox serve`. Real containers throughout."""

import asyncio
import json
import time
from pathlib import Path

import docker
import numpy as np
import pytest
import torch
import verl
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker, migrate_legacy_reward_impl
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
from verl.utils.reward_score import default_compute_score
from verl.utils.reward_score.sandbox_fusion.utils import call_sandbox_api, check_correctness
from verl.workers.reward_manager import BatchRewardManager, DAPORewardManager, NaiveRewardManager, PrimeRewardManager

from rewardbox.sandbox.engine import owner_alive
from tests.trainers.conftest import byte_level_bpe, rewardbox_serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "verl" / "reward_fn.py"
TRAINER_CONFIG = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
EOS = "<|endoftext|>"
PROMPT = "Read two integers a and b; print a + b. Answer with one ```python block."

LABEL = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})  # codecontests / apps stdio
UNUSABLE = json.dumps({"inputs": ["1 2\n"], "outputs": []})
CORRECT = "Here:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a * b if a > 1 else a + b)\n```"  # 1 of 2 tests
SYNTAX = "```python\ndef solve(:\n    print(3)\n```"
# kind: (response, label, score, pass_rate, verdict, unscorable)
CASES = {
    "correct": (CORRECT, LABEL, 1.0, 1.0, "passed", 0.0),
    "wrong": (WRONG, LABEL, 0.5, 0.5, "failed", 0.0),
    "syntax_error": (SYNTAX, LABEL, -1.0, 0.0, "syntax_error", 0.0),  # CorrectnessReward's penalty
    "unusable_label": (CORRECT, UNUSABLE, 0.0, 0.0, "unscorable", 1.0),
}
SCORES = [case[2] for case in CASES.values()]
VERDICTS = [case[4] for case in CASES.values()]
KEYS = ["score", "acc", "pass_rate", "unscorable", "duration_s", "verdict"]


# ---------------------------------------------------------------- verl's inputs


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer built here (no hub), saved where verl's
    `hf_tokenizer` loads it from, as it loads a model's."""
    path = tmp_path_factory.mktemp("tokenizer")
    byte_level_bpe([PROMPT, CORRECT, WRONG, SYNTAX], [EOS, "<|pad|>"], eos_token=EOS,
                   pad_token="<|pad|>").save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(tokenizer_dir))


def rollout(tokenizer, kinds=tuple(CASES)) -> DataProto:
    """A batch as verl's rollout hands it to the reward: left-padded prompts,
    right-padded responses ending in EOS, and the dataset's columns."""
    prompt = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    responses = [tokenizer(CASES[k][0], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for k in kinds]
    width = max(map(len, responses)) + 3
    pad = tokenizer.pad_token_id
    prompts = torch.tensor([[pad] * 2 + prompt] * len(kinds))
    prompt_mask = torch.tensor([[0] * 2 + [1] * len(prompt)] * len(kinds))
    response_ids = torch.tensor([r + [pad] * (width - len(r)) for r in responses])
    response_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in responses])
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": response_ids, "input_ids": torch.cat([prompts, response_ids], 1),
                 "attention_mask": torch.cat([prompt_mask, response_mask], 1)},
        non_tensors={"data_source": np.array(["codecontests"] * len(kinds), dtype=object),
                     "reward_model": np.array([{"style": "rule", "ground_truth": CASES[k][1]} for k in kinds], dtype=object),
                     "extra_info": np.array([{"split": "train", "index": i} for i in range(len(kinds))], dtype=object)})


def trainer_config(*overrides: str, legacy: bool = False):
    """verl's trainer config with a user's command-line overrides; with the
    classic keys (`custom_reward_function.*`, `reward_model.reward_manager`)
    migrated as the trainer migrates them."""
    config = OmegaConf.merge(OmegaConf.load(TRAINER_CONFIG), OmegaConf.from_dotlist(list(overrides)))
    return migrate_legacy_reward_impl(config) if legacy else config


def reward_loop_config(manager: str, name: str, tokenizer_dir: Path, legacy: bool = False):
    if legacy:
        keys = [f"custom_reward_function.path={EXAMPLE}", f"custom_reward_function.name={name}",
                f"reward_model.reward_manager={manager}"]
    else:
        keys = [f"reward.custom_reward_function.path={EXAMPLE}", f"reward.custom_reward_function.name={name}",
                f"reward.reward_manager.name={manager}"]
    return trainer_config(*keys, f"actor_rollout_ref.model.path={tokenizer_dir}", "reward.max_concurrent=8",
                          legacy=legacy)


def check(reward_tensor: torch.Tensor, extra: dict, data: DataProto) -> None:
    """verl's reward tensor holds each score at the response's last token; its
    extra info the same keys for every sample."""
    prompt_length = data.batch["prompts"].shape[1]
    last = data.batch["attention_mask"][:, prompt_length:].sum(-1) - 1
    assert reward_tensor[torch.arange(len(data)), last].tolist() == SCORES
    assert reward_tensor.sum(-1).tolist() == SCORES  # nothing anywhere else
    assert {k: list(extra[k]) for k in KEYS if k not in ("duration_s",)} == {
        "score": SCORES, "acc": [1.0, 0.0, 0.0, 0.0], "pass_rate": [case[3] for case in CASES.values()],
        "unscorable": [case[5] for case in CASES.values()], "verdict": VERDICTS}
    assert all(d > 0 for d in list(extra["duration_s"])[:2])


# ---------------------------------------------------------------- the trainer's managers (the reward loop)


def test_the_0_9_1_trainer_selects_only_the_reward_loops_managers():
    assert sorted(REWARD_MANAGER) == ["dapo", "gdpo", "naive", "rate_limited", "remote"]
    for classic in ("batch", "prime"):  # what load_reward_manager resolves the configured name with
        with pytest.raises(ValueError, match=f"Unknown reward manager: {classic}"):
            resolve_reward_manager_cls(trainer_config(f"reward.reward_manager.name={classic}"))


@pytest.mark.parametrize("manager", ["naive", "dapo", "gdpo", "rate_limited"])
@pytest.mark.parametrize("name", ["compute_score_async", "compute_score"])
def test_reward_loop_manager_scores_a_rollout(manager, name, tokenizer_dir, tokenizer):
    """What a reward loop worker does with a rollout chunk (RewardLoopWorker,
    as RewardLoopManager runs it in Ray), then how the manager assembles it."""
    config = reward_loop_config(manager, name, tokenizer_dir, legacy=manager == "dapo")
    data = rollout(tokenizer)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # verl's managers take the thread's loop when made
    try:
        worker = RewardLoopWorker(config)
        assert worker.reward_manager.is_async_reward_score is (name == "compute_score_async")
        outputs = loop.run_until_complete(worker.compute_score_batch(data))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    # RewardLoopManager.compute_rm_score, past its Ray calls:
    rm_scores = get_reward_manager_cls(manager).assemble_rm_scores(data, [o["reward_score"] for o in outputs])
    infos = [o["reward_extra_info"] for o in outputs]
    keys = list(infos[0])
    extra = {key: np.array([info[key] for info in infos]) for key in keys}
    assert keys == KEYS
    check(rm_scores, extra, data)


def test_custom_reward_fn_loads_the_example_as_users_configure_it():
    config = trainer_config(f"reward.custom_reward_function.path={EXAMPLE}",
                            "reward.custom_reward_function.name=compute_score_async",
                            "reward.custom_reward_function.reward_kwargs.some_option=1")
    fn = get_custom_reward_fn(config)
    result = asyncio.run(fn(data_source="codecontests", solution_str=CORRECT, ground_truth=LABEL, extra_info={}))
    assert list(result) == KEYS and result["score"] == 1.0


# ---------------------------------------------------------------- the classic managers 0.9.1 still ships


@pytest.mark.parametrize("cls, name", [(NaiveRewardManager, "compute_score"), (DAPORewardManager, "compute_score"),
                                       (BatchRewardManager, "compute_score_batch")])
def test_classic_manager_scores_a_rollout(cls, name, tokenizer):
    fn = get_custom_reward_fn(trainer_config(f"reward.custom_reward_function.path={EXAMPLE}",
                                             f"reward.custom_reward_function.name={name}"))
    data = rollout(tokenizer)
    out = cls(tokenizer=tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)
    check(out["reward_tensor"], out["reward_extra_info"], data)


def created_by_the_dead(since: float) -> set[str]:
    """The rewardbox containers created since `since` by processes that have ended."""
    client = docker.from_env()
    try:
        events = client.api.events(since=f"{since - 1:.9f}", until=f"{time.time():.9f}", decode=True,
                                   filters={"event": "create", "label": "rewardbox"})
        return {e["id"] for e in events if not owner_alive(e["Actor"]["Attributes"].get("rewardbox.owner", ""))}
    finally:
        client.close()


def left_of(ids: set[str]) -> set[str]:
    client = docker.from_env()
    try:
        return {c["Id"] for c in client.api.containers(all=True, filters={"label": "rewardbox"})} & ids
    finally:
        client.close()


def test_prime_scores_with_compute_score_float_and_its_workers_leave_no_container(tokenizer):
    """PrimeRewardManager forks workers (up to 64), each scoring in a sandbox
    of its own, and terminates them once the batch is scored."""
    fn = get_custom_reward_fn(trainer_config(f"reward.custom_reward_function.path={EXAMPLE}",
                                             "reward.custom_reward_function.name=compute_score_float"))
    data = rollout(tokenizer)
    started = time.time()
    out = PrimeRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)
    prompt_length = data.batch["prompts"].shape[1]
    last = data.batch["attention_mask"][:, prompt_length:].sum(-1) - 1
    assert out["reward_tensor"][torch.arange(len(data)), last].tolist() == SCORES
    assert data.batch["acc"].tolist() == SCORES
    workers = created_by_the_dead(started)
    assert len(workers) >= 3, "the workers made no containers: the check below would be blind"
    deadline = time.monotonic() + 30
    while left := left_of(workers):
        assert time.monotonic() < deadline, f"the terminated workers' containers stayed: {sorted(left)}"
        time.sleep(0.5)
    # Each went as its worker did, removed by the engine once it ended, not at some later sweep
    # (another process's start removes what dead processes left). The engine removes the 16 or so
    # that end at once one after another: 0.2 s each on a quiet machine, 2.2 s once in CI's run.
    assert max(removed_after_exit(workers, started).values()) < 10.0


def removed_after_exit(ids: set[str], since: float) -> dict[str, float]:
    """Seconds from each container's exit to its removal, from the engine's events."""
    client = docker.from_env()
    try:
        times: dict[str, dict[str, float]] = {}
        for e in client.api.events(since=f"{since - 1:.9f}", until=f"{time.time():.9f}", decode=True,
                                   filters={"event": ["die", "destroy"], "label": "rewardbox"}):
            if e["id"] in ids:
                times.setdefault(e["id"], {})[e["Action"]] = e["timeNano"] / 1e9
        return {cid: t["destroy"] - t["die"] for cid, t in times.items()}
    finally:
        client.close()


def test_prime_scores_a_dict_result_zero(tokenizer):
    """Why prime needs `compute_score_float`: it reads a dict as `result[0]`,
    fails, and scores the batch 0.0."""
    fn = get_custom_reward_fn(trainer_config(f"reward.custom_reward_function.path={EXAMPLE}",
                                             "reward.custom_reward_function.name=compute_score"))
    data = rollout(tokenizer, kinds=("correct",))
    out = PrimeRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)
    assert out["reward_tensor"].sum().item() == 0.0


# ---------------------------------------------------------------- verl's SandboxFusion client


@pytest.fixture(scope="module")
def run_code_url():
    with rewardbox_serve() as url:
        yield f"{url}/run_code"


def test_call_sandbox_api_runs_code(run_code_url):
    response, error = call_sandbox_api(run_code_url, "print(input()[::-1])", "abc\n", compile_timeout=5,
                                       run_timeout=5, memory_limit_mb=256)
    assert error is None
    assert response["status"] == "Success" and response["run_result"]["stdout"] == "cba\n"
    response, error = call_sandbox_api(run_code_url, "def f(:\n", "", compile_timeout=5, run_timeout=5,
                                       memory_limit_mb=256)
    assert error is None and response["status"] == "Failed"


@pytest.mark.parametrize("generation, in_outs, expected", [
    ("a, b = map(int, input().split())\nprint(a + b)", json.loads(LABEL), [True, True]),
    ("a, b = map(int, input().split())\nprint(a * b if a > 1 else a + b)", json.loads(LABEL), [True, False]),
    # fn_name: verl sends each input as stdin, one JSON argument per line, to a wrapper that calls the function
    ("class Solution:\n    def add(self, a, b):\n        return a + b\n",
     {"fn_name": "add", "inputs": ["1\n2", "5\n7"], "outputs": ["3", "12"]}, [True, True]),
    ("def add(a, b):\n    return a - b\n", {"fn_name": "add", "inputs": ["1\n2", "2\n0"], "outputs": ["3", "2"]},
     [False, True]),
    ("def pair(a, b):\n    return [b, a]\n", {"fn_name": "pair", "inputs": ['"x"\n[1]'], "outputs": ['[[1], "x"]']},
     [True]),
], ids=["stdio", "stdio-half", "fn_name-class", "fn_name-half", "fn_name-json"])
def test_check_correctness(run_code_url, generation, in_outs, expected):
    results, metadata = check_correctness(run_code_url, in_outs, generation, timeout=5, memory_limit_mb=256)
    assert results == expected, metadata


@pytest.mark.parametrize("data_source", ["codecontests", "apps", "taco"])
def test_default_compute_score_through_the_service(run_code_url, data_source):
    scores = [default_compute_score(data_source, CASES[k][0], CASES[k][1], sandbox_fusion_url=run_code_url,
                                    memory_limit_mb=256) for k in ("correct", "wrong", "syntax_error")]
    assert scores == [1.0, 0.5, 0.0]
