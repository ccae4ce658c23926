"""`rewards.extract`: finding the code in a completion."""

import pytest

from rewards import extract_code, strip_completion

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
    pytest.param("<think>a</think>b<think>c</think>d", "bd", id="several-thinks"),
    pytest.param("the template opened think</think>answer", "answer", id="closing-only"),
    pytest.param("reasoning</think>draft</think>answer", "answer", id="last-closing-wins"),
    pytest.param("<think>never ends", "", id="unterminated-at-start"),
    pytest.param("answer<think>more thoughts", "answer", id="unterminated-after-answer"),
    pytest.param("plain answer", "plain answer", id="no-think"),
])
def test_think_blocks(completion, stripped):
    assert strip_completion(completion) == stripped


def test_code_inside_think_is_dropped():
    completion = f"<think>\nMaybe:\n```python\n{G}```\nNo, better:\n</think>\n```python\n{F}```"

    assert extract_code(completion) == F


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
