"""`rewardbox.rewards.format` and `rewardbox.rewards.length`: shape and length of a response."""

import pytest
from pydantic import ValidationError

from rewardbox.rewards.base import Sample
from rewardbox.rewards.format import ONE_CODE_BLOCK, THINK_ANSWER, FormatReward, FormatSpec, response_text
from rewardbox.rewards.length import LengthReward, LengthSpec

THINK_ANSWER_OK = [
    pytest.param("<think>2+2=4</think><answer>4</answer>", id="tight"),
    pytest.param("<think>\nadd them\n</think>\n\n<answer>\n4\n</answer>\n", id="newlines"),
    pytest.param("  <think>a</think>   <answer>b</answer>  ", id="spaces-around"),
    pytest.param("<think></think><answer>4</answer>", id="empty-think"),
    pytest.param("<think>x < y and y > z</think><answer>a<b</answer>", id="angle-brackets-in-text"),
    pytest.param("<think>use ```code```</think><answer>```python\nprint(1)\n```</answer>", id="code-inside"),
    pytest.param("<think>a</think><answer>4</answer><|im_end|>", id="trailing-chat-token"),
    pytest.param("<|im_start|><think>a</think><answer>4</answer><|endoftext|>", id="chat-tokens-around"),
    pytest.param("<s><think>a</think><answer>4</answer></s>", id="bos-eos"),
    pytest.param("<think>a</think><answer>4</answer><|eot_id|>\n</s><pad><pad>", id="eos-and-padding"),
]

THINK_ANSWER_BAD = [
    pytest.param("", id="empty"),
    pytest.param("The answer is 4.", id="plain-text"),
    pytest.param("<think>a</think>", id="missing-answer"),
    pytest.param("<answer>4</answer>", id="missing-think"),
    pytest.param("<answer>4</answer><think>a</think>", id="wrong-order"),
    pytest.param("Sure! <think>a</think><answer>4</answer>", id="text-before"),
    pytest.param("<think>a</think>So: <answer>4</answer>", id="text-between"),
    pytest.param("<think>a</think><answer>4</answer> Hope this helps!", id="text-after"),
    pytest.param("<think>a <think>b</think> c</think><answer>4</answer>", id="nested-think"),
    pytest.param("<think>a</think><think>b</think><answer>4</answer>", id="two-thinks"),
    pytest.param("<think>a</think><answer>4</answer><answer>5</answer>", id="two-answers"),
    pytest.param("<think>a <answer>3</answer></think><answer>4</answer>", id="answer-inside-think"),
    pytest.param("<think>a</think><answer>4 <think>b</think></answer>", id="think-inside-answer"),
    pytest.param("<think>a</think><answer></answer>", id="empty-answer"),
    pytest.param("<think>a</think><answer>  \n </answer>", id="blank-answer"),
    pytest.param("<think>a</think><answer>4", id="unclosed-answer"),
    pytest.param("<think>a<answer>4</answer>", id="unclosed-think"),
    pytest.param("<THINK>a</THINK><ANSWER>4</ANSWER>", id="upper-case-tags"),
    pytest.param("<think>a</think><answer>4</answer>\n<|im_end|>Extra", id="text-after-chat-token"),
]


@pytest.mark.parametrize("completion", THINK_ANSWER_OK)
def test_think_answer_accepts(completion):
    out = FormatReward.think_answer()(completion)
    assert (out.reward, out.score) == (1.0, 1.0)
    assert out.details() == {"verdict": "passed", "format_ok": True, "failed_rule": None, "failed_pattern": None}


@pytest.mark.parametrize("completion", THINK_ANSWER_BAD)
def test_think_answer_rejects(completion):
    out = FormatReward.think_answer()(completion)
    assert (out.reward, out.score) == (0.0, 0.0)
    assert out.verdict == "failed" and out.metadata["format_ok"] is False
    assert out.metadata["failed_rule"] == "required"
    assert out.metadata["failed_pattern"] == THINK_ANSWER.required[0]


