"""MathReward against real math-verify in real pebble worker processes."""

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from rewards.base import RewardOutput, Sample
from rewards.math import MathConfig, MathReward, _judge, extract_answer


@pytest.fixture(scope="module")
def reward():
    with MathReward(MathConfig(timeout_s=5, workers=2)) as reward:
        yield reward


@pytest.fixture(scope="module")
def quick():
    """A short deadline, for answers that never finish."""
    with MathReward(MathConfig(timeout_s=1, workers=1)) as reward:
        reward("\\boxed{1}", "1")
        reward("1/3", "0.5")  # started and warm: the tests below time the deadline, not the start
        yield reward


def sample(completion: str, label, **fields) -> Sample:
    return Sample(completion=completion, label=label, **fields)


# --- finding the answer -------------------------------------------------------

@pytest.mark.parametrize(("completion", "expected"), [
    ("So it is \\boxed{42}.", "42"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}} is it", "\\frac{\\sqrt{3}}{2}"),
    ("first \\boxed{3}, then \\boxed{5}", "5"),
    ("\\boxed{3} and then \\boxed{\\frac{1}{2", "3"),  # cut off inside the last box
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not close the box
    ("\\fbox{7}", "7"),
    ("\\boxed{1\\\\}", "1\\\\"),  # a LaTeX line break, \\, just before the closing brace
    pytest.param("\\boxed{" * 5_000 + "1", "\\boxed{" * 5_000 + "1", id="5000-unclosed-boxes"),  # found in linear time
    ("<answer> 7 </answer> I counted 3 apples", "7"),
    ("<answer>\\boxed{9}</answer>", "9"),
    ("<answer>12", "12"),  # generation cut off before </answer>
    ("Natalia sold 48/2 = 24 clips.\n#### 72", "72"),
    ("#### 72\nI hope this helps with 3 things.", "72"),
    ("####\n72", "72"),
    ("The answer is 42.", "The answer is 42."),
    ("<think>it is \\boxed{41}</think>\\boxed{42}<|im_end|>", "42"),
    ("<think>it is \\boxed{41}", None),  # reasoning that never ended holds no answer
    ("   ", None),
])
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_extract_answer_drops_the_prompt():
    prompt = "<|im_start|>user\nWhat is \\boxed{6 x 7}?<|im_end|>\n<|im_start|>assistant\n"
    assert extract_answer(prompt + "It is 42.<|im_end|>", prompt) == "It is 42."


# --- answers as models write them -------------------------------------------------

@pytest.mark.parametrize(("completion", "label"), [
    ("So the total is \\boxed{42}.", "42"),
    ("40 + 2 = 42\n#### 42", "42"),
    ("The answer is 42.", "42"),
    ("Final Answer: The final answer is $42$. I hope it is correct.", "42"),
    ("She pays 600 * 3 = 1800 dollars in total, so we get 1800", 1800),
    ("#### 1,800", "1800"),
    ("\\boxed{1800}", "1,800"),
    ("\\boxed{1\\,800}", "1800"),
    ("\\boxed{18.0}", "18"),
    ("\\boxed{18}", "18.00"),
    ("\\boxed{\\frac{1}{2}}", "0.5"),
    ("\\boxed{0.5}", "\\frac{1}{2}"),
    ("\\boxed{\\dfrac12}", {"answer": "1/2"}),
    ("$42$", "42"),
    ("The answer is $\\$42$.", "42"),
    ("The answer is 42%.", "42"),  # a percentage matches both readings: 42 ...
    ("\\boxed{42\\%}", "0.42"),  # ... and 0.42
    ("<answer>3\\sqrt{3}</answer>", "3\\sqrt{3}"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt 3}{2}"),
    ("\\boxed{x = 5}", "5"),
    ("\\boxed{(1, 2)}", "(1,2)"),
    ("\\boxed{\\text{Monday}}", "Monday"),
    ("Counting, 48 + 24 = 72.\n#### 72", {"answer": "Natalia sold 48/2 = 24 clips in May.\n#### 72"}),  # GSM8K's answer
    ("\\boxed{\\frac{1}{4}}", {"answer": "So $p = \\frac{1}{4}$.\nThe answer is \\boxed{\\frac14}."}),  # MATH's solution
])
def test_correct_answers_score_one(reward, completion, label):
    output = reward.score(sample(completion, label))
    assert (output.reward, output.score) == (1.0, 1.0), output.metadata
    assert output.metadata["verdict"] == "passed"
    assert output.metadata["timeout"] is False


