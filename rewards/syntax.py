"""Parsing Python source safely from many threads.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by
threads (gh-106905): concurrent `ast.parse` calls can fail with "SystemError:
AST constructor recursion depth mismatch". Rewards are called from many
threads at once (OpenRLHF), so every parse here goes through one lock.
"""

import ast
import threading

_PARSE_LOCK = threading.Lock()


def parse(source: str | bytes) -> ast.Module:
    """`ast.parse`, one thread at a time; raises what it raises.

    >>> type(parse("x = 1").body[0]).__name__
    'Assign'
    """
    with _PARSE_LOCK:
        return ast.parse(source)
