"""The comparison rules (rbcompare, the README's table "Comparison rules"),
imported from the image's source: program output and returned values in each
mode, and the issue's wrong answers that the earlier rule passed."""

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import rbcompare  # noqa: E402
from rbcompare import same_output, same_return, same_value  # noqa: E402

TOL = 1e-6


def stirling(n: int) -> float:
    """n! by Stirling's series: a float within 1e-10 of the exact integer."""
    return math.sqrt(2 * math.pi * n) * (n / math.e) ** n * (1 + 1 / (12 * n) + 1 / (288 * n * n) - 139 / (51840 * n**3))


# -- wrong answers the earlier rule passed (it lives on as mode "float") ---------------------------

WRONG_OUTPUTS = [
    pytest.param("1e6\n", "1000001\n", id="1e6-for-1000001"),
    pytest.param("5.000000005e+17\n", "500000000500000000\n", id="true-division-for-an-integer"),
    pytest.param("500000400.0\n", "500000000\n", id="500-off-near-5e8-printed-as-float"),
    pytest.param("499999600.0\n", "500000000\n", id="500-below-near-5e8-printed-as-float"),
    pytest.param("0042\n", "42\n", id="zero-padded"),
    pytest.param("+7\n", "7\n", id="plus-sign"),
    pytest.param("-0\n", "0\n", id="negative-zero"),
    pytest.param("1.0\n", "1\n", id="float-spelling-of-an-integer"),
    pytest.param("1e0\n", "1\n", id="exponent-spelling-of-an-integer"),
    pytest.param("Infinity\n", "inf\n", id="Infinity-for-inf"),
    pytest.param("INF\n", "inf\n", id="INF-for-inf"),
    pytest.param("+inf\n", "inf\n", id="plus-inf-for-inf"),
    pytest.param("infinity\n", "inf\n", id="infinity-for-inf"),
    pytest.param("1_0\n", "10.0\n", id="underscore-digits-for-a-float"),
    pytest.param("\u0661\u0660.\u0660\n", "10.0\n", id="arabic-indic-digits-for-a-float"),
    pytest.param("3 1e6\n", "3 1000001\n", id="among-other-tokens"),
]


@pytest.mark.parametrize("got, want", WRONG_OUTPUTS)
def test_wrong_outputs_the_earlier_rule_passed_now_fail(got, want):
    assert not same_output(got, want)
    assert same_output(got, want, "float")  # the earlier rule, for datasets that ask for it


WRONG_RETURNS = [
    pytest.param(stirling(50), math.factorial(50), id="stirling-for-a-factorial"),
    pytest.param(3.0, 3, id="float-for-an-int"),
    pytest.param(3.0000000001, 3, id="close-float-for-an-int"),
    pytest.param(5.000000005e17, 500000000500000000, id="true-division-for-an-int"),
    pytest.param([1, 2.0], [1, 2], id="float-for-an-int-in-a-list"),
    pytest.param({"n": 1e6}, {"n": 1000001}, id="float-for-an-int-in-a-dict"),
    pytest.param(3.0, [3], id="float-for-an-apps-wrapped-int"),
]


@pytest.mark.parametrize("got, want", WRONG_RETURNS)
def test_wrong_returns_the_earlier_rule_passed_now_fail(got, want):
    assert not same_return(got, want)
    assert same_return(got, want, "float")


# -- program output, mode "tokens" (the default) ------------------------------------------------

