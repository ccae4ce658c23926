"""Finding the code in a completion: a pure function of the text.

Cleaning removes only what a tokenizer or a chat template put in the text, and
only where they put it:

- special tokens (`<|im_end|>`, `<|eot_id|>`, `</s>`, ...): a run of them at
  the very start or the very end of the response, with the whitespace between
  them (whitespace touching the text stays);
- a turn boundary between the messages of a multi-turn completion (a run of
  special tokens holding a turn header: `<|im_end|>\\n<|im_start|>assistant\\n`,
  `<|eot_id|><|start_header_id|>assistant<|end_header_id|>`), which becomes a
  newline;
- reasoning, per message: up to the last `</think>`, whether the message opens
  it with `<think>` (after leading whitespace) or a chat template opened it in
  the prompt (Qwen3, DeepSeek-R1: the response holds only `</think>`). A
  message that opens `<think>` (or whose prompt did) and never closes it was
  cut while reasoning: it holds no answer yet (unless a fence the reasoning
  left open hides its `</think>`: then the first one closes it).

Inside code no token or tag counts, so nothing there is removed: a fenced
block's body, an inline code span, or, in a completion without fenced blocks,
a message (or the whole text) that parses as Python: every tag in it is in a
string or a comment (parsed on the host below `MAX_HOST_PARSE_CHARS` only). A
`<think>` anywhere but at the start of a message is text. Every step is one
pass, or one regex anchored at an edge, over the text: linear on any input.
"""

import ast
import bisect
import re
from collections.abc import Iterable

from rewardbox.rewards.syntax import MAX_HOST_PARSE_CHARS, TooComplex, parse
from rewardbox.sandbox import languages
from rewardbox.sandbox.languages import Language

_ROLE = r"[A-Za-z_]{1,20}"
# A turn header names the role of the message that follows: ChatML (Qwen), Llama 3,
# Gemma, Phi-3, DeepSeek. Each form has its mirror image, for the end of the text.
_HEADERS = (rf"<\|im_start\|>{_ROLE}\n", rf"<\|start_header_id\|>{_ROLE}<\|end_header_id\|>", rf"<start_of_turn>{_ROLE}\n")
_HEADERS_REVERSED = (rf"\n{_ROLE}>\|trats_mi\|<", rf">\|di_redaeh_dne\|<{_ROLE}>\|di_redaeh_trats\|<",
                     rf"\n{_ROLE}>nrut_fo_trats<")
_ROLE_TOKENS = r"<\|(?:assistant|user|system|tool)\|>|<｜(?:Assistant|User)｜>"
# Chat markers and end-of-sequence tokens (`<|...|>`: Qwen, Llama 3, Phi, GPT-2; `<｜...｜>`:
# DeepSeek; Gemma; Llama 2/Mistral). Bounded lengths: no attempt scans far.
_CHAT = (r"<\|[A-Za-z0-9_]{1,40}\|>", r"<｜[\w▁]{1,40}｜>", r"<(?:start|end)_of_turn>", r"\[/?INST\]")
_CHAT_REVERSED = (r">\|[A-Za-z0-9_]{1,40}\|<", r">｜[\w▁]{1,40}｜<", r">nrut_fo_(?:trats|dne)<", r"\]TSNI/?\[")
# Tokens that also occur in ordinary text ("<s>" in an HTML string) count only at
# their own edge: start tokens at the start, end tokens at the end.
_START_ONLY = (r"<s>", r"<bos>")
_END_ONLY_REVERSED = (r">s/<", r">soe<", r">dap<")  # </s>, <eos>, <pad>

# Each edge pattern is tried once, at the start of the text or of the reversed
# text (a pattern ending in `$` is retried from every position: quadratic on hostile text).
_LEADING_TOKENS = re.compile(rf"\A(?:\s*(?:{'|'.join(_HEADERS + _CHAT + _START_ONLY)}))+")
_TRAILING_TOKENS_REVERSED = re.compile(rf"\A(?:\s*(?:{'|'.join(_HEADERS_REVERSED + _CHAT_REVERSED + _END_ONLY_REVERSED)}))+")
_TOKEN_RUN = re.compile(rf"(?:{'|'.join(_HEADERS + _CHAT)})(?:\s*(?:{'|'.join(_HEADERS + _CHAT)}))*")
_HEADER = re.compile("|".join((*_HEADERS, _ROLE_TOKENS)))
_SPACES = re.compile(r"\s*")
# Markdown's inline code, on one line: backticks pair from the left.
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_OPEN_THINK, _CLOSE_THINK = "<think>", "</think>"
# A fence line: its language tag, and whether a newline ends it. Nothing after the
# backticks can fail, so no match backtracks; `finditer` visits each line once.
_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([\w+\-.]*)[^\n]*(\n?)", re.MULTILINE)
_PYTHON = languages.language("python")


