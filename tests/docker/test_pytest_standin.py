"""A dataset's pytest module against the stand-in `solution` (rbsolution):
what such modules do (fixtures, parametrize, classes, `pytest.approx`,
`monkeypatch` of their own names, `capsys`, files in /work,
`unittest.TestCase`) and what they hold of the solution (instances, linked
lists, generators, classes, exceptions), graded end to end through
CodeReward on real containers; what cannot cross, and the `in_process`
option that keeps the old way. One batch, scored in parallel."""

import pytest

from rewardbox.rewards import Sample

SOLUTION = '''\
import os

class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next

def reverse(head):
    prev = None
    while head:
        head.next, prev, head = prev, head, head.next
    return prev

class Account:
    class_name = "account"

    def __init__(self, balance=0):
        self.balance = balance

    def withdraw(self, amount):
        if amount > self.balance:
            raise InsufficientFunds(f"balance {self.balance} is below {amount}")
        self.balance -= amount
        return self.balance

    def __len__(self):
        return self.balance

    def __eq__(self, other):
        return isinstance(other, Account) and other.balance == self.balance

    __hash__ = object.__hash__

class InsufficientFunds(ValueError):
    pass

class Stack(list):
    def push(self, x):
        self.append(x)

def squares(n):
    for i in range(n):
        yield i * i

def greet(name):
    print(f"hello {name}")
    return len(name)

def sort_colors(nums):
    nums.sort()

def rotate(matrix):
    matrix[:] = [list(row) for row in zip(*matrix[::-1])]

def read_file(path):
    with open(path) as f:
        return f.read().strip()

def parse(text):
    return int(text)

def mean(xs):
    return sum(xs) / len(xs)

def helper():
    return 1

def uses_helper():
    return helper() + 1
'''

TESTS = '''\
import unittest

import pytest

import solution
from solution import *


@pytest.fixture
def account():
    return Account(10)


def build(values):
    head = None
    for v in reversed(values):
        head = ListNode(v, head)
    return head


def values(head):
    out = []
    while head:
        out.append(head.val)
        head = head.next
    return out


def test_linked_list():
    assert values(reverse(build([1, 2, 3]))) == [3, 2, 1]


def test_instance_and_fixture(account):
    assert account.withdraw(3) == 7
    assert account.balance == 7 and len(account) == 7
    account.balance = 20
    assert account.withdraw(5) == 15
    assert Account.class_name == "account"
    assert isinstance(account, Account) and not isinstance(3, Account)
    assert account == Account(15) and account != Account(1)
    assert account is account and account.withdraw is not None


def test_exceptions_cross(account):
    with pytest.raises(InsufficientFunds, match="below 100"):
        account.withdraw(100)
    with pytest.raises(ValueError):
        account.withdraw(100)
    with pytest.raises(ValueError):
        parse("x")


def test_generator():
    gen = squares(4)
    assert next(gen) == 0
    assert list(gen) == [1, 4, 9]


def test_builtin_subclass_instance():
    s = Stack()
    s.push(1)
    s.push(2)
    assert s == [1, 2] and len(s) == 2 and s[-1] == 2 and 2 in s and s[0:1] == [1]


@pytest.mark.parametrize("nums,want", [([2, 0, 1], [0, 1, 2]), ([1], [1])])
def test_in_place(nums, want):
    sort_colors(nums)
    assert nums == want


def test_in_place_matrix():
    m = [[1, 2], [3, 4]]
    row = m[0]
    rotate(m)
    assert m == [[3, 1], [4, 2]]


def test_capsys(capsys):
    assert greet("ann") == 3
    assert capsys.readouterr().out == "hello ann\\n"


def test_files(tmp_path):
    with open("/work/data.txt", "w") as f:
        f.write("shared\\n")
    assert read_file("/work/data.txt") == "shared"


def test_approx():
    assert mean([0.1, 0.2]) == pytest.approx(0.15)


def test_monkeypatch_own_names(monkeypatch):
    monkeypatch.setattr(solution, "mean", lambda xs: 0)
    assert solution.mean([1, 2]) == 0


class TestClass:
    def test_method(self):
        assert solution.parse("7") == 7


class BankAccountTest(unittest.TestCase):  # Exercism names them so: pytest collects any TestCase
    def test_unittest(self):
        self.assertEqual(parse("3"), 3)
        self.assertIsInstance(Account(), Account)
        with self.assertRaises(InsufficientFunds):
            Account(0).withdraw(1)
'''
TOTAL = 14

