"""What reporting a failure costs a pooled run. Most samples of an RL batch
fail, so this is most runs' cost.

- The zygote has reported a failure before any run (rbzygote.WARM_TESTS):
  what pytest's report of a failure builds on first use (inspect's map of
  every loaded module's file, about 6 ms; tokenize's patterns) is built once
  per container, not in every run that fails.
- A short traceback's entries read through rbtraceback: a test module is
  parsed once per run, not once per failure, and its whole tree walked once,
  not once per failing line; each entry's path is made once;
  exec'd code's missing source is known without inspect's search of every
  loaded module.
"""

import os

import pytest

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.pool import PooledSandbox

RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
SOLUTION = {"solution.py": "def add(a, b):\n    return a + b\n"}

# Read before this process has reported any failure of its own.
WARM = {"test_solution.py": '''
import inspect
import tokenize

from solution import add


def test_the_failure_report_finds_its_caches_filled():
    assert len(inspect._filesbymodname) > 100, len(inspect._filesbymodname)
    assert tokenize._compile.cache_info().currsize > 0


def test_add():
    assert add(1, 2) == 3
'''}

# The first test counts the parses of pytest's statement finder
# (_pytest._code.source parses as "source") from then on; four failures
# later, the last test reads the count.
PARSES = {"test_solution.py": '''
import ast

from solution import add

PARSED = []


def test_count_parses():
    parse = ast.parse

    def counted(source, filename="<unknown>", *args, **kwargs):
        if filename == "source":
            PARSED.append(1)
        return parse(source, filename, *args, **kwargs)

    ast.parse = counted


def check(a, b, want):
    assert add(a, b) == (
        want)


def test_a():
    check(1, 2, 4)


def test_b():
    check(2, 2, 5)


def test_c():
    check(3, 2, 6)


def test_d():
    check(4, 2, 7)


def test_parsed_once():
    assert len(PARSED) == 1, len(PARSED)
'''}

# The first test counts the walks of the whole tree pytest's statement finder
# parsed (as "source") from then on; four failures on four lines later (and
# the helper's line they share), the last test reads the count.
WALKS = {"test_solution.py": PARSES["test_solution.py"].replace("def test_count_parses():", """def test_count_walks():
    parse, walk = ast.parse, ast.walk
    trees = []

    def kept(source, filename="<unknown>", *args, **kwargs):
        tree = parse(source, filename, *args, **kwargs)
        if filename == "source":
            trees.append(tree)
        return tree

    def counted(node):
        if any(node is tree for tree in trees):
            PARSED.append(1)
        return walk(node)

    ast.parse, ast.walk = kept, counted


def unused():""").replace("def test_parsed_once():", "def test_walked_once():")}


# The first test counts inspect's module searches for "<...>" files from then
# on (two per entry of exec'd code, pytest's own way); the last reads the count.
SEARCHES = {"test_solution.py": '''
import inspect

from _pytest._code import Code

from solution import add

SEARCHED = []


def test_count_searches():
    getmodule = inspect.getmodule

    def counted(object, _filename=None):
        if isinstance(_filename, str) and _filename.startswith("<"):
            SEARCHED.append(_filename)
        return getmodule(object, _filename)

    inspect.getmodule = counted


def test_a():
    exec(compile("assert add(1, 2) == 4", "<test>", "exec"), {"add": add})


def test_b():
    exec(compile("assert add(2, 2) == 5", "<test>", "exec"), {"add": add})


def test_searched_none():
    assert SEARCHED == [], SEARCHED


def test_a_path_is_made_once():
    code = Code(test_a_path_is_made_once.__code__)
    assert code.path is code.path
'''}


def run(box, tests):
    return box.run(RunRequest(files=SOLUTION, tests=tests, limits=Limits(timeout_s=20)))


def test_a_run_finds_what_a_failure_report_needs_already_built():
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        for _ in range(2):  # the container's first run and a later one
            result = run(box, WARM)
            assert result.verdict is Verdict.PASSED, (result.message, result.stdout)
            assert [t.outcome for t in result.tests] == ["passed", "passed"], result.tests


@pytest.mark.parametrize(("tests", "counter", "count"), [(PARSES, "test_count_parses", "test_parsed_once"),
                                                      (WALKS, "test_count_walks", "test_walked_once")],
                         ids=["parsed once", "walked whole once"])
def test_a_module_whose_tests_fail_is_read_once_for_their_tracebacks(tests, counter, count):
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        result = run(box, tests)
    outcomes = {t.name: t.outcome for t in result.tests}
    assert outcomes == {counter: "passed", "test_a": "failed", "test_b": "failed", "test_c": "failed",
                        "test_d": "failed", count: "passed"}, (outcomes, result.stdout)
    assert "assert 3 == 4" in result.stdout  # the short tracebacks are there


def test_exec_d_code_is_reported_without_searching_every_module():
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        result = run(box, SEARCHES)
    outcomes = {t.name: t.outcome for t in result.tests}
    assert outcomes == {"test_count_searches": "passed", "test_a": "failed", "test_b": "failed",
                        "test_searched_none": "passed", "test_a_path_is_made_once": "passed"}, (outcomes, result.stdout)
    assert "<test>:1: in <module>" in result.stdout  # the exec'd entries are in the tracebacks

