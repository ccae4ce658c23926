"""Finding the code in a completion: a pure function of the text."""

import ast
import re

from rewards.syntax import parse

# Chat-template markers and end-of-sequence tokens that decoding with special
# tokens leaves in the text (Qwen/ChatML, Llama 3, Llama 2/Mistral, Gemma, GPT-2).
_CHAT_TOKENS = re.compile(r"<\|[A-Za-z0-9_]+\|>|<end_of_turn>|<start_of_turn>(?:model|user)?|\[/?INST\]")
# Tokens that also occur in ordinary code ("<s>" in an HTML string) are only
# removed where a tokenizer puts them: at the very start or end.
_EDGE_TOKENS = re.compile(r"^(?:\s*(?:<s>|<bos>))+|(?:(?:</s>|<eos>|<pad>)\s*)+$")
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+\-.]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+\-.]*)[^\n]*\n(.*)\Z", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"", "python", "python3", "py"}
_CODE_LINE = re.compile(r"^(def |class |import |from \S+ import |async def |@|if __name__)", re.MULTILINE)


def strip_completion(completion: str, prompt: str | None = None, keep_think: bool = False) -> str:
    """The response alone: without the prompt, special tokens or (unless
    `keep_think`) reasoning."""
    text = completion
    if prompt and text.startswith(prompt):
        text = text[len(prompt):]
    text = _EDGE_TOKENS.sub("", _CHAT_TOKENS.sub("", text))
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
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    if not blocks:
        trailing = _OPEN_FENCE.search(text)  # generation cut off inside a block
        blocks = [(trailing.group(1).lower(), trailing.group(2))] if trailing else []
    tagged = [body for tag, body in blocks if tag in _PYTHON_TAGS and tag]
    python = tagged or [body for tag, body in blocks if tag in _PYTHON_TAGS]  # an untagged block after
    if python:                                                                # the code is often its output
        code = python[-1]
    elif blocks:
        return None  # only other languages
    else:
        code = text if _looks_like_code(text) else ""
    return code if code.strip() else None


def _looks_like_code(text: str) -> bool:
    try:
        tree = parse(text)
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
