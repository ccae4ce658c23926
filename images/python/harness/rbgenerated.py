"""Generated tests run without pytest's collection and per-test protocol.

A generated test module (asserts, check functions, stdin/stdout, call-based
labels) is ours, always the same shape: `import rbcheck`, then one function
per case whose body is `rbcheck.check(i)`. Collecting it (a directory, a
module imported through the assertion rewriter, the items, their fixtures and
marks) and running each item through pytest's setup/call/teardown hooks cost
most of a small run, to learn nothing the cases do not already say.

`GeneratedTests` is a plugin of the prepared session that answers pytest's
collection and test loop for such a module: the items are known from the
module, each case is called as pytest calls a test function, and its reports
are pytest's own (`CallInfo`, `TestReport`, `Function.repr_failure`), sent
through the same hooks, so the records plugin, the terminal report and the
session's exit status see what they see under pytest's loop
(tests/docker/test_generated_runner.py holds the two side by side). Sessions
this does not fit (a module of another shape; label code that uses pytest,
logging or warnings, which pytest's per-test hooks would act on) take
pytest's own loop.
"""

import os
import re
import types

import pytest
from _pytest.nodes import Node
from _pytest.outcomes import Exit
from _pytest.python import Function
from _pytest.reports import TestReport
from _pytest.runner import CallInfo, _update_current_test_var, check_interactive_exception
from _pytest.warnings import catch_warnings_for_item

# Text in a label's own code that pytest's per-test hooks would act on: outcomes
# (skip, xfail, fail, exit), captured log records, warning filters.
NEEDS_PYTEST_LOOP = ("pytest", "logging", "warn")


class GeneratedItem:
    """What pytest's reporting reads of a test item, for one generated case.
    Its failure is told by pytest's own Function code (the traceback cut at the
    test function, the harness's frames hidden), bound to this item."""

    repr_failure = Function.repr_failure
    _repr_failure_py = Node._repr_failure_py
    _traceback_filter = Function._traceback_filter

    def __init__(self, config, relpath, function):
        self.config = config
        self.ihook = config.hook
        self.name = self.originalname = function.__name__
        self.cls = None
        self.nodeid = f"{relpath}::{self.name}"
        self.location = (relpath, function.__code__.co_firstlineno - 1, self.name)
        self.keywords = {self.name: 1}
        self.obj = self._obj = function
        self.user_properties = []
        self._report_sections = []

    def iter_markers(self, name=None):
        return iter(())

    def reportinfo(self):
        return self.location

    def runtest(self):
        self.obj()


class GeneratedTests:
    """The collection and test loop of a generated module (see the module's
    docstring). Registered once with the prepared session, dormant (pytest's
    own collection and loop run) until a run arms it with its module."""

    def __init__(self):
        self.relpath = None
        self.functions = None

    def arm(self, test_files, data, root):
        """Takes this run's module when it is the generated shape; whether it did."""
        if len(test_files) != 1 or not _plain_label_code(data):
            return False
        path = test_files[0]
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except (OSError, ValueError):
            return False
        cases = _case_functions(text, len(data.get("cases", ())))
        if cases is None:
            return False
        import rbcheck

        namespace = {"__name__": os.path.splitext(os.path.basename(path))[0], "__file__": path, "rbcheck": rbcheck}
        self.functions = [_case_function(namespace, path, name, line, i) for i, (name, line) in enumerate(cases)]
        self.relpath = os.path.relpath(path, root)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        if self.functions is None:
            return None
        config = session.config
        session.items = [GeneratedItem(config, self.relpath, function) for function in self.functions]
        session.testscollected = len(session.items)
        config.hook.pytest_collection_finish(session=session)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """Each item as pytest's protocol runs it, less the setup and teardown
        phases, which have nothing to do for these items (no fixtures, no
        setup functions) and whose passing reports nobody shows or records."""
        if self.functions is None:
            return None
        hook = session.config.hook
        for item in session.items:
            hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
            with catch_warnings_for_item(session.config, ihook=hook, when="runtest", item=item):
                _update_current_test_var(item, "call")
                call = CallInfo.from_call(item.runtest, when="call", reraise=(Exit, KeyboardInterrupt))
                report = TestReport.from_item_and_call(item, call)
                hook.pytest_runtest_logreport(report=report)
                if check_interactive_exception(call, report):
                    hook.pytest_exception_interact(node=item, call=call, report=report)
                _update_current_test_var(item, None)
            hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


# A generated test's code, compiled once: each case's function is this with
# its name, index, file and line put in (the same code compiling the module gives).
# (`import rbcheck` in the same unit: CPython compiles a call on an imported module apart.)
_TEMPLATE = next(c for c in compile("import rbcheck\n\n\ndef test():\n    rbcheck.check(0)\n", "<template>",
                                    "exec").co_consts if isinstance(c, types.CodeType))


def _case_function(namespace, path, name, line, index):
    code = _TEMPLATE.replace(co_name=name, co_qualname=name, co_filename=path, co_firstlineno=line,
                             co_consts=tuple(index if c == 0 and type(c) is int else c for c in _TEMPLATE.co_consts))
    return types.FunctionType(code, namespace, name)


def _plain_label_code(data):
    """Whether the label's own code (a check function, asserts, their setup)
    leaves pytest's per-test hooks nothing to act on."""
    texts = [data.get("setup") or ""] + [case.get("source") or "" for case in data.get("cases", ())
                                         if isinstance(case, dict)]
    return not any(word in text for text in texts if isinstance(text, str) for word in NEEDS_PYTEST_LOOP)


# The module the host writes (rewards.label_formats), character for character: a
# one-line docstring, `import rbcheck`, then for each case two blank lines, `def`,
# and its one call. Matched whole, so no part of it can sit inside a string or a
# continued line of something else; any other text keeps pytest's loop.
_MODULE = re.compile(r'(?:"""[^"\\\n]*"""\n)?import rbcheck\n'
                     r"(?:\n\ndef test_[A-Za-z0-9_]*\(\):\n    rbcheck\.check\([0-9]+\)\n)*")
_CASE = re.compile(r"\n\ndef (test_[A-Za-z0-9_]*)\(\):\n    rbcheck\.check\(([0-9]+)\)\n")


def _case_functions(text, cases):
    """The (name, line) of the module's test functions when its text is
    exactly the generated shape for `cases` cases, function i calling
    `rbcheck.check(i)`; else None. Read from the text, not parsed: the shape
    is ours, and the module is the same for every sample of a label."""
    if _MODULE.fullmatch(text) is None:
        return None
    found, line = [], text.count("\n", 0, text.index("import rbcheck\n")) + 1
    for i, match in enumerate(_CASE.finditer(text)):
        if match.group(2) != str(i):
            return None
        line += 3  # two blank lines, then the def
        found.append((match.group(1), line))
        line += 1
    return found if len(found) == cases and len({name for name, _ in found}) == cases else None
