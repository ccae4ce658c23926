"""`rewardbox.rewards.expected`: counting the tests of a pytest module from its source,
and matching reported results against that count."""

import textwrap

import pytest

from rewardbox.rewards import ExpectedTests, expected_tests
from rewardbox.sandbox import Outcome, TestResult

P, F = Outcome.PASSED, Outcome.FAILED


def counts(source: str) -> dict:
    return expected_tests(textwrap.dedent(source)).counts


def results(*specs) -> tuple[TestResult, ...]:
    """`(name, outcome)` or `(cls, name, outcome)` -> reported results."""
    out = []
    for spec in specs:
        cls, name, outcome = spec if len(spec) == 3 else (None, *spec)
        out.append(TestResult(nodeid=f"t.py::{cls or ''}::{name}[{len(out)}]", name=name, cls=cls, outcome=outcome))
    return tuple(out)


# --- counting -------------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    pytest.param("""
        def test_a(): pass
        async def test_b(): pass
        def helper(): pass
        def _test_private(): pass
        x = 1
        """, {(None, "test_a"): 1, (None, "test_b"): 1}, id="top-level-functions"),
    pytest.param("""
        class TestMath:
            def test_add(self): pass
            def test_sub(self): pass
            def helper(self): pass
        class Helper:
            def test_not_collected(self): pass
        """, {("TestMath", "test_add"): 1, ("TestMath", "test_sub"): 1}, id="test-class"),
    pytest.param("""
        class TestWithInit:
            def __init__(self): pass
            def test_x(self): pass
        def test_y(): pass
        """, {(None, "test_y"): 1}, id="class-with-init-not-counted"),
    pytest.param("""
        class TestA:
            def test_x(self): pass
        def test_x(): pass
        """, {("TestA", "test_x"): 1, (None, "test_x"): 1}, id="same-name-in-class-and-module"),
    pytest.param("""
        def test_a(): pass
        def test_a(): pass
        """, {(None, "test_a"): 1}, id="redefined-function-counts-once"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x", [1, 2, 3])
        def test_a(x): pass
        """, {(None, "test_a"): 3}, id="parametrize-list"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x, y", ((1, 2), (3, 4)))
        def test_a(x, y): pass
        """, {(None, "test_a"): 2}, id="parametrize-tuple"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize(argnames="x", argvalues=[1, 2, 3, 4])
        def test_a(x): pass
        """, {(None, "test_a"): 4}, id="parametrize-keywords"),
    pytest.param("""
        from pytest import mark
        @mark.parametrize("x", [1, 2])
        def test_a(x): pass
        """, {(None, "test_a"): 2}, id="parametrize-from-import"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x", [1, 2, 3])
        @pytest.mark.parametrize("y", [1, 2])
        @pytest.mark.slow
        def test_a(x, y): pass
        """, {(None, "test_a"): 6}, id="stacked-parametrize"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x", [
            1,
            pytest.param(2, id="two"),
            pytest.param(3, marks=pytest.mark.skip),
            pytest.param(4, marks=pytest.mark.xfail),
        ])
        def test_a(x): pass
        """, {(None, "test_a"): 4}, id="pytest-param-entries"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x", [1, 2])
        class TestA:
            def test_b(self, x): pass
            @pytest.mark.parametrize("y", [1, 2, 3])
            def test_c(self, x, y): pass
        """, {("TestA", "test_b"): 2, ("TestA", "test_c"): 6}, id="class-level-parametrize"),
    pytest.param("""
        import pytest
        CASES = [1, 2, 3]
        @pytest.mark.parametrize("x", CASES)
        def test_a(x): pass
        @pytest.mark.parametrize("x", range(3))
        @pytest.mark.parametrize("y", [1, 2])
        def test_b(x, y): pass
        @pytest.mark.parametrize(*CASES)
        def test_c(x): pass
        """, {(None, "test_a"): None, (None, "test_b"): None, (None, "test_c"): None}, id="non-literal-parametrize"),
    pytest.param("""
        import pytest
        @pytest.mark.parametrize("x", CASES)
        class TestA:
            def test_b(self, x): pass
        """, {("TestA", "test_b"): None}, id="non-literal-class-parametrize"),
    pytest.param("""
        import unittest
        from unittest import TestCase
        class TwoFerTest(unittest.TestCase):
            def test_a(self): pass
            def helper(self): pass
        class LeapTest(TestCase):
            def test_b(self): pass
        class Helper:
            def test_c(self): pass
        """, {("TwoFerTest", "test_a"): 1, ("LeapTest", "test_b"): 1}, id="unittest-test-cases-whatever-their-name"),
])
def test_counts(source, expected):
    assert counts(source) == expected


@pytest.mark.parametrize("source, total", [
    ("def test_a(): pass\n", 1),
    ("import pytest\n@pytest.mark.parametrize('x', [1, 2, 3])\ndef test_a(x): pass\ndef test_b(): pass\n", 4),
    # An uncountable parametrization counts once.
    ("import pytest\n@pytest.mark.parametrize('x', CASES)\ndef test_a(x): pass\ndef test_b(): pass\n", 2),
    ("import pytest\n@pytest.mark.parametrize('x', [])\ndef test_a(x): pass\n", 0),
    ("", 0),
    ("def test_a(:\n", 0),  # syntax error: nothing to count
])
def test_total(source, total):
    assert expected_tests(source).total == total


# --- matching results -----------------------------------------------------

ABC = ExpectedTests(counts={(None, "test_a"): 1, (None, "test_b"): 2, ("TestC", "test_d"): 1})


@pytest.mark.parametrize("reported, passed", [
    pytest.param(results(("test_a", P), ("test_b", P), ("test_b", P), ("TestC", "test_d", P)), 4, id="all"),
    pytest.param(results(("test_a", P), ("test_b", F), ("test_b", P), ("TestC", "test_d", F)), 2, id="some"),
    pytest.param(results(), 0, id="nothing-reported"),
    pytest.param(results(("test_a", P)), 1, id="missing-count-as-failed"),
    pytest.param(results(("test_a", Outcome.SKIPPED), ("test_b", Outcome.XFAILED), ("test_b", Outcome.ERROR),
                         ("TestC", "test_d", Outcome.XPASSED)), 0, id="non-pass-outcomes"),
    pytest.param(results(("test_a", P), ("test_zzz", P), ("test_yyy", P), ("TestOther", "test_a", P)), 1,
                 id="unexpected-tests-ignored"),
    pytest.param(results(("test_d", P)), 0, id="class-test-reported-without-class"),
    pytest.param(results(("TestC", "test_a", P)), 0, id="module-test-reported-in-a-class"),
    pytest.param(results(*[("test_b", P)] * 5), 2, id="duplicates-capped-at-count"),
    pytest.param(results(*[("test_a", P)] * 3, ("test_b", P)), 2, id="duplicates-of-one-do-not-fill-another"),
])
def test_passed(reported, passed):
    assert ABC.total == 4
    assert ABC.passed(reported) == passed


UNCOUNTED = ExpectedTests(counts={(None, "test_a"): None, (None, "test_b"): 1})


@pytest.mark.parametrize("reported, passed", [
    pytest.param(results(("test_a", P), ("test_a", P), ("test_a", P)), 1, id="all-instances-passed"),
    pytest.param(results(("test_a", P), ("test_a", F), ("test_a", P)), 0, id="one-instance-failed"),
    pytest.param(results(("test_a", P), ("test_a", Outcome.SKIPPED)), 0, id="one-instance-skipped"),
    pytest.param(results(("test_b", P)), 1, id="not-collected-counts-as-failed"),
])
def test_uncounted_parametrize_passes_only_if_every_instance_passed(reported, passed):
    assert UNCOUNTED.total == 2
    assert UNCOUNTED.passed(reported) == passed


def test_result_without_name_matches_nothing():
    reported = (TestResult(nodeid="test_solution.py::test_a", outcome=P),)

    assert ExpectedTests(counts={(None, "test_a"): 1}).passed(reported) == 0


@pytest.mark.parametrize("source", [
    pytest.param("""
        import pytest
        @pytest.fixture(params=[1, 2])
        def n(request):
            return request.param
        def test_a(n): pass
        """, id="fixture-params"),
    pytest.param("""
        import pytest
        pytestmark = pytest.mark.parametrize("n", [1, 2])
        def test_a(n): pass
        """, id="module-pytestmark"),
    pytest.param("""
        import pytest
        CASES = [1, 2]
        @pytest.mark.parametrize("n", [*CASES])
        def test_a(n): pass
        """, id="starred-argvalues"),
])
def test_hidden_parametrization_with_a_failing_instance_is_not_passed(source):
    expected = expected_tests(textwrap.dedent(source))
    # pytest runs two instances of test_a; one fails.
    reported = results(("test_a", P), ("test_a", F))

    assert expected.passed(reported) < expected.total


def test_expected_tests_is_frozen():
    with pytest.raises(ValueError, match="frozen"):
        ABC.counts = {}
    assert ABC.total == 4
