"""The modules a label's tests import, which the sandbox image must hold.

A task whose tests import numpy cannot be graded on an image without numpy:
a correct solution would fail with the tests' ImportError. That is the
dataset's need, never the model's fault, so before a run the code reward
compares what the label's tests import (read here, from their syntax tree)
with what the image holds (`rewardbox.images.image_manifest`), and a missing
module makes the sample unscorable with `missing_modules_error`.

Counted: `import a.b` and `from a.b import c` (as `a`); `__import__("a")`,
`importlib.import_module("a")` and `pytest.importorskip("a")` with a literal
name (a skipped test does not pass either). Not counted: relative imports;
imports in the body of a `try` whose handlers catch ImportError (or a base of
it: the tests have a way on without the module); imports under
`if TYPE_CHECKING:`; the standard library; the solution's own module and the
label's files; the harness's modules, which the tests may import.

>>> sorted(imported_modules('''
... import numpy as np, os.path
... from scipy.stats import norm
... from . import helpers
... try:
...     import pandas
... except ImportError:
...     pandas = None
... '''))
['numpy', 'os', 'scipy']
>>> needed_modules(PytestLabel(pytest="import numpy, json\\nfrom solution import mean\\ndef test_a(): pass"))
('numpy',)
>>> print(missing_modules_error(("numpy",), "rewardbox/python:0.1.0-0123456789ab", scientific=["numpy==2.4.6"]))
the label's tests import numpy, which the sandbox image rewardbox/python:0.1.0-0123456789ab does not hold (the \
dataset's need, not the model's fault): use the scientific image (REWARDBOX_IMAGE=scientific, built by \
`rewardbox image build --variant scientific`), or build an image with it: \
`rewardbox image build --packages numpy` (or `-r requirements.txt`)
"""

import ast
import functools
import re
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import PurePosixPath

from rewardbox.rewards.label_formats import TEST_FILE, AssertLabel, CheckLabel, CodeLabel, PytestLabel
from rewardbox.rewards.syntax import parse
from rewardbox.sandbox.protocol import SOLUTION_FILE

__all__ = ["DISTRIBUTIONS", "distribution", "harness_modules", "imported_modules", "missing_modules_error",
           "needed_modules"]

# Import names whose distribution on PyPI is named otherwise: the name the
# fix's `--packages` needs. Only the common ones; any other name is its own.
DISTRIBUTIONS: dict[str, str] = {
    "PIL": "pillow",
    "bs4": "beautifulsoup4",
    "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
}

# What a handler must catch for the import it guards to be optional.
_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# Calls that import the module named by their first argument.
_IMPORT_CALLS = frozenset({"__import__", "import_module", "importorskip"})


def distribution(module: str) -> str:
    """The distribution to install for an import name.

    >>> distribution("sklearn"), distribution("numpy")
    ('scikit-learn', 'numpy')
    """
    return DISTRIBUTIONS.get(module, module)


def imported_modules(source: str) -> frozenset[str]:
    """The top-level names of the modules `source` imports unguarded (see the
    module's docstring); none for source that does not parse (the label says
    why elsewhere)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    found: set[str] = set()
    _visit(tree, False, found)
    return frozenset(found)


# `try` and, from Python 3.11, `try`/`except*` (the same fields).
_TRY_NODES: tuple[type[ast.Try], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))


def _visit(node: ast.AST, guarded: bool, found: set[str]) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        guarded = False  # its body runs when called, outside the try that defined it
    if isinstance(node, ast.Import) and not guarded:
        found.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and not guarded and not node.level and node.module:
        found.add(node.module.split(".")[0])
    elif isinstance(node, ast.Call) and not guarded and (name := _imported_by_call(node)):
        found.add(name)
    elif isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.orelse:
            _visit(statement, guarded, found)
        return
    elif isinstance(node, _TRY_NODES):
        for statement in node.body:
            _visit(statement, guarded or _guards(node.handlers), found)
        for after in [*node.handlers, *node.orelse, *node.finalbody]:
            _visit(after, guarded, found)
        return
    for child in ast.iter_child_nodes(node):
        _visit(child, guarded, found)


def _imported_by_call(call: ast.Call) -> str | None:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name not in _IMPORT_CALLS or not call.args:
        return None
    first = call.args[0]
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str) or not first.value:
        return None
    return None if first.value.startswith(".") else first.value.split(".")[0]


def _guards(handlers: list[ast.ExceptHandler]) -> bool:
    """Whether one of these handlers catches an ImportError."""
    for handler in handlers:
        caught = handler.type
        if caught is None:
            return True
        for exc in caught.elts if isinstance(caught, ast.Tuple) else [caught]:
            name = exc.id if isinstance(exc, ast.Name) else exc.attr if isinstance(exc, ast.Attribute) else None
            if name in _GUARDS:
                return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@functools.cache
def harness_modules() -> frozenset[str]:
    """The harness's modules (rbcheck and the rest), on the tests' path in
    every sandbox image built from this package."""
    harness = resources.files("rewardbox.images") / "python" / "harness"
    return frozenset(PurePosixPath(f.name).stem for f in harness.iterdir() if f.name.endswith(".py"))


def needed_modules(label: CodeLabel) -> tuple[str, ...]:
    """The modules, sorted, that the image must hold for `label`'s tests to
    run: what the test code imports beyond the standard library, the
    solution's module, the label's files and the harness. The generated
    formats' own test modules import only the harness; an asserts label's
    setup and asserts, and a check label's test and prompt, are the dataset's."""
    if isinstance(label, PytestLabel):
        sources: tuple[str, ...] = (label.pytest,)
    elif isinstance(label, AssertLabel):
        sources = (label.setup, *label.tests)
    elif isinstance(label, CheckLabel):
        sources = (label.test, label.prompt or "")  # the prompt's imports run with the tests, or the solution
    else:
        return ()
    return _needed(sources)


@functools.lru_cache(maxsize=4096)
def _needed(sources: tuple[str, ...]) -> tuple[str, ...]:
    """Per distinct test code: labels are parsed once and shared by their
    samples, so the same strings come back for every sample of a task."""
    local = {PurePosixPath(SOLUTION_FILE).stem, PurePosixPath(TEST_FILE).stem}
    imported = set().union(*(imported_modules(s) for s in sources if s))
    return tuple(sorted(imported - sys.stdlib_module_names - local - harness_modules()))


def missing_modules_error(missing: Iterable[str], image: str, scientific: Iterable[str] = ()) -> str:
    """Why a sample is unscorable on `image`, and the fix: the scientific
    image when its requirement lines (`scientific`) install every missing
    module, else an image built with them."""
    modules = sorted(missing)
    names = ", ".join(modules)
    them = "it" if len(modules) == 1 else "them"
    build = f"`rewardbox image build --packages {' '.join(distribution(m) for m in modules)}` (or `-r requirements.txt`)"
    offered = {_project(line) for line in scientific}
    if modules and all(_project(distribution(m)) in offered for m in modules):
        fix = (f"use the scientific image (REWARDBOX_IMAGE=scientific, built by `rewardbox image build --variant "
               f"scientific`), or build an image with {them}: {build}")
    else:
        fix = f"build an image with {them}: {build}, and score on its tag (REWARDBOX_IMAGE or --image)"
    return (f"the label's tests import {names}, which the sandbox image {image} does not hold (the dataset's need, "
            f"not the model's fault): {fix}")


def _project(requirement: str) -> str:
    """A requirement line's project name, normalized as PyPI compares them."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()