def test_think_answer_strips_the_prompt_prefix():
    prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    response = "<think>a</think><answer>4</answer><|im_end|>"
    check = FormatReward.think_answer()
    assert check(prompt + response, prompt=prompt).reward == 1.0
    assert check(response, prompt=prompt).reward == 1.0  # TRL passes the completion alone
    # Without the prompt, the template's text counts as text outside the tags.
    assert check(prompt + response).reward == 0.0


@pytest.mark.parametrize("prompt", ["<|im_start|>assistant\n<think>\n", "Assistant: <think>", "<think>"])
def test_think_opened_by_the_prompt(prompt):
    check = FormatReward.think_answer()
    assert check("reasoning</think>\n<answer>4</answer>", prompt=prompt).reward == 1.0
    assert check(prompt + "reasoning</think>\n<answer>4</answer>", prompt=prompt).reward == 1.0
    # The model may still write the tag itself.
    assert check("<think>reasoning</think><answer>4</answer>", prompt=prompt).reward == 1.0
    assert check("reasoning, no answer", prompt=prompt).reward == 0.0


def test_think_in_prompt_only_counts_at_its_end():
    prompt = "Use <think> tags. Question: 2+2?\n"
    assert FormatReward.think_answer()("reasoning</think><answer>4</answer>", prompt=prompt).reward == 0.0


def test_response_text_keeps_or_drops_reasoning():
    completion = "<think>a</think>b<|im_end|>"
    assert response_text(completion) == "<think>a</think>b"
    assert response_text(completion, keep_think=False) == "b"
    assert response_text("Q: x\nA: <think>a</think>b", prompt="Q: x\nA: ") == "<think>a</think>b"


F = "```python\ndef f(x):\n    return x + 1\n```"

ONE_BLOCK_OK = [
    pytest.param(F, id="alone"),
    pytest.param(f"Here is the solution:\n{F}\nIt adds one.", id="prose-around"),
    pytest.param("```\nprint(1)\n```", id="untagged"),
    pytest.param("   ```cpp\nint x;\n   ```   \n", id="indented-fences"),
    pytest.param('```python title="a.py"\nx = 1\n```', id="info-string"),
    pytest.param(f"<think>first try:\n```python\nx = 0\n```\n</think>\n{F}", id="block-inside-think-ignored"),
    pytest.param(f"{F}<|im_end|>", id="trailing-chat-token"),
    pytest.param(f"<|im_start|>{F}<|endoftext|></s>", id="chat-tokens-around"),
    pytest.param("Use `x` inline, then:\n```python\nx = 1\n```", id="inline-code"),
    pytest.param("```python\n```", id="empty-block"),
]

ONE_BLOCK_BAD = [
    pytest.param("def f(x):\n    return x + 1\n", id="plain-code"),
    pytest.param("", id="empty"),
    pytest.param(f"{F}\nand a test:\n```python\nassert f(1) == 2\n```", id="two-blocks"),
    pytest.param("```python\ndef f(x):\n    return x", id="unclosed-fence"),
    pytest.param(f"{F}\nand then:\n```python\nx = 1\n", id="block-then-unclosed"),
    pytest.param("Use ```python print(1)``` inline", id="inline-triple-backticks"),
    pytest.param(f"<think>only here:\n{F}\n</think>", id="block-only-inside-think"),
    pytest.param(f"<think>unfinished reasoning\n{F}", id="unclosed-think"),
    pytest.param("```python\nx = 1\n``` trailing", id="closing-fence-with-text"),
]


@pytest.mark.parametrize("completion", ONE_BLOCK_OK)
def test_one_code_block_accepts(completion):
    out = FormatReward.one_code_block()(completion)
    assert out.reward == 1.0, out.metadata
    assert out.verdict == "passed"


@pytest.mark.parametrize("completion", ONE_BLOCK_BAD)
def test_one_code_block_rejects(completion):
    out = FormatReward.one_code_block()(completion)
    assert out.reward == 0.0
    assert out.verdict == "failed"


