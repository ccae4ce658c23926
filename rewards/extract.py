"""Finding the code in a completion: a pure function of the text."""

import ast
import re

from rewards.syntax import MAX_HOST_PARSE_CHARS, TooComplex, parse

# Chat-template markers and end-of-sequence tokens that decoding with special
# tokens leaves in the text (Qwen/ChatML, Llama 3, Llama 2/Mistral, Gemma, GPT-2).
_CHAT_TOKENS = re.compile(r"<\|[A-Za-z0-9_]+\|>|<end_of_turn>|<start_of_turn>(?:model|user)?|\[/?INST\]")
# Tokens that also occur in ordinary code ("<s>" in an HTML string) are only
# removed where a tokenizer puts them: at the very start or end. Each pattern is
# tried once, at the start of the text or of the reversed text (a pattern ending
# in `$` is retried from every position: quadratic on hostile text).
_LEADING_TOKENS = re.compile(r"\A(?:\s*(?:<s>|<bos>))+")
_TRAILING_TOKENS_REVERSED = re.compile(r"\A(?:\s*(?:>s/<|>soe<|>dap<))+")  # </s>, <eos>, <pad>
# A fence line: its language tag, and whether a newline ends it. Nothing after the
# backticks can fail, so no match backtracks; `finditer` visits each line once.
_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([\w+\-.]*)[^\n]*(\n?)", re.MULTILINE)
_PYTHON_TAGS = {"", "python", "python3", "py"}
_CODE_LINE = re.compile(r"^(def |class |import |from \S+ import |async def |@|if __name__)", re.MULTILINE)


def strip_completion(completion: str, prompt: str | None = None, keep_think: bool = False) -> str:
    """The response alone: without the prompt, special tokens or (unless
    `keep_think`) reasoning."""
    text = completion
    if prompt and text.startswith(prompt):
        text = text[len(prompt):]
    text = _strip_edge_tokens(_CHAT_TOKENS.sub("", text))
    if keep_think:
        return text
    text = _drop_think_blocks(text)
    if "</think>" in text:  # the template opened <think> inside the prompt
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:  # reasoning that never ended holds no answer
        text = text.split("<think>", 1)[0]
    return text


def extract_code(completion: str, prompt: str | None = None) -> str | None:
    """The code to run: the last Python fenced block, else the whole text when
    it is plain code; None when there is none.

    >>> extract_code("Here you go:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1\\n'
    >>> extract_code("def f(): return 1<|im_end|>")
    'def f(): return 1'
    >>> extract_code("I cannot solve this.") is None
    True
    """
    text = strip_completion(completion, prompt)
    blocks, unclosed = _fenced_blocks(text)
    if not blocks and unclosed is not None:  # generation cut off inside a block
        blocks = [unclosed]
    tagged = [body for tag, body in blocks if tag in _PYTHON_TAGS and tag]
    python = tagged or [body for tag, body in blocks if tag in _PYTHON_TAGS]  # an untagged block after
    if python:                                                                # the code is often its output
        code = python[-1]
    elif blocks:
        return None  # only other languages
    else:
        code = text if _looks_like_code(text) else ""
    return code if code.strip() else None


def _fenced_blocks(text: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    """The closed fenced blocks as (lower-case tag, body), and the block left
    open at the end, if any. A fence line opens a block when it ends in a
    newline; the next fence line closes it, whatever follows its backticks."""
    blocks: list[tuple[str, str]] = []
    tag, body_start = None, 0
    for fence in _FENCE_LINE.finditer(text):
        if tag is not None:
            blocks.append((tag, text[body_start:fence.start()]))
            tag = None
        elif fence.group(2):
            tag, body_start = fence.group(1).lower(), fence.end()
    return blocks, (tag, text[body_start:]) if tag is not None else None


def _strip_edge_tokens(text: str) -> str:
    """Without the start tokens (and the whitespace before them) at the very
    start, nor the end tokens (and the whitespace after them) at the very end."""
    leading = _LEADING_TOKENS.match(text)
    trailing = _TRAILING_TOKENS_REVERSED.match(text[::-1])
    start = leading.end() if leading else 0
    end = len(text) - trailing.end() if trailing else len(text)
    return text[start:max(start, end)]


def _looks_like_code(text: str) -> bool:
    if len(text) > MAX_HOST_PARSE_CHARS:
        return bool(_CODE_LINE.search(text))
    try:
        tree = parse(text)
    except TooComplex:
        return True  # Python refuses it as code: its syntax error is the model's verdict
    except (SyntaxError, ValueError):
        return bool(_CODE_LINE.search(text))  # broken code still earns its syntax error
    # Prose rarely parses; when it does ("Hello\nWorld"), it is bare names or constants.
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)))
               for node in tree.body)


def _drop_think_blocks(text: str) -> str:
    """Every closed `<think>...</think>` removed, in linear time (a regex
    rescans to the end from each unclosed tag: quadratic on hostile text)."""
    kept, pos = [], 0
    while (start := text.find("<think>", pos)) >= 0 and (end := text.find("</think>", start)) >= 0:
        kept.append(text[pos:start])
        pos = end + len("</think>")
    kept.append(text[pos:])
    return "".join(kept)
