"""The pooled container's test process runs pytest from a session prepared in
the zygote before any request (pytest_runner.PreparedSession), not through
`pytest.main`. Its records, terminal text and exit status must be exactly
those of `pytest.main` with the same arguments and plugin, for every way a
session ends: run here inside the sandbox image, against the pytest it ships."""

import textwrap

import pytest

from tests.docker.in_image import run_script

# Each module: what the test process gets as its one test file.
MODULES = {
    "outcomes": """
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")

        def test_pass():
            assert [1, 2] == [1, 2]

        def test_fail():
            assert {"a": 1} == {"a": 2}

        def test_error(broken):
            pass

        def test_skip():
            pytest.skip("not today")

        @pytest.mark.xfail
        def test_xfail():
            assert False

        @pytest.mark.xfail
        def test_xpass():
            pass

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_param(n):
            assert n < 3

        class TestGroup:
            def test_method(self):
                assert "x" * 3 == "xxx"
    """,
    "syntax_error": "def test_x(:\n    pass\n",
    "import_error": "import no_such_module_here\n\ndef test_x():\n    pass\n",
    "keyboard_interrupt": "def test_a():\n    pass\n\ndef test_b():\n    raise KeyboardInterrupt\n\ndef test_c():\n    pass\n",
    "pytest_exit": "import pytest\n\ndef test_a():\n    pytest.exit('enough', returncode=3)\n\ndef test_b():\n    pass\n",
    "system_exit": "import sys\n\ndef test_a():\n    sys.exit(5)\n\ndef test_b():\n    pass\n",
    # pytest's logging plugin writes every record to a file handler opened at
    # configure time (/dev/null): in a forked test process that fd must still be it.
    "logging": """
        import logging

        def test_logs():
            for i in range(50):
                logging.getLogger("x").warning("a warning %d", i)
            assert False, "after logging"

        def test_after():
            pass
    """,
    "warnings_and_chdir": """
        import os
        import warnings

        def test_warns():
            warnings.warn("careful", UserWarning)
            os.chdir("/")

        def test_fixtures(tmp_path, monkeypatch, capsys, caplog, recwarn):
            monkeypatch.setenv("X", "1")
            print("out")
            assert capsys is not None
    """,
    "empty": "x = 1\n",
    # Short tracebacks whose entries share files and lines (a helper every test
    # calls, statements over several lines): the prepared session finds each
    # statement once (rbtraceback), pytest.main once per entry.
    "shared_lines": """
        import pytest

        def helper(x, want):
            assert x == (
                want)

        def test_a():
            helper(1, 2)

        def test_b():
            helper(2,
                   3)

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_c(n):
            # a comment
            helper(n, 0)

        class TestD:
            def test_e(self):
                try:
                    helper(0, 1)
                finally:
                    pass
    """,
    # Entries in exec'd code (whose source the prepared session knows to be
    # missing without inspect's search, unless it was registered or linecache's
    # reader replaced, as doctest does), and in code compiled from a relative
    # file name before and after a chdir (each path made once per directory).
    "exec_code": """
        import linecache
        import os

        SHOWN = "x = 1\\nassert x == (\\n    2)\\n"
        linecache.cache["<shown>"] = (len(SHOWN), None, SHOWN.splitlines(True), "<shown>")
        RELATIVE = "def f():\\n    assert False, os.getcwd()\\n"

        def helper(x):
            assert x == 0

        def test_exec_fails():
            exec(compile("assert 1 == 2", "<test>", "exec"), {})

        def test_exec_calls_helper():
            exec(compile("helper(3)", "<test>", "exec"), {"helper": helper})

        def test_registered_source():
            exec(compile(SHOWN, "<shown>", "exec"), {})

        def test_replaced_reader(monkeypatch):
            monkeypatch.setattr(linecache, "getlines", lambda name, module_globals=None: ["assert 'read' == 'here'\\n"])
            exec(compile("assert 'read' == 'here'", "<read>", "exec"), {})

        def relative_function():
            namespace = {"os": os}
            exec(compile(RELATIVE, "rel.py", "exec"), namespace)
            return namespace["f"]

        def test_relative_name_here():
            relative_function()()

        def test_relative_name_elsewhere(monkeypatch):
            os.makedirs("/tmp/rbrel", exist_ok=True)
            with open("/tmp/rbrel/rel.py", "w") as f:
                f.write(RELATIVE)
            monkeypatch.chdir("/tmp/rbrel")
            relative_function()()

        def test_relative_name_here_again():
            relative_function()()
    """,
}

