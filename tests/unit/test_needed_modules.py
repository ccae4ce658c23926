"""Which modules a label's tests need from the image (rewardbox.rewards.needed_modules),
and the code reward's one inspect per image (rewardbox.rewards.code.ImageModules)."""

import threading
import time
from pathlib import Path

import pytest

from rewardbox.images import VARIANTS
from rewardbox.rewards.code import ImageModules
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.needed_modules import (
    distribution,
    harness_modules,
    imported_modules,
    missing_modules_error,
    needed_modules,
)

HARNESS = Path(__file__).parents[2] / "images" / "python" / "harness"


def needed(test_code: str) -> tuple[str, ...]:
    return needed_modules(parse_label({"pytest": test_code + "\n\ndef test_a():\n    pass\n"}))


@pytest.mark.parametrize("source, modules", [
    ("import numpy", {"numpy"}),
    ("import numpy as np", {"numpy"}),
    ("import scipy.stats as st, mpmath", {"scipy", "mpmath"}),
    ("from numpy.linalg import norm as n2", {"numpy"}),
    ("from sortedcontainers import SortedList", {"sortedcontainers"}),
    ("__import__('sympy.abc')", {"sympy"}),
    ("import importlib\nm = importlib.import_module('requests.adapters')", {"importlib", "requests"}),
    ("from importlib import import_module\nimport_module('networkx')", {"importlib", "networkx"}),
    # A skipped test is not a passed one: importorskip needs the module as much as an import.
    ("import pytest\nnp = pytest.importorskip('numpy')", {"pytest", "numpy"}),
    ("def test_x():\n    import pandas\n    assert pandas", {"pandas"}),
    ("class T:\n    import yaml", {"yaml"}),
])
def test_imports_are_read_from_the_syntax_tree(source, modules):
    assert imported_modules(source) == modules


@pytest.mark.parametrize("source", [
    "from . import helpers",
    "from .helpers import f",
    "from .. import x",
    "importlib.import_module('.sub', 'pkg')",
    "__import__(name)",  # not a literal: nothing to read
    "try:\n    import numpy\nexcept ImportError:\n    numpy = None",
    "try:\n    import numpy\nexcept ModuleNotFoundError:\n    numpy = None",
    "try:\n    import numpy\nexcept (ValueError, ImportError):\n    numpy = None",
    "try:\n    import numpy\nexcept Exception:\n    numpy = None",
    "try:\n    import numpy\nexcept:\n    numpy = None",
    "try:\n    from numpy import mean\nexcept builtins.ImportError:\n    mean = None",
    "try:\n    try:\n        import numpy\n    finally:\n        pass\nexcept ImportError:\n    pass",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import numpy",
    "import typing\nif typing.TYPE_CHECKING:\n    from numpy import ndarray",
    "def broken(:",  # the label says why elsewhere
])
def test_unguarded_absolute_imports_only(source):
    assert imported_modules(source) - {"typing", "importlib"} == set()


