"""OpenRLHF's own released code calling `examples/openrlhf/*.py` and `rewardbox serve`.

Each release runs in a process of its own (this module run as a script, with
the release first on its path and the GPU-only stubs behind it), as far into
the trainer as a machine without a GPU allows:

- 0.9.1 and later: `SamplesGenerator._generate_vllm`, the rollout loop with
  dynamic filtering, over Ray object refs; the rollout actor is stood in for
  (it owns vLLM) by `_Rollout`, which builds the executor as
  `RolloutRayActor.__init__` does (`SingleTurnAgentExecutor(remote_rm_url)`, or
  `_load_agent_executor(path)`) and runs it as `generate_responses` does. The
  executors call the reward file (one sample per call, from threads), the HTTP
  client or the agent; `_process_response_into_experience` makes the
  experiences whose rewards and scores we check.
- 0.8.11 and 0.9.0: the `RemoteRewardModel` Ray actor (the reward file in Ray
  tasks, one micro-batch each; or the HTTP client), then
  `update_samples_with_rewards`; the agent through `AgentExecutorBase.execute`,
  its instances Ray actors.

Only the LLM is faked (`_LLM`: canned completions, tokenized by a real
byte-level BPE tokenizer built here). The completions have known outcomes: a
correct solution (reward 1.0, score 1.0), one passing 1 of 2 tests (0.5,
0.75) and a syntax error (-1.0, 0.0).
"""

import asyncio
import json
import os
import subprocess
import sys
import traceback
import uuid
from pathlib import Path
from types import SimpleNamespace

import docker
import docker.errors
import pytest

from rewardbox.adapters.openrlhf_agent import CodingEpisode
from tests.trainers.conftest import byte_level_bpe, release_env, rewardbox_serve

ROOT = Path(__file__).resolve().parents[2]
REWARD_FILE = ROOT / "examples" / "openrlhf" / "reward_func.py"
AGENT_FILE = ROOT / "examples" / "openrlhf" / "agent_func.py"

NEWEST, OLDEST = "0.11.2", "0.8.11"
SCORES_OR_REWARDS = ("0.9.10", "0.10.0")  # read `scores or rewards` (0.9.1-0.10.0)
BATCHED = ("0.9.0", OLDEST)  # reward_func gets micro-batches in Ray tasks (up to 0.9.0)

