"""(a) Cleaning and extracting code never raise, take bounded time per byte, and never touch code."""

from hypothesis import given
from hypothesis import strategies as st

from rewardbox.rewards.extract import extract_code, strip_completion
from tests.fuzz.strategies import ALL_PIECES, CpuTimer, completions, cpu_budget_s, examples, prompts, utf8_size


@examples(200)
@given(completion=completions, prompt=prompts, keep_think=st.booleans())
def test_extraction_never_raises_and_is_linear(completion, prompt, keep_think):
    with CpuTimer() as timer:
        stripped = strip_completion(completion, prompt, keep_think=keep_think)
        code = extract_code(completion, prompt)

    assert isinstance(stripped, str)
    assert code is None or (isinstance(code, str) and code.strip())
    size = utf8_size(completion) + utf8_size(prompt or "")
    assert timer.elapsed <= cpu_budget_s(size), f"{timer.elapsed:.3f} s CPU for {size} bytes"


# Code that tokens and tags can hide in: no backtick (so no fence line), and no
# tag at an edge of the body (an end token there would be the generation's end).
_INNER = [p for p in ALL_PIECES if "`" not in p and "~" not in p]
_LEADING = ["", "<|im_start|>assistant\n", "<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n", "<s>",
            "<think>\nLet me try\n</think>\n", "reasoning opened by the template</think>\n", " \n"]
_TRAILING = ["", "<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>\n", "<|im_end|><|endoftext|><|endoftext|>", "\n"]


@examples(200)
@given(inner=st.lists(st.sampled_from(_INNER), min_size=1, max_size=8).map("".join),
       before=st.sampled_from(_LEADING), prose=st.sampled_from(["", "Here:\n", "Fixed:\n"]),
       after=st.sampled_from(_TRAILING))
def test_a_fenced_blocks_body_is_never_cleaned(inner, before, prose, after):
    body = f"x = 1\n{inner}\nx = 2\n"

    assert extract_code(f"{before}{prose}```python\n{body}```{after}") == body