@pytest.mark.parametrize("got, want", [
    pytest.param("3\n", "3\n", id="equal"),
    pytest.param("3  \n", "3\n", id="trailing-spaces"),
    pytest.param("1 2\t\n3\n", "1 2\n3\n", id="trailing-tab"),
    pytest.param("3", "3\n", id="missing-final-newline"),
    pytest.param("3\n\n\n", "3\n", id="trailing-blank-lines"),
    pytest.param("1 2\r\n3\r\n", "1 2\n3\n", id="crlf"),
    pytest.param("  3\n", "3\n", id="leading-spaces-as-token-separators"),
    pytest.param("1   2\n", "1 2\n", id="runs-of-spaces"),
    pytest.param("", "", id="both-empty"),
    pytest.param("", "\n", id="empty-and-newline"),
    pytest.param("\n\n", "", id="blank-and-empty"),
    pytest.param("123456789012345678901234567890\n", "123456789012345678901234567890\n", id="big-integer"),
    pytest.param("1" * 5000 + "\n", "1" * 5000 + "\n", id="integer-of-5000-digits"),
    pytest.param("0042\n", "0042\n", id="expected-zero-padded"),
    pytest.param("-0\n", "-0\n", id="expected-negative-zero"),
    pytest.param("+7\n", "+7\n", id="expected-plus-sign"),
    pytest.param("inf\n", "inf\n", id="inf-by-inf"),
    pytest.param("nan\n", "nan\n", id="nan-by-nan"),
    pytest.param("1e999\n", "1e999\n", id="overflowing-decimal-by-its-text"),
    pytest.param("0.33333333\n", "0.333333333\n", id="float-within-tolerance"),
    pytest.param("1\n", "1.0\n", id="integer-for-a-float"),
    pytest.param("1.0000001\n", "1.0\n", id="float-within-relative-tolerance"),
    pytest.param("0.0000004\n", "0.0\n", id="float-within-absolute-tolerance"),
    pytest.param("1e-7\n", "0.0000001\n", id="exponent-for-a-point"),
    pytest.param("1500\n", "1.5E+3\n", id="point-for-an-exponent"),
    pytest.param("+0.5\n", "0.5\n", id="signed-float"),
    pytest.param(".5\n", "0.5\n", id="no-leading-digit"),
    pytest.param("5.\n", "5.0\n", id="no-trailing-digit"),
    pytest.param("-0.0\n", "0.0\n", id="negative-zero-float"),
    pytest.param("500000400\n", "5e8\n", id="expected-float-keeps-its-relative-tolerance"),
    pytest.param("2.5 yes\n", "2.5000000001 yes\n", id="float-among-words"),
])
def test_tokens_accepts(got, want):
    assert same_output(got, want)
    assert same_output(got, want, "tokens", TOL)


@pytest.mark.parametrize("got, want", [
    pytest.param("YES\n", "yes\n", id="no-case-folding"),
    pytest.param("Hello World\n", "hello world\n", id="no-case-folding-words"),
    pytest.param("0.334\n", "0.333\n", id="float-beyond-tolerance"),
    pytest.param("1 2\n", "1 2 3\n", id="fewer-tokens"),
    pytest.param("1 2 3\n", "1 2\n", id="more-tokens"),
    pytest.param("3\n", "3\n4\n", id="fewer-lines"),
    pytest.param("a\n\nb\n", "a\nb\n", id="blank-line-inside"),
    pytest.param("\n3\n", "3\n", id="leading-blank-line"),
    pytest.param("", "3\n", id="empty-output"),
    pytest.param("3\n", "", id="output-where-none-expected"),
    pytest.param("12\n", "1 2\n", id="tokens-joined"),
    pytest.param("1000001\n", "1000000\n", id="integers-differ"),
    pytest.param("999999000\n", "999999999\n", id="integers-differ-near-1e9"),
    pytest.param("123456789012345679\n", "123456789012345678\n", id="integers-differ-beyond-2**53"),
    pytest.param("42\n", "0042\n", id="unpadded-for-zero-padded"),
    pytest.param("0\n", "-0\n", id="zero-for-negative-zero"),
    pytest.param("7\n", "+7\n", id="unsigned-for-signed"),
    pytest.param("\u0664\u0662\n", "42\n", id="other-scripts-digits-for-an-integer"),
    pytest.param("nan\n", "1\n", id="nan-for-an-integer"),
    pytest.param("nan\n", "1.0\n", id="nan-for-a-float"),
    pytest.param("inf\n", "1e308\n", id="inf-for-a-float"),
    pytest.param("1e999\n", "1.5e308\n", id="overflowing-decimal-for-a-float"),
    pytest.param("2e999\n", "1e999\n", id="overflowing-decimals-differ"),
    pytest.param("NaN\n", "nan\n", id="NaN-for-nan"),
    pytest.param("0x10\n", "16.0\n", id="hex-for-a-float"),
    pytest.param("1,5\n", "1.5\n", id="decimal-comma"),
    pytest.param("1.5f\n", "1.5\n", id="suffix"),
    pytest.param("1.0\n", "one\n", id="number-for-a-word"),
])
def test_tokens_rejects(got, want):
    assert not same_output(got, want)


def test_tokens_tolerance_is_the_labels():
    assert same_output("0.334\n", "0.333\n", "tokens", 0.01)
    assert not same_output("0.3331\n", "0.3330\n", "tokens", 0.0)
    assert not same_output("1000001\n", "1000000\n", "tokens", 0.5)  # integers never have a tolerance
    assert not same_output("inf\n", "1.0\n", "tokens", math.inf)


