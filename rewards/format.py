"""Format rewards: does the response have the required shape?

A `FormatSpec` lists regular expressions that the cleaned response must match
(`required`, all of them, anywhere: `re.search`) and must not match
(`forbidden`, none of them). Patterns that describe the whole response anchor
with `\\A` and `\\Z` (`^`/`$` match at every line under the default MULTILINE).
The label is not used, so a format reward never returns "no reward".

Two presets: `think_answer` (reasoning in `<think>`, then the answer in
`<answer>`) and `one_code_block` (exactly one fenced code block outside the
reasoning).
"""

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rewardbox.rewards.base import Reward, RewardOutput, Sample

# Private regexes shared on purpose: the format check removes exactly the
# tokens that code extraction removes, but keeps the reasoning.
from rewardbox.rewards.extract import strip_completion
from rewardbox.sandbox import Verdict

# Chat templates of reasoning models (DeepSeek-R1, Qwen3) end the prompt with
# "<think>": the model's text then starts inside the reasoning.
_PROMPT_OPENS_THINK = re.compile(r"<think>\s*\Z")


class FormatSpec(BaseModel):
    """What a well-formed response looks like, and what it earns.

    `score` is 1.0 for a well-formed response and 0.0 otherwise, whatever the
    two rewards are.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    required: tuple[str, ...] = Field((), description="patterns that must all match (re.search)")
    forbidden: tuple[str, ...] = Field((), description="patterns none of which may match")
    dotall: bool = Field(True, description="re.DOTALL: '.' also matches a newline")
    multiline: bool = Field(True, description="re.MULTILINE: '^' and '$' match at every line")
    ignorecase: bool = Field(False, description="re.IGNORECASE")
    reward_ok: float = Field(1.0, description="reward of a well-formed response")
    reward_bad: float = Field(0.0, description="reward of any other response")
    strip: bool = Field(True, description="remove the prompt prefix and chat special tokens first")
    keep_think: bool = Field(True, description="with strip: keep <think> blocks (False: drop them, as code extraction does)")

    @field_validator("required", "forbidden")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None
        return patterns

    @model_validator(mode="after")
    def _ok_earns_more(self) -> "FormatSpec":
        if self.reward_ok <= self.reward_bad:
            raise ValueError(f"reward_ok ({self.reward_ok}) must exceed reward_bad ({self.reward_bad})")
        return self

    @property
    def flags(self) -> re.RegexFlag:
        flags = re.RegexFlag(0)
        for on, flag in ((self.dotall, re.DOTALL), (self.multiline, re.MULTILINE), (self.ignorecase, re.IGNORECASE)):
            if on:
                flags |= flag
        return flags


# A tag of either kind; the bodies below may hold none, so that each tag occurs exactly once.
_TAG = r"</?(?:think|answer)>"
_BODY = rf"(?:(?!{_TAG}).)*"
THINK_ANSWER = FormatSpec(
    required=(rf"\A\s*<think>{_BODY}</think>\s*<answer>\s*(?!{_TAG})\S{_BODY}</answer>\s*\Z",),
)
"""The whole response is `<think>…</think>` then a non-blank `<answer>…</answer>`,
whitespace around them allowed, no other tag of either kind anywhere."""

_FENCE_LINE = r"^[ \t]*```"
_UNTIL_FENCE = rf"(?:(?!{_FENCE_LINE}).)*"
ONE_CODE_BLOCK = FormatSpec(
    # Anchored at the start, the first fence line opens and the next one closes: a
    # pattern tried from every fence line would be quadratic on hostile text. With
    # no third fence line allowed, it is the same rule.
    required=(rf"\A{_UNTIL_FENCE}{_FENCE_LINE}[^\n`]*\n{_UNTIL_FENCE}{_FENCE_LINE}[ \t]*$",),
    forbidden=(rf"{_FENCE_LINE}(?:.*?{_FENCE_LINE}){{2}}",),
    keep_think=False,
)
"""Exactly one closed ```` ``` ```` block outside the reasoning: an opening fence
line (with an optional language tag), a closing one, and no third fence line
(a second block, or an unclosed one). Prose around the block is allowed."""


def response_text(completion: str, prompt: str | None = None, keep_think: bool = True) -> str:
    """The response without the prompt prefix or chat special tokens; `<think>`
    blocks kept unless `keep_think` is False (then it is `strip_completion`).

    A prompt that ends by opening `<think>` (a reasoning model's chat template)
    lends its tag to the response, so the reasoning block is whole again.

    >>> response_text("<|im_start|>assistant\\n<think>a</think>b<|im_end|>")
    '<think>a</think>b'
    >>> response_text("a</think>b", prompt="<|im_start|>assistant\\n<think>\\n")
    '<think>a</think>b'
    """
    if not keep_think:
        return strip_completion(completion, prompt)
    text = strip_completion(completion, prompt, keep_think=True)
    if prompt and _PROMPT_OPENS_THINK.search(prompt) and not text.lstrip().startswith("<think>"):
        text = "<think>" + text
    return text


class FormatReward(Reward):
    """`reward_ok` when the response has the spec's shape, else `reward_bad`.

    The output's `verdict` is passed or failed; its metadata holds `format_ok`,
    and for a failure the broken rule (`failed_rule`: "required"/"forbidden")
    and its `failed_pattern`.

    >>> check = FormatReward.think_answer()
    >>> check("<think>2+2 is 4</think>\\n<answer>4</answer>").reward
    1.0
    >>> check("The answer is 4.").verdict.value
    'failed'
    """

    def __init__(self, spec: FormatSpec | None = None, *, name: str = "format", **fields: Any):
        self.spec = FormatSpec(**{**(spec.model_dump() if spec else {}), **fields})
        self.name = name
        flags = self.spec.flags
        self._rules = ([("required", p, re.compile(p, flags)) for p in self.spec.required]
                       + [("forbidden", p, re.compile(p, flags)) for p in self.spec.forbidden])

    @classmethod
    def think_answer(cls, **fields: Any) -> "FormatReward":
        """`THINK_ANSWER`; `fields` override the spec (e.g. `reward_bad=-1.0`)."""
        return cls(THINK_ANSWER, name="format_think_answer", **fields)

    @classmethod
    def one_code_block(cls, **fields: Any) -> "FormatReward":
        """`ONE_CODE_BLOCK`; `fields` override the spec."""
        return cls(ONE_CODE_BLOCK, name="format_one_code_block", **fields)

    def failure(self, text: str) -> tuple[str, str] | None:
        """The first rule `text` breaks, as `(rule, pattern)`; None when it has the shape."""
        for rule, pattern, regex in self._rules:
            if (regex.search(text) is None) == (rule == "required"):
                return rule, pattern
        return None

    def score(self, sample: Sample) -> RewardOutput:
        text = response_text(sample.completion, sample.prompt, self.spec.keep_think) if self.spec.strip else sample.completion
        failed = self.failure(text)
        rule, pattern = failed or (None, None)
        return RewardOutput(
            reward=self.spec.reward_bad if failed else self.spec.reward_ok,
            score=0.0 if failed else 1.0,
            verdict=Verdict.FAILED if failed else Verdict.PASSED,
            metadata={"format_ok": failed is None, "failed_rule": rule, "failed_pattern": pattern},
        )
