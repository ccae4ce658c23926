"""MathReward against real math-verify in real pebble worker processes."""

import importlib.util
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from rewardbox.rewards.base import RewardOutput, Sample
from rewardbox.rewards.math import MathConfig, MathReward, _judge, extract_answer


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
    ("So it is \\boxed{42}.", "So it is \\boxed{42}."),  # read whole: math-verify finds the box and its neighbours
    ("\\boxed{3} and then \\boxed{\\frac{1}{2", "\\boxed{3} and then"),  # cut off inside the last box
    ("\\boxed{\\{1, 2\\}} ok", "\\boxed{\\{1, 2\\}} ok"),  # escaped braces do not open or close a box
    ("\\boxed{1\\\\}", "\\boxed{1\\\\}"),  # a LaTeX line break, \\, just before the closing brace
    ("\\boxed{\\frac{1}{\\boxed{2}}}", "\\boxed{\\frac{1}{\\boxed{2}}}"),  # a box inside a box closes
    pytest.param("\\boxed{" * 5_000 + "1", None, id="5000-unclosed-boxes"),  # found in linear time
    ("<answer> 7 </answer> I counted 3 apples", "7"),
    ("<answer>12", "12"),  # generation cut off before </answer>
    ("Natalia sold 48/2 = 24 clips.\n#### 72", "72"),
    ("#### 72\nI hope this helps with 3 things.", "72"),
    ("####\n72", "72"),
    ("The answer is 42.", "The answer is 42."),
    ("<think>it is \\boxed{41}</think>\\boxed{42}<|im_end|>", "\\boxed{42}"),
    ("<think>it is \\boxed{41}", None),  # reasoning that never ended holds no answer
    ("   ", None),
])
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_extract_answer_drops_the_prompt():
    prompt = "<|im_start|>user\nWhat is \\boxed{6 x 7}?<|im_end|>\n<|im_start|>assistant\n"
    assert extract_answer(prompt + "It is 42.<|im_end|>", prompt) == "It is 42."


@pytest.mark.parametrize(("completion", "answer"), [
    ("first \\boxed{3}, then \\boxed{5}", "3,5"),  # listed boxes: math-verify's set
    ("\\boxed{3}. Checking again I find a slip. So \\boxed{5}", "5"),  # a correction: the last box
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ("\\fbox{7}", "7"),
    ("<answer>\\boxed{9}</answer>", "9"),
    ("\\boxed{3} and then \\boxed{\\frac{1}{2", "3"),
])
def test_the_answer_read(reward, completion, answer):
    assert reward.score(sample(completion, "0")).metadata["answer"] == answer


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
    ("1 000", "1000"),
    ("<answer>1 000 000</answer>", "1000000"),
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
    assert output.verdict == "passed"
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
    assert output.verdict == "failed"


# --- several answers, final-answer statements, hedges, false equations, text golds ----------

