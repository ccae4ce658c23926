"""`rewardbox.rewards.extract`: finding the code in a completion."""

import re

import pytest

from rewardbox.rewards import FormatReward, extract_code, strip_completion

F = "def f(x):\n    return x + 1\n"
G = "def g():\n    return 2\n"


@pytest.mark.parametrize("completion, code", [
    pytest.param(f"Here is the solution:\n```python\n{F}```\nIt adds one.", F, id="python-fence-with-prose"),
    pytest.param(f"```python\n{F}```", F, id="python-fence-alone"),
    pytest.param(f"```Python\n{F}```", F, id="tag-case-insensitive"),
    pytest.param(f"```python3\n{F}```", F, id="python3-tag"),
    pytest.param(f"```py\n{F}```", F, id="py-tag"),
    pytest.param(f"```\n{F}```", F, id="untagged"),
    pytest.param(f"```python title=\"solution.py\"\n{F}```", F, id="tag-with-attributes"),
    pytest.param(f"Answer:\n   ```python\n{F}   ```\n", F, id="indented-fences"),
    pytest.param(f"First try:\n```python\n{G}```\nBetter:\n```python\n{F}```\nDone.", F, id="last-python-wins"),
    pytest.param(f"```python\n{F}```\nRun it with:\n```bash\npython solution.py\n```\n", F,
                 id="later-non-python-block-ignored"),
    pytest.param(f"```js\nconst f = x => x + 1;\n```\n```python\n{F}```\n```cpp\nint f(int x);\n```", F,
                 id="python-among-other-languages"),
    pytest.param(f"Here you go:\n```python\n{F}", F, id="unclosed-fence-truncated"),
    pytest.param(f"```python\n{G}```\nNow the fix:\n```python\ndef f(x):\n    ret", G,
                 id="truncated-second-block-ignored"),
    pytest.param(F, F, id="plain-code"),
    pytest.param("import math\nprint(math.pi)\n", "import math\nprint(math.pi)\n", id="plain-script"),
    pytest.param("x = 1", "x = 1", id="plain-assignment"),
    pytest.param("def f(x):\n    return x +\n", "def f(x):\n    return x +\n", id="plain-code-with-syntax-error"),
    pytest.param("@cache\ndef f(x):\n    return x\n", "@cache\ndef f(x):\n    return x\n", id="decorated"),
])
def test_code_is_found(completion, code):
    assert extract_code(completion) == code


@pytest.mark.parametrize("completion", [
    pytest.param("", id="empty"),
    pytest.param("   \n\t\n", id="whitespace"),
    pytest.param("I cannot solve this problem.", id="prose"),
    pytest.param("Sorry, I don't know how to do that. Could you clarify the input format?", id="prose-question"),
    pytest.param("Hello", id="single-word"),
    pytest.param("```bash\npip install numpy\n```", id="bash-only"),
    pytest.param("```js\nconst f = 1;\n```\n```rust\nfn f() {}\n```", id="other-languages-only"),
    pytest.param("```cpp\nint main() {", id="unclosed-non-python"),
    pytest.param("```python\n```", id="empty-fence"),
    pytest.param("```python\n   \n\n```", id="blank-fence"),
    pytest.param("<|im_end|>", id="only-special-tokens"),
    pytest.param("<think>Let me think about def f(x): return x", id="unterminated-think"),
    pytest.param("<think>\ndef f(x):\n    return x\n</think>", id="code-only-inside-think"),
])
def test_no_code(completion):
    assert extract_code(completion) is None


@pytest.mark.parametrize("token", ["<|im_end|>", "</s>", "<|eot_id|>", "<|endoftext|>", "<end_of_turn>", "<eos>"])
def test_special_tokens_are_removed(token):
    assert extract_code(f"```python\n{F}```{token}") == F
    assert extract_code(f"{F}{token}") == F
    assert strip_completion(f"Done.{token}{token}") == "Done."


def test_chat_markers_and_padding_are_removed():
    completion = f"<|im_start|>```python\n{F}```<|im_end|><|endoftext|><|endoftext|>"

    assert strip_completion(completion) == f"```python\n{F}```"
    assert extract_code(completion) == F


@pytest.mark.parametrize("completion, stripped", [
    pytest.param("<think>f should add one</think>\nanswer", "\nanswer", id="closed-think"),
    pytest.param(" \n<think>a</think>b", "b", id="after-leading-whitespace"),
    pytest.param("<|im_start|>assistant\n<think>a</think>b<|im_end|>", "b", id="after-a-leading-turn-header"),
    pytest.param("the template opened think</think>answer", "answer", id="closing-only"),
    pytest.param("reasoning</think>draft</think>answer", "answer", id="last-closing-wins"),
    pytest.param("<think>a</think>b<think>c</think>d", "d", id="reasoning-ends-at-the-last-closing"),
    pytest.param("<think>never ends", "", id="unterminated-at-start"),
    pytest.param("<|im_start|>assistant\n <think>never ends<|im_end|>", "", id="unterminated-after-header"),
    pytest.param("answer<think>more thoughts", "answer<think>more thoughts", id="opening-mid-text-is-text"),
    pytest.param("Use <think> tags.", "Use <think> tags.", id="opening-in-prose-is-text"),
    pytest.param("plain answer", "plain answer", id="no-think"),
])
def test_think_blocks(completion, stripped):
    assert strip_completion(completion) == stripped


