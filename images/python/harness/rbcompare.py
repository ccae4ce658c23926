"""Comparison rules for generated tests, written as a judge: what an expected
output or return value is matched by. Documented in the README ("Comparison
rules"); pure and stdlib only, so the host's unit tests import it as it is.

A label picks a mode with `"compare"`:

    tokens  (default) a contest checker's rule. An expected token written as an
            integer is matched only by the same text, so 1e6 is not 1000001 and
            0042, +7, -0 are not 42, 7, 0; one written as a float (a point or
            an exponent) by any decimal number within the tolerance; anything
            else as text. Returned values: an int only by an int of the same
            value, a float by an int or float within the tolerance.
    exact   the output text itself (line endings and one final newline aside);
            returned values of the same types, floats equal.
    float   the lenient rule of earlier versions: any two numbers compared
            numerically within the tolerance, whatever their types or spelling.

The expected values come from JSON, the returned ones from rbwire.decode:
both are exact builtin types, so no `__eq__` of the solution's runs here.
"""

import math
import re

MODES = ("tokens", "exact", "float")
DEFAULT_MODE = "tokens"

# ASCII digits only: `\d` would take other scripts' digits, which int() and
# float() read but no judge's expected output is written in.
_SIGNED_INTEGER = re.compile(r"[+-]?[0-9]+")
# A finite decimal as C's strtod and every checker read it; not Python's
# float() spellings (inf, nan, 1_000, surrounding spaces).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"unknown comparison mode {mode!r} (one of {', '.join(MODES)})")


# -- program output ------------------------------------------------------------

def same_output(got, want, mode=DEFAULT_MODE, tolerance=1e-6):
    """A program's output (`got`) against the expected output."""
    _check_mode(mode)
    if mode == "exact":
        return _exact_text(got) == _exact_text(want)
    got_lines, want_lines = _lines(got), _lines(want)
    if len(got_lines) != len(want_lines):
        return False
    same_token = _same_token if mode == "tokens" else _same_number
    # Equal lines have equal tokens: only lines that differ are split.
    return all(g == w or _same_tokens(g.split(), w.split(), same_token, tolerance)
               for g, w in zip(got_lines, want_lines))


def _exact_text(text):
    """A contest's exact checker: only how the last line ends is not compared."""
    text = text.replace("\r\n", "\n")
    return text[:-1] if text.endswith("\n") else text


def _lines(text):
    """Lines without trailing whitespace, trailing blank lines dropped."""
    return text.replace("\r\n", "\n").rstrip().split("\n") if text.strip() else []


def _same_tokens(got, want, same_token, tolerance):
    return len(got) == len(want) and all(g == w or same_token(g, w, tolerance) for g, w in zip(got, want))


def _same_token(got, want, tolerance):
    """tokens mode, for two tokens that differ as text: only an expected float
    has other spellings (an integer, `+7` and words are matched by their text)."""
    if not (_DECIMAL.fullmatch(want) and _DECIMAL.fullmatch(got)) or _SIGNED_INTEGER.fullmatch(want):
        return False
    return _close(float(got), float(want), tolerance, finite=True)


def _same_number(got, want, tolerance):
    """float mode, for two tokens that differ as text: integers by value, any
    other two tokens Python's float() reads within the tolerance."""
    if _SIGNED_INTEGER.fullmatch(got) and _SIGNED_INTEGER.fullmatch(want):
        return _integer_value(got) == _integer_value(want)
    try:
        return _close(float(got), float(want), tolerance)
    except ValueError:
        return False


def _integer_value(token):
    """Its value as a canonical spelling: int() refuses more than 4300 digits."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return ("-" if token[0] == "-" and digits != "0" else "") + digits


def _close(got, want, tolerance, finite=False):
    """Within `tolerance`, relative or absolute. With `finite`, an overflowing
    decimal (1e999) matches nothing numerically; else an infinity matches the
    same infinity, and NaN matches NaN (a judge's rule: testlib's doubleCompare)."""
    try:
        got, want = float(got), float(want)
    except OverflowError:  # an int beyond any float
        return False
    if finite and not (math.isfinite(got) and math.isfinite(want)):
        return False
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    return got == want or math.isclose(got, want, rel_tol=tolerance, abs_tol=tolerance)


# -- returned values -------------------------------------------------------------

def same_return(got, want, mode=DEFAULT_MODE, tolerance=1e-6):
    """A value returned by the solution against the expected one. APPS wraps
    each expected return value in a list of one: the bare value matches too."""
    _check_mode(mode)
    return same_value(got, want, mode, tolerance) or (
        type(want) is list and len(want) == 1 and same_value(got, want[0], mode, tolerance))


def same_value(got, want, mode=DEFAULT_MODE, tolerance=1e-6):
    """`got` against `want`, recursively. Lists and tuples alike in every mode
    (JSON, the label's format, has no tuples); bools only equal bools; dicts
    by keys (of the same type) and values."""
    _check_mode(mode)
    return _same_value(got, want, mode, tolerance)


def _same_value(got, want, mode, tolerance):
    if type(got) is tuple:
        got = list(got)
    if type(want) is tuple:
        want = list(want)
    if type(want) is float and type(got) in (int, float):
        if mode == "exact":
            return type(got) is float and (got == want or math.isnan(got) and math.isnan(want))
        return _close(got, want, tolerance)
    if type(want) is int and mode == "float" and type(got) is float:
        return _close(got, want, tolerance)
    if type(got) is not type(want):
        return False
    if type(want) is list:
        return len(got) == len(want) and all(_same_value(g, w, mode, tolerance) for g, w in zip(got, want))
    if type(want) is dict:
        keys = {(type(k), k) for k in want}
        return ({(type(k), k) for k in got} == keys
                and all(_same_value(got[k], want[k], mode, tolerance) for k in want))
    return got == want