@pytest.mark.parametrize(("completion", "label", "reward_value"), [
    # Several boxes, or several values in one, are the set math-verify reads ...
    ("The solutions are \\boxed{1}, \\boxed{2}.", {"answer": "\\{1, 2\\}"}, 1.0),
    ("\\boxed{1} and \\boxed{2}", "1, 2", 1.0),
    ("\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}", "(2, 2), (6, 2)", 1.0),
    ("So \\boxed{6 \\text{ and } 8}", "6 \\text{ and } 8", 1.0),
    ("So \\boxed{6, 8}", "6 \\text{ and } 8", 1.0),
    ("So \\boxed{8}", "6 \\text{ and } 8", 0.0),  # ... so one of them is not the answer
    ("The solutions are \\boxed{1}, \\boxed{2}.", "2", 0.0),
    ("\\boxed{6 \\text{ and } 8}", "8", 0.0),
    # The final-answer statement wins over an intermediate box before it.
    ("My first guess was \\boxed{3}. Checking it, the final answer is 5.", "5", 1.0),
    ("My first guess was \\boxed{3}. Checking it, the final answer is $5$.", "5", 1.0),
    ("My first guess was \\boxed{3}. Checking it, the final answer is 5.", "3", 0.0),
    ("Final Answer: The final answer is $5$. I hope it is correct. \\boxed{3}", "5", 1.0),
    # A hedge, several candidates for one answer, scores 0 whichever it names.
    ("\\boxed{3 \\lor 5}", "5", 0.0),
    ("\\boxed{3 \\vee 5}", "3", 0.0),
    ("$3 \\lor 5$", "5", 0.0),
    ("The answer is 3 or 5.", "3", 0.0),
    ("The answer is 3 or 5.", "5", 0.0),
    ("It is 3, or maybe 5", "5", 0.0),
    ("x = 3 or x = 5", "5", 0.0),
    ("\\boxed{3} or \\boxed{5}", "5", 0.0),
    ("\\boxed{\\pm 2}", "2", 0.0),
    # ... but candidates that are the gold set are its answer.
    ("x = 3 or x = 5", "3, 5", 1.0),
    ("\\boxed{x = 3 \\lor x = 5}", {"answer": "x = 3 \\text{ or } x = 5"}, 1.0),
    ("We could use substitution or elimination; either way \\boxed{5}", "5", 1.0),
    ("Either 3 or 5 boxes fit in a row, so two rows hold at most 10.", "10", 1.0),
    # A false computation whose right side is the answer fails ...
    ("\\boxed{2+2=5}", "5", 0.0),
    ("$2 \\times 3 = 7$", "7", 0.0),
    ("So $2+2=4=5$.", "5", 0.0),
    ("\\boxed{\\sqrt{16} = 5}", "5", 0.0),
    # ... a true one, an assignment (math-verify's x = ... = 11 is x = 11) or a conversion passes.
    ("\\boxed{2+2=4}", "4", 1.0),
    ("\\boxed{\\frac{10}{2} = 5}", "5", 1.0),
    ("\\boxed{x = 2 + 3 = 5}", "5", 1.0),
    ("$x = 5+5+1 = 7 = 11$", {"answer": "$x = 11$"}, 1.0),
    ("\\boxed{1 \\text{ hour} = 60}", "60", 1.0),
    # A gold that math-verify reads only as text is compared as text.
    ("\\boxed{p \\Rightarrow q}", "p \\Rightarrow q", 1.0),
    ("\\boxed{q \\Rightarrow p}", "p \\Rightarrow q", 0.0),
    ("$A \\to B$", {"answer": "$A \\to B$"}, 1.0),
])
def test_the_issue_rules(reward, completion, label, reward_value):
    output = reward.score(sample(completion, label))
    assert output.reward == reward_value, output.metadata


@pytest.mark.parametrize(("completion", "label", "reward_value"), [
    # precision: the decimal places compared
    ("0.3333", {"answer": "$\\frac{1}{3}$", "precision": 4}, 1.0),
    ("0.3333", {"answer": "$\\frac{1}{3}$"}, 0.0),
    ("$(0.6,2.6667]$", {"answer": "$(\\frac{3}{5},\\frac{8}{3}]$", "precision": 2}, 1.0),
    ("$(0.6,2.6667]$", {"answer": "$(\\frac{3}{5},\\frac{8}{3}]$"}, 0.0),
    # match_types: what is read as an answer
    ("Answer $ \n 9 \n $", {"answer": "$9$", "match_types": ["latex"]}, 0.0),
    ("Answer $ \n 9 \n $", {"answer": "$9$"}, 1.0),  # the plain-expression reader finds the 9
    ("1 000", {"answer": "1000", "match_types": ["expr"]}, 1.0),
    ("1000,99", {"answer": "1000.99", "match_types": "expr"}, 1.0),
    # strict: whether variables must match
    ("$f(y)$", {"answer": "$f(x)$", "strict": False}, 1.0),
    ("$f(y)$", {"answer": "$f(x)$"}, 0.0),
    # allow_set_relation_comp: an answer relation against a gold set
    ("$-2 \\le x \\le 7$", {"answer": "$x \\in [-2,7]$", "allow_set_relation_comp": True}, 1.0),
    ("$-2 \\le x \\le 7$", {"answer": "$x \\in [-2,7]$"}, 0.0),
])
def test_label_options(reward, completion, label, reward_value):
    output = reward.score(sample(completion, label))
    assert output.reward == reward_value, output.metadata


