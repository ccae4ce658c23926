"""Counting the tests a pytest module should produce, before anything runs.

The count comes from the module's source (its syntax tree), never from the run,
so code under test cannot shrink it: a test that is missing, skipped or never
collected still counts in the denominator.
"""

import ast
from collections.abc import Iterator
from typing import TypeGuard

from pydantic import BaseModel, ConfigDict

from rewardbox.rewards.syntax import parse
from rewardbox.sandbox import Outcome, TestResult

TestKey = tuple[str | None, str]  # (class name or None, function name)


class ExpectedTests(BaseModel):
    """Expected instances per test function; `None` when a parametrization
    cannot be counted statically (then the function counts once, passed only if
    every collected instance passed)."""

    model_config = ConfigDict(frozen=True)

    counts: dict[TestKey, int | None]

    @property
    def total(self) -> int:
        return sum(1 if n is None else n for n in self.counts.values())

    def passed(self, results: tuple[TestResult, ...]) -> int:
        """How many expected tests these results show as passed."""
        by_key: dict[TestKey, list[Outcome]] = {}
        for result in results:
            by_key.setdefault((result.cls, result.name or ""), []).append(result.outcome)
        passed = 0
        for key, count in self.counts.items():
            outcomes = by_key.get(key, [])
            if count is None or len(outcomes) > count:
                # More instances than the source shows (fixture params, pytestmark, ...):
                # the function's instances pass together or not at all.
                all_passed = bool(outcomes) and all(o is Outcome.PASSED for o in outcomes)
                passed += (1 if count is None else count) if all_passed else 0
            else:
                passed += sum(o is Outcome.PASSED for o in outcomes)
        return passed


def expected_tests(source: str) -> ExpectedTests:
    """Test functions and their parametrized instances in a pytest module.

    >>> expected_tests('''
    ... import pytest
    ... def test_a(): pass
    ... @pytest.mark.parametrize("x", [1, 2, 3])
    ... def test_b(x): pass
    ... class TestC:
    ...     def test_d(self): pass
    ... class TwoFerTest(unittest.TestCase):
    ...     def test_e(self): pass
    ... ''').total
    6
    """
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return ExpectedTests(counts={})
    counts: dict[TestKey, int | None] = {}
    for node in tree.body:
        if _is_test_function(node):
            counts[(None, node.name)] = _instances(node.decorator_list)
        elif isinstance(node, ast.ClassDef) and (_is_test_case(node) or (
                node.name.startswith("Test") and not _has_init(node))):
            class_factor = _instances(node.decorator_list)
            for item in node.body:
                if _is_test_function(item):
                    n = _instances(item.decorator_list)
                    counts[(node.name, item.name)] = None if n is None or class_factor is None else n * class_factor
    return ExpectedTests(counts=counts)


def _is_test_function(node: ast.stmt) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")


def _is_test_case(node: ast.ClassDef) -> bool:
    """A `unittest.TestCase` subclass, which pytest collects whatever its name
    (Exercism's `TwoFerTest`)."""
    return any(_name(base).rsplit(".", 1)[-1].endswith("TestCase") for base in node.bases)


def _has_init(node: ast.ClassDef) -> bool:
    return any(isinstance(item, ast.FunctionDef) and item.name == "__init__" for item in node.body)


def _instances(decorators: list[ast.expr]) -> int | None:
    count: int | None = 1
    for sizes in _parametrize_sizes(decorators):
        count = None if sizes is None or count is None else count * sizes
    return count


def _parametrize_sizes(decorators: list[ast.expr]) -> Iterator[int | None]:
    for decorator in decorators:
        if not (isinstance(decorator, ast.Call) and _name(decorator.func).endswith("parametrize")):
            continue
        values = decorator.args[1] if len(decorator.args) > 1 else next(
            (k.value for k in decorator.keywords if k.arg == "argvalues"), None)
        if isinstance(values, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in values.elts):
            yield len(values.elts)
        else:
            yield None


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""