# -- program output, mode "exact" -------------------------------------------------------------------

@pytest.mark.parametrize("got, want", [
    pytest.param("1 2\n3\n", "1 2\n3\n", id="equal"),
    pytest.param("1 2\n3", "1 2\n3\n", id="missing-final-newline"),
    pytest.param("1 2\n3\n", "1 2\n3", id="extra-final-newline"),
    pytest.param("1 2\r\n3\r\n", "1 2\n3\n", id="crlf"),
    pytest.param("", "", id="both-empty"),
    pytest.param("\n", "", id="newline-and-empty"),
])
def test_exact_accepts(got, want):
    assert same_output(got, want, "exact", TOL)


@pytest.mark.parametrize("got, want", [
    pytest.param("3 \n", "3\n", id="trailing-space"),
    pytest.param("3\n\n", "3\n", id="trailing-blank-line"),
    pytest.param(" 3\n", "3\n", id="leading-space"),
    pytest.param("1  2\n", "1 2\n", id="runs-of-spaces"),
    pytest.param("0.33333333\n", "0.333333333\n", id="float-within-tolerance"),
    pytest.param("1\n", "1.0\n", id="integer-for-a-float"),
    pytest.param("1 2\r3\n", "1 2\n3\n", id="lone-cr"),
])
def test_exact_rejects(got, want):
    assert not same_output(got, want, "exact", TOL)


# -- program output, mode "float" (the earlier rule) ---------------------------------------------

@pytest.mark.parametrize("got, want", [
    pytest.param("1.0\n", "1\n", id="float-for-an-integer"),
    pytest.param("0.33333333\n", "0.333333333\n", id="float-within-tolerance"),
    pytest.param("-0\n", "0\n", id="negative-zero"),
    pytest.param("0" * 5000 + "7\n", "+7\n", id="integer-of-5000-digits"),
    pytest.param("3  yes\n", "3 yes\n", id="words-as-text"),
])
def test_float_accepts(got, want):
    assert same_output(got, want, "float", TOL)


@pytest.mark.parametrize("got, want", [
    pytest.param("1000001\n", "1000000\n", id="integers-by-value"),
    pytest.param("1" * 5000 + "\n", "1" * 4999 + "2\n", id="integers-of-5000-digits"),
    pytest.param("0.334\n", "0.333\n", id="float-beyond-tolerance"),
    pytest.param("nan\n", "1\n", id="nan-for-an-integer"),
    pytest.param("YES\n", "yes\n", id="no-case-folding"),
])
def test_float_rejects(got, want):
    assert not same_output(got, want, "float", TOL)


# -- returned values, mode "tokens" (the default) ---------------------------------------------------

@pytest.mark.parametrize("got, want", [
    pytest.param((1, 2), [1, 2], id="tuple-for-list"),
    pytest.param([1, 2], (1, 2), id="list-for-tuple"),
    pytest.param(3, 3, id="ints"),
    pytest.param(10**30, 10**30, id="big-ints"),
    pytest.param(0.1 + 0.2, 0.3, id="float-within-tolerance"),
    pytest.param(1, 1.0, id="int-for-a-float"),
    pytest.param(1, 1.0000000001, id="int-for-a-close-float"),
    pytest.param(math.inf, math.inf, id="inf"),
    pytest.param(math.nan, math.nan, id="nan-for-nan"),
    pytest.param(True, True, id="bools"),
    pytest.param([[1, (2, 3.0000000001)], "a"], [[1, [2, 3.0]], "a"], id="nested"),
    pytest.param({"a": [1, 2], "b": 0.5}, {"a": (1, 2), "b": 0.5000000001}, id="dict"),
    pytest.param(None, None, id="none"),
    pytest.param("abc", "abc", id="str"),
    pytest.param({1, 2}, {2, 1}, id="set"),
    pytest.param(b"ab", b"ab", id="bytes"),
])
def test_tokens_values_accept(got, want):
    assert same_value(got, want)
    assert same_return(got, want, "tokens", TOL)


