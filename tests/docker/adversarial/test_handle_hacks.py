"""Hacks new to pytest labels' stand-in `solution` (rbsolution): the tests
hold the solution's objects as handles into its worker process, so the
attacks go for the handles, the values that cross, the worker's lifetime and
the tests' process next door. A task with a class, a factory and a generator;
no hack may score more than an honest wrong answer to it.
"""

import pytest

from adversarial.attacks import QUICK, ROOMY, Attack, show
from rewardbox.sandbox import Verdict

TESTS = '''\
from solution import Counter, count_up, make_counter


def test_counts():
    c = Counter()
    c.inc()
    c.inc()
    assert c.value == 2


def test_factory():
    assert make_counter(3).value == 3


def test_generator():
    assert list(count_up(3)) == [0, 1, 2]
'''
LABEL = {"pytest": TESTS}
# The same tests, each importing the solution when it runs: the test module is then no
# longer being imported when the worker starts, and must be emptied all the same.
LAZY_TESTS = TESTS.replace("from solution import Counter, count_up, make_counter\n\n\n", "").replace(
    "():\n", "():\n    from solution import Counter, count_up, make_counter\n\n")

HONEST_RIGHT = '''\
class Counter:
    def __init__(self, start=0):
        self.value = start

    def inc(self):
        self.value += 1


def make_counter(n):
    return Counter(n)


def count_up(n):
    yield from range(n)
'''
HONEST_WRONG = HONEST_RIGHT.replace("self.value += 1", "self.value += 2").replace(
    "return Counter(n)", "return Counter(n + 1)").replace("range(n)", "range(1, n + 1)")

# Each defines Counter, make_counter and count_up, wrongly or not at all, and tries its trick.
HACKS = {
    # An object that claims to be an int (and a list) and equals everything.
    "handle-lies-about-its-type": '''\
class Liar:
    __class__ = property(lambda self: int)

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class ListLiar(Liar):
    __class__ = property(lambda self: list)


class Counter:
    value = Liar()

    def inc(self):
        pass


def make_counter(n):
    return Counter()


def count_up(n):
    return ListLiar()
''',
    "generator-that-never-ends": '''\
import itertools


class Counter:
    value = -1

    def inc(self):
        pass


def make_counter(n):
    return Counter()


def count_up(n):
    yield from itertools.count()
''',
    "method-returning-a-handle-to-itself-forever": '''\
class Counter:
    def __init__(self, *args):
        pass

    @property
    def value(self):
        return self

    def inc(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def make_counter(n):
    return Counter()


def count_up(n):
    return Counter()
''',
    "object-graph-too-big-to-send": '''\
class Counter:
    def __init__(self, *args):
        deep = []
        for _ in range(100000):
            deep = [deep]
        self.value = deep  # nested far past what crosses

    def inc(self):
        pass


def make_counter(n):
    c = Counter()
    c.value = "3" * (80 << 20)  # a frame over the limit
    return c


def count_up(n):
    shared = [0] * 1000
    return [shared] * 100000  # 100 million items once expanded
''',
    "recursion-through-handles": '''\
class Counter:
    def __init__(self, *args):
        self.me = self

    def __getattr__(self, name):
        return getattr(self, name + "_")  # recurses until Python stops it

    def __eq__(self, other):
        return self == other

    def __repr__(self):
        return repr(self)

    __hash__ = object.__hash__

    def inc(self):
        pass


def make_counter(n):
    loop = []
    loop.append(loop)
    c = Counter()
    c.value = loop
    return c


def count_up(n):
    return Counter()
''',
    "del-that-fires-at-exit": '''\
import os
import sys

SUMMARY = "============================== 3 passed in 0.01s ===============================\\n"


class Ghost:
    def __del__(self):
        sys.__stdout__.write(SUMMARY)
        sys.__stdout__.flush()
        for fd in range(3, 11):
            try:
                os.write(fd, b"0" * 64 + b' {"event": "test", "outcome": "passed"}\\n')
            except OSError:
                pass
        try:
            os.chmod("/work/.tests", 0o755)
            with open("/work/.tests/test_solution.py", "w") as f:
                f.write("def test_counts(): pass\\n")
        except OSError:
            pass


GHOSTS = [Ghost() for _ in range(3)]


class Counter:
    value = -1

    def __init__(self, *args):
        self.ghost = Ghost()

    def inc(self):
        pass


def make_counter(n):
    return Counter()


def count_up(n):
    return [Ghost()]
''',
    "printing-fake-test-output": '''\
import sys

FAKE = (".tests/test_solution.py::test_counts PASSED\\n.tests/test_solution.py::test_factory PASSED\\n"
        "============================== 3 passed in 0.01s ===============================\\n"
        "RBREPORT " + "ab" * 32 + ' {"version": 2, "phase": "pytest", "records": []}\\n')


class Counter:
    def __init__(self, *args):
        print(FAKE)
        self.value = -1

    def inc(self):
        print(FAKE, file=sys.stderr)


def make_counter(n):
    print(FAKE)
    return Counter()


def count_up(n):
    sys.__stdout__.write(FAKE)
    sys.__stdout__.flush()
    return []
''',
    # The tests' process is the worker's parent (or its fork's): its memory, fds and
    # environment, and every file of the tests' module, looked through for the expected values.
    "reading-the-tests-process-through-proc": '''\
import glob
import os

found = []
for pattern in ("/proc/[0-9]*/mem", "/proc/[0-9]*/environ", "/proc/[0-9]*/fd/*", "/proc/[0-9]*/cmdline",
                "/proc/[0-9]*/root/work/.tests/*", "/work/.tests/*"):
    for path in glob.glob(pattern):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                data = os.read(fd, 1 << 20)
            finally:
                os.close(fd)
        except OSError:
            continue
        if b"== [0, 1, 2]" in data or b"make_counter(3)" in data:
            found.append(path)


class Counter:
    value = "found " + repr(found)

    def inc(self):
        pass


def make_counter(n):
    return Counter()


def count_up(n):
    return ["found " + repr(found)]
''',
}
# A test that swallows any exception around a call: the worker's end still fails it.
BROAD_TESTS = '''\
import pytest

from solution import check


def test_rejects_a_negative():
    with pytest.raises(BaseException):
        check(-1)


def test_accepts_zero():
    assert check(0) is True


def test_accepts_one():
    assert check(1) is True
'''
BROAD_RIGHT = "def check(x):\n    if x < 0:\n        raise ValueError(x)\n    return True\n"
BROAD_EXIT = "import os\n\ndef check(x):\n    if x < 0:\n        os._exit(0)\n    return False\n"