SCRIPT = r'''
import pytest
import pytest_runner
import rbtraceback
import rbzygote

MODULES = json.loads(sys.argv[1])
KEY = b"k" * 32
os.mkdir("/work/.tests")
prepared = rbzygote.prepare_session()


def run(body):
    status, lines = forked(body)
    return status, records_of(lines)


def by_pytest_main(path):
    def body(fd):
        rbtraceback.uninstall()  # pytest's own readers, in this fork
        plugin = pytest_runner.RecordPlugin(KEY, fd)
        code = pytest.main(pytest_runner.pytest_args([path], tb="short"), plugins=[plugin])
        plugin.terminal()
        return int(code)
    return run(body)


def by_prepared_session(path):
    def body(fd):
        prepared.plugin.arm(KEY, fd)
        return prepared.run([path], "short")
    return run(body)


out = {}
for name, source in MODULES.items():
    path = f"/work/.tests/test_{name}.py"
    with open(path, "w") as f:
        f.write(source)
    out[name] = {"pytest.main": by_pytest_main(path), "prepared": by_prepared_session(path)}
    os.remove(path)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def outcomes(docker_client):
    modules = {name: textwrap.dedent(source) for name, source in MODULES.items()}
    return run_script(docker_client, SCRIPT, modules, "prepared", timeout_s=120)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_prepared_session_ends_as_pytest_main(outcomes, module):
    reference, prepared = outcomes[module]["pytest.main"], outcomes[module]["prepared"]
    assert reference[1], "pytest.main sent no records: the comparison would be blind"
    assert prepared == reference


def test_the_cases_cover_every_way_a_session_ends(outcomes):
    statuses = {name: runs["pytest.main"][0] for name, runs in outcomes.items()}
    # 1 tests failed, 2 interrupted (collection errors, KeyboardInterrupt), 3 pytest.exit's code, 5 no tests
    assert {statuses["outcomes"], statuses["syntax_error"], statuses["keyboard_interrupt"], statuses["pytest_exit"],
            statuses["empty"]} == {1, 2, 3, 5}
    outcomes_seen = {r.get("outcome") for r in outcomes["outcomes"]["pytest.main"][1]}
    assert {"passed", "failed", "error", "skipped", "xfailed", "xpassed"} <= outcomes_seen


# Every statement form of Python 3.11 that holds a block or a line pytest's
# statement finder reads: decorators, else and finally blocks, except and
# except* handlers, match cases, async forms, nesting.
EVERY_BLOCK = '''
import contextlib


@contextlib.contextmanager
@staticmethod
def managed(
        a, b=lambda: [x for x in range(3)]):
    yield a


class Outer:
    @property
    def prop(self):
        class Inner:
            x = 1
        return Inner


async def run(items):
    async for item in items:
        pass
    else:
        return 1
    async with managed(1) as m:
        await m


def flow(n):
    for i in range(n):
        if i:
            continue
        elif i > 2:
            break
        else:
            pass
    else:
        n += 1
    while n:
        n -= 1
    else:
        n = (
            2)
    try:
        raise ValueError
    except ValueError as exc:
        del exc
    except (TypeError, KeyError):
        pass
    else:
        pass
    finally:
        n = 0
    try:
        pass
    finally:
        pass
    try:
        raise ExceptionGroup("g", [ValueError()])
    except* ValueError:
        pass
    else:
        pass
    match n:
        case 0 if n == 0:
            return "zero"
        case [1, *rest]:
            return rest
        case _:
            with open("x") as f, open("y"):
                return f
'''

STATEMENTS_SCRIPT = r'''
import ast, glob
import rbtraceback
from _pytest._code.source import get_statement_startend2


def ranges(tree, lines):
    found = []
    for line in range(-1, lines + 2):
        try:
            found.append(get_statement_startend2(line, tree))
        except IndexError:  # before the first statement, as pytest has it
            found.append("IndexError")
    return found


sources = {path: open(path).read() for path in sorted(glob.glob("/opt/rewardbox/*.py"))}
sources["every block"] = json.loads(sys.argv[1])
out = {}
for name, text in sources.items():
    tree = ast.parse(text)
    lines = text.count("\n") + 1
    out[name] = {"tree": ranges(tree, lines), "statements": ranges(rbtraceback.statements_only(tree), lines)}
print(json.dumps(out))
'''


def test_a_statements_only_tree_gives_every_line_pytests_range(docker_client):
    """rbtraceback looks up a text's later lines in its statements-only tree:
    pytest's own function, on every line of every harness module and of one
    of every statement form, answers as on the whole tree."""
    out = run_script(docker_client, STATEMENTS_SCRIPT, EVERY_BLOCK, "statements", timeout_s=120)
    assert len(out) > 10 and "every block" in out
    for name, found in out.items():
        assert found["statements"] == found["tree"], name
    assert len({tuple(r) for r in out["every block"]["tree"]}) > 30  # the lines fall in many statements
