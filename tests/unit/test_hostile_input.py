"""Hostile but cheap inputs on the host (issue 15): whatever a completion or a
label holds, reading it answers its own sample and takes time linear in its
size. Each case here once raised, hung for minutes, or grew without bound."""

import asyncio
import contextlib
import json
import tracemalloc

import pytest

from rewardbox.adapters import score_async
from rewardbox.rewards import (
    CodeReward,
    CompositeReward,
    FormatReward,
    LabelError,
    Sample,
    extract_code,
    parse_label,
    strip_completion,
)
from rewardbox.rewards.base import Reward, RewardOutput
from rewardbox.rewards.labels import LabelCache
from rewardbox.rewards.logs import sample_logs
from rewardbox.rewards.safe_json import MAX_JSON_DEPTH, loads, plain
from rewardbox.rewards.syntax import TooComplex, parse
from rewardbox.sandbox import EngineUnavailable, RunResult, Verdict

F = "def f(x):\n    return x + 1\n"
CHECK = {"test": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "f"}

# Shapes Python's parser refuses with RecursionError or MemoryError, not SyntaxError.
NESTED = {
    "unary-operators": "def f(x):\n    return " + "- " * 5000 + "x\n",
    "plus-chain": "def f(x):\n    return " + "x+" * 50_000 + "x\n",
    "elif-table": "def f(x):\n    if x == 0: return 0\n" + "".join(f"    elif x == {i}: return {i}\n" for i in range(1, 20_000)),
}


@pytest.mark.parametrize("code", NESTED.values(), ids=NESTED.keys())
def test_code_too_deep_to_parse_is_a_syntax_error_not_an_exception(code):
    try:
        parse(code)
    except TooComplex as exc:
        assert isinstance(exc, SyntaxError)
    assert extract_code(code) == code  # unfenced: still code, which the container refuses to compile
    assert extract_code(f"```python\n{code}```") == code


@pytest.mark.parametrize("code", NESTED.values(), ids=NESTED.keys())
def test_a_check_label_joins_deep_code_without_raising(code, fake_sandbox):
    sandbox = fake_sandbox(RunResult(verdict=Verdict.SYNTAX_ERROR, message="RecursionError"))
    out = CodeReward(sandbox).score(Sample(completion=code, prompt="def f(x):\n", label={**CHECK, "prompt": "def f(x):\n"}))

    assert out.verdict == "syntax_error" and out.reward == -1.0
    assert sandbox.requests[0].files["solution.py"].endswith(code)


@pytest.mark.timeout(20)  # quadratic before: ~25 minutes for these sizes
@pytest.mark.parametrize("completion, code", [
    pytest.param(F + "</s> " * 200_000 + "x", "?", id="end-tokens-then-text"),
    pytest.param(f"```python\n{F}```" + "</s>" * 250_000, F, id="end-tokens-after-a-block"),
    pytest.param("```" + "a" * 1_000_000, None, id="fence-line-without-newline"),
    pytest.param("```a\n" * 200_000, "", id="fence-lines"),
    pytest.param(" <s>" * 250_000 + F, F, id="start-tokens"),
    pytest.param("a\n" * 500_000, None, id="a-megabyte-of-names"),
])
def test_a_megabyte_of_hostile_text_is_read_in_linear_time(completion, code):
    found = extract_code(completion)
    if code == "?":  # code among junk: either reading is fine, the container judges it
        assert found is None or found.startswith(F)
    elif code == "":  # fence lines pair into empty blocks
        assert found is None
    else:
        assert found == code


def test_edge_tokens_are_stripped_as_before():
    assert strip_completion("  <s> <bos>x<s></s> <eos>\n<pad>  ") == "x<s>"
    assert strip_completion("<s></s>") == ""
    assert strip_completion("a </s>") == "a "


@pytest.mark.timeout(20)
def test_the_one_code_block_rule_is_linear():
    check = FormatReward.one_code_block()
    assert check("```a\n" * 200_000).reward == 0.0
    assert check(f"Here:\n```python\n{F}```\nDone.").reward == 1.0
    assert check(f"```python\n{F}```\n```\nx\n```").reward == 0.0


@pytest.mark.parametrize("raw", [
    pytest.param("[" * 100_000 + "]" * 100_000, id="json-string"),
    pytest.param(json.dumps({"input_output": "[" * 5000 + "]" * 5000}), id="apps-input-output"),
])
def test_labels_nested_thousands_deep_are_label_errors(raw):
    with pytest.raises(LabelError, match="nested"):
        parse_label(raw)