CROSSING = '''\
import pytest

import solution
from solution import uses_helper, apply


def test_monkeypatch_internals(monkeypatch):
    monkeypatch.setattr(solution, "helper", lambda: 10)
    assert uses_helper() == 11


def test_passes_a_function():
    assert apply(lambda x: x + 1, 1) == 2
'''
CROSSING_SOLUTION = "def helper():\n    return 1\n\ndef uses_helper():\n    return helper() + 1\n\n" \
                    "def apply(f, x):\n    return f(x)\n"

WRONG = SOLUTION.replace("self.balance -= amount", "self.balance -= amount + 1").replace(
    "yield i * i", "yield i").replace("nums.sort()", "nums.reverse()")

CASES = {
    "right": (SOLUTION, {"pytest": TESTS}),
    "wrong": (WRONG, {"pytest": TESTS}),
    "right-in-process": (SOLUTION, {"pytest": TESTS, "in_process": True}),
    "crossing": (CROSSING_SOLUTION, {"pytest": CROSSING}),
    "crossing-in-process": (CROSSING_SOLUTION, {"pytest": CROSSING, "in_process": True}),
    "missing-module": ("import no_such_module\n\ndef f():\n    return 1\n", {"pytest": "from solution import f\n\n"
                                                                       "def test_f():\n    assert f() == 1\n"}),
    "missing-name": ("def g():\n    return 1\n", {"pytest": "from solution import f\n\ndef test_f():\n    assert f() == 1\n"}),
    "raises-at-import": ("1 / 0\n", {"pytest": "from solution import f\n\ndef test_f():\n    assert f() == 1\n"}),
    "import-in-test": ("1 / 0\n", {"pytest": "def test_f():\n    from solution import f\n    assert f() == 1\n"}),
}


@pytest.fixture(scope="module")
def graded(code_reward):
    samples = [Sample(id=key, completion=f"```python\n{code}\n```", label=label) for key, (code, label) in CASES.items()]
    return dict(zip(CASES, code_reward.score_many(samples), strict=True))


def show(out):
    failed = [(t["name"], (t["message"] or "")[-500:]) for t in out.metadata["tests"] if t["outcome"] != "passed"]
    return f"{out.reward} {out.metadata['verdict']} {out.metadata['message'][-500:]!r} {failed}"


@pytest.mark.parametrize("key", ["right", "right-in-process"])
def test_what_a_pytest_module_does_works_out_of_process(graded, key):
    out = graded[key]
    assert out.reward == 1.0 and out.total == TOTAL, show(out)


def test_a_wrong_solution_fails_where_it_is_wrong(graded):
    out = graded["wrong"]
    failed = sorted(t["name"] for t in out.metadata["tests"] if t["outcome"] != "passed")
    assert failed == ["test_generator", "test_in_place", "test_instance_and_fixture"], show(out)
    assert out.passed == TOTAL - 3  # test_in_place([1]) passes: reversed, [1] is sorted


def test_what_cannot_cross_fails_and_in_process_keeps_the_old_way(graded):
    out, old = graded["crossing"], graded["crossing-in-process"]
    messages = " ".join(t["message"] or "" for t in out.metadata["tests"])
    assert out.passed == 0 and "cannot cross to the solution's process" in messages, show(out)
    assert old.reward == 1.0, show(old)


@pytest.mark.parametrize("key,verdict", [("missing-module", "import_error"), ("missing-name", "import_error"),
                                         ("raises-at-import", "collection_error"), ("import-in-test", "failed")])
def test_an_import_that_fails_keeps_its_verdict(graded, key, verdict):
    assert graded[key].verdict == verdict, show(graded[key])