def test_reasoning_kept_on_request():
    assert strip_completion("<think>a</think>b<|im_end|>", keep_think=True) == "<think>a</think>b"


def test_code_inside_think_is_dropped():
    completion = f"<think>\nMaybe:\n```python\n{G}```\nNo, better:\n</think>\n```python\n{F}```"

    assert extract_code(completion) == F


def test_a_fence_left_open_in_the_reasoning_does_not_hide_its_end():
    completion = f"<think>\nDraft:\n```python\n{G}\n</think>\n```python\n{F}```<|im_end|>"

    assert extract_code(completion) == F
    assert extract_code(completion[len("<think>"):], prompt="<|im_start|>assistant\n<think>") == F


def test_think_opened_by_the_template():
    # The prompt ended with "<think>\n"; the response starts inside the reasoning.
    completion = f"I should add one.\n```python\n{G}```\nhmm</think>\n\n```python\n{F}```<|im_end|>"

    assert extract_code(completion) == F


PROMPT = ("<|im_start|>user\nWrite f. Example of the format:\n```python\ndef example():\n    pass\n```"
          "<|im_end|>\n<|im_start|>assistant\n")


def test_prompt_prefix_is_removed():
    assert strip_completion(PROMPT + "Sure.<|im_end|>", PROMPT) == "Sure."
    assert extract_code(PROMPT + f"```python\n{F}```<|im_end|>", PROMPT) == F


def test_code_in_the_prompt_is_not_taken_for_the_answer():
    query = PROMPT + "I don't know.<|im_end|>"

    assert extract_code(query, PROMPT) is None


def test_prompt_that_is_not_a_prefix_is_left_alone():
    assert strip_completion("Sure.", prompt="something else") == "Sure."
    assert extract_code(f"```python\n{F}```", prompt="unrelated prompt") == F


@pytest.mark.parametrize("prompt", [None, ""])
def test_no_prompt(prompt):
    assert strip_completion("abc<|im_end|>", prompt) == "abc"


# -- tokens and tags inside code are the solution's --------------------------------------------

IM_END = "def f():\n    return '<|im_end|>'\n"


@pytest.mark.parametrize("completion", [
    pytest.param(f"```python\n{IM_END}```<|im_end|>", id="fenced"),
    pytest.param(f"Here:\n```python\n{IM_END}```\nDone.<|im_end|><|endoftext|>", id="fenced-with-prose"),
    pytest.param(f"<think>return the token</think>\n```python\n{IM_END}```<|im_end|>", id="after-reasoning"),
    pytest.param(f"{IM_END}<|im_end|>", id="plain-code"),
])
def test_a_special_token_in_a_string_is_kept(completion):
    assert extract_code(completion) == IM_END


@pytest.mark.parametrize("token", ["<|im_end|>", "<|im_start|>", "<|eot_id|>", "<|endoftext|>", "</s>", "<s>", "<eos>",
                                   "<end_of_turn>", "<start_of_turn>", "[INST]", "<｜end▁of▁sentence｜>"])
def test_every_token_survives_inside_code(token):
    body = f"def f():\n    return {token!r} + '{token}'\n"

    assert extract_code(f"<|im_start|>assistant\n```python\n{body}```<|im_end|>") == body
    assert extract_code(f"<|im_start|>assistant\n{body}<|im_end|>") == body


HANDLES_THINK = ("def strip_reasoning(text):\n    if '<think>' in text and '</think>' not in text:\n        return ''\n"
                 "    return text.split('</think>')[-1]\n")


@pytest.mark.parametrize("completion", [
    pytest.param(f"```python\n{HANDLES_THINK}```<|im_end|>", id="fenced"),
    pytest.param(f"Drop the reasoning:\n```python\n{HANDLES_THINK}```\nIt splits at `</think>`.", id="inline-code-after"),
    pytest.param(f"<think>split at '</think>'?</think>\n```python\n{HANDLES_THINK}```", id="after-reasoning"),
    pytest.param(f"I split at '</think>'.</think>\n```python\n{HANDLES_THINK}```", id="after-template-opened-reasoning"),
    pytest.param(f"{HANDLES_THINK}<|im_end|>", id="plain-code"),
    pytest.param(f"```python\ndef g():\n    return '<think>'\n```\n```python\n{HANDLES_THINK}```",
                 id="unclosed-tag-in-an-earlier-block"),
])
def test_think_tags_in_code_are_text(completion):
    assert extract_code(completion) == HANDLES_THINK