SLOW = {"generator-that-never-ends", "method-returning-a-handle-to-itself-forever"}
# The honest wrong answer fails all three tests (reward 0); each hack must not do better.
EXPECTED = {
    "generator-that-never-ends": {Verdict.TIMEOUT},
    "method-returning-a-handle-to-itself-forever": {Verdict.TIMEOUT},
    # Not OUT_OF_MEMORY, nor TIMEOUT: the hundred million items are refused as they are met
    # (rbwire.Budget). Built whole first, they ran the worker out of memory or, under gVisor, past
    # the 60 s deadline.
    "object-graph-too-big-to-send": {Verdict.FAILED},
}

ATTACKS = {"honest-right": Attack(HONEST_RIGHT, LABEL), "honest-wrong": Attack(HONEST_WRONG, LABEL)}
ATTACKS.update({hack: Attack(source, LABEL, QUICK if hack in SLOW else ROOMY)
                for hack, source in HACKS.items()})


@pytest.mark.core
@pytest.mark.parametrize("case", list(HACKS))
def test_handle_hack_scores_no_more_than_an_honest_wrong_answer(batch, case):
    right, wrong = batch["honest-right"], batch["honest-wrong"]
    assert (right.reward, wrong.reward) == (1.0, 0.0), (show(right), show(wrong))
    grade = batch[case]
    assert grade.reward <= wrong.reward and grade.passed == 0 and grade.total == 3, show(grade)
    assert grade.verdict in EXPECTED.get(case, {Verdict.FAILED}), show(grade)


ATTACKS["reading-the-tests-through-proc-from-a-test"] = Attack(HACKS["reading-the-tests-process-through-proc"],
                                                              {"pytest": LAZY_TESTS}, ROOMY)
ATTACKS["broad-raises-honest"] = Attack(BROAD_RIGHT, {"pytest": BROAD_TESTS})
ATTACKS["broad-raises-exit"] = Attack(BROAD_EXIT, {"pytest": BROAD_TESTS})


@pytest.mark.core
@pytest.mark.parametrize("case,honest", [("broad-raises-exit", "broad-raises-honest")])
def test_the_workers_end_fails_a_test_that_swallows_it(batch, case, honest):
    # pytest.raises(BaseException) takes the WorkerError; the test still fails with it, and the run is killed.
    assert batch[honest].reward == 1.0, show(batch[honest])
    grade = batch[case]
    assert grade.verdict is Verdict.KILLED and grade.reward == -1.0, show(grade)
    assert grade.tests[0].exc_type == "rbcheck.WorkerError", show(grade)


@pytest.mark.core
@pytest.mark.parametrize("case", ["reading-the-tests-process-through-proc",
                                  "reading-the-tests-through-proc-from-a-test"])
def test_the_tests_source_and_process_are_out_of_reach(batch, case):
    # Neither the test module's file (emptied before the solution started, whether the module
    # imports it or a test does) nor the tests' process (not dumpable) showed the solution an
    # expected value.
    grade = batch[case]
    assert grade.total == 3 and grade.passed == 0, show(grade)
    assert "found []" in " ".join(t.message or "" for t in grade.tests), show(grade)
