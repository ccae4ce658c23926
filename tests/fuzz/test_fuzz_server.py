"""(e) The service in-process, against a fake sandbox that answers every
verdict: every endpoint answers one of its documented statuses (never 500),
with one result per sample and a JSON body that parses."""

import asyncio
import json
import json as _json

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import configured_registry
from rewardbox.rewards.server import Service, create_app
from rewardbox.rewards.server.app import ServerSettings
from tests.fuzz.strategies import (
    FuzzSandbox,
    SwitchSandbox,
    answers,
    completions,
    deep_json_text,
    examples,
    json_values,
    jsonable,
    labels,
    prompts,
)

GET_REWARD = {200, 400, 413, 422, 503}
V1_REWARDS = {200, 400, 413, 422, 503}
RUN_CODE = {200, 400, 413, 422, 504}
MAX_BYTES = 1 << 20  # the default: completions over 1 MB (in UTF-8) get 413


class StubMath(Reward):
    """The math reward without worker processes."""

    name = "math"

    def score(self, sample: Sample) -> RewardOutput:
        return RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed", "answer": sample.completion[:50]})


@pytest.fixture(scope="module")
def service():
    switch = SwitchSandbox()
    registry = configured_registry(sandbox=switch)
    registry.register("math", StubMath(), replace=True)
    svc = Service(registry, switch, ServerSettings(max_completion_bytes=MAX_BYTES, max_waiting_samples=64))
    yield switch, svc, AsgiClient(create_app(svc))


class Response:
    def __init__(self, status_code: int, content: bytes):
        self.status_code, self.content = status_code, content


