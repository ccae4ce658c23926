"""The service's shared state: admission (bounded waiting) and settings. The
routes themselves run against a real server in the docker tier."""

import asyncio

import pytest
from fastapi import HTTPException

from rewards.base import Reward, RewardOutput, Sample
from rewards.registry import Registry
from rewards.server.app import Busy, ServerSettings, Service


class Echo(Reward):
    name = "echo"

    def score(self, sample: Sample) -> RewardOutput:
        return RewardOutput(reward=float(len(sample.completion)), score=1.0)


def service(max_waiting: int = 4) -> Service:
    registry = Registry()
    registry.register("echo", Echo())
    return Service(registry, sandbox=None, settings=ServerSettings(max_waiting_samples=max_waiting,  # type: ignore[arg-type]
                                                                  default_reward="echo"))


def test_admission_is_bounded_and_released():
    svc = service(max_waiting=4)

    async def scenario():
        async with svc.admitted(3):
            assert svc.waiting == 3
            with pytest.raises(Busy):
                async with svc.admitted(2):
                    pass
            async with svc.admitted(1):
                assert svc.waiting == 4
        assert svc.waiting == 0

    asyncio.run(scenario())


def test_a_batch_larger_than_the_bound_is_admitted_when_nothing_waits():
    # Otherwise a batch bigger than the queue could never be scored.
    svc = service(max_waiting=2)

    async def scenario():
        async with svc.admitted(10):
            assert svc.waiting == 10

    asyncio.run(scenario())
    assert svc.waiting == 0


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
