"""What a short traceback reads, read once per test process.

pytest (8.4, pinned in the image) reports a failure entry by entry, and for
every entry of every failure it reads again what it read for the last one:
- the statement each entry shows (`_pytest._code.source.getstatementrange_ast`):
  the entry's whole file parsed, its tree walked and the statement tokenized;
  its cache of trees lives for one failure, so a module whose tests fail
  parsed itself once per failure;
- the path of each entry's file (`Code.path`, for the traceback's cut and
  filter, about 30 entries a failure with pytest's own): a new `Path` each time;
- the source of each entry (`Code.fullsource`): for code compiled from a
  string (`<string>`, `<test>`: a dataset's tests that `exec` their cases),
  `inspect` looks for a module of that name in every loaded module, twice,
  before it finds no source.
Most RL samples fail, so this was most of what a failing sample cost. The
files a test process reports on do not change under it: here each text is
parsed once and each line's statement found once, by pytest's own function;
each path is made once per working directory; and exec'd code is known to
have no source without the search, under the conditions that make inspect
find none. What pytest shows is unchanged (tests/docker/test_prepared_session.py
holds it to pytest.main's, with these undone).
"""

import inspect
import linecache
import os

import _pytest._code.code
from _pytest._code.source import findsource, getstatementrange_ast
from _pytest.pathlib import absolutepath

# Per test process, which reports on a handful of files (the tests, their helpers) and then exits:
# source text -> (its tree, {(line, assertion): (start, end)})
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


def statement_range(lineno, source, assertion=False, astnode=None):
    """`getstatementrange_ast`, remembered: (tree, start, end)."""
    text = str(source)
    known = _STATEMENTS.get(text)
    if known is None:
        astnode, start, end = getstatementrange_ast(lineno, source, assertion, astnode)
        _STATEMENTS[text] = (astnode, {(lineno, assertion): (start, end)})
        return astnode, start, end
    tree, ranges = known
    if (lineno, assertion) not in ranges:
        ranges[(lineno, assertion)] = getstatementrange_ast(lineno, source, assertion, tree)[1:]
    return (tree, *ranges[(lineno, assertion)])


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
