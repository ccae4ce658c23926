"""(a) Cleaning and extracting code never raise, and take bounded time per byte."""

from hypothesis import given
from hypothesis import strategies as st

from rewards.extract import extract_code, strip_completion
from tests.fuzz.strategies import CpuTimer, completions, cpu_budget_s, examples, prompts, utf8_size


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
