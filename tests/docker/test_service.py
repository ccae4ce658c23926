"""The reward service over a real socket: OpenRLHF's body exactly as its
client sends it, and our batch API."""

import json

import pytest
import requests

PROMPT = "<|im_start|>user\nWrite f.<|im_end|>\n<|im_start|>assistant\n"
ASSERTS = json.dumps({"tests": ["assert f(1) == 2", "assert f(2) == 4"]})


def test_get_reward_as_openrlhf_sends_it(server_url):
    body = {"query": [PROMPT + "```python\ndef f(x):\n    return x + 1\n```<|im_end|>",
                      PROMPT + "The answer is $\\boxed{42}$.<|im_end|>"],
            "prompts": [PROMPT, PROMPT], "labels": [ASSERTS, "42"]}

    first = requests.post(f"{server_url}/get_reward", json=body, timeout=120)
    again = requests.post(f"{server_url}/get_reward", json=body, timeout=120)

    assert first.status_code == 200, first.text
    out = first.json()
    assert out["rewards"] == [0.5, 1.0]
    assert out["scores"] == [0.75, 1.0]
    assert out["extra_logs"]["pass_rate"] == [0.0, 1.0]
    assert all(len(v) == 2 for v in out["extra_logs"].values())
    assert {k: v for k, v in again.json().items() if k != "extra_logs"} == {k: v for k, v in out.items()
                                                                           if k != "extra_logs"}  # idempotent


def test_get_reward_answers_empty_lists_with_empty_lists(server_url):
    response = requests.post(f"{server_url}/get_reward", json={"query": [], "prompts": [], "labels": []}, timeout=30)

    assert response.status_code == 200
    assert response.json()["rewards"] == [] and response.json()["scores"] == []


def test_batch_api_mixes_code_and_math(server_url):
    body = {"samples": [
        {"id": "code", "completion": "```python\ndef f(x):\n    return x + 1\n```", "label": ASSERTS},
        {"id": "math", "completion": "#### 1,800", "label": "1800"},
        {"id": "bad", "completion": "x", "label": {"inputs": ["1"], "outputs": []}},
    ]}

    response = requests.post(f"{server_url}/v1/rewards", json=body, timeout=120)

    assert response.status_code == 200, response.text
    results = {r["id"]: r for r in response.json()["results"]}
    assert (results["code"]["reward"], results["code"]["verdict"], results["code"]["passed"]) == (0.5, "failed", 1)
    assert [t["outcome"] for t in results["code"]["tests"]] == ["passed", "failed"]
    assert (results["math"]["reward"], results["math"]["verdict"]) == (1.0, "passed")
    assert results["bad"]["reward"] is None and "1 inputs but 0 outputs" in results["bad"]["error"]


@pytest.mark.parametrize("path, body, status, detail", [
    ("/get_reward", b'{"query": ["x"', 400, "malformed JSON"),
    ("/get_reward", {"query": "x"}, 422, "query: Input should be a valid list"),
    ("/get_reward", {"query": [1]}, 422, "query.0: Input should be a valid string"),
    ("/get_reward", {"query": ["a", "b"], "prompts": ["p"], "labels": ["1", "2"]}, 422, "2 queries but 1 prompts"),
    ("/get_reward", {"query": ["a"], "labels": []}, 422, "1 queries but 0 labels"),
    ("/get_reward", {"query": ["x" * (1 << 20 + 1)]}, 413, "query[0] is over the limit of 1048576 bytes"),
    ("/v1/rewards", {"samples": [{"completion": "x", "label": "1"}], "reward": "nope"}, 400, "unknown reward 'nope'"),
    ("/v1/rewards", {"samples": [{"label": "1"}]}, 422, "samples.0.completion: Field required"),
    ("/v1/rewards", {"samples": [{"completion": "é" * (1 << 19 + 1)}]}, 413, "over the limit"),
])
def test_bad_requests_get_clear_errors(server_url, path, body, status, detail):
    kwargs = {"data": body, "headers": {"content-type": "application/json"}} if isinstance(body, bytes) else {"json": body}

    response = requests.post(f"{server_url}{path}", timeout=30, **kwargs)

    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]
