"""AgentFly's rollout-scoped resource over a rewardbox session, on real containers.

AgentFly cannot be installed here (not on PyPI under its name; Python 3.12),
so `_Context` below follows its code path step by step, as read at commit
1256586b1109ba8e0dc0f179f8515b4567d09df4 of github Agent-One-Lab/AgentFly:

- `src/agentfly/core/context.py` 90-129 (`acquire_resource`: the id is the
  rollout's, recorded for `scope="rollout"`, handed to
  `ResourceEngine.acquire`) and 167-182 (`end_resource`: `ResourceEngine.end`
  for each rollout id, then forgotten);
- `src/agentfly/resources/engine.py` 155-230 (`acquire`: the same id returns
  the same resource, else the runner starts one) and 305-321 (`end`: popped,
  `resource.end()` awaited, never returned to the free store);
- `src/agentfly/resources/runner.py` 227-248 (`LocalRunner._start_local_env`:
  the class imported from `env_cls_path`, built with `init_kwargs`, wrapped,
  `start()` awaited);
- `src/agentfly/resources/local_env_resource.py` 18-69 (`LocalEnvResource`:
  start -> env.start, reset -> env.reset, end/close -> env.aclose, any other
  attribute from the env);
- `src/agentfly/rewards/reward_base.py` 166-171 and 185-192 (a reward gets only
  the keywords its signature names, awaited when a coroutine function);
- `src/agentfly/agents/chain/chain_base.py` 935-978 (`_finalize_chain`: the
  reward with `final_response`, the row's fields, `trajectory`, `id` and
  `context`, then `context.end_resource(scope="rollout")`).
"""

import asyncio
import importlib
import inspect
from typing import Any

import docker
import docker.errors
import pytest

from rewardbox.adapters import session_tools
from rewardbox.adapters.agentfly_session import SessionEnv, agentfly_session_reward, run_code, session_spec
from rewardbox.sandbox import Sandbox, SessionEnded

