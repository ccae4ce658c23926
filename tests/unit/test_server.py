"""The service's shared state: the line for the sandbox (admission in arrival
order, held requests whose retries attach to their work) and settings. The
routes themselves run against a real server in the docker tier."""

import asyncio

import pytest
from fastapi import HTTPException

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import Registry
from rewardbox.rewards.sandboxfusion import RunCodeRequest
from rewardbox.rewards.server.app import ServerSettings, Service
from rewardbox.rewards.server.line import Busy, Held, Line
from rewardbox.rewards.server.run_code import client_timeout_s, hold_s


class Echo(Reward):
    name = "echo"

    def score(self, sample: Sample) -> RewardOutput:
        return RewardOutput(reward=float(len(sample.completion)), score=1.0)


def service(max_waiting: int = 4) -> Service:
    registry = Registry()
    registry.register("echo", Echo())
    return Service(registry, sandbox=None, settings=ServerSettings(max_waiting_samples=max_waiting,  # type: ignore[arg-type]
                                                                  default_reward="echo"))


def test_a_full_sandbox_holds_requests_in_arrival_order_rather_than_refusing_them():
    line = Line(max_waiting=4, max_held=100, keep_s=1)
    order = []

    async def scenario():
        async with line.admitted(3):
            assert line.waiting == 3

            async def enter(name, samples):
                async with line.admitted(samples):
                    order.append(name)
                    await asyncio.sleep(0)

            # b would fit beside the 3, but a came first: nobody overtakes.
            tasks = [asyncio.create_task(enter("a", 2)), asyncio.create_task(enter("b", 1))]
            await asyncio.sleep(0.01)
            assert (order, line.waiting, line.held) == ([], 3, 3)
        await asyncio.gather(*tasks)
        assert (line.waiting, line.held) == (0, 0)

    asyncio.run(scenario())
    assert order == ["a", "b"]


def test_a_batch_larger_than_the_bound_is_admitted_when_nothing_waits():
    # Otherwise a batch bigger than the queue could never be scored.
    line = Line(max_waiting=2, max_held=100, keep_s=1)

    async def scenario():
        async with line.admitted(10):
            assert line.waiting == 10

    asyncio.run(scenario())
    assert line.waiting == 0


class Gate:
    """Work that ends when the test says, counting its runs."""

    def __init__(self):
        self.runs = 0
        self.open = asyncio.Event()

    async def __call__(self):
        self.runs += 1
        await self.open.wait()
        return f"answer {self.runs}"


def test_a_held_request_keeps_its_place_and_its_retry_gets_the_one_answer():
    # OpenRLHF and verl retry the same body after a 503/504: the retry must not start over at the back.
    line = Line(max_waiting=1, max_held=100, keep_s=5)

    async def scenario():
        gate = Gate()
        with pytest.raises(Held):
            await line.wait("k", 1, gate, hold_s=0.01)
        assert (gate.runs, line.waiting) == (1, 1)  # still running for the retry
        retry = asyncio.create_task(line.wait("k", 1, gate, hold_s=5))
        await asyncio.sleep(0.01)
        gate.open.set()
        assert await retry == "answer 1"
        assert gate.runs == 1 and line.waiting == 0
        # Answered: the same content later is new work.
        assert await line.wait("k", 1, gate, hold_s=5) == "answer 2"

    asyncio.run(scenario())


def test_an_answer_ready_between_attempts_waits_for_the_retry_then_is_dropped():
    line = Line(max_waiting=1, max_held=100, keep_s=0.1)

    async def scenario():
        gate = Gate()
        with pytest.raises(Held):
            await line.wait("k", 1, gate, hold_s=0.01)
        gate.open.set()
        await asyncio.sleep(0.01)  # done while nobody waits: kept for the retry
        assert await line.wait("k", 1, gate, hold_s=0) == "answer 1"
        unclaimed = Gate()
        with pytest.raises(Held):
            await line.wait("j", 1, unclaimed, hold_s=0.01)
        unclaimed.open.set()
        await asyncio.sleep(0.2)  # nobody came back within keep_s: the next one is new work
        assert await line.wait("j", 1, unclaimed, hold_s=1) == "answer 2"
        assert gate.runs == 1

    asyncio.run(scenario())


def test_work_nobody_comes_back_for_leaves_the_line_unrun():
    # A client that gave up must not cost a container ahead of those still waiting.
    line = Line(max_waiting=1, max_held=100, keep_s=0.05)

    async def scenario():
        first, abandoned, later = Gate(), Gate(), Gate()
        running = asyncio.create_task(line.wait("first", 1, first, hold_s=5))
        await asyncio.sleep(0.01)
        with pytest.raises(Held):
            await line.wait("abandoned", 1, abandoned, hold_s=0.01)
        queued = asyncio.create_task(line.wait("later", 1, later, hold_s=5))
        await asyncio.sleep(0.1)
        assert line.held == 1  # only "later" is still in line
        first.open.set()
        later.open.set()
        assert await running == "answer 1" and await queued == "answer 1"
        assert (abandoned.runs, line.waiting, line.held) == (0, 0, 0)

    asyncio.run(scenario())


