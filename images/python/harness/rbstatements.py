"""The statement each entry of a short traceback shows, found once per file
and line in a test process.

pytest (8.4, pinned in the image) finds it with
`_pytest._code.source.getstatementrange_ast`: the entry's whole file parsed
again, its tree walked and the statement tokenized, for every entry of every
failure (its cache of trees lives for one failure). A module whose tests
fail parses itself once per failure: most of what a failing sample costs,
and most RL samples fail. The files a test process reports on do not change
under it, so the range of a line of a text is the same each time: here each
text is parsed once and each line's range found once, by pytest's own
function. What pytest shows is unchanged (tests/docker/test_prepared_session.py
holds it to pytest.main's).
"""

import _pytest._code.code
from _pytest._code.source import getstatementrange_ast

# source text -> (its tree, {(line, assertion): (start, end)}): per test process,
# which reports on a handful of files (the tests, their helpers) and then exits.
_KNOWN = {}


def statement_range(lineno, source, assertion=False, astnode=None):
    """`getstatementrange_ast`, remembered: (tree, start, end)."""
    text = str(source)
    known = _KNOWN.get(text)
    if known is None:
        astnode, start, end = getstatementrange_ast(lineno, source, assertion, astnode)
        _KNOWN[text] = (astnode, {(lineno, assertion): (start, end)})
        return astnode, start, end
    tree, ranges = known
    if (lineno, assertion) not in ranges:
        ranges[(lineno, assertion)] = getstatementrange_ast(lineno, source, assertion, tree)[1:]
    return (tree, *ranges[(lineno, assertion)])


def install():
    """Tracebacks' entries find their statements here (`TracebackEntry.getsource`)."""
    _pytest._code.code.getstatementrange_ast = statement_range
