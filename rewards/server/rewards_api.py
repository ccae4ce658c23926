"""Scoring routes: OpenRLHF's remote reward (`/get_reward`) and our own batch
API (`/v1/rewards`)."""

import hashlib
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardbox.adapters import split_response
from rewardbox.rewards.base import RewardOutput, Sample
from rewardbox.rewards.logs import LOG_KEYS, sample_logs, trainer_numbers
from rewardbox.rewards.safe_json import plain
from rewardbox.rewards.server.service import Service, request_service

router = APIRouter()


class GetRewardRequest(BaseModel):
    """OpenRLHF's body, as its client sends it (note the singular `query`)."""

    model_config = ConfigDict(extra="ignore")

    query: list[str]
    prompts: list[str | None] | None = None
    labels: list[Any] | None = None

    @model_validator(mode="after")
    def _same_lengths(self) -> "GetRewardRequest":
        for name in ("prompts", "labels"):
            values = getattr(self, name)
            if values is not None and len(values) != len(self.query):
                raise ValueError(f"{len(self.query)} queries but {len(values)} {name}")
        return self


class GetRewardResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]] | None = Field(None, description="absent with ?extra_logs=false")


@router.post("/get_reward", response_model=GetRewardResponse, response_model_exclude_none=True)
async def get_reward(body: GetRewardRequest, request: Request, service: Service = Depends(request_service),
                     extra_logs: bool = True) -> GetRewardResponse:
    """Rewards for OpenRLHF's `--reward.remote_url http://host:port/get_reward`.
    Stateless, so a retried request gets the same answer (the one scoring,
    if it is still under way); empty lists (sent to every URL but the first)
    answer empty lists.

    `?extra_logs=false` leaves `extra_logs` out of the answer: OpenRLHF
    0.8.10 and 0.8.11 `torch.cat` the answers' extra_logs, which JSON lists
    are not (`update_samples_with_rewards`), and read them only if present.
    Their client posts to the URL as given, query string and all."""
    service.check_sizes(body.query, "query")
    n = len(body.query)
    prompts = body.prompts or [None] * n
    labels = body.labels if body.labels is not None else [None] * n
    samples = [Sample(id=i, completion=split_response(q, p) if p else q, label=label)
               for i, (q, p, label) in enumerate(zip(body.query, prompts, labels))]
    outputs = await service.score(service.reward(None), samples,
                                  key=await content_key(request, service.settings.default_reward))
    numbers = [trainer_numbers(o, f"sample {i} of {n}") for i, o in enumerate(outputs)]
    logs = [sample_logs(o) for o in outputs]
    return GetRewardResponse(rewards=[r for r, _ in numbers], scores=[s for _, s in numbers],
                             extra_logs={key: [row[key] for row in logs] for key in LOG_KEYS} if extra_logs else None)


class SampleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | int | None = None
    completion: str
    label: Any = None
    prompt: str | None = None
    columns: dict[str, Any] = Field(default_factory=dict, description="other dataset columns, for rewards that use them")


class RewardsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    samples: list[SampleIn]
    reward: str | None = Field(None, description="a registered reward or a mix 'a=0.9,b=0.1'; default: the server's")


class SampleResult(BaseModel):
    id: str | int | None
    reward: float | None
    score: float | None
    verdict: str | None
    error: str | None
    passed: int | None = None
    total: int | None = None
    duration_s: float | None = None
    tests: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict, description="everything else the reward reported")


class RewardsResponse(BaseModel):
    reward: str
    results: list[SampleResult]


@router.post("/v1/rewards", response_model=RewardsResponse)
async def rewards(body: RewardsRequest, request: Request, service: Service = Depends(request_service)) -> RewardsResponse:
    """Full structured results for a batch: reward, score, verdict, per-test
    outcomes and timings. A sample whose label cannot be used gets no reward
    and an error; the others are scored."""
    service.check_sizes([s.completion for s in body.samples], "samples.completion")
    name = body.reward or service.settings.default_reward
    reward = service.reward(name)
    samples = [Sample(id=s.id, completion=s.completion, label=s.label, prompt=s.prompt, columns=s.columns)
               for s in body.samples]
    outputs = await service.score(reward, samples, key=await content_key(request, name))
    return RewardsResponse(reward=name, results=[result(s, o) for s, o in zip(body.samples, outputs)])


async def content_key(request: Request, *context: str) -> tuple[str, ...]:
    """What makes two requests the same work: the route, what the body does
    not say (the reward), and the body's bytes (a client's retry sends the
    very same bytes)."""
    return (request.url.path, *context, hashlib.sha256(await request.body()).hexdigest())


def result(sample: SampleIn, out: RewardOutput) -> SampleResult:
    """One sample's result; whatever the reward put in its metadata becomes
    JSON data, and a field of the wrong type (from a reward function) stays in
    `metadata` rather than failing the response."""
    metadata = plain(out.details())
    fields: dict[str, Any] = {"verdict": None, "error": None}
    for key, kinds in _FIELDS.items():
        value = metadata.get(key)
        if value is None or (isinstance(value, kinds) and not isinstance(value, bool)):
            fields[key] = metadata.pop(key, None)
    tests = metadata.pop("tests") if _test_list(metadata.get("tests")) else []
    return SampleResult(id=plain(sample.id), reward=out.reward, score=out.score, tests=tests, metadata=metadata, **fields)


_FIELDS: dict[str, type | tuple[type, ...]] = {"verdict": str, "error": str, "passed": int, "total": int,
                                               "duration_s": (int, float)}


def _test_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, dict) for t in value)