def test_the_prompt_says_the_reasoning_was_opened():
    prompt = "<|im_start|>user\nWrite f.<|im_end|>\n<|im_start|>assistant\n<think>\n"

    # Cut while reasoning: the code drafted so far is no answer.
    assert extract_code(f"Draft:\n```python\n{G}```\nbut", prompt) is None
    assert extract_code(f"Draft:\n```python\n{G}```\nbut", None) == G  # no prompt: nothing says it was reasoning
    assert extract_code(f"Draft:\n```python\n{G}```</think>\n```python\n{F}```", prompt) == F
    assert strip_completion("plan</think>answer", prompt) == "answer"


# -- turns ------------------------------------------------------------------------------------

@pytest.mark.parametrize("end, header", [
    pytest.param("<|im_end|>", "<|im_start|>assistant\n", id="chatml"),
    pytest.param("<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n", id="llama3"),
    pytest.param("<end_of_turn>", "<start_of_turn>model\n", id="gemma"),
    pytest.param("<|end|>", "<|assistant|>\n", id="phi3"),
    pytest.param("<｜end▁of▁sentence｜>", "<｜Assistant｜>", id="deepseek"),
])
def test_turn_boundaries_are_removed(end, header):
    first, second = f"Try:\n```python\n{G}```", f"Fixed:\n```python\n{F}```"
    completion = f"{header}{first}{end}\n{header}{second}{end}"

    stripped = strip_completion(completion)  # whitespace touching a message stays

    assert stripped.strip().startswith(first) and stripped.strip().endswith(second)
    assert re.sub(r"\s+", "", stripped) == re.sub(r"\s+", "", first + second)
    assert extract_code(completion) == F
    assert strip_completion(f"{header}<think>a</think>A{end}\n{header}<think>b</think>B{end}") == "A\nB"


def test_a_tool_turn_is_a_message_like_the_others():
    completion = (f"```python\n{G}```<|im_end|>\n<|im_start|>tool\nNameError: f<|im_end|>\n"
                  f"<|im_start|>assistant\n<think>f is missing</think>\n```python\n{F}```<|im_end|>")

    assert strip_completion(completion) == f"```python\n{G}```\nNameError: f\n\n```python\n{F}```"


def test_a_reasoning_cut_in_the_last_turn_leaves_the_earlier_answer():
    completion = f"```python\n{F}```<|im_end|>\n<|im_start|>assistant\n<think>Should I also handle"

    assert extract_code(completion) == F


TEMPLATE = ('def render(messages):\n    out = """<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"""\n'
            '    return out + messages[-1] + """<|im_end|>\n<|im_start|>assistant\n"""\n')


@pytest.mark.parametrize("completion", [
    pytest.param(f"```python\n{TEMPLATE}```<|im_end|>", id="fenced"),
    pytest.param(f"<|im_start|>assistant\n{TEMPLATE}<|im_end|>", id="plain-code"),
])
def test_a_turn_boundary_inside_code_is_kept(completion):
    assert extract_code(completion) == TEMPLATE


def test_tokens_mid_prose_without_a_turn_header_are_text():
    assert strip_completion("Qwen ends a turn with <|im_end|> and pads with <|endoftext|>.<|im_end|>") == \
        "Qwen ends a turn with <|im_end|> and pads with <|endoftext|>."


@pytest.mark.parametrize("header", ["<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>",
                                    "<start_of_turn>model\n", "<|begin_of_text|>", "<｜begin▁of▁sentence｜><｜Assistant｜>"])
def test_a_leading_header_is_removed(header):
    assert strip_completion(f"{header}Sure.") == "Sure."
    assert strip_completion(f"Sure.<|im_end|>{header}") == "Sure."  # a header opened after the end


def test_whitespace_touching_the_text_stays():
    assert strip_completion("\n<|im_start|>assistant\n\nSure.\n<|im_end|>\n<|endoftext|>") == "\nSure.\n"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("completion", [
    pytest.param("a<|im_end|>\n<|im_start|>assistant\n" * 40_000 + "b", id="many-turns"),
    pytest.param("```\n</think>\n```\n" * 60_000, id="closing-tags-in-blocks"),
    pytest.param("x = '</think>'\n<|im_end|>\n<|im_start|>assistant\n" * 25_000, id="closing-tags-in-many-messages"),
    pytest.param("<|im_start|>" * 80_000 + "a" * 100_000, id="headers-without-roles"),
    pytest.param("<think>" * 150_000, id="opening-tags"),
])
def test_hostile_turns_and_tags_are_read_in_linear_time(completion):
    extract_code(completion)
    strip_completion(completion, keep_think=True)


def test_the_format_reward_sees_the_response_without_its_turn_header():
    # FormatReward keeps the reasoning but cleans the edges as extraction does.
    check = FormatReward.think_answer()

    assert check("<|im_start|>assistant\n<think>2+2</think>\n<answer>4</answer><|im_end|>").reward == 1.0
    assert check("<|im_start|>assistant\nNo reasoning.<|im_end|>").reward == 0.0
