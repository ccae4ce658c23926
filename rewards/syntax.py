"""Parsing Python source safely: from many threads, and whatever the source.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by
threads (gh-106905): concurrent `ast.parse` calls can fail with "SystemError:
AST constructor recursion depth mismatch". Rewards are called from many
threads at once (OpenRLHF), so every parse here goes through one lock.

The parser bounds its own recursion, but reports the bound as
`RecursionError` or `MemoryError` (a few thousand nested operators, a long
`1+1+...` chain, a huge `elif` table), which no caller expects from a parse.
Here they are a `SyntaxError` like any other code Python refuses:
`TooComplex`.

A sample's text is parsed by several readers in turn (is the completion
code, does it define the entry point, what does it import; a label's test,
split and scanned), so the last few trees are kept by their text: readers
share them and never change them.
"""

import ast
import threading
from collections import OrderedDict

_PARSE_LOCK = threading.Lock()
# The trees of the last sources parsed, most recent last, within a bound on
# their text: a tree takes about 50 times its text, so at most about 13 MB.
_TREES: OrderedDict[str | bytes, ast.Module] = OrderedDict()
_TREES_MAX = 32
_TREES_MAX_CHARS = 256 * 1024
_trees_chars = 0
# The host parses a completion only below this size: ast.parse costs 1-4 s per
# MB (and holds the lock), the service accepts 1 MB, and 32 KiB is about 8,000
# tokens of code. Above it, line-anchored checks decide (callers say how); the
# container's compile judges the code either way.
MAX_HOST_PARSE_CHARS = 32 * 1024


class TooComplex(SyntaxError):
    """Code nested too deeply (or too large) for Python's parser: Python
    refuses to compile it, as it refuses a syntax error."""


def parse(source: str | bytes) -> ast.Module:
    """`ast.parse`, one thread at a time; raises `SyntaxError` (`TooComplex`
    among them) or `ValueError` (NUL bytes) for source Python refuses. The
    tree may be one handed out before for the same text: read it, never
    change it.

    >>> type(parse("x = 1").body[0]).__name__
    'Assign'
    >>> try:
    ...     parse("x = " + "- " * 5000 + "1")
    ... except TooComplex as exc:
    ...     print(exc)
    too deeply nested or too large to parse (RecursionError)
    """
    global _trees_chars
    with _PARSE_LOCK:
        if (tree := _TREES.get(source)) is not None:
            _TREES.move_to_end(source)
            return tree
        try:
            tree = ast.parse(source)
        except (RecursionError, MemoryError) as exc:
            raise TooComplex(f"too deeply nested or too large to parse ({type(exc).__name__})") from None
        if len(source) <= MAX_HOST_PARSE_CHARS:
            _TREES[source] = tree
            _trees_chars += len(source)
            while _trees_chars > _TREES_MAX_CHARS or len(_TREES) > _TREES_MAX:
                _trees_chars -= len(_TREES.popitem(last=False)[0])
        return tree
