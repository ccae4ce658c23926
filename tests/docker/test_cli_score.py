"""`rewardbox score` end to end: a file mixing every label format, code and
math, through the real command, real containers and the real math checker."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

MIXED = Path(__file__).parents[2] / "examples" / "mixed.jsonl"

# id -> (reward, verdict), as examples/make_rollouts.py describes each rollout.
EXPECTED = {
    "mbpp-pass": (1.0, "passed"),
    "mbpp-partial": (2 / 3, "failed"),
    "humaneval-continuation": (1.0, "passed"),
    "apps-stdio": (1.0, "passed"),
    "leetcode-call": (1.0, "passed"),
    "open-r1-loop": (-0.5, "timeout"),
    "gsm8k": (1.0, "passed"),
    "math-boxed": (1.0, "passed"),
    "math-wrong": (0.0, "failed"),
    "bad-label": (None, None),
}


def score(*args: str) -> tuple[list[dict], str]:
    done = subprocess.run([sys.executable, "-m", "rewardbox.cli", "score", str(MIXED), "--no-progress", *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_a_mixed_file_is_scored_per_label():
    records, summary = score()

    assert [r["id"] for r in records] == list(EXPECTED)  # every line answered, in order
    assert {r["id"]: r["verdict"] for r in records} == {k: verdict for k, (_, verdict) in EXPECTED.items()}
    for r in records:
        assert r["reward"] == pytest.approx(EXPECTED[r["id"]][0]), r
    by_id = {r["id"]: r for r in records}
    assert by_id["bad-label"]["error"] == "bad stdio label: label: 1 inputs but 0 outputs"
    assert by_id["mbpp-partial"]["kind"] == "asserts"
    assert [t["outcome"] for t in by_id["mbpp-partial"]["tests"]] == ["passed", "failed", "passed"]
    assert "samples      10" in summary


def test_a_named_composition_weighs_the_rewards():
    records, _ = score("--reward", "correctness=0.75,format_one_code_block=0.25")

    by_id = {r["id"]: r for r in records}
    # Fenced code, all tests passed: 0.75 * 1 + 0.25 * 1.
    assert by_id["mbpp-pass"]["reward"] == pytest.approx(1.0)
    # A continuation without a fence: correct, but not the format asked for.
    assert by_id["humaneval-continuation"]["reward"] == pytest.approx(0.75)
    assert by_id["humaneval-continuation"]["components"]["format_one_code_block"]["reward"] == 0.0
    assert by_id["bad-label"]["reward"] is None


def test_an_unknown_reward_is_a_clear_error():
    done = subprocess.run([sys.executable, "-m", "rewardbox.cli", "score", str(MIXED), "--reward", "nope"],
                          capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    assert "unknown reward 'nope'; known: code, correctness," in done.stderr