@pytest.mark.parametrize("got, want", [
    pytest.param(True, 1, id="bool-for-int"),
    pytest.param(1, True, id="int-for-bool"),
    pytest.param(False, 0, id="false-for-zero"),
    pytest.param(0.0, False, id="float-for-bool"),
    pytest.param(True, 1.0, id="bool-for-float"),
    pytest.param(0.31, 0.3, id="float-beyond-tolerance"),
    pytest.param(2, 3, id="ints"),
    pytest.param(10**30 + 1, 10**30, id="big-ints"),
    pytest.param(10**400, 1.0, id="int-beyond-floats-for-a-float"),
    pytest.param(10**400, math.inf, id="int-beyond-floats-for-inf"),
    pytest.param(math.nan, 1.0, id="nan-for-a-float"),
    pytest.param(1.0, math.nan, id="float-for-nan"),
    pytest.param(-math.inf, math.inf, id="minus-inf-for-inf"),
    pytest.param(1e308, math.inf, id="big-float-for-inf"),
    pytest.param([1, 2], [1, 2, 3], id="length"),
    pytest.param([[1, 2]], [[1, 3]], id="nested"),
    pytest.param({"a": 1}, {"b": 1}, id="dict-keys"),
    pytest.param({"a": 1}, {"a": 1, "b": 2}, id="dict-missing-key"),
    pytest.param({1: 2}, {"1": 2}, id="dict-key-types"),
    pytest.param({True: 2}, {1: 2}, id="dict-bool-key-for-int-key"),
    pytest.param({"a": 1}, [("a", 1)], id="dict-for-list"),
    pytest.param("A", "a", id="str-case"),
    pytest.param("1", 1, id="str-for-int"),
    pytest.param(1, "1", id="int-for-str"),
    pytest.param(None, 0, id="none-for-zero"),
    pytest.param(None, [], id="none-for-empty"),
    pytest.param({1, 2}, [1, 2], id="set-for-list"),
    pytest.param(b"ab", "ab", id="bytes-for-str"),
])
def test_tokens_values_reject(got, want):
    assert not same_value(got, want)
    assert not same_return(got, want)


@pytest.mark.parametrize("got, want, matches", [
    pytest.param(3, [3], True, id="bare-value"),
    pytest.param([3], [3], True, id="wrapped-value"),
    pytest.param([1, 2], [[1, 2]], True, id="bare-list"),
    pytest.param((1, 2), [[1, 2]], True, id="bare-tuple"),
    pytest.param(4, [3], False, id="wrong-bare-value"),
    pytest.param(1, [1, 2], False, id="not-a-list-of-one"),
    pytest.param(True, [1], False, id="bool-for-wrapped-int"),
])
def test_an_apps_wrapped_value_matches_the_bare_one(got, want, matches):
    assert same_return(got, want) is matches
    assert not same_value(got, want) or got == want


# -- returned values, modes "exact" and "float" -----------------------------------------------------

@pytest.mark.parametrize("got, want, exact, lenient", [
    pytest.param(0.5, 0.5, True, True, id="equal-floats"),
    pytest.param(0.1 + 0.2, 0.3, False, True, id="close-floats"),
    pytest.param(1, 1.0, False, True, id="int-for-a-float"),
    pytest.param(1.0, 1, False, True, id="float-for-an-int"),
    pytest.param(1000001, 1000000, False, False, id="ints-differ"),
    pytest.param(1.5, 1, False, False, id="float-far-from-an-int"),
    pytest.param(True, 1, False, False, id="bool-for-int"),
    pytest.param(1.0, True, False, False, id="float-for-bool"),
    pytest.param((1, 2.0), [1, 2.0], True, True, id="tuple-for-list"),
    pytest.param(math.nan, math.nan, True, True, id="nan-for-nan"),
    pytest.param(10**400, 1e308, False, False, id="int-beyond-floats"),
    pytest.param({"a": [0.1 + 0.2]}, {"a": [0.3]}, False, True, id="nested"),
    pytest.param(3, [3], True, True, id="apps-wrapped"),
])
def test_exact_and_float_values(got, want, exact, lenient):
    assert same_return(got, want, "exact", TOL) is exact
    assert same_return(got, want, "float", TOL) is lenient


@pytest.mark.parametrize("compare", [
    lambda: same_output("1\n", "1\n", "loose"),
    lambda: same_return(1, 1, "Tokens"),
    lambda: same_value(1, 1, ""),
])
def test_an_unknown_mode_is_refused(compare):
    with pytest.raises(ValueError, match="unknown comparison mode"):
        compare()


def test_modes_are_the_labels():
    from typing import get_args

    from rewardbox.rewards.labels import StdioLabel

    assert get_args(StdioLabel.model_fields["compare"].annotation) == rbcompare.MODES
    assert StdioLabel.model_fields["compare"].default == rbcompare.DEFAULT_MODE