def strip_completion(completion: str, prompt: str | None = None, keep_think: bool = False) -> str:
    """The response alone: without the prompt, the special tokens a tokenizer
    left at its edges and between its turns, or (unless `keep_think`) the
    reasoning. See the module docstring for where each is recognised.

    >>> strip_completion("<think>a</think>\\nanswer<|im_end|>")
    '\\nanswer'
    >>> strip_completion("return '<|im_end|>'<|im_end|>")
    "return '<|im_end|>'"
    >>> strip_completion("still thinking", prompt="<|im_start|>assistant\\n<think>\\n")
    ''
    """
    text = completion
    if prompt and text.startswith(prompt):
        text = text[len(prompt):]
    text = _strip_edge_tokens(text)
    code = _Code(text)
    messages = _messages(text, code)
    if not keep_think:
        opened = prompt is not None and prompt.rstrip().endswith(_OPEN_THINK)  # the template opened the reasoning
        messages = [(_answer_start(text, start, end, code, opened and i == 0), end)
                    for i, (start, end) in enumerate(messages)]
    return "\n".join(text[start:end] for start, end in messages)


def extract_code(completion: str, prompt: str | None = None, language: "str | Language" = "python") -> str | None:
    """The code to run: the last fenced block tagged as `language`'s (its
    `tags`, `rewardbox.sandbox.languages`), else the last untagged one, else,
    in a text without fenced blocks, the whole text when it is that
    language's code; None when there is none.

    >>> extract_code("Here you go:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1\\n'
    >>> extract_code("def f(): return 1<|im_end|>")
    'def f(): return 1'
    >>> extract_code("I cannot solve this.") is None
    True
    >>> extract_code("```python\\nprint(1)\\n```\\n```c++\\nint main() {}\\n```", language="cpp")
    'int main() {}\\n'
    """
    lang = languages.language(language)
    text = strip_completion(completion, prompt)
    blocks, unclosed = _fenced_blocks(text)
    if not blocks and unclosed is not None:  # generation cut off inside a block
        blocks = [unclosed]
    # The last block tagged with the language, else the last untagged one (an
    # untagged block after the code is often its output).
    chosen = (next((b for b in reversed(blocks) if b[0] in lang.tags), None)
              or next((b for b in reversed(blocks) if not b[0]), None))
    if chosen:
        code = text[chosen[1]:chosen[2]]
    elif blocks:
        return None  # only other languages
    elif lang is _PYTHON:
        code = text if _looks_like_code(text) else ""
    else:
        code = text if lang.looks_like_code(text) else ""
    return code if code.strip() else None


def _fenced_blocks(text: str) -> tuple[list[tuple[str, int, int]], tuple[str, int, int] | None]:
    """The closed fenced blocks as (lower-case tag, body start, body end), and
    the block left open at the end, if any. A fence line opens a block when it
    ends in a newline; the next fence line closes it, whatever follows its backticks."""
    blocks: list[tuple[str, int, int]] = []
    tag, body_start = None, 0
    for fence in _FENCE_LINE.finditer(text):
        if tag is not None:
            blocks.append((tag, body_start, fence.start()))
            tag = None
        elif fence.group(2):
            tag, body_start = fence.group(1).lower(), fence.end()
    return blocks, (tag, body_start, len(text)) if tag is not None else None