def test_label_objects_nested_thousands_deep_are_label_errors():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(LabelError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
        parse_label({"fn_name": "f", "inputs": [deep], "outputs": [1]})


def test_the_label_cache_is_bounded_by_bytes():
    cache = LabelCache(max_bytes=8 << 20)
    for i in range(40):  # 40 distinct 0.5 MB stdio labels: 60 MB by the cache's estimate
        label = parse_label(json.dumps({"inputs": [f"{i}\n" + "x" * (512 << 10)], "outputs": ["1\n"]}), cache=cache)
        assert label.kind == "stdio"
    assert 0 < cache.bytes <= cache.max_bytes
    assert 1 <= len(cache) < 40
    small = LabelCache(max_bytes=0)
    assert parse_label(json.dumps(CHECK), cache=small).kind == "check" and len(small) == 0


def test_weights_that_overflow_when_summed_are_refused():
    with pytest.raises(ValueError, match="sum to inf"):
        CompositeReward([(FormatReward.think_answer(), 1e308), (FormatReward.one_code_block(), 1e308)])


def test_an_error_of_ours_while_reading_a_sample_answers_that_sample(fake_sandbox, monkeypatch):
    def broken(self, code, limits, prompt=None):
        raise KeyError("a bug")

    monkeypatch.setattr(type(parse_label(CHECK)), "request", broken)
    out = CodeReward(fake_sandbox()).score(Sample(completion=F, label=CHECK))

    assert out.reward is None and "KeyError" in out.metadata["error"]


class _Raises(Reward):
    name = "raises"

    def score(self, sample: Sample) -> RewardOutput:
        if sample.completion == "bad":
            raise ZeroDivisionError("a bug in a reward function")
        if sample.completion == "down":
            raise EngineUnavailable("engine down")
        return RewardOutput(reward=1.0, score=1.0)


def test_a_batch_answers_every_sample_when_one_reward_raises():
    outputs = asyncio.run(score_async(_Raises(), [Sample(completion="ok"), Sample(completion="bad"), Sample(completion="ok")]))

    assert [o.reward for o in outputs] == [1.0, None, 1.0]
    assert "ZeroDivisionError" in outputs[1].metadata["error"]
    with pytest.raises(EngineUnavailable):  # our failure: the whole batch is tried again, never a reward
        asyncio.run(score_async(_Raises(), [Sample(completion="ok"), Sample(completion="down")]))


def test_anything_a_reward_reports_becomes_json_data():
    reported = {"verdict": Verdict.PASSED, "message": "x\ud800y", "duration_s": float("nan"), "seen": {1}, "o": object()}
    data = plain(reported)

    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["message"] == "x\ufffdy" and data["duration_s"] is None and data["verdict"] == "passed"
    assert sample_logs(RewardOutput(reward=1.0, score=1.0, metadata={"duration_s": float("inf")}))["sandbox_latency_s"] == 0.0


def test_bounded_json_reads_what_datasets_hold():
    nested = {"inputs": [[[1, [2, [3]]]]], "s": "[[[[[[" * 1000}
    assert loads(json.dumps(nested)) == nested


@pytest.mark.parametrize("raw", [
    pytest.param('{"test_list": [], "test_setup_code": null}', id="mbpp-null-setup"),
    pytest.param({"test_list": ["assert f(1) == 2"], "test_imports": [None]}, id="mbpp-null-import"),
    pytest.param({"test_cases": [{"input": None, "output": 3}]}, id="open-r1-wrong-types"),
])
def test_labels_of_any_shape_are_label_errors_or_labels(raw):
    with contextlib.suppress(LabelError):
        parse_label(raw)


def test_a_long_string_in_deep_json_is_measured_in_constant_memory():
    # A CLI line or label with a long string and more than 200 brackets: its depth was
    # measured with a regex over whole strings that kept ~120 bytes per character
    # (a 100 MB line cost 12 GB, and the fuzz tier's CLI test ran the machine out of memory).
    line = json.dumps({"completion": "x" * 2_000_000, "label": [[i] for i in range(300)]})
    tracemalloc.start()
    try:
        assert loads(line)["label"][299] == [299]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 30 << 20, f"{peak >> 20} MiB to read a {len(line) >> 20} MiB line"
