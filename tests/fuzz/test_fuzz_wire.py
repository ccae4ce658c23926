"""(f) The wire's running budget (rbwire.Budget) charges a value no more than
its JSON takes: a value that fits a frame is never refused as over it, whatever
it holds and however its containers are shared."""

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import examples

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "python" / "harness"))
import rbhandle  # noqa: E402
import rbwire  # noqa: E402

# The ints near Python's 4300-digit limit are wanted; hypothesis warns that its own repr of them is long.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

scalars = st.none() | st.booleans() | st.integers() | st.integers(min_value=1 << 3990, max_value=1 << 4100) \
    | st.floats() | st.text() | st.binary() | st.complex_numbers()
hashable = st.recursive(scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
                        max_leaves=8)


def values(leaves):
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.sets(hashable, max_size=3)
        | st.dictionaries(hashable, inner, max_size=3)
        | st.lists(inner, min_size=1, max_size=2).map(lambda items: [items] * 3),  # one list met thrice
        max_leaves=30)


plain = values(scalars)
with_ranges = values(scalars | st.builds(range, st.integers(-5, 5), st.integers(-5, 5), st.sampled_from([1, 2, -1])))


def charged_and_size(encode, value):
    budget = rbwire.Budget()
    tree = encode(value, budget)
    return budget.limit - budget.left, len(json.dumps(tree, separators=(",", ":")))


@examples(400)
@given(value=plain)
def test_rbwire_charges_no_more_than_the_json(value):
    charged, size = charged_and_size(lambda v, budget: rbwire.encode(v, budget), value)

    assert 0 < charged <= size


@examples(400)
@given(value=with_ranges)
def test_rbhandle_charges_no_more_than_the_json(value):
    charged, size = charged_and_size(
        lambda v, budget: rbhandle.encode(v, lambda _obj: {"$": "ref", "v": [1]}, budget=budget), value)

    assert 0 < charged <= size
