"""JSON from untrusted text with its nesting bounded before the (recursive)
parse: a label or a CLI line nested thousands deep is refused with a clear
error, never a `RecursionError` from the decoder. Linear in the text's size.
"""

import enum
import json
import math
import re
from collections.abc import Iterable
from typing import Any

# Deeper than any dataset's labels (trees as nested lists stay far below);
# far below the decoder's recursion limit, whatever the caller's stack depth.
MAX_JSON_DEPTH = 200

# The characters that matter to nesting: a string's quotes and escapes, brackets.
_SIGNIFICANT = re.compile(r'[]["\\{}]')
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONTooDeep(ValueError):
    """JSON nested deeper than the bound."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text` (strings ignored).

    >>> json_depth('{"a": [1, [2]], "b": "[[[["}')
    3
    """
    if text.count("[") + text.count("{") <= 1:
        return text.count("[") + text.count("{")
    # Only the significant characters are visited, in constant memory (a regex
    # matching whole strings kept about 120 bytes per character of a string:
    # a 100 MB line cost 12 GB). Strings as the decoder reads them: from an
    # unescaped quote to the next; an unterminated one the decoder refuses.
    depth = deepest = 0
    in_string = False
    escaped_until = -1  # the character after a backslash is taken as it is
    for match in _SIGNIFICANT.finditer(text):
        at = match.start()
        if at < escaped_until:
            continue
        char = text[at]
        if in_string:
            if char == "\\":
                escaped_until = at + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing (`JSONTooDeep`, a `ValueError`) JSON nested
    deeper than `max_depth`; bytes must be UTF-8 (else `UnicodeDecodeError`,
    also a `ValueError`).

    >>> loads('[[1]]')
    [[1]]
    >>> try:
    ...     loads("[" * 5000 + "]" * 5000)
    ... except JSONTooDeep as exc:
    ...     print(exc)
    JSON nested 5000 deep, over the limit of 200
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if text.count("[") + text.count("{") > max_depth and (depth := json_depth(text)) > max_depth:
        raise JSONTooDeep(f"JSON nested {depth} deep, over the limit of {max_depth}")
    try:
        return json.loads(text)
    except RecursionError:  # the bound above makes this unreachable; kept as the last guard
        raise JSONTooDeep(f"JSON nested too deep to decode (limit {max_depth})") from None


def deeper_than(value: Any, max_depth: int) -> bool:
    """Whether lists, tuples and dicts in `value` nest deeper than
    `max_depth`: asked without recursion, before anything recursive (json.dumps,
    validation) walks it.

    >>> deeper_than({"a": [[1]]}, 2), deeper_than({"a": [[1]]}, 3)
    (True, False)
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def plain(value: Any, max_depth: int = 64) -> Any:
    """`value` as JSON data any encoder accepts: strings valid UTF-8 (a lone
    surrogate becomes U+FFFD), non-finite floats None, enums their values,
    models their dumps, tuples and sets lists, keys strings, anything else its
    repr; below `max_depth`, a container's repr.

    >>> plain({"a": float("nan"), 1: ("x\\ud800", {2})})
    {'a': None, '1': ['x\\ufffd', [2]]}
    """
    if value is None or isinstance(value, (bool, int)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return _utf8(value)
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="python")
    if isinstance(value, (dict, list, tuple, set, frozenset)) and max_depth <= 0:
        return _utf8(repr(value)[:1000])
    if isinstance(value, dict):
        return {_utf8(str(getattr(k, "value", k))): plain(v, max_depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v, max_depth - 1) for v in value]
    if isinstance(value, (str, int, float)) or value is None:
        return plain(value, max_depth)
    return _utf8(repr(value)[:1000])


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