@pytest.mark.parametrize(("completion", "label"), [
    ("So the total is \\boxed{41}.", "42"),
    ("#### 43", "42"),
    ("42 is tempting, but it is \\boxed{41}", "42"),  # the boxed answer wins over an earlier number
    ("\\boxed{\\frac{1}{3}}", "0.5"),
    ("\\boxed{1,80}", "180"),  # a decimal comma, not a thousands separator
    ("I cannot solve this.", "42"),
    ("", "42"),
    ("\\boxed{}", "42"),
    ("<think>The answer is 42</think>", "42"),
])
def test_wrong_answers_score_zero(reward, completion, label):
    output = reward.score(sample(completion, label))
    assert (output.reward, output.score) == (0.0, 0.0), output.metadata
    assert output.metadata["verdict"] == "failed"


def test_metadata(reward):
    output = reward.score(sample("We get \\boxed{\\frac12}.", "0.5"))
    assert output.metadata["answer"] == "\\frac{1}{2}"
    assert output.metadata["expected"] == "0.5"
    assert output.metadata["timeout"] is False
    assert 0 <= output.metadata["duration_s"] < 60
    nothing = reward.score(sample("<think>Let me see", "42")).metadata
    assert nothing["answer"] is None and nothing["verdict"] == "failed"
    long = reward.score(sample("\\boxed{" + "1+" * 500 + "1}", "2")).metadata
    assert len(long["answer"]) == 200


@pytest.mark.parametrize(("label", "error"), [
    ({"pytest": "def test_a():\n    assert True\n"}, "not a math label"),
    ("{broken json", "not valid JSON"),
    ({"kind": "nope"}, "unknown label kind"),
    ([1, 2], "must be a JSON object"),
    ("???", "not math that math-verify can parse"),
])
def test_unusable_label_gives_no_reward(reward, label, error):
    output = reward.score(sample("\\boxed{42}", label))
    assert output.reward is None and output.score is None
    assert error in output.metadata["error"]


def test_configured_rewards_keep_score_in_unit_range():
    config = MathConfig(correct_reward=2.0, wrong_reward=-1.0)
    with MathReward(config) as reward:
        right, wrong = reward.score_many([sample("#### 42", "42"), sample("#### 41", "42")])
    assert (right.reward, right.score) == (2.0, 1.0)
    assert (wrong.reward, wrong.score) == (-1.0, 0.0)


def test_config_is_frozen_and_checked():
    config = MathConfig()
    assert (config.correct_reward, config.wrong_reward, config.timeout_s) == (1.0, 0.0, 5.0)
    assert 1 <= config.workers <= 4
    with pytest.raises(ValidationError):
        config.timeout_s = 1  # type: ignore[misc]
    with pytest.raises(ValidationError, match="greater than"):
        MathConfig(correct_reward=0.0, wrong_reward=0.0)
    with pytest.raises(ValidationError):
        MathConfig(timeout_s=0)


# --- deadlines, crashes, threads ------------------------------------------------------

@pytest.mark.parametrize("completion", [
    "\\boxed{9^{9^{9^{9^{9}}}}}",
    "\\boxed{" + "+".join(["1"] * 50_000) + "}",  # a 100k-character expression
    "\\boxed{(10^{10})!}",
])
def test_pathological_answer_is_killed_at_the_deadline(quick, completion):
    start = time.monotonic()
    output = quick.score(sample(completion, "42"))
    elapsed = time.monotonic() - start
    assert elapsed < quick.config.timeout_s + 4
    assert (output.reward, output.score) == (0.0, 0.0)
    assert output.metadata["timeout"] is True and output.metadata["verdict"] == "failed"
    after = quick.score(sample("\\boxed{\\frac{1}{2}}", "0.5"))  # the pool replaced its killed worker
    assert after.reward == 1.0


