"""Hostile but cheap inputs on the paths users take (issue 15): the CLI, the
batch API and OpenRLHF's /get_reward over a real server and real containers.
One sample's completion or label can only affect its own answer; code Python
refuses to compile is the model's syntax error, never our failure."""

import json
import subprocess
import sys
import threading
import time

import pytest
import requests

F = "def f(x):\n    return x + 1\n"
ASSERTS = {"tests": ["assert f(1) == 2", "assert f(2) == 3"]}
CHECK = {"test": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "f"}

# Python's parser refuses these with RecursionError or MemoryError, not SyntaxError.
DEEP = {
    "unary-operators": "def f(x):\n    return " + "- " * 5000 + "x\n",
    "plus-chain": "def f(x):\n    return " + "x+" * 50_000 + "x\n",
    "elif-table": "def f(x):\n    if x == 0: return 0\n" + "".join(f"    elif x == {i}: return {i}\n" for i in range(1, 20_000)),
}


def post(url: str, path: str, body: dict) -> requests.Response:
    return requests.post(url + path, data=json.dumps(body), headers={"content-type": "application/json"}, timeout=300)


@pytest.mark.parametrize("code", DEEP.values(), ids=DEEP.keys())
def test_deep_code_is_a_syntax_error_through_the_batch_api(server_url, code):
    samples = [{"id": "fenced", "completion": f"```python\n{code}```", "label": ASSERTS},
               {"id": "plain", "completion": code, "label": ASSERTS},
               {"id": "continues-the-prompt", "completion": code.split("\n", 1)[1],
                "label": {**CHECK, "prompt": "def f(x):\n"}},
               {"id": "honest", "completion": F, "label": ASSERTS}]
    response = post(server_url, "/v1/rewards", {"samples": samples})

    assert response.status_code == 200, response.text[:500]
    results = {r["id"]: r for r in response.json()["results"]}
    for sample_id in ("fenced", "plain", "continues-the-prompt"):
        assert results[sample_id]["verdict"] == "syntax_error", results[sample_id]
        assert results[sample_id]["reward"] == -1.0
    assert results["honest"]["verdict"] == "passed"


def test_deep_code_is_a_penalty_through_get_reward(server_url):
    labels = [json.dumps(ASSERTS)] * 2
    response = post(server_url, "/get_reward", {"query": [DEEP["unary-operators"], F], "prompts": ["", ""], "labels": labels})

    assert response.status_code == 200, response.text[:500]
    assert response.json()["rewards"] == [-1.0, 1.0]


def test_labels_nested_thousands_deep_answer_only_their_own_sample(server_url):
    deep = "[" * 5000 + "]" * 5000
    samples = [{"id": 0, "completion": F, "label": deep},
               {"id": 1, "completion": F, "label": json.dumps({"input_output": deep})},
               {"id": 2, "completion": F, "label": ASSERTS}]
    response = post(server_url, "/v1/rewards", {"samples": samples})

    assert response.status_code == 200, response.text[:500]
    results = response.json()["results"]
    assert [r["reward"] for r in results] == [None, None, 1.0]
    assert all("nested" in r["error"] for r in results[:2])
    got = post(server_url, "/get_reward", {"query": [F, F], "prompts": ["", ""], "labels": [deep, json.dumps(ASSERTS)]})
    assert got.status_code == 200 and got.json()["rewards"] == [0.0, 1.0]


def test_ids_and_texts_with_lone_surrogates_are_answered(server_url):
    body = ('{"samples": [{"id": "\\ud800", "completion": "```python\\ndef f(x):\\n    return x + 1  # \\udfff\\n```", '
            f'"label": {json.dumps(ASSERTS)}}}]}}')
    response = requests.post(server_url + "/v1/rewards", data=body, headers={"content-type": "application/json"}, timeout=120)

    assert response.status_code == 200, response.text[:500]
    result = response.json()["results"][0]
    assert result["id"] == "\ufffd" and result["verdict"] == "passed"


def test_a_megabyte_of_end_tokens_is_cleaned_without_stalling_the_service(server_url):
    completion = f"```python\n{F}```" + "</s> " * 100_000 + "</s>x" * 100_000  # 1 MB; ~25 minutes of regex before
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            started = time.monotonic()
            requests.get(server_url + "/healthz", timeout=60)
            latencies.append(time.monotonic() - started)
            time.sleep(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        response = post(server_url, "/v1/rewards", {"samples": [{"id": 0, "completion": completion, "label": ASSERTS}] * 4})
    finally:
        done.set()
        prober.join()
    assert response.status_code == 200, response.text[:500]
    assert [r["verdict"] for r in response.json()["results"]] == ["passed"] * 4
    assert latencies and max(latencies) < 10  # the event loop kept answering


def test_a_mix_whose_weights_overflow_is_refused_clearly(server_url):
    response = post(server_url, "/v1/rewards", {"samples": [{"completion": F, "label": ASSERTS}],
                                                "reward": "correctness=1e308,format_one_code_block=1e308"})

    assert response.status_code == 400 and "sum to inf" in response.json()["detail"]


def test_the_cli_answers_deep_code_and_deep_labels_line_by_line(tmp_path):
    rows = [{"id": "deep-code", "completion": f"```python\n{DEEP['plus-chain']}```", "label": ASSERTS},
            {"id": "deep-label", "completion": F, "label": "[" * 5000 + "]" * 5000},
            {"id": "honest", "completion": F, "label": ASSERTS}]
    source = tmp_path / "rollouts.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "results.jsonl"
    done = subprocess.run([sys.executable, "-m", "rewardbox.cli", "score", str(source), "-o", str(out), "--no-progress",
                           "-j", "2"],
                          capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert results["deep-code"]["verdict"] == "syntax_error" and results["deep-code"]["reward"] == -1.0
    assert results["deep-label"]["reward"] is None and "nested" in results["deep-label"]["error"]
    assert results["honest"]["verdict"] == "passed"
