"""What a short traceback reads, read once per test process.

pytest (8.4, pinned in the image) reports a failure entry by entry, and for
every entry of every failure it reads again what it read for the last one:
- the statement each entry shows (`_pytest._code.source.getstatementrange_ast`):
  the entry's whole file parsed, its whole tree walked and the statement
  tokenized; its cache of trees lives for one failure, so a module whose
  tests fail parsed itself once per failure, and walked itself once per
  failing line (a module of n failing tests, n walks of n tests' tree);
- the path of each entry's file (`Code.path`, for the traceback's cut and
  filter, about 30 entries a failure with pytest's own): a new `Path` each time;
- the source of each entry (`Code.fullsource`): for code compiled from a
  string (`<string>`, `<test>`: a dataset's tests that `exec` their cases),
  `inspect` looks for a module of that name in every loaded module, twice,
  before it finds no source.
Most RL samples fail, so this was most of what a failing sample cost. The
files a test process reports on do not change under it: here each text is
parsed and walked whole once, and each line's statement found once, by
pytest's own function (from a text's second line on, over its statements
only);
each path is made once per working directory; and exec'd code is known to
have no source without the search, under the conditions that make inspect
find none. What pytest shows is unchanged (tests/docker/test_prepared_session.py
holds it to pytest.main's, with these undone).
"""

import ast
import inspect
import linecache
import os

import _pytest._code.code
from _pytest._code.source import findsource, getstatementrange_ast
from _pytest.pathlib import absolutepath

# Per test process, which reports on a handful of files (the tests, their helpers) and then exits:
# source text -> [its tree, its statements-only tree once needed, {(line, assertion): (start, end)}]
_STATEMENTS = {}
# (path, working directory) -> the absolute Path pytest makes of it
_PATHS = {}
# pytest's own, as installed over
PYTEST_OWN = {
    "getstatementrange_ast": _pytest._code.code.getstatementrange_ast,
    "absolutepath": _pytest._code.code.absolutepath,
    "fullsource": _pytest._code.code.Code.fullsource,
}
# Where inspect (Python 3.11) gets a "<...>" file's lines: linecache's cache only
# (updatecache gives none for such names, whatever module they belong to), unless
# these are replaced, as doctest replaces getlines while it runs.
_SOURCE_READERS = (inspect.findsource, linecache.getlines, linecache.updatecache)

_DECORATED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# Where statements are (Python 3.11's grammar): a module's, def's, class's, loop's, with's, try's, except
# handler's and match case's blocks.
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")


def statement_range(lineno, source, assertion=False, astnode=None):
    """`getstatementrange_ast`, remembered: (tree, start, end). From a text's
    second line on, pytest's function reads its statements-only tree."""
    text = str(source)
    known = _STATEMENTS.get(text)
    if known is None:
        astnode, start, end = getstatementrange_ast(lineno, source, assertion, astnode)
        _STATEMENTS[text] = [astnode, None, {(lineno, assertion): (start, end)}]
        return astnode, start, end
    tree, statements, ranges = known
    if (lineno, assertion) not in ranges:
        if statements is None:
            statements = known[1] = statements_only(tree)
        ranges[(lineno, assertion)] = getstatementrange_ast(lineno, source, assertion, statements)[1:]
    return (tree, *ranges[(lineno, assertion)])


def statements_only(tree):
    """`tree` cut to what pytest's `get_statement_startend2` reads of it: each
    statement and except handler at its line, a def's or class's decorators at
    theirs, and the first line of each else and finally block, flat under one
    module. pytest walks the whole tree for every line it looks up (about
    0.2 ms for a small test module, 3 ms for a 500-line one); this one is as
    long as the statements, and gives every line the same range: the lines it
    reads are the same, some of them twice (the first statement of a block is
    also a statement of its own), and a line's range is the nearest lines
    around it, which a repeated line does not move
    (tests/docker/test_prepared_session.py compares the two on every line).
    Made in a third of the time of one walk: statements sit only in blocks,
    never inside an expression, so only the blocks are followed."""
    flat = []
    todo = [tree]
    while todo:
        node = todo.pop()
        for field in _BLOCKS:
            children = getattr(node, field, None)
            if type(children) is list:
                todo.extend(children)
        if not isinstance(node, (ast.stmt, ast.ExceptHandler)):
            continue  # the module, a match's case
        decorators = node.decorator_list if isinstance(node, _DECORATED) else None
        finalbody, orelse = getattr(node, "finalbody", None), getattr(node, "orelse", None)
        if not decorators and not finalbody and not orelse:
            flat.append(ast.Pass(lineno=node.lineno))  # a statement with no fields: nothing below it to walk
            continue
        # Its own kind, every field empty (a missing field costs the walk an exception) but those read.
        stub = type(node)(**dict.fromkeys(node._fields), lineno=node.lineno)
        if decorators:
            stub.decorator_list = [ast.Constant(None, None, lineno=d.lineno) for d in decorators]
        if finalbody:
            stub.finalbody = [ast.Pass(lineno=finalbody[0].lineno)]
        if orelse:
            stub.orelse = [ast.Pass(lineno=orelse[0].lineno)]
        flat.append(stub)
    return ast.Module(body=flat, type_ignores=[])


def absolute_path(path):
    """`absolutepath`, remembered: its answer depends on the path and, for a
    relative one, the working directory (which may be gone: then abspath's error)."""
    path = os.fspath(path)
    key = path if os.path.isabs(path) else (path, os.getcwd())
    found = _PATHS.get(key)
    if found is None:
        found = _PATHS[key] = absolutepath(path)
    return found


def full_source(code):
    """`Code.fullsource`: None at once for exec'd code whose source nobody registered."""
    name = code.raw.co_filename
    if (name.startswith("<") and name.endswith(">") and name not in linecache.cache
            and (inspect.findsource, linecache.getlines, linecache.updatecache) == _SOURCE_READERS):
        return None
    return findsource(code.raw)[0]


def install():
    """A traceback's entries read through these (`TracebackEntry.getsource`, `Code.path`, `Code.fullsource`)."""
    _pytest._code.code.getstatementrange_ast = statement_range
    _pytest._code.code.absolutepath = absolute_path
    _pytest._code.code.Code.fullsource = property(full_source)


def uninstall():
    """pytest's own back: what pytest.main would read (the tests compare the two)."""
    _pytest._code.code.getstatementrange_ast = PYTEST_OWN["getstatementrange_ast"]
    _pytest._code.code.absolutepath = PYTEST_OWN["absolutepath"]
    _pytest._code.code.Code.fullsource = PYTEST_OWN["fullsource"]