LABEL = {"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}
WRONG = "def add(a, b):\n    return a - b\n\nprint(add(1, 2))\nassert add(1, 2) == 3, 'add(1, 2) is not 3'\n"
FIXED = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
HALF = "def add(a, b):\n    return a * b if a > 0 else a + b\n"  # add(-1, 1) passes, add(1, 2) does not


class _LocalEnvResource:
    """local_env_resource.py 18-69."""

    def __init__(self, env: Any, resource_id: str, spec: Any):
        object.__setattr__(self, "_env", env)
        object.__setattr__(self, "resource_id", resource_id)

    async def start(self) -> None:
        await self._env.start()

    async def reset(self, *args: Any, **kwargs: Any) -> Any:
        return await self._env.reset(*args, **kwargs)

    async def end(self) -> None:
        await self._env.aclose()

    async def close(self) -> None:
        await self._env.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_env"), name)


class _ResourceEngine:
    """engine.py 155-230 and 305-321, with runner.py 227-248 as its local runner."""

    def __init__(self) -> None:
        self.acquired: dict[str, _LocalEnvResource] = {}
        self.started = 0

    async def acquire(self, id: str, spec: Any, backend: str = "local", timeout: float | None = 600.0) -> Any:
        assert backend == "local" and spec.category == "local_env"
        if id in self.acquired:
            return self.acquired[id]
        module_path, _, cls_name = spec.env_cls_path.rpartition(".")
        env = getattr(importlib.import_module(module_path), cls_name)(**spec.init_kwargs)
        resource = _LocalEnvResource(env=env, resource_id=id, spec=spec)
        await resource.start()
        self.started += 1
        self.acquired[id] = resource
        return resource

    async def end(self, id: str) -> None:
        resource = self.acquired.pop(id, None)
        if resource is not None:
            await resource.end()


class _Context:
    """context.py 90-129 and 167-182."""

    def __init__(self, rollout_id: str, engine: _ResourceEngine):
        self.rollout_id, self.engine = rollout_id, engine
        self.rollout_resource_ids: list[str] = []

    async def acquire_resource(self, id: str | None = None, spec: Any = None, scope: str = "rollout",
                               backend: str | None = None, timeout: float | None = 600.0) -> Any:
        resource_id = id or self.rollout_id
        if scope == "rollout" and resource_id not in self.rollout_resource_ids:
            self.rollout_resource_ids.append(resource_id)
        return await self.engine.acquire(id=resource_id, spec=spec, backend=backend or "local", timeout=timeout)

    async def end_resource(self, scope: str = "rollout") -> None:
        for resource_id in list(self.rollout_resource_ids):
            await self.engine.end(id=resource_id)
        self.rollout_resource_ids.clear()


async def _finalize(reward_fn: Any, context: _Context, final_response: str, row: dict[str, Any]) -> Any:
    """chain_base.py 935-978 with reward_base.py's keyword filter: the reward, then the rollout's resources ended."""
    kwargs = {**row, "final_response": final_response, "trajectory": [], "id": context.rollout_id, "context": context}
    accepted = inspect.signature(reward_fn).parameters
    raw = reward_fn(**{k: v for k, v in kwargs.items() if k in accepted})
    reward = await raw if inspect.isawaitable(raw) else raw
    await context.end_resource(scope="rollout")
    return reward


@pytest.fixture(scope="module")
def box():
    box = Sandbox(max_containers=2, retry_s=20, sweep=False)
    yield box
    box.close()


@pytest.fixture
def process_sandbox(box, monkeypatch):
    """The adapters' process sandbox for sessions is this one (restored after)."""
    monkeypatch.setattr(session_tools, "_shared", None)
    session_tools.configure(box)
    return box


@pytest.fixture(scope="module")
def client():
    client = docker.from_env()
    yield client
    client.close()


def _gone(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return True
    return False


def test_an_episode_through_agentflys_context(process_sandbox, client):
    """Wrong code run through the tool, its error read back, the fix run in the
    same container, the reward 1.0 from the session's solution.py, and the
    container gone once the chain's end_resource ran."""
    engine = _ResourceEngine()
    context = _Context("chain-1", engine)
    reward_fn = agentfly_session_reward(label_column="label")

    async def episode():
        first = await run_code(WRONG, context)
        resource = engine.acquired["chain-1"]
        container = resource.container_id
        second = await run_code(FIXED, context)
        assert engine.acquired["chain-1"].container_id == container  # the same session
        reward = await _finalize(reward_fn, context, "done", {"label": LABEL, "question": "Write add."})
        return first, second, container, reward, resource

    # The resource held on: removed by end_resource, not when collected.
    first, second, container, reward, _resource = asyncio.run(episode())
    assert first.startswith("verdict: failed") and "stdout:\n-1" in first
    assert "AssertionError: add(1, 2) is not 3" in first
    assert second.startswith("verdict: passed") and "stdout:\n3" in second
    assert reward == {"reward": 1.0, "acc": 1.0, "pass_rate": 1.0, "unscorable": 0.0}
    assert engine.started == 1 and engine.acquired == {}
    assert _gone(client, container)


def test_the_reward_is_the_files_as_it_is_at_the_end(process_sandbox, client):
    """The last code run is what is graded (half right: 0.5), not the final
    response's text; two rollouts at once have a container each."""
    engine = _ResourceEngine()
    contexts = [_Context("chain-a", engine), _Context("chain-b", engine)]
    reward_fn = agentfly_session_reward(label_column="label")

    async def both():
        await asyncio.gather(run_code(FIXED, contexts[0]), run_code(HALF, contexts[1]))
        containers = {c.rollout_id: engine.acquired[c.rollout_id].container_id for c in contexts}
        final = "```python\n" + FIXED + "```"  # the text says the fix; the file holds HALF
        rewards = await asyncio.gather(*(_finalize(reward_fn, c, final, {"label": LABEL}) for c in contexts))
        return containers, rewards

    containers, rewards = asyncio.run(both())
    assert len(set(containers.values())) == 2
    assert [r["reward"] for r in rewards] == [1.0, 0.5]
    assert all(_gone(client, c) for c in containers.values())


def test_a_rollout_that_never_ran_code_scores_an_empty_file(process_sandbox, client):
    """No tool call: the reward's acquire opens the session, whose solution.py
    does not exist: an empty completion (no code), and the container ends with the chain."""
    engine = _ResourceEngine()
    context = _Context("chain-quiet", engine)
    reward = asyncio.run(_finalize(agentfly_session_reward(label_column="label"), context, "", {"label": LABEL}))
    assert reward["reward"] == -1.0 and reward["acc"] == 0.0
    assert engine.started == 1 and engine.acquired == {}


def test_a_lost_container_is_said_to_the_model_and_never_scored(process_sandbox, client):
    """The rollout's container removed from outside (as its idle limit would):
    the next tool call says so, the reward raises SessionEnded rather than
    grading an empty new session; a later call opens a new one, then scored."""
    engine = _ResourceEngine()
    context = _Context("chain-lost", engine)
    reward_fn = agentfly_session_reward(label_column="label")

    async def episode():
        await run_code(FIXED, context)
        lost = engine.acquired["chain-lost"].container_id
        client.containers.get(lost).remove(force=True)
        said = await run_code(FIXED, context)
        with pytest.raises(SessionEnded):
            await reward_fn(context=context, label=LABEL)
        again = await run_code(FIXED, context)
        return said, again, await _finalize(reward_fn, context, "", {"label": LABEL})

    said, again, reward = asyncio.run(episode())
    assert said.startswith("error: your workspace ended") and again.startswith("verdict: passed")
    assert reward["reward"] == 1.0 and engine.acquired == {}


def test_reset_starts_over_in_a_new_container(process_sandbox, client):
    """AgentFly's reset_resource: a new container, without the old files; the old one removed."""

    async def run():
        env = SessionEnv(idle_s=60)
        await env.start()
        await env.step("open('notes.txt', 'w').write('x')")
        old = env.container_id
        await env.reset()
        listing = await env.step("import os; print(sorted(os.listdir('.')))")
        new = env.container_id
        await env.aclose()
        return old, new, listing

    old, new, listing = asyncio.run(run())
    assert old != new and "notes.txt" not in listing
    assert _gone(client, old) and _gone(client, new)


def test_the_spec_has_agentflys_local_env_fields():
    """What AgentFly's engine and context read off a spec (engine.py 22-33,
    context.py 27-32; runner.py 233-244): category, env_cls_path,
    init_kwargs, max_global_num; a bad limit fails when the spec is made."""
    spec = session_spec(max_global_num=8, idle_s=120)
    assert (spec.category, spec.env_cls_path, spec.init_kwargs, spec.max_global_num) == (
        "local_env", "rewardbox.adapters.agentfly_session.SessionEnv", {"idle_s": 120}, 8)
    with pytest.raises(ValueError, match="idle_s"):
        session_spec(idle_s=-1)


def test_the_example_registers_the_tool_and_the_reward(process_sandbox, client, monkeypatch):
    """examples/agentfly/rewardbox_session.py under AgentFly's decorators
    (`tool(name=, description=)`, `reward(name=)`: stand-ins that register
    the function), then an episode through what it registered."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    registered: dict[str, Any] = {}

    def decorator(**options: Any) -> Any:
        def register(function: Any) -> Any:
            registered[options["name"]] = function
            return function
        return register

    for name, attribute in (("agentfly", None), ("agentfly.rewards", "reward"), ("agentfly.tools", "tool")):
        module = types.ModuleType(name)
        if attribute:
            setattr(module, attribute, decorator)
        monkeypatch.setitem(sys.modules, name, module)
    path = Path(__file__).resolve().parents[2] / "examples" / "agentfly" / "rewardbox_session.py"
    spec = importlib.util.spec_from_file_location("rewardbox_session_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(registered) == {"run_code", "rewardbox_session"}
    engine = _ResourceEngine()
    context = _Context("chain-example", engine)

    async def episode():
        answer = await registered["run_code"](code=FIXED, context=context)
        container = engine.acquired["chain-example"].container_id
        return answer, container, await _finalize(registered["rewardbox_session"], context, "", {"label": LABEL})

    answer, container, reward = asyncio.run(episode())
    assert answer.startswith("verdict: passed") and reward["reward"] == 1.0
    assert _gone(client, container)
