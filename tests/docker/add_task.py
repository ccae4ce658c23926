"""The task most docker-tier tests grade against: `add(a, b)`, three tests."""

ADD_TESTS = """\
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_zero():
    assert add(0, 0) == 0

def test_negative():
    assert add(-2, 5) == 3
"""
LABEL = {"pytest": ADD_TESTS}
NAMES = ["test_small", "test_zero", "test_negative"]


def outcomes(grade):
    return [(t.name, t.outcome) for t in grade.tests]