@pytest.mark.parametrize("source, modules", [
    # A handler that does not catch ImportError leaves the import required.
    ("try:\n    import numpy\nexcept ValueError:\n    pass", {"numpy"}),
    # The handler's, else's and finally's imports are not guarded by the try.
    ("try:\n    import numpy\nexcept ImportError:\n    import scipy", {"scipy"}),
    ("try:\n    pass\nexcept ImportError:\n    pass\nelse:\n    import scipy\nfinally:\n    import sympy",
     {"scipy", "sympy"}),
    # A function defined in the try runs its imports later, unguarded.
    ("try:\n    def f():\n        import numpy\nexcept ImportError:\n    pass", {"numpy"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n    import numpy", {"typing", "numpy"}),
])
def test_what_a_guard_does_not_cover(source, modules):
    assert imported_modules(source) == modules


def test_the_standard_library_the_solution_and_the_harness_are_not_needed():
    assert needed("import os, sys, json, math, collections.abc, typing, __future__\nfrom itertools import chain") == ()
    assert needed("import solution\nfrom solution import mean\nimport test_solution") == ()
    assert needed("import rbcheck, pytest\nfrom rbcompare import equal") == ("pytest",)  # pytest: the image's
    assert needed("import numpy as np\nfrom solution import f\nimport os") == ("numpy",)
    assert needed("import scipy\nimport numpy\nimport numpy.linalg") == ("numpy", "scipy")  # sorted, once each


def test_the_harness_modules_are_its_files():
    assert harness_modules() == {p.stem for p in HARNESS.glob("*.py")}
    assert "rbcheck" in harness_modules()


def test_each_label_format_reads_its_own_test_code():
    asserts = parse_label({"tests": ["assert f([1, 2]) == numpy.float64(1.5)"], "setup": "import numpy"})
    mbpp = parse_label({"test_list": ["assert f(1) == 1"], "test_imports": ["import sympy", "import math"]})
    check = parse_label({"test": "import scipy\ndef check(candidate):\n    assert candidate(1) == 1",
                         "entry_point": "f"})
    prompt = parse_label({"test": "def check(candidate):\n    assert candidate(1) == 1", "entry_point": "f",
                          "prompt": "import numpy as np\n\ndef f(x):\n    '''...'''\n"})
    assert needed_modules(asserts) == ("numpy",)
    assert needed_modules(mbpp) == ("sympy",)
    assert needed_modules(check) == ("scipy",)
    assert needed_modules(prompt) == ("numpy",)  # the label's prompt runs with its tests or its solution
    # Generated tests import the harness only; the cases are data.
    assert needed_modules(parse_label({"inputs": ["1\n"], "outputs": ["import numpy\n"]})) == ()
    assert needed_modules(parse_label({"fn_name": "f", "inputs": [["numpy"]], "outputs": [1]})) == ()


def test_distribution_names_where_they_differ():
    assert [distribution(m) for m in ("sklearn", "yaml", "PIL", "cv2", "bs4", "numpy")] == [
        "scikit-learn", "PyYAML", "pillow", "opencv-python-headless", "beautifulsoup4", "numpy"]


def test_the_error_names_the_modules_and_the_fix():
    image = "rewardbox/python:0.1.0-0123456789ab"
    error = missing_modules_error({"scipy", "numpy"}, image, VARIANTS["scientific"])
    assert error.startswith(f"the label's tests import numpy, scipy, which the sandbox image {image} does not hold "
                            "(the dataset's need, not the model's fault): use the scientific image "
                            "(REWARDBOX_IMAGE=scientific, built by `rewardbox image build --variant scientific`)")
    assert "`rewardbox image build --packages numpy scipy` (or `-r requirements.txt`)" in error

    # The scientific image does not hold it: only a build with it helps; the hint names the distribution.
    error = missing_modules_error(["sklearn"], image, VARIANTS["scientific"])
    assert "scientific" not in error
    assert error.endswith("build an image with it: `rewardbox image build --packages scikit-learn` "
                          "(or `-r requirements.txt`), and score on its tag (REWARDBOX_IMAGE or --image)")
    # Project names compare as PyPI compares them.
    assert "REWARDBOX_IMAGE=scientific" in missing_modules_error(["yaml"], image, ["pyyaml>=6"])


class CountedInspect:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, image, base_url):
        self.calls.append((image, base_url))
        time.sleep(0.05)  # the first samples of a batch arrive together
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_one_inspect_per_image_whatever_the_threads(monkeypatch):
    inspect = CountedInspect(frozenset({"numpy"}), None)
    monkeypatch.setattr(ImageModules, "_inspect", staticmethod(inspect))
    cache = ImageModules()
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(cache.modules("sci"))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert seen == [frozenset({"numpy"})] * 16
    assert cache.modules("foreign:1") is None  # no labels of ours: unknown, no check
    assert cache.modules("foreign:1") is None
    assert inspect.calls == [("sci", None), ("foreign:1", None)]


def test_an_engine_that_cannot_tell_means_no_check_and_a_later_retry(monkeypatch):
    inspect = CountedInspect(ConnectionError("engine down"), frozenset({"numpy"}))
    monkeypatch.setattr(ImageModules, "_inspect", staticmethod(inspect))
    cache = ImageModules(retry_s=0.0)

    assert cache.modules("sci", "tcp://127.0.0.1:1") is None
    assert cache.modules("sci", "tcp://127.0.0.1:1") == {"numpy"}
    assert cache.modules("sci", "tcp://127.0.0.1:1") == {"numpy"}
    assert len(inspect.calls) == 2
