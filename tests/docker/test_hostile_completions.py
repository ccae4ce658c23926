"""Completions that once made a sample come back unscored, as if the sandbox
had failed, through every way in: the Python API, the batch API, OpenRLHF's
`/get_reward` and SandboxFusion's `/run_code`, on real containers.

- Code nested deeper than Python compiles (thousands of unary operators, a
  `1+1+...` chain, a long elif table): CPython refuses it with RecursionError
  or MemoryError rather than SyntaxError. It is the model's syntax error.
- Text that is not valid UTF-8 coming back from the container (an exception
  message holding a lone surrogate, which JSON carries as an escape): the
  result must still serialise, so the service answers 200 with a verdict.
"""

import json

import pytest
import requests

from rewardbox.rewards import RewardOutput, Sample

ADD_TESTS = ("from solution import add\n\n"
             "def test_one():\n    assert add(1, 2) == 3\n\n"
             "def test_two():\n    assert add(2, 2) == 4\n")
LABELS = {
    "pytest": {"pytest": ADD_TESTS},
    "asserts": {"tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]},
    "check": {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"},
    "call": {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]},
    "stdio": {"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "4\n"]},
}
ADD = "def add(a, b):\n    return a + b\n\n"
MAIN = 'if __name__ == "__main__":\n    print(add(*map(int, input().split())))\n'

# Shapes `compile()` refuses with something other than SyntaxError (CPython 3.11):
# its compiler's recursion bound, and its parser's stack (MemoryError, no message).
TOO_DEEP = {
    "unary-3000": "x = " + "- " * 3000 + "1\n",  # RecursionError
    "unary-10000": "x = " + "- " * 10_000 + "1\n",  # MemoryError
    "sum-50000": "x = " + "+".join(["1"] * 50_000) + "\n",  # RecursionError
    "elif-3000": "def table(x):\n    if x == 0:\n        return 0\n"
                 + "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, 3000)),  # RecursionError
    "elif-10000": "def table(x):\n    if x == 0:\n        return 0\n"
                  + "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, 10_000)),  # MemoryError
}

# A lone surrogate in what the container sends back: the code itself is ASCII
# (an escape in a string literal), only its exception message is not UTF-8.
SURROGATE_RAISED = 'def add(a, b):\n    raise ValueError("bad \\ud800 text \\udfff")\n\n' + MAIN
SURROGATE_AT_IMPORT = 'raise ImportError("bad \\ud800 text")\n\n' + ADD + MAIN


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def deep_completion(shape: str) -> str:
    return fenced(ADD + TOO_DEEP[shape] + MAIN)


DEEP_RUNS = {f"deep-{shape}-{fmt}": Sample(id=f"deep-{shape}-{fmt}", completion=deep_completion(shape),
                                          label=LABELS[fmt])
             for shape in TOO_DEEP for fmt in LABELS}
SURROGATE_RUNS = {
    **{f"raised-{fmt}": Sample(id=f"raised-{fmt}", completion=fenced(SURROGATE_RAISED), label=LABELS[fmt])
       for fmt in LABELS},
    **{f"import-{fmt}": Sample(id=f"import-{fmt}", completion=fenced(SURROGATE_AT_IMPORT), label=LABELS[fmt])
       for fmt in LABELS},
}


# One batch each, so that each kind's tests stand or fall on their own.
@pytest.fixture(scope="module")
def deep(code_reward) -> dict[str, RewardOutput]:
    return dict(zip(DEEP_RUNS, code_reward.score_many(list(DEEP_RUNS.values())), strict=True))


@pytest.fixture(scope="module")
def surrogates(code_reward) -> dict[str, RewardOutput]:
    return dict(zip(SURROGATE_RUNS, code_reward.score_many(list(SURROGATE_RUNS.values())), strict=True))


def show(out: RewardOutput) -> str:
    tests = [(t["name"], t["outcome"], (t["message"] or "")[-200:]) for t in out.metadata.get("tests", [])]
    return f"{out.reward} {out.metadata.get('verdict')} {str(out.metadata.get('message'))[:300]!r} {tests}"


@pytest.mark.parametrize("fmt", list(LABELS))
@pytest.mark.parametrize("shape", list(TOO_DEEP))
def test_code_too_deep_to_compile_is_a_syntax_error(deep, shape, fmt):
    out = deep[f"deep-{shape}-{fmt}"]

    assert (out.verdict, out.reward) == ("syntax_error", -1.0), show(out)
    assert out.metadata["message"].startswith(("RecursionError", "MemoryError")), show(out)
    out.model_dump_json()


# (verdict, reward) by format: a generated format grades a solution whose module
# would not import as an import error; a program (stdio) that cannot start fails its cases.
RAISED = {fmt: ("failed", 0.0) for fmt in LABELS}
AT_IMPORT = {**{fmt: ("import_error", -1.0) for fmt in LABELS}, "stdio": ("failed", 0.0)}


@pytest.mark.parametrize("fmt", list(LABELS))
@pytest.mark.parametrize("case, expected", [("raised", RAISED), ("import", AT_IMPORT)])
def test_lone_surrogates_from_the_container_give_a_verdict_that_serialises(surrogates, case, expected, fmt):
    out = surrogates[f"{case}-{fmt}"]

    assert (out.verdict, out.reward) == expected[fmt], show(out)
    text = out.model_dump_json()
    text.encode("utf-8")
    if fmt != "stdio":  # a program's stderr is bytes, decoded with replacement from the start
        assert "\ufffd" in text  # the surrogate became U+FFFD where it entered the host


# -- over HTTP --------------------------------------------------------------------------------

HTTP_SAMPLES = {
    "deep": [("deep-pytest", deep_completion("unary-3000"), LABELS["pytest"], "syntax_error"),
             ("deep-call", deep_completion("elif-10000"), LABELS["call"], "syntax_error")],
    "surrogates": [("raised-pytest", fenced(SURROGATE_RAISED), LABELS["pytest"], "failed"),
                   ("raised-asserts", fenced(SURROGATE_RAISED), LABELS["asserts"], "failed"),
                   ("import-pytest", fenced(SURROGATE_AT_IMPORT), LABELS["pytest"], "import_error"),
                   ("import-call", fenced(SURROGATE_AT_IMPORT), LABELS["call"], "import_error")],
}


@pytest.mark.parametrize("kind", list(HTTP_SAMPLES))
def test_batch_api_answers_every_hostile_sample(server_url, kind):
    samples = HTTP_SAMPLES[kind]
    body = {"samples": [{"id": key, "completion": completion, "label": label} for key, completion, label, _ in samples]}

    response = requests.post(f"{server_url}/v1/rewards", json=body, timeout=300)

    assert response.status_code == 200, response.text[:2000]
    results = {r["id"]: r for r in response.json()["results"]}
    assert {key: results[key]["verdict"] for key, *_ in samples} == {key: verdict for key, _, _, verdict in samples}
    assert all(results[key]["reward"] is not None for key, *_ in samples)


@pytest.mark.parametrize("kind", list(HTTP_SAMPLES))
def test_get_reward_answers_every_hostile_sample(server_url, kind):
    samples = HTTP_SAMPLES[kind]
    prompt = "<|im_start|>user\nWrite add.<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [prompt + completion + "<|im_end|>" for _, completion, _, _ in samples],
            "prompts": [prompt] * len(samples), "labels": [json.dumps(label) for _, _, label, _ in samples]}

    response = requests.post(f"{server_url}/get_reward", json=body, timeout=300)

    assert response.status_code == 200, response.text[:2000]
    assert response.json()["rewards"] == [0.0 if verdict == "failed" else -1.0 for *_, verdict in samples]


def run_code(url: str, code: str) -> dict:
    # verl's request (tests/docker/test_run_code.py)
    payload = json.dumps({"compile_timeout": 10, "run_timeout": 10, "code": code, "stdin": "1 2\n",
                          "memory_limit_MB": 1024, "language": "python", "files": {}, "fetch_files": []})
    response = requests.post(f"{url}/run_code", data=payload, timeout=60,
                             headers={"Content-Type": "application/json", "Accept": "application/json"})
    assert response.status_code == 200, response.text[:2000]
    return response.json()


@pytest.mark.parametrize("shape", list(TOO_DEEP))
def test_run_code_runs_code_too_deep_to_compile_as_python_would(server_url, shape):
    out = run_code(server_url, ADD + TOO_DEEP[shape] + MAIN)

    # What Python itself does with it: exits 1, its error on stderr; never our failure.
    assert out["status"] == "Failed", out
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("Finished", 1), out
    assert run["stderr"].rstrip().rsplit("\n", 1)[-1].startswith(("RecursionError", "MemoryError")), run["stderr"]
    assert out["message"].startswith(("RecursionError", "MemoryError")), out["message"]


def test_run_code_program_raising_a_lone_surrogate(server_url):
    out = run_code(server_url, SURROGATE_AT_IMPORT)

    assert out["status"] == "Failed" and out["run_result"]["return_code"] == 1, out