@pytest.mark.parametrize(("options", "error"), [
    ({"precision": "4"}, "precision: Input should be a valid integer"),
    ({"precision": -1}, "precision: Input should be greater than or equal to 0"),
    ({"precision": 16}, "precision: Input should be less than or equal to 15"),
    ({"match_types": []}, "match_types: Tuple should have at least 1 item"),
    ({"match_types": ["latex", "string"]}, "match_types.1: Input should be 'latex' or 'expr'"),
    ({"match_types": ["expr", "expr"]}, "each match type at most once"),
    ({"strict": "no"}, "strict: Input should be a valid boolean"),
    ({"allow_set_relation_comp": 1}, "allow_set_relation_comp: Input should be a valid boolean"),
])
def test_bad_label_options_give_no_reward(reward, options, error):
    output = reward.score(sample("\\boxed{42}", {"answer": "42", **options}))
    assert output.reward is None and output.score is None
    assert error in output.metadata["error"]


def test_agreement_with_math_verify_test_suite():
    """Math-Verify's own asserted cases (read from the tests in math-verify's
    sdist, which `make install` downloads into bench/.cache; missing, this
    fails saying so), each with its test's options: MathReward agrees with at
    least as many as math-verify itself, measured in this same run."""
    bench = _load_bench("math_verify_agreement")
    cases = bench.load_cases()
    assert len(cases) >= 250 and {case["via"] for case in cases} == {"helper", "parse"}
    with MathReward(MathConfig(workers=2)) as reward:
        result = bench.agreement(cases, reward)
    print(f"MathReward {result['ours']}/{result['cases']}, math-verify {result['math_verify']}/{result['cases']}")
    assert result["ours"] >= result["math_verify"], result["ours_wrong"]


def _load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"rbbench_{name}", Path(__file__).parents[2] / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_metadata(reward):
    output = reward.score(sample("We get \\boxed{\\frac12}.", "0.5"))
    assert output.metadata["answer"] == "\\frac{1}{2}"
    assert output.metadata["expected"] == "0.5"
    assert output.metadata["timeout"] is False
    assert 0 <= output.duration_s < 60
    nothing = reward.score(sample("<think>Let me see", "42"))
    assert nothing.metadata["answer"] is None and nothing.verdict == "failed"
    long = reward.score(sample("\\boxed{" + "1+" * 500 + "1}", "2")).metadata
    assert len(long["answer"]) == 200


@pytest.mark.parametrize(("label", "error"), [
    ({"pytest": "def test_a():\n    assert True\n"}, "not a math label"),
    ("{broken json", "not valid JSON"),
    ({"kind": "nope"}, "unknown label kind"),
    ([1, 2], "must be a JSON object"),
    ({"answer": "no number\nnor formula here"}, "math-verify reads no answer in the gold answer"),
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
    assert output.metadata["timeout"] is True and output.verdict == "failed"
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
    return output.reward, output.score, output.verdict, output.metadata.get("answer")


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


def _crash(answer, label):
    os._exit(3)


def _crash_once(answer, label):
    marker = Path(os.environ["MATH_TEST_CRASH_MARKER"])
    if not marker.exists():
        marker.touch()
        os._exit(3)
    return _judge(answer, label)


class _Crashing(MathReward):
    _judge = staticmethod(_crash)


class _CrashingOnce(MathReward):
    _judge = staticmethod(_crash_once)


def test_an_answer_that_crashes_the_worker_twice_scores_wrong():
    with _Crashing(MathConfig(workers=1)) as reward:
        output = reward.score(sample("\\boxed{41}", "42"))
        assert (output.reward, output.verdict) == (0.0, "failed")
        assert "crashed the math parser twice" in output.metadata["error"]
        assert output.metadata["answer"] == "\\boxed{41}"  # where it was looked for: it was never read
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
