"""verl 0.9.1's own tool code driving rewardbox sessions: the tools loaded by
its `initialize_tools_from_config` from examples/verl/tool_config.yaml, then
multi-turn episodes as a rollout drives them: the `BaseTool` contract (create
with the label, execute, calc_reward, release) and 0.9.1's `ToolAgentLoop`
(`_call_tool`, which creates and releases around every call). Real
containers throughout; every episode ends with its container gone."""

import asyncio
import gc
import importlib.util
import json
import os
import sys
import threading
import time
import types
from pathlib import Path

import docker
import pytest

from rewardbox.sandbox import ImageMissing, Sandbox, Session, SessionEnded
from tests.trainers.stubs._placeholders import placeholders

# verl's agent loop package imports these at module level, never on `_call_tool`'s
# path; the tier installs verl without its dependencies (hydra-core's pins clash
# with the omegaconf and antlr4 the tier needs), so they are placeholders that
# fail when used.
for _module in ("hydra", "cachetools"):
    if importlib.util.find_spec(_module) is None:
        _stub = types.ModuleType(_module)
        _stub.__path__ = []
        _stub.__getattr__ = placeholders(_module)
        sys.modules[_module] = _stub

from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop  # noqa: E402
from verl.experimental.agent_loop.tool_parser import FunctionCall  # noqa: E402
from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import ToolResponse  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "verl" / "tool_config.yaml"
LABEL = json.dumps({"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]})
WRONG = "def add(a, b):\n    return a - b\n\nassert add(1, 2) == 3, add(1, 2)\n"
FIXED = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
HALF = "def add(a, b):\n    return a + b if a > 0 else 7\n"  # the first test passes, the second fails


def our_sessions() -> set[str]:
    """The session containers this process owns (the engine's owner label)."""
    client = docker.from_env()
    try:
        found = client.api.containers(all=True, filters={"label": "rewardbox", "name": "rewardbox-session-"})
    finally:
        client.close()
    return {c["Id"] for c in found if c["Labels"].get("rewardbox.owner", "").split(":")[1:2] == [str(os.getpid())]}


def wait_gone(ids: set[str], within_s: float = 20.0) -> set[str]:
    deadline = time.monotonic() + within_s
    while (left := our_sessions() & ids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def tools() -> dict[str, BaseTool]:
    loaded = initialize_tools_from_config(str(CONFIG))
    return {tool.name: tool for tool in loaded}


def test_the_config_names_both_tools_with_their_schemas(tools):
    assert sorted(tools) == ["run_code", "run_tests"]
    assert all(isinstance(tool, BaseTool) for tool in tools.values())
    code = tools["run_code"].get_openai_tool_schema().model_dump(exclude_none=True)
    assert code["function"]["parameters"]["required"] == ["code"]
    assert set(code["function"]["parameters"]["properties"]) == {"code", "file", "stdin"}
    assert tools["run_tests"].get_openai_tool_schema().function.parameters.properties == {}


def test_an_episode_wrong_code_error_read_back_fix_tests_pass_reward_container_gone(tools):
    run_code, run_tests = tools["run_code"], tools["run_tests"]

    async def episode() -> None:
        before = our_sessions()
        for tool in (run_code, run_tests):  # as verl's rollouts create every tool of a request, under its id
            instance_id, response = await tool.create("rollout-1", create_kwargs={"ground_truth": LABEL})
            assert instance_id == "rollout-1" and isinstance(response, ToolResponse)
        opened = our_sessions() - before
        assert len(opened) == 1  # one session for both tools

        response, step, _ = await run_code.execute("rollout-1", {"code": WRONG})
        assert isinstance(response, ToolResponse) and step == 0.0
        assert "verdict: failed" in response.text and "AssertionError: -1" in response.text

        response, step, _ = await run_code.execute("rollout-1", {"code": FIXED})
        assert response.text.startswith("verdict: passed") and "stdout:\n3" in response.text and step == 0.0

        response, step, metrics = await run_tests.execute("rollout-1", {})
        assert "passed 2 of 2 tests" in response.text and step == 1.0 and metrics["reward"] == 1.0
        response, step, _ = await run_tests.execute("rollout-1", {})  # asking again gains nothing
        assert "passed 2 of 2 tests" in response.text and step == 0.0

        assert await run_tests.calc_reward("rollout-1") == 1.0
        await run_tests.release("rollout-1")
        await run_code.release("rollout-1")  # the other tool's release, then twice: harmless
        await run_code.release("rollout-1")
        assert not wait_gone(opened, within_s=5)
        response, step, _ = await run_code.execute("rollout-1", {"code": FIXED})
        assert "no session 'rollout-1'" in response.text and step == 0.0

    asyncio.run(episode())


def test_a_wrong_answer_scores_below_one_with_the_failing_test_read_back(tools):
    run_code, run_tests = tools["run_code"], tools["run_tests"]

    async def episode() -> None:
        instance_id, _ = await run_code.create(create_kwargs={"ground_truth": LABEL})  # an id made for it
        await run_code.execute(instance_id, {"code": HALF})
        response, step, _ = await run_tests.execute(instance_id, {})
        assert "passed 1 of 2 tests" in response.text and "assert add(-1, 1) == 0" in response.text
        assert step == 0.5
        assert await run_tests.calc_reward(instance_id) == 0.5
        await run_code.release(instance_id)

    before = our_sessions()
    asyncio.run(episode())
    assert not wait_gone(our_sessions() - before, within_s=5)


def test_bad_calls_are_text_answers_never_errors(tools):
    run_code = tools["run_code"]

    async def episode() -> list[str]:
        answers = [(await run_code.execute("no-such-instance", {"code": FIXED}))[0].text]
        instance_id, _ = await run_code.create("rollout-bad", create_kwargs={"ground_truth": LABEL})
        for parameters in ({}, {"code": 3}, {"code": FIXED, "file": "../escape.py"}, {"code": FIXED, "stdin": 5},
                           {"code": FIXED}):
            response, step, _ = await run_code.execute(instance_id, parameters)
            assert step == 0.0
            answers.append(response.text)
        await run_code.release(instance_id)
        return answers

    before = our_sessions()
    unknown, missing, not_text, escape, bad_stdin, after = asyncio.run(episode())
    assert "no session 'no-such-instance'" in unknown
    assert "run_code needs `code`" in missing and "run_code needs `code`" in not_text
    assert "Error:" in escape and "escape.py" in escape
    assert "`stdin` must be a string" in bad_stdin
    assert after.startswith("verdict: passed")  # the session still serves after the bad calls
    assert not wait_gone(our_sessions() - before, within_s=5)


def agent_loop(tools: dict[str, BaseTool]) -> ToolAgentLoop:
    """0.9.1's ToolAgentLoop with what `_call_tool` reads (its __init__ needs
    a served model)."""
    loop = object.__new__(ToolAgentLoop)
    loop.tools = tools
    loop.max_tool_response_length = 4000
    loop.tool_response_truncate_side = "middle"
    return loop


def test_verl_0_9_1_agent_loop_keeps_one_session_per_rollout_and_closes_it_when_the_rollout_ends(tools, monkeypatch):
    """`_call_tool` creates and releases an instance around every call; the
    files persist across calls all the same, and the container goes with the
    rollout's AgentData, closed in a worker thread (not on verl's event loop,
    where the rollout's data is dropped)."""
    closing_threads = []
    close = Session.close

    def watched_close(self):
        closing_threads.append(threading.current_thread().name)
        close(self)

    monkeypatch.setattr(Session, "close", watched_close)
    loop = agent_loop(tools)
    kwargs = {name: {"create_kwargs": {"ground_truth": LABEL}} for name in tools}
    before = our_sessions()

    async def rollout() -> None:
        data = AgentData(messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None,
                         metrics={}, request_id="req-1", tools_kwargs=kwargs)

        async def call(name: str, arguments: str, rollout: AgentData) -> tuple[ToolResponse, float]:
            response, reward, _ = await loop._call_tool(FunctionCall(name=name, arguments=arguments), kwargs, rollout)
            return response, reward

        response, reward = await call("run_code", json.dumps({"code": WRONG}), data)
        assert "AssertionError: -1" in response.text and reward == 0.0
        response, reward = await call("run_tests", "{}", data)  # the file of the previous call, in the same session
        assert "passed 0 of 2 tests" in response.text and reward == 0.0
        response, _ = await call("run_code", "{not json", data)
        assert response.text.startswith("Invalid JSON in arguments for 'run_code'")
        await call("run_code", json.dumps({"code": FIXED}), data)
        response, reward = await call("run_tests", "{}", data)
        assert "passed 2 of 2 tests" in response.text and reward == 1.0
        assert len(our_sessions() - before) == 1  # one container for the whole rollout
        data.tool_rewards.append(reward)
        assert sum(data.tool_rewards) == 1.0
        del data  # the rollout ends: its AgentData goes

    asyncio.run(rollout())
    gc.collect()
    assert not wait_gone(our_sessions() - before)
    assert closing_threads and all(name.startswith("rewardbox-verl-close") for name in closing_threads)


def test_a_failure_of_ours_is_an_answer_in_execute_and_raised_by_calc_reward(tools, caplog):
    """The engine cannot start the session (its image is missing): the model
    hears it is not its fault, at no cost; the reward is not made up."""
    from rewardbox.adapters import session_tools

    box = Sandbox(sweep=False, retry_s=0)
    box.image = "rewardbox-test-missing-image:none"
    kept = session_tools._shared
    session_tools.configure(box)
    run_code, run_tests = tools["run_code"], tools["run_tests"]

    async def episode() -> tuple[ToolResponse, float, dict]:
        instance_id, _ = await run_code.create("rollout-ours", create_kwargs={"ground_truth": LABEL})
        answer = await run_code.execute(instance_id, {"code": FIXED})
        with pytest.raises(ImageMissing):
            await run_tests.calc_reward(instance_id)
        await run_code.release(instance_id)
        return answer

    try:
        response, step, metrics = asyncio.run(episode())
    finally:
        session_tools._shared = kept
        box.close()
    assert "through no fault of your code" in response.text and step == 0.0 and metrics == {"sandbox_error": 1.0}
    assert any(r.levelname == "ERROR" and "the sandbox failed" in r.getMessage() for r in caplog.records)


def remove_our_sessions(before: set[str]) -> None:
    client = docker.from_env()
    try:
        for container in our_sessions() - before:  # this test's own sessions
            client.api.remove_container(container, force=True)
    finally:
        client.close()


def test_a_session_removed_under_the_rollout_is_said_and_the_next_call_opens_a_new_one(tools):
    """As at its idle limit: the model hears its files are gone, the next
    call works in a new session, and no reward is made up for a lost file."""
    run_code, run_tests = tools["run_code"], tools["run_tests"]
    before = our_sessions()

    async def episode() -> list[str]:
        instance_id, _ = await run_code.create("rollout-gone", create_kwargs={"ground_truth": LABEL})
        await run_code.execute(instance_id, {"code": FIXED})
        remove_our_sessions(before)
        answers = [(await run_code.execute(instance_id, {"code": FIXED}))[0].text]
        answers.append((await run_code.execute(instance_id, {"code": FIXED}))[0].text)  # in a new session
        remove_our_sessions(before)
        response, step, _ = await run_tests.execute(instance_id, {})
        assert step == 0.0
        answers.append(response.text)
        with pytest.raises(SessionEnded):
            await run_tests.calc_reward(instance_id)
        await run_code.release(instance_id)
        return answers

    ended, again, ended_at_tests = asyncio.run(episode())
    assert "your session ended" in ended and "files are gone" in ended
    assert again.startswith("verdict: passed")
    assert "your session ended" in ended_at_tests
    assert not wait_gone(our_sessions() - before, within_s=5)