def test_only_a_line_over_its_bound_refuses_at_once():
    line = Line(max_waiting=1, max_held=2, keep_s=1)

    async def scenario():
        gate = Gate()
        tasks = [asyncio.create_task(line.wait(i, 1, gate, hold_s=5)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert (line.waiting, line.held) == (1, 2)
        with pytest.raises(Busy):
            await line.wait("one more", 1, gate, hold_s=5)
        with pytest.raises(Held):  # an identical request attaches: held, not refused
            await line.wait(2, 1, gate, hold_s=0.01)
        gate.open.set()
        assert len(set(await asyncio.gather(*tasks))) == 3

    asyncio.run(scenario())


def test_a_failure_reaches_every_waiter_and_is_not_kept():
    line = Line(max_waiting=1, max_held=100, keep_s=5)
    calls = []

    async def failing():
        calls.append(1)
        await asyncio.sleep(0.01)
        raise RuntimeError("engine down")

    async def scenario():
        results = await asyncio.gather(line.wait("k", 1, failing, 5), line.wait("k", 1, failing, 5),
                                       return_exceptions=True)
        assert [str(r) for r in results] == ["engine down", "engine down"] and len(calls) == 1
        with pytest.raises(RuntimeError):
            await line.wait("k", 1, failing, 5)
        assert len(calls) == 2 and line.waiting == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("compile_s, run_s, margin_s, expected", [(10, 10, 3.0, 27.0), (1, 1, 3.0, 9.0), (0, 0, 30.0, 1.0)])
def test_run_code_answers_504_before_verls_own_timeout(compile_s, run_s, margin_s, expected):
    # verl 0.9.1: timeout = compile_timeout + run_timeout + 10 s; its own timeout is a failed case, a 504 is retried.
    body = RunCodeRequest(code="", language="python", compile_timeout=compile_s, run_timeout=run_s)

    assert client_timeout_s(body) == compile_s + run_s + 10
    assert hold_s(body, margin_s) == expected


def test_score_keeps_order_and_releases_the_queue():
    svc = service()
    samples = [Sample(completion="x" * n) for n in (3, 1, 2)]

    outputs = asyncio.run(svc.score(svc.reward(None), samples))

    assert [o.reward for o in outputs] == [3.0, 1.0, 2.0]
    assert svc.waiting == 0
    assert asyncio.run(svc.score(svc.reward("echo"), [])) == []


def test_unknown_reward_is_a_400_naming_the_known_ones():
    with pytest.raises(HTTPException) as caught:
        service().reward("nope")

    assert caught.value.status_code == 400
    assert "unknown reward 'nope'; known: echo" in caught.value.detail


def test_sizes_are_checked_in_bytes():
    svc = Service(Registry(), sandbox=None, settings=ServerSettings(max_completion_bytes=4))  # type: ignore[arg-type]

    svc.check_sizes(["abcd", "éé"], "query")
    with pytest.raises(HTTPException) as caught:
        svc.check_sizes(["ok", "ééé"], "query")

    assert (caught.value.status_code, caught.value.detail) == (413, "query[1] is over the limit of 4 bytes")


async def _post(path: str, query: bytes, body: bytes) -> tuple[int, dict]:
    """One POST through the app (ASGI, no server), with a query string."""
    import json

    from rewardbox.rewards.server.app import create_app

    sent: list[dict] = []
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    await create_app(service())(scope, receive, send)
    status = next(m for m in sent if m["type"] == "http.response.start")["status"]
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


GET_REWARD_BODY = b'{"query": ["abc", "de"], "prompts": ["", ""], "labels": [null, null]}'


def test_get_reward_leaves_extra_logs_out_when_asked():
    """OpenRLHF 0.8.10-0.8.11 torch.cat the answer's extra_logs when present: ?extra_logs=false."""
    status, answer = asyncio.run(_post("/get_reward", b"extra_logs=false", GET_REWARD_BODY))

    assert status == 200
    assert answer == {"rewards": [3.0, 2.0], "scores": [1.0, 1.0]}


@pytest.mark.parametrize("query", [b"", b"extra_logs=true"])
def test_get_reward_sends_extra_logs_by_default(query):
    status, answer = asyncio.run(_post("/get_reward", query, GET_REWARD_BODY))

    assert status == 200
    assert (answer["rewards"], answer["scores"]) == ([3.0, 2.0], [1.0, 1.0])
    assert answer["extra_logs"]["pass_rate"] == [0.0, 0.0] and len(answer["extra_logs"]) > 1


def test_get_reward_refuses_an_extra_logs_value_it_cannot_read():
    status, answer = asyncio.run(_post("/get_reward", b"extra_logs=maybe", GET_REWARD_BODY))

    assert status == 422 and "extra_logs" in answer["detail"]