class _Code:
    """Where `text` is code, in which no token or tag is a marker: the bodies
    of its fenced blocks and its inline code spans (`` `</think>` ``); in a
    text without fenced blocks, a span (the text, or one message) that parses
    as Python. Each is found only once a marker is in question: most texts hold none."""

    def __init__(self, text: str):
        self.text = text
        self._spans: tuple[tuple[list[int], list[int]], tuple[list[int], list[int]]] | None = None
        self._parses: dict[tuple[int, int], bool] = {}

    def holds(self, pos: int, start: int, end: int) -> bool:
        """Whether `pos`, in the span `start:end`, is in code."""
        if self._spans is None:
            blocks, unclosed = _fenced_blocks(self.text)
            self._spans = (_starts_ends((start, end) for _, start, end in blocks + ([unclosed] if unclosed else [])),
                           _starts_ends(span.span() for span in _INLINE_CODE.finditer(self.text)))
        bodies, inline = self._spans
        if _within(pos, *bodies) or _within(pos, *inline):
            return True
        if bodies[0] or len(self.text) > MAX_HOST_PARSE_CHARS:
            return False  # prose around blocks, or never parsed on the host: its markers count
        if (start, end) not in self._parses:  # the spans parsed add up to twice the text at most
            self._parses[start, end] = _parses(self.text[start:end])
        return self._parses[start, end]


def _starts_ends(spans: Iterable[tuple[int, int]]) -> tuple[list[int], list[int]]:
    starts, ends = [], []
    for start, end in spans:
        starts.append(start)
        ends.append(end)
    return starts, ends


def _within(pos: int, starts: list[int], ends: list[int]) -> bool:
    """Whether `pos` falls in one of the sorted, disjoint spans."""
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and pos < ends[i]


def _parses(text: str) -> bool:
    try:
        parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _messages(text: str, code: _Code) -> list[tuple[int, int]]:
    """The spans of the messages between the turn boundaries outside code."""
    spans, start = [], 0
    for run in _TOKEN_RUN.finditer(text):
        if _HEADER.search(run.group()) and not code.holds(run.start(), 0, len(text)):
            spans.append((start, run.start()))
            start = run.end()
    spans.append((start, len(text)))
    return spans


def _opens_thinking(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` begins with `<think>`, after any spaces."""
    spaces = _SPACES.match(text, start, end)  # never None: `\s*` matches the empty string
    return spaces is not None and text.startswith(_OPEN_THINK, spaces.end(), end)


def _answer_start(text: str, start: int, end: int, code: _Code, opened: bool) -> int:
    """Where the answer of the message `start:end` begins: after its last
    `</think>` outside code; `end` (no answer) when its reasoning never closed;
    `start` when it holds no reasoning."""
    close = text.rfind(_CLOSE_THINK, start, end)
    while close >= 0 and code.holds(close, start, end):
        close = text.rfind(_CLOSE_THINK, start, close)  # rfind scans back from here on: linear in all
    if close >= 0:
        return close + len(_CLOSE_THINK)
    if opened or _opens_thinking(text, start, end):
        # Reasoning that never closes outside code: either cut short, or a fence it
        # left open hid its end, which is then its first `</think>`.
        close = text.find(_CLOSE_THINK, start, end)
        return close + len(_CLOSE_THINK) if close >= 0 else end
    return start


def _strip_edge_tokens(text: str) -> str:
    """Without the run of start tokens (and the whitespace before them) at the
    very start, nor the run of end tokens (and the whitespace after them) at
    the very end."""
    leading = _LEADING_TOKENS.match(text)
    trailing = _TRAILING_TOKENS_REVERSED.match(text[::-1])
    start = leading.end() if leading else 0
    end = len(text) - trailing.end() if trailing else len(text)
    return text[start:max(start, end)]


def _looks_like_code(text: str) -> bool:
    """Python's own rule: the host can parse Python, so a text is code when it
    parses as more than bare names, or when its marker (a line only Python
    code starts with) says so of a text that does not parse."""
    if len(text) > MAX_HOST_PARSE_CHARS:
        return _PYTHON.looks_like_code(text)
    try:
        tree = parse(text)
    except TooComplex:
        return True  # Python refuses it as code: its syntax error is the model's verdict
    except (SyntaxError, ValueError):
        return _PYTHON.looks_like_code(text)  # broken code still earns its syntax error
    # Prose rarely parses; when it does ("Hello\nWorld"), it is bare names or constants.
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)))
               for node in tree.body)