PROMPT = "<|im_start|>user\nWrite add(a, b) in Python.<|im_end|>\n<|im_start|>assistant\n"
LABEL = json.dumps({"tests": ["assert add(2, 3) == 5", "assert add(0, 0) == 0"]})
EOS = "<|im_end|>"
CORRECT = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return a * b\n```"  # add(0, 0) passes, add(2, 3) does not
SYNTAX = "```python\ndef add(a, b)\n    return a + b\n```"
OUTCOME = {CORRECT: (1.0, 1.0), HALF: (0.5, 0.75), SYNTAX: (-1.0, 0.0)}  # (reward, score)

# Three prompts (the same task; distinct text so the LLM can tell them apart) and the
# completions sampled for each, a group of three. Dynamic filtering keeps a group
# whose mean score lies strictly inside (0, 1): A (1/3) and B (7/12); C (5/6) is the
# replacement it draws for a group it drops. Read as `scores or rewards`, A's mean
# is -1/3: A is dropped and C drawn.
GROUPS = {
    "A: " + PROMPT: [CORRECT, SYNTAX, SYNTAX],
    "B: " + PROMPT: [CORRECT, HALF, SYNTAX],
    "C: " + PROMPT: [CORRECT, HALF, HALF],
}
FIRST_BATCH, REPLACEMENTS = ["A: " + PROMPT, "B: " + PROMPT], ["C: " + PROMPT]

# Agent episodes: the completions of successive attempts.
EPISODES = {
    "fixed: " + PROMPT: [HALF, CORRECT],
    "stuck: " + PROMPT: [SYNTAX, SYNTAX, SYNTAX],
}

# Concurrent episodes (OpenRLHF runs every sample of every prompt at once): each prompt twice,
# as GRPO samples it, with the same script, so both must end alike. (steps, reward, score)
CONCURRENT = {
    "fixed: " + PROMPT: [HALF, CORRECT],
    "stuck: " + PROMPT: [SYNTAX, SYNTAX, SYNTAX],
    "first: " + PROMPT: [CORRECT],
}
CONCURRENT_OUTCOME = {"fixed": (2, 1.0, 1.0), "stuck": (3, -1.0, 0.0), "first": (1, 1.0, 1.0)}
SHARED_INSTANCE = "0.9.1"  # MultiTurnAgentExecutor builds one agent instance for all episodes (0.9.1.post1 fixed it)

# The default sandbox mode (pooled), as users run it: Ray kills the agent actors (0.8.11, 0.9.0: one
# per episode) and, at shutdown, the workers that hold a pool; its containers go with them.
SANDBOX_ENV = {"REWARDBOX_WORKERS": "2", "REWARDBOX_TIMEOUT_S": "20", "REWARDBOX_MAX_STEPS": "3",
               "RAY_AUTH_MODE": "disabled"}


# What each test drives: (release, scenario, the URLs it is given). Each release's runs are made in ONE
# process, the first time a test asks for one of them: importing the trainer and starting Ray take about
# 16 s a process on this 2-core machine, once a release instead of once a test. The adapter's reward
# is then one for the process across its runs, as in a trainer's rollout actor.
RUNS: dict[str, tuple[str, str, str]] = {
    **{f"reward_file@{v}": (v, "reward_file", "") for v in (NEWEST, "0.10.1", *SCORES_OR_REWARDS, *BATCHED)},
    f"http-rotating@{NEWEST}": (NEWEST, "http", "rotating"),
    **{f"http@{v}": (v, "http", "/get_reward") for v in (*SCORES_OR_REWARDS, "0.9.0", OLDEST)},
    f"http-no-extra-logs@{OLDEST}": (OLDEST, "http", "/get_reward?extra_logs=false"),
    **{f"agent@{v}": (v, "agent", "") for v in (NEWEST, "0.9.10", OLDEST)},
    **{f"agent_concurrent@{v}": (v, "agent_concurrent", "") for v in (NEWEST, SHARED_INSTANCE)},
}
RECORDED = ("agent", "agent_concurrent")  # scenarios whose agent steps are written (RecordingEpisode)


class Releases:
    """The results of RUNS, each release's runs made together in a process of
    its own (this module run as a script, the release first on its path) when
    a test first asks for one; a run that raised fails its own test only."""

    def __init__(self, base_url: str, records: Path):
        port = base_url.rsplit(":", 1)[1]
        self.rotating_urls = [f"{base_url}/get_reward", f"http://localhost:{port}/get_reward"]
        self.base_url, self.records = base_url, records
        self.results: dict[str, dict[str, dict]] = {}

    def urls(self, key: str) -> list[str]:
        spec = RUNS[key][2]
        return self.rotating_urls if spec == "rotating" else [self.base_url + spec] if spec else []

    def record(self, key: str) -> Path:
        """Where the run's agent steps were written."""
        return self.records / f"{key}.jsonl"

    def run(self, key: str) -> dict:
        version = RUNS[key][0]
        if version not in self.results:
            try:
                self.results[version] = self._drive(version)
            except (AssertionError, subprocess.TimeoutExpired) as exc:  # every run of the release fails with it
                self.results[version] = {k: {"error": str(exc)} for k, run in RUNS.items() if run[0] == version}
        result = self.results[version][key]
        if "error" in result:
            raise AssertionError(f"{key}: {result['error']}")
        assert result["version"] == version, f"imported openrlhf {result['version']}, not {version}"
        return result

    def _drive(self, version: str) -> dict[str, dict]:
        plan = [{"key": key, "scenario": scenario, "urls": self.urls(key),
                 "record": str(self.record(key)) if scenario in RECORDED else None}
                for key, (release, scenario, _) in RUNS.items() if release == version]
        # Ray's workers take the driver's environment at its start: an agent in Ray actors (up to
        # 0.9.0, one agent run a release) writes where the variable says when the process starts.
        first_record = next((run["record"] for run in plan if run["record"]), None)
        env = release_env("openrlhf", version, stubs=True, **SANDBOX_ENV,
                          **({RECORD_ENV: first_record} if first_record else {}))
        done = subprocess.run([sys.executable, "-m", "tests.trainers.test_real_openrlhf", json.dumps(plan)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300 * len(plan))
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            raise AssertionError(f"openrlhf {version}'s runs exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
        return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def releases(serve_url, tmp_path_factory) -> Releases:
    return Releases(serve_url, tmp_path_factory.mktemp("openrlhf-steps"))


def _rows(result: dict) -> list[tuple[str, str, float, float]]:
    return sorted((s["prompt"][:1], s["completion"], s["reward"], s["score"]) for s in result["samples"])


def _expected(prompts: list[str]) -> list[tuple[str, str, float, float]]:
    return sorted((p[:1], c, *OUTCOME[c]) for p in prompts for c in GROUPS[p])


# -- (a) the reward file ------------------------------------------------------------------------

@pytest.mark.parametrize("version", [NEWEST, "0.10.1", *SCORES_OR_REWARDS])
def test_reward_file_scores_and_dynamic_filtering(releases, version):
    """One sample per reward_func call, from threads; the group means dynamic
    filtering compares are the scores'. On 0.9.1-0.10.0 (`scores or rewards`)
    a 0.0 score used to become the reward (-1.0 here): group A was dropped."""
    result = releases.run(f"reward_file@{version}")
    assert result["accepted"] == ["A", "B"]
    assert result["calls"] == {"count": 6, "max_queries": 1}  # 2 groups of 3, one sample each
    assert result["prompts_consumed"] == 2
    assert _rows(result) == _expected(FIRST_BATCH)
    for sample in result["samples"]:
        assert sample["info_score"] == sample["score"] and sample["info_reward"] == sample["reward"]
        assert sample["pass_rate"] == float(sample["completion"] == CORRECT)
        assert sample["crash_rate"] == float(sample["completion"] == SYNTAX)


@pytest.mark.parametrize("version", BATCHED)
def test_reward_file_micro_batches_in_ray_tasks(releases, version):
    """Up to 0.9.0: one Ray task per micro-batch (2 here), then
    `update_samples_with_rewards` splits the results back."""
    result = releases.run(f"reward_file@{version}")
    assert result["calls"] == {"count": 2, "max_queries": 2}
    assert _rows(result) == _expected(["A: " + PROMPT])
    assert [s["completion"] for s in result["samples"]] == GROUPS["A: " + PROMPT]  # order kept


# -- (b) the HTTP client against `rewardbox serve` ------------------------------------------------

@pytest.fixture(scope="module")
def serve_url():
    with rewardbox_serve("--workers", "2", "--timeout-s", "20", env=release_env("openrlhf", NEWEST, **SANDBOX_ENV)) as url:
        yield url


def test_http_client_rotates_between_urls(releases):
    """0.11.2 sends each rollout's request to the next URL in turn; both answer
    (the same server under two names), with the scores kept as they are."""
    urls = releases.urls(f"http-rotating@{NEWEST}")
    result = releases.run(f"http-rotating@{NEWEST}")
    assert result["accepted"] == ["A", "B"]
    assert _rows(result) == _expected(FIRST_BATCH)
    assert result["urls_used"] == urls
    assert result["url_counts"] == [3, 3]  # in turn: 6 requests, one sample each


@pytest.mark.parametrize("version", SCORES_OR_REWARDS)
def test_http_client_older_single_turn(releases, version):
    """0.9.1-0.10.0 read `scores or rewards` over HTTP too; a JSON list `[0.0]`
    is true, so the score stands."""
    result = releases.run(f"http@{version}")
    assert result["accepted"] == ["A", "B"]
    assert _rows(result) == _expected(FIRST_BATCH)


@pytest.mark.parametrize(("key", "query"), [("http@0.9.0", ""), (f"http-no-extra-logs@{OLDEST}", "?extra_logs=false")])
def test_http_client_batched(releases, key, query):
    """Up to 0.9.0: `remote_rm_fn_ray` in a Ray task, one request per URL for
    the batch, then `update_samples_with_rewards`. 0.8.11 passes the URL to
    `requests.post` as given and reads `extra_logs` only when present, so
    `?extra_logs=false` leaves them out and the rewards and scores through."""
    result = releases.run(key)
    assert result["received"] == [list(OUTCOME[c]) for c in GROUPS["A: " + PROMPT]]
    assert result["calls"] == {"count": 1, "max_queries": 3}
    assert "update_error" not in result
    assert _rows(result) == _expected(["A: " + PROMPT])
    assert [s.get("pass_rate") for s in result["samples"]] == ([None] * 3 if query else [1.0, 0.0, 0.0])


def test_http_client_oldest_cannot_take_extra_logs(releases):
    """Without the query, 0.8.11 fails: it `torch.cat`s the answer's extra_logs,
    JSON lists (OpenRLHF's own serve_rm sends them too; 0.9.0 added `torch.as_tensor`)."""
    result = releases.run(f"http@{OLDEST}")
    assert result["received"] == [list(OUTCOME[c]) for c in GROUPS["A: " + PROMPT]]
    assert "expected Tensor" in result["update_error"]


# -- (c) the agent --------------------------------------------------------------------------------

RECORD_ENV = "REWARDBOX_TEST_AGENT_STEPS"  # this module's own: where RecordingEpisode writes


def _code(answer: str) -> str:
    return answer.removeprefix("```python\n").removesuffix("```")


def _steps(record: Path) -> dict[str, list[dict]]:
    """The recorded steps of each episode, in order."""
    episodes: dict[str, list[dict]] = {}
    for line in record.read_text().splitlines():
        step = json.loads(line)
        episodes.setdefault(step["episode"], []).append(step)
    return {tag: sorted(steps, key=lambda s: s["step"]) for tag, steps in episodes.items()}


def _check_one_container_each(episodes: dict[str, list[dict]], scripts: dict[str, list[str]]) -> None:
    """Every step of an episode ran in the same session's container, which held
    the previous step's solution.py when the next step came (state kept, not
    a fresh container per step); the episode closed it at its end; a container
    of its own per episode; none is left."""
    containers = set()
    for steps in episodes.values():
        script = scripts[next(p for p in scripts if p.startswith(steps[0]["prompt"]))]
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
        assert len({s["container"] for s in steps}) == 1 and steps[0]["container"], steps
        assert steps[0]["before"] is None  # no session before the first step
        for previous, step in zip(steps, steps[1:]):
            assert step["before"] == _code(script[previous["step"] - 1]), step
        assert [s["open_after"] for s in steps] == [True] * (len(steps) - 1) + [False]
        containers.add(steps[0]["container"])
    assert len(containers) == len(episodes)
    client = docker.from_env()
    try:
        for container in containers:
            with pytest.raises(docker.errors.NotFound):
                client.containers.get(container)
    finally:
        client.close()


@pytest.mark.parametrize("version", [NEWEST, "0.9.10", OLDEST])
def test_agent_episodes(releases, version):
    """A half-right answer, the failing test fed back as a user turn, then the
    fix: reward 1.0 in all (the steps' deltas add up), score 1.0. Three syntax
    errors: reward -1.0, score 0.0, the episode ends at REWARDBOX_MAX_STEPS.
    Each episode's steps ran in one session's container, removed at its end."""
    result = releases.run(f"agent@{version}")
    _check_one_container_each(_steps(releases.record(f"agent@{version}")), EPISODES)
    episodes = {e["prompt"].split(":")[0]: e for e in result["episodes"]}
    fixed, stuck = episodes["fixed"], episodes["stuck"]
    assert (fixed["reward"], fixed["score"], fixed["steps"]) == (1.0, 1.0, 2)
    assert (stuck["reward"], stuck["score"], stuck["steps"]) == (-1.0, 0.0, 3)
    # What the model read before its second attempt: the test it failed, in a chatml user turn.
    second = fixed["contexts"][1]
    assert second.startswith("fixed: " + PROMPT + HALF)
    assert "<|im_start|>user\nYour code passed 1 of 2 tests." in second and "add(2, 3)" in second
    assert second.endswith("<|im_start|>assistant\n")
    assert "syntax error" in stuck["contexts"][1]
    if "experience" in fixed:  # 0.9.1 and later: what the trainer keeps
        assert fixed["experience"] == {"reward": 1.0, "score": 1.0}
        assert stuck["experience"] == {"reward": -1.0, "score": 0.0}


@pytest.mark.parametrize("version", [NEWEST, SHARED_INSTANCE])
def test_concurrent_agent_episodes_keep_their_own_state(releases, version):
    """Six episodes at once through the release's own `MultiTurnAgentExecutor.execute`
    (loaded by its `_load_agent_executor`), their steps interleaved, two per prompt.
    0.9.1 runs them all on ONE agent instance: steps, prompt and reward paid so far
    mixed (wrong rewards, episodes cut short) until the agent file gave each its own.
    Each has a session of its own (six containers), all gone at the end."""
    result = releases.run(f"agent_concurrent@{version}")
    episodes = _steps(releases.record(f"agent_concurrent@{version}"))
    assert len(episodes) == 6
    _check_one_container_each(episodes, CONCURRENT)
    got = sorted((e["prompt"].split(":")[0], e["steps"], e["reward"], e["score"]) for e in result["episodes"])
    assert got == sorted((name, *outcome) for name, outcome in CONCURRENT_OUTCOME.items() for _ in range(2))
    assert result["shared_instance"] == (version == SHARED_INSTANCE)


@pytest.fixture
def session_box(monkeypatch):
    """A sandbox whose sessions the episodes open (the adapters' process sandbox, restored after)."""
    from rewardbox.adapters import session_tools
    from rewardbox.sandbox import Sandbox

    box = Sandbox(max_containers=2, retry_s=20, sweep=False)
    monkeypatch.setattr(session_tools, "_shared", None)
    session_tools.configure(box)
    yield box
    box.close()


def test_episode_grades_as_single_samples_and_outlives_a_lost_container(session_box):
    """CodingEpisode's steps against grading each answer alone with the same
    reward, a mix whose format part reads the whole answer (prose, two code
    blocks): the same reward and score every step. Its session's container
    removed from outside between steps: the next step opens another and goes
    on; the last one closed at the end."""
    from rewardbox.adapters.openrlhf import OpenRLHFReward
    from rewardbox.rewards.base import Sample
    from rewardbox.rewards.registry import configured_registry

    reward = configured_registry(sandbox=session_box).resolve("correctness=0.9,format_one_code_block=0.1")
    episode = CodingEpisode(OpenRLHFReward(reward), max_steps=3)
    answers = ["Try this:\n" + HALF + "\nand a check:\n```python\ndef add(a, b):\n    return a * b\n```",
               SYNTAX + " (it should work)", "Fixed:\n" + CORRECT]
    episode.reset({"observation": PROMPT, "label": LABEL})
    client = docker.from_env()
    containers, got, alone = [], [], []
    try:
        for answer in answers:
            out = episode.step({"action_text": answer, "label": LABEL})
            containers.append(episode._session.container_id if episode.session else None)
            got.append((episode._paid, round(out["scores"].item(), 6)))  # scores are float32
            single = reward.score(Sample(completion=answer, label=LABEL, prompt=PROMPT))
            alone.append((single.reward, round(single.score, 6)))
            if len(containers) == 1:
                client.containers.get(containers[0]).remove(force=True)  # as an idle limit or a crash would
        assert got == alone
        assert alone[0][0] == pytest.approx(0.9 * 0.5) and alone[2][0] == pytest.approx(1.0)  # format: 0, then 1
        assert containers[1] is not None and containers[1] != containers[0]
        assert containers[2] is None and out["done"]  # closed at the end
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(containers[1])
    finally:
        episode.close()
        client.close()


def test_an_episode_dropped_mid_way_leaves_no_container(session_box):
    """OpenRLHF can stop an episode without a last step (its context length
    spent): the instance is dropped with its session open, and the container
    goes when the episode is collected (the session's idle limit otherwise)."""
    import gc

    from rewardbox.adapters.openrlhf import OpenRLHFReward
    from rewardbox.rewards.correctness import CorrectnessReward

    episode = CodingEpisode(OpenRLHFReward(CorrectnessReward(session_box)), max_steps=3)
    episode.reset({"observation": PROMPT, "label": LABEL})
    assert not episode.step({"action_text": HALF, "label": LABEL})["done"]
    container = episode.session.container_id
    client = docker.from_env()
    try:
        assert client.containers.get(container).status == "running"
        del episode
        gc.collect()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container)
    finally:
        client.close()


# ================================================================================================
# The driver: runs inside the process whose path holds the OpenRLHF release under test.
# ================================================================================================

class RecordingEpisode(CodingEpisode):
    """`CodingEpisode` writing, after each step, a JSON line to RECORD_ENV's
    file: the episode, the step, the container its session ran in, what the
    session's solution.py held before the step, and whether the session is
    still open after it. The agent file takes it in place of CodingEpisode
    (in 0.8.11 and 0.9.0, inside each episode's Ray actor)."""

    def reset(self, states):
        self.tag, self.container = uuid.uuid4().hex, None
        return super().reset(states)

    def step(self, states):
        session = self.session
        before = session.read_file("solution.py") if session is not None else None
        out = super().step(states)
        line = {"episode": self.tag, "prompt": (self._prompt or "").split(":")[0], "step": self.steps,
                "container": self.container, "before": before, "open_after": self.session is not None}
        with open(os.environ[RECORD_ENV], "a") as record:
            record.write(json.dumps(line) + "\n")
        return out

    def _open(self):
        session = super()._open()
        self.container = session.container_id
        return session


def _record_steps() -> None:
    """The agent file imports CodingEpisode from here when it loads (by path, after this)."""
    if os.environ.get(RECORD_ENV):
        import rewardbox.adapters.openrlhf as adapter

        adapter.CodingEpisode = RecordingEpisode

def _tokenizer():
    """chatml's special tokens, trained on this file's texts."""
    return byte_level_bpe([PROMPT, CORRECT, HALF, SYNTAX], [EOS, "<|im_start|>"], eos_token=EOS)


class _LLM:
    """Stands in for vLLM: the next canned completion for the prompt the context
    starts with. As vLLM does, the token ids end with EOS and the text does not."""

    def __init__(self, tokenizer, script: dict[str, list[str]]):
        self.tokenizer = tokenizer
        self.left = {prompt: list(completions) for prompt, completions in script.items()}
        self.contexts: dict[str, list[str]] = {prompt: [] for prompt in script}

    def _next(self, token_ids) -> SimpleNamespace:
        context = self.tokenizer.decode(token_ids, skip_special_tokens=False)
        prompt = next(p for p in self.left if context.startswith(p))
        self.contexts[prompt].append(context)
        text = self.left[prompt].pop(0)
        ids = self.tokenizer(text + EOS, add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])

    def generate(self, prompt, sampling_params, request_id=None, multi_modal_data=None):
        if isinstance(prompt, dict):  # up to 0.9.0: vLLM's AsyncLLMEngine.generate, a stream
            return self._stream(prompt["prompt_token_ids"])
        return self._once(prompt)  # 0.9.1 and later: the rollout actor's generate(token_ids, params)

    async def _once(self, token_ids):
        return self._next(token_ids)

    async def _stream(self, token_ids):
        yield self._next(token_ids)


class _ScriptedLLM(_LLM):
    """The k-th completion of the prompt's script for the k-th attempt (read from
    the context, so identical prompts run alike in any order), answered after an
    uneven number of turns of the event loop, so concurrent episodes interleave."""

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        context = self.tokenizer.decode(prompt_token_ids, skip_special_tokens=False)
        for _ in range(len(context) % 4):
            await asyncio.sleep(0)
        prompt = next(p for p in self.left if context.startswith(p))
        self.contexts[prompt].append(context)
        text = self.left[prompt][context[len(prompt):].count("<|im_start|>assistant")]
        ids = self.tokenizer(text + EOS, add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])


def _agent_concurrent(tokenizer) -> dict:
    """0.9.1 and later: the rollout actor's executor (`_load_agent_executor`), every
    sample of every prompt at once, as the actor's concurrent `generate_responses` run them."""
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
    from vllm import SamplingParams

    executor = _load_agent_executor(str(AGENT_FILE))
    llm = _ScriptedLLM(tokenizer, CONCURRENT)

    async def run():
        episodes = []
        for prompt in CONCURRENT:
            params = SamplingParams(max_tokens=1024, logprobs=None)  # one per prompt, as generate_responses gets it
            episodes += [executor.execute(prompt=prompt, label=LABEL, sampling_params=params, max_length=2048,
                                          hf_tokenizer=tokenizer, llm_engine=llm) for _ in range(2)]
        return await asyncio.gather(*episodes)

    outputs = asyncio.run(run())
    return {"shared_instance": hasattr(executor, "agent_instance"),
            "episodes": [{"prompt": o["prompt"], "reward": round(float(o["reward"]), 6), "score": float(o["scores"]),
                          "steps": len(o["action_ranges"])} for o in outputs]}


class _Rollout:
    """Stands in for `RolloutRayActor` (it owns vLLM): its executor built as its
    `__init__` builds it, run as its `generate_responses` runs it."""

    def __init__(self, llm: _LLM, agent_func_path: str | None = None, remote_rm_url=None):
        from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        self.llm = llm
        self.executor = _load_agent_executor(agent_func_path) if agent_func_path else SingleTurnAgentExecutor(remote_rm_url)
        self.get_num_unfinished_requests = SimpleNamespace(remote=lambda: _ray().put(0))
        self.generate_responses = SimpleNamespace(remote=self._generate_responses)

    def _generate_responses(self, prompt, label, sampling_params, max_length, hf_tokenizer, num_samples=1, **kwargs):
        async def run():
            return await asyncio.gather(*[
                self.executor.execute(prompt=prompt, label=label, sampling_params=sampling_params,
                                      max_length=max_length, hf_tokenizer=hf_tokenizer, llm_engine=self, **kwargs)
                for _ in range(num_samples)])
        return _ray().put(asyncio.run(run()))

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        return await self.llm.generate(prompt_token_ids, sampling_params)


def _ray():
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def _count_calls(module_attr: tuple[object, str], calls: dict) -> None:
    """Count reward_func's calls and their sizes (wrapping the adapter's entry point)."""
    owner, name = module_attr
    inner = getattr(owner, name)

    def counted(queries, *args, **kwargs):
        calls["count"] += 1
        calls["max_queries"] = max(calls["max_queries"], len(queries))
        return inner(queries, *args, **kwargs)
    setattr(owner, name, counted)


def _generate_vllm(llm: _LLM, tokenizer, dynamic_filtering: bool, n_samples: int = 3, **executor) -> dict:
    """0.9.1 and later: the trainer's rollout loop over the groups."""
    import inspect

    from openrlhf.trainer.ppo_utils import samples_generator

    generator = object.__new__(samples_generator.SamplesGenerator)
    range_ = (0.0, 1.0)  # OpenRLHF's default range
    generator.args = SimpleNamespace(
        dynamic_filtering_reward_range=range_, enable_vllm_is_correction=False, n_samples_per_prompt=3,
        algo=SimpleNamespace(dynamic_filtering_range=range_, advantage=SimpleNamespace(is_correction_level="off")),
        rollout=SimpleNamespace(n_samples_per_prompt=3))
    generator.tokenizer = tokenizer
    generator.vllm_engines = [_Rollout(llm, **executor)]
    with_images = "batch_images" in inspect.getsource(samples_generator._collect_prompt_batch)
    batches = [FIRST_BATCH, REPLACEMENTS] if dynamic_filtering else [list(llm.left)]

    def loader():
        for index, prompts in enumerate(batches):
            labels = [LABEL] * len(prompts)
            yield (index, prompts, labels, [None] * len(prompts)) if with_images else (index, prompts, labels)

    experiences, consumed, _ = generator._generate_vllm(loader(), num_prompts=len(batches[0]),
                                                        dynamic_filtering=dynamic_filtering, max_len=2048,
                                                        max_new_tokens=1024, n_samples_per_prompt=n_samples)
    samples = []
    for experience in experiences:
        prompt = experience.prompts[0]
        completion = tokenizer.decode(experience.sequences[0][experience.action_mask[0].nonzero()[0, 0] + 1:])
        samples.append({"prompt": prompt, "completion": completion.removesuffix(EOS),
                        "reward": experience.rewards.flatten()[0].item(),
                        # what the filter reads: e.scores[0].item()
                        "score": experience.scores[0].item(),
                        "info_reward": experience.info["reward"].flatten()[0].item(),
                        "info_score": experience.info["score"].flatten()[0].item(),
                        **{key: experience.info[key].flatten()[0].item()
                           for key in ("pass_rate", "crash_rate") if key in experience.info}})
    return {"samples": samples, "prompts_consumed": consumed,
            "accepted": sorted({s["prompt"][:1] for s in samples})}


def _remote_reward_model(remote_rm_url, tokenizer) -> dict:
    """Up to 0.9.0: `RemoteRewardModel.get_rewards` (Ray), then `update_samples_with_rewards`."""
    import torch
    from openrlhf.trainer.ppo_utils.experience_maker import Experience, update_samples_with_rewards
    from openrlhf.utils.remote_rm_utils import RemoteRewardModel

    ray = _ray()
    prompt = "A: " + PROMPT
    completions = GROUPS[prompt]
    queries = [prompt + c + EOS for c in completions]
    model = RemoteRewardModel.remote(SimpleNamespace(micro_rollout_batch_size=2), remote_rm_url)
    rewards_info = ray.get(model.get_rewards.remote(queries, [prompt] * 3, [LABEL] * 3))
    # The experience maker's micro-batches: the first two samples, then the third (an empty
    # info would become a list: `info or []`; the generator always sets some lengths).
    samples_list = [Experience(sequences=torch.zeros(n, 4, dtype=torch.long), info={"total_length": torch.full((n,), 4.0)})
                    for n in (2, 1)]
    calls = {"count": len(rewards_info), "max_queries": max(len(i["rewards"]) for i in rewards_info)}
    received = [(float(r), float(s)) for info in rewards_info for r, s in zip(info["rewards"], info["scores"])]
    try:
        update_samples_with_rewards(rewards_info, samples_list)
    except TypeError as exc:  # JSON lists in extra_logs: torch.cat wants tensors
        return {"calls": calls, "received": received, "update_error": str(exc)}
    rows = [(r, s) for batch in samples_list for r, s in zip(batch.rewards.tolist(), batch.scores.tolist())]
    # extra_logs, when the answer holds them
    logs = [{k: batch.info[k][i].item() for k in ("pass_rate",) if k in batch.info}
            for batch in samples_list for i in range(len(batch.sequences))]
    return {"calls": calls, "received": received,
            "samples": [{"prompt": prompt, "completion": c, "reward": r, "score": s, **log}
                        for c, (r, s), log in zip(completions, rows, logs)]}


def _agent_oldest(tokenizer) -> dict:
    """Up to 0.9.0: the executor the rollout actor builds from the file (as
    `LLMRayActorAsync.add_requests` does), each episode's instance a Ray actor."""
    import importlib.util

    from vllm import SamplingParams

    _ray()
    spec = importlib.util.spec_from_file_location("agent_module", str(AGENT_FILE))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    llm = _LLM(tokenizer, EPISODES)

    async def run():
        queue = asyncio.Queue()
        executor = module.AgentExecutor(max_steps=5, max_length=2048, llm_engine=llm, hf_tokenizer=tokenizer,
                                        result_queue=queue)
        await asyncio.gather(*[executor.execute(prompt, LABEL, SamplingParams(logprobs=None)) for prompt in EPISODES])
        return [queue.get_nowait() for _ in EPISODES]

    outputs = asyncio.run(run())
    return {"episodes": [{"prompt": o["prompt"], "reward": float(o["reward"]), "score": float(o["scores"]),
                          "steps": len(o["action_ranges"]), "contexts": llm.contexts[o["prompt"]]}
                         for o in outputs]}


def _agent(tokenizer) -> dict:
    llm = _LLM(tokenizer, EPISODES)
    result = _generate_vllm(llm, tokenizer, dynamic_filtering=False, n_samples=1, agent_func_path=str(AGENT_FILE))
    episodes = []
    for sample in result["samples"]:
        prompt = sample["prompt"]
        episodes.append({"prompt": prompt, "reward": sample["reward"], "score": sample["score"],
                         "steps": len(llm.contexts[prompt]), "contexts": llm.contexts[prompt],
                         "experience": {"reward": sample["info_reward"], "score": sample["info_score"]}})
    return {"episodes": episodes}


def main(scenario: str, *urls: str) -> dict:
    from importlib.metadata import version as dist_version

    import openrlhf.utils.agent as agent

    tokenizer = _tokenizer()
    _record_steps()
    single_turn = hasattr(agent, "SingleTurnAgentExecutor")  # 0.9.1 and later
    result: dict = {}
    if scenario == "agent":
        result = _agent(tokenizer) if single_turn else _agent_oldest(tokenizer)
    elif scenario == "agent_concurrent":
        result = _agent_concurrent(tokenizer)
    elif scenario == "reward_file":
        calls = {"count": 0, "max_queries": 0}
        if single_turn:
            from rewardbox.adapters import openrlhf as adapter

            _count_calls((adapter, "reward_func"), calls)
            result = _generate_vllm(_LLM(tokenizer, GROUPS), tokenizer, dynamic_filtering=True,
                                    remote_rm_url=str(REWARD_FILE))
            result["calls"] = calls
        else:
            result = _remote_reward_model(str(REWARD_FILE), tokenizer)
    elif scenario == "http":
        if single_turn:
            seen: list[str] = []
            import aiohttp

            post = aiohttp.ClientSession.post

            def recorded(self, url, *args, **kwargs):
                seen.append(str(url))
                return post(self, url, *args, **kwargs)
            aiohttp.ClientSession.post = recorded
            result = _generate_vllm(_LLM(tokenizer, GROUPS), tokenizer, dynamic_filtering=True, remote_rm_url=list(urls))
            result["urls_used"] = sorted(set(seen), key=seen.index)
            result["url_counts"] = [seen.count(url) for url in result["urls_used"]]
        else:
            result = _remote_reward_model(list(urls), tokenizer)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    import openrlhf

    path = Path(openrlhf.__file__).resolve()
    side = next((p.name for p in path.parents if p.name.startswith("openrlhf-")), None)
    result["version"] = side.removeprefix("openrlhf-") if side else dist_version("openrlhf")
    return result


def run_all(plan: list[dict]) -> dict[str, dict]:
    """Each run of the plan in turn, in this process (its Ray, the adapter's
    reward): its result, or the error it raised. What a run patched
    (`reward_func` counted, aiohttp's post recorded) is put back after it."""
    import aiohttp

    import rewardbox.adapters.openrlhf as adapter

    patched = [(adapter, "reward_func"), (aiohttp.ClientSession, "post")]
    results = {}
    for run in plan:
        if run["record"]:
            os.environ[RECORD_ENV] = run["record"]
        saved = [getattr(owner, name) for owner, name in patched]
        try:
            results[run["key"]] = main(run["scenario"], *run["urls"])
        except Exception:  # noqa: BLE001 - this run's test fails with it, the others go on
            results[run["key"]] = {"error": traceback.format_exc()}
        finally:
            for (owner, name), value in zip(patched, saved):
                setattr(owner, name, value)
    return results


if __name__ == "__main__":
    print("RESULT " + json.dumps(run_all(json.loads(sys.argv[1]))), flush=True)
    sys.stdout.flush()