def test_deeply_nested_fractions_end(quick):
    start = time.monotonic()
    output = quick.score(sample("\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}", "42"))
    assert time.monotonic() - start < quick.config.timeout_s + 4
    assert output.reward == 0.0


def test_concurrent_threads_agree_with_sequential(reward):
    cases = [
        ("\\boxed{42}", "42"), ("\\boxed{\\frac{1}{2}}", "0.5"), ("#### 43", "42"), ("The answer is 7.", "7"),
        ("\\boxed{\\sqrt{2}}", "\\sqrt{2}"), ("\\boxed{3}", "\\pi"), ("no idea", "1"), ("\\boxed{1}", {"kind": "nope"}),
    ]
    samples = [sample(completion, label, id=i) for i, (completion, label) in enumerate(cases * 8)]
    sequential = [_essence(reward.score(s)) for s in samples]
    with ThreadPoolExecutor(max_workers=32) as threads:
        concurrent = [_essence(o) for o in threads.map(reward.score, samples)]
    assert concurrent == sequential
    assert [r for r, *_ in sequential[:8]] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, None]


def _essence(output: RewardOutput) -> tuple:
    return output.reward, output.score, output.metadata.get("verdict"), output.metadata.get("answer")


def test_score_many_keeps_the_order(reward):
    labels = [str(n) for n in range(40)]
    completions = [f"\\boxed{{{n if n % 3 else n + 1}}}" if n % 2 else f"{n}/1" for n in range(40)]
    outputs = reward.score_many(sample(c, label) for c, label in zip(completions, labels))
    expected = [0.0 if n % 2 and not n % 3 else 1.0 for n in range(40)]
    assert [o.reward for o in outputs] == expected
    assert [o.metadata["expected"] for o in outputs] == labels


def test_submit_returns_a_future(reward):
    future = reward.submit(sample("\\boxed{\\frac{2}{4}}", "0.5"))
    assert isinstance(future, Future)
    assert future.result(timeout=30).reward == 1.0
    unusable = reward.submit(sample("\\boxed{1}", "{bad"))
    assert unusable.done() and unusable.result().reward is None


def _crash(answer, gold):
    os._exit(3)


def _crash_once(answer, gold):
    marker = Path(os.environ["MATH_TEST_CRASH_MARKER"])
    if not marker.exists():
        marker.touch()
        os._exit(3)
    return _judge(answer, gold)


class _Crashing(MathReward):
    _judge = staticmethod(_crash)


class _CrashingOnce(MathReward):
    _judge = staticmethod(_crash_once)


def test_an_answer_that_crashes_the_worker_twice_scores_wrong():
    with _Crashing(MathConfig(workers=1)) as reward:
        output = reward.score(sample("\\boxed{41}", "42"))
        assert (output.reward, output.metadata["verdict"]) == (0.0, "failed")
        assert "crashed the math parser twice" in output.metadata["error"]
        assert output.metadata["answer"] == "41"
        assert reward.score(sample("#### 42", "42")).reward == 1.0  # a plain number needs no worker


def test_a_single_worker_crash_is_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("MATH_TEST_CRASH_MARKER", str(tmp_path / "crashed"))
    with _CrashingOnce(MathConfig(workers=1)) as reward:
        output = reward.score(sample("\\boxed{\\frac{1}{2}}", "0.5"))
    assert (tmp_path / "crashed").exists()
    assert output.reward == 1.0 and "error" not in output.metadata


def test_close_stops_the_workers_and_refuses_more_work():
    reward = MathReward(MathConfig(workers=1))
    assert reward._pool is None  # started lazily
    assert reward.score(sample("\\boxed{\\frac{1}{2}}", "0.5")).reward == 1.0
    pool = reward._pool
    reward.close()
    reward.close()
    assert reward._pool is None and not pool.active
    with pytest.raises(RuntimeError, match="closed"):
        reward.score(sample("\\boxed{\\frac{1}{2}}", "0.5"))