def test_one_code_block_names_the_broken_rule():
    check = FormatReward.one_code_block()
    assert check("no code").metadata["failed_rule"] == "required"
    two = check(f"{F}\n{F}").metadata
    assert (two["failed_rule"], two["failed_pattern"]) == ("forbidden", ONE_CODE_BLOCK.forbidden[0])


def test_custom_spec_rewards_and_flags():
    check = FormatReward(required=[r"\\boxed\{"], forbidden=[r"^sorry"], ignorecase=True, reward_ok=0.5, reward_bad=-1.0)
    assert (check(r"so \boxed{4}").reward, check(r"so \boxed{4}").score) == (0.5, 1.0)
    assert (check("no box").reward, check("no box").score) == (-1.0, 0.0)
    out = check("Well.\nSORRY, \\boxed{4}")
    assert out.reward == -1.0 and out.metadata["failed_pattern"] == "^sorry"  # multiline and ignorecase
    assert FormatReward(required=["^b"], multiline=False)("a\nb").reward == 0.0
    assert FormatReward(required=["a.b"], dotall=False)("a\nb").reward == 0.0
    assert FormatReward(required=["a.b"])("a\nb").reward == 1.0


def test_overrides_and_strip_off():
    check = FormatReward.think_answer(reward_bad=-1.0)
    assert check.name == "format_think_answer" and check.spec.required == THINK_ANSWER.required
    assert check("nope").reward == -1.0
    raw = FormatReward.think_answer(strip=False)
    assert raw("<think>a</think><answer>4</answer><|im_end|>").reward == 0.0
    assert FormatReward()("anything").reward == 1.0  # no rule, nothing to break


def test_format_ignores_the_label():
    out = FormatReward.think_answer().score(Sample(completion="<think>a</think><answer>4</answer>", label={"bad": object()}))
    assert out.reward == 1.0


@pytest.mark.parametrize("fields", [{"required": ["("]}, {"forbidden": ["[a-"]}, {"reward_ok": 0.0, "reward_bad": 0.0},
                                    {"unknown": 1}])
def test_invalid_specs(fields):
    with pytest.raises(ValidationError):
        FormatSpec(**fields)


def test_spec_is_frozen():
    with pytest.raises(ValidationError):
        THINK_ANSWER.reward_ok = 2.0


@pytest.mark.parametrize("length, reward", [
    (0, 1.0), (50, 1.0), (100, 1.0), (125, 0.75), (150, 0.5), (175, 0.25), (200, 0.0), (201, 0.0), (10_000, 0.0),
])
def test_length_curve(length, reward):
    out = LengthReward(target_chars=100, max_chars=200)("x" * length)
    assert out.reward == pytest.approx(reward)
    assert out.score == pytest.approx(reward)
    assert out.metadata == {"length_chars": length}


@pytest.mark.parametrize("length, reward, score", [(100, 1.0, 1.0), (150, 0.0, 0.5), (175, -0.5, 0.25), (300, -1.0, 0.0)])
def test_length_curve_with_a_penalty(length, reward, score):
    out = LengthReward(target_chars=100, max_chars=200, min_reward=-1.0)("x" * length)
    assert (out.reward, out.score) == (pytest.approx(reward), pytest.approx(score))


def test_length_is_measured_on_the_cleaned_response():
    reward = LengthReward(target_chars=10, max_chars=20)
    prompt = "P" * 50
    out = reward(prompt + "<think>" + "r" * 100 + "</think>" + "x" * 15 + "<|im_end|>", prompt=prompt)
    assert out.metadata["length_chars"] == 15 and out.reward == pytest.approx(0.5)


def test_length_defaults_and_validation():
    assert LengthSpec().target_chars < LengthSpec().max_chars
    assert LengthReward().name == "length"
    for fields in ({"target_chars": 10, "max_chars": 10}, {"target_chars": -1}, {"min_reward": 1.0}):
        with pytest.raises(ValidationError):
            LengthSpec(**fields)