class AsgiClient:
    """Posts to the app in-process, straight through ASGI (no network, no
    httpx). An exception the app does not handle propagates from `post`, with
    its traceback: that is a 500."""

    def __init__(self, app):
        self.app = app

    def post(self, path: str, json: object = None, content: bytes | None = None, headers: dict | None = None) -> Response:
        body = _json.dumps(json).encode() if content is None else content
        headers = {"content-type": "application/json", **(headers or {})}
        return asyncio.run(self._post(path, body, headers))

    async def _post(self, path: str, body: bytes, headers: dict) -> Response:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(k.lower().encode(), v.encode()) for k, v in {**headers, "content-length": str(len(body))}.items()],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
        chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)] or [b""]
        received = iter(enumerate(chunks, 1))
        sent: list[dict] = []

        async def receive() -> dict:
            number, chunk = next(received, (None, None))
            if chunk is None:
                await asyncio.sleep(3600)  # the request is over: wait like a client that keeps the connection
            return {"type": "http.request", "body": chunk, "more_body": number < len(chunks)}

        async def send(message: dict) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        return Response(start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


json_labels = labels.filter(jsonable)
odd = json_values | deep_json_text  # a value of the wrong type where a field is expected
texts = completions | odd

get_reward_bodies = st.one_of(
    st.sampled_from([1, 2, 3, 4, 0]).flatmap(lambda n: st.fixed_dictionaries(
        {"query": st.lists(completions, min_size=n, max_size=n)},
        optional={"prompts": st.lists(st.none() | prompts, min_size=n, max_size=n) | odd,
                  "labels": st.lists(json_labels, min_size=n, max_size=n) | odd})),
    st.fixed_dictionaries({}, optional={"query": st.lists(texts, max_size=3) | odd, "prompts": odd, "labels": odd}),
    json_values,
)
rewards_names = st.none() | st.sampled_from(["correctness", "code", "math", "format_think_answer", "format_one_code_block",
                                             "length", "correctness=0.9,format_one_code_block=0.1", "code=1,code=1",
                                             "correctness=nan", "correctness=1e999", "correctness=-1", "=,", "nope",
                                             "CODE", "correctness=0"]) | st.text(max_size=20)
sample_bodies = st.fixed_dictionaries({"completion": completions},
                                      optional={"id": st.none() | st.integers() | st.text(max_size=10) | odd,
                                                "label": json_labels, "prompt": st.none() | prompts,
                                                "columns": st.dictionaries(st.text(max_size=5), json_values, max_size=2) | odd})
v1_bodies = st.one_of(
    st.fixed_dictionaries({"samples": st.lists(sample_bodies, max_size=4)}, optional={"reward": rewards_names}),
    st.fixed_dictionaries({}, optional={"samples": st.lists(sample_bodies | odd, max_size=3) | odd,
                                        "reward": rewards_names | odd, "extra": odd}),
    json_values,
)
base64_texts = st.sampled_from(["", "aGVsbG8=", "not base64!", "aGVsbG8", "\ud800"]) | st.text(max_size=10)
run_code_bodies = st.one_of(
    st.fixed_dictionaries({"code": completions, "language": st.sampled_from(["python", "python3", "cpp", ""])},
                          optional={"stdin": st.none() | completions, "compile_timeout": st.floats() | st.integers(),
                                    "run_timeout": st.floats() | st.integers(-5, 1000) | st.sampled_from([1e-300, 1e300]),
                                    "memory_limit_MB": st.integers(-(1 << 40), 1 << 40),
                                    "files": st.dictionaries(st.sampled_from(["a.txt", "main.py", "../x", "d/e.txt", "",
                                                                              "IGNORE_THIS_FILE", "a/" * 20 + "f"])
                                                             | st.text(max_size=10), st.none() | base64_texts, max_size=3),
                                    "fetch_files": st.lists(st.sampled_from(["out.txt", "../etc/passwd", "/abs", ""])
                                                            | st.text(max_size=10), max_size=3),
                                    "args": st.lists(st.text(max_size=5), max_size=2)}),
    st.fixed_dictionaries({}, optional={k: odd for k in ("code", "stdin", "language", "compile_timeout", "run_timeout",
                                                          "memory_limit_MB", "files", "fetch_files")}),
    json_values,
)
raw_bodies = st.one_of(
    st.binary(max_size=60),
    st.sampled_from([b"", b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"NaN", b"Infinity", b'{"query": [NaN]}', b"{" * 10_000,
                     b"[" * 100_000 + b"]" * 100_000, b'{"query": ["a"], "labels": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}",
                     b'{"query": ' + b"9" * 5000 + b"}", b'{"query": ["\\ud800"], "labels": ["\\udfff"]}',
                     b'{"query": ["x"], "query": 3}', b'{"samples": [{"completion": "\\u0000"}]}',
                     b'{"code": "print(1)", "language": "python", "files": {"a": "\\ud800"}}']),
    deep_json_text.map(str.encode),
)


def post(client, switch, answered, path, **kwargs):
    switch.current = FuzzSandbox(*answered)
    return client.post(path, **kwargs)


def answered_json(response) -> object:
    event(f"status {response.status_code}")
    assert response.status_code != 500
    return json.loads(response.content)  # the body is JSON that parses


@examples(100)
@given(body=get_reward_bodies, answered=st.lists(answers, min_size=1, max_size=3))
def test_get_reward(service, body, answered):
    switch, svc, client = service
    response = post(client, switch, answered, "/get_reward", json=body)
    data = answered_json(response)
    assert response.status_code in GET_REWARD, data
    if response.status_code == 200:
        n = len(body["query"])
        assert len(data["rewards"]) == len(data["scores"]) == n
        assert all(len(v) == n for v in data["extra_logs"].values())
        assert all(0.0 <= s <= 1.0 for s in data["scores"])
    assert svc.waiting == 0


@examples(100)
@given(body=v1_bodies, answered=st.lists(answers, min_size=1, max_size=3))
def test_v1_rewards(service, body, answered):
    switch, svc, client = service
    response = post(client, switch, answered, "/v1/rewards", json=body)
    data = answered_json(response)
    assert response.status_code in V1_REWARDS, data
    if response.status_code == 200:
        assert len(data["results"]) == len(body["samples"])
        assert [r["id"] for r in data["results"]] == [s.get("id") for s in body["samples"]]
    assert svc.waiting == 0


@examples(100)
@given(body=run_code_bodies, answered=st.lists(answers, min_size=1, max_size=3))
def test_run_code(service, body, answered):
    switch, svc, client = service
    response = post(client, switch, answered, "/run_code", json=body)
    data = answered_json(response)
    assert response.status_code in RUN_CODE, data
    if response.status_code == 200:
        assert data["status"] in ("Success", "Failed", "SandboxError")
        assert isinstance(data["message"], str)
    assert svc.waiting == 0


@examples(100)
@given(path=st.sampled_from(["/get_reward", "/v1/rewards", "/run_code"]), body=raw_bodies,
       answered=st.lists(answers, min_size=1, max_size=3))
def test_odd_json(service, path, body, answered):
    switch, svc, client = service
    response = post(client, switch, answered, path, content=body, headers={"content-type": "application/json"})
    data = answered_json(response)
    assert response.status_code in {"/get_reward": GET_REWARD, "/v1/rewards": V1_REWARDS, "/run_code": RUN_CODE}[path], data
    assert svc.waiting == 0
