"""A stdin/stdout label's program runs, in a pooled container, as a fork of
the run's seed (rbprograms), not as a new interpreter per input. What the
program sees and what it leaves (output, exit status, tracebacks, SystemExit's
text, threads, exit handlers) must be a new interpreter's: each program here is
graded in the cold mode (`python3 -I -B solution.py` per input) and in the
pooled mode, and every record must be the same."""

import os

import pytest

from rewardbox import Limits, parse_label
from rewardbox.sandbox.modes import make_sandbox

INPUTS = ["1 2\n", "3 4\n", "5 6\n"]
LABEL = {"inputs": INPUTS, "outputs": ["3\n", "7\n", "11\n"], "case_timeout_s": 2}
READ = "a, b = map(int, input().split())\n"

PROGRAMS = {
    "right": READ + "print(a + b)\n",
    "wrong_output": READ + "print(a * b)\n",
    "raises": READ + "def f(x):\n    return 1 // (x - 3)\nprint(f(a) + a + b)\n",
    "raises_chained": READ + "try:\n    {}[a]\nexcept KeyError as e:\n    raise ValueError('no') from e\n",
    "exits_with_text": READ + "import sys\nif a == 3:\n    sys.exit('bye ' + str(b))\nprint(a + b)\n",
    "exits_with_code": READ + "raise SystemExit(a)\n",
    "exits_hard": READ + "import os\nprint(a + b, flush=True)\nos._exit(a)\n",
    "keyboard_interrupt": READ + "if a == 3:\n    raise KeyboardInterrupt\nprint(a + b)\n",
    "signals_itself": READ + "import os, signal\nif a == 5:\n    os.kill(os.getpid(), signal.SIGTERM)\nprint(a + b)\n",
    "unflushed_at_exit": READ + "import sys\nsys.stdout.write(str(a + b) + '\\n')\n",
    "exit_handler_prints": READ + "import atexit\natexit.register(print, a + b)\n",
    "thread_prints_late": READ + "import threading, time\n"
                          "def late():\n    time.sleep(0.05)\n    print(a + b)\nthreading.Thread(target=late).start()\n",
    "reads_all_stdin": "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n",
    "eof": READ + "input()\n",
    "times_out": READ + "while a == 3:\n    pass\nprint(a + b)\n",
    "bad_text": READ + "print('\\udcff')\nprint('\\ud800')\n",
    "long_output": READ + "print('x' * 100000)\n",
    # What a program can see of its interpreter, a few things per input (a failure shows 300 characters).
    "its_interpreter": (
        READ + "import os, signal, sys, __main__\n"
        "print(*{1: [__name__, __main__.__file__, sys.argv, sys.path, os.getcwd()],\n"
        "        3: [sys.stdin.name, sys.stdout.name, sys.stdout.encoding, sys.stdin.errors, sys.stdout.errors,\n"
        "            sys.stderr.errors, sys.stdout.line_buffering, sys.stderr.line_buffering, sys.stdout.write_through,\n"
        "            type(sys.stdout.buffer).__name__, tuple(sys.flags)],\n"
        "        5: [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGPIPE), signal.getsignal(signal.SIGTERM),\n"
        "            signal.getsignal(signal.SIGCHLD), sys.excepthook is sys.__excepthook__, os.getsid(0) == os.getpid(),\n"
        "            os.getpgid(0) == os.getpid(), sys.getrecursionlimit(), sorted(os.environ)]}[a])\n"),
    "imports_the_harness": "import rbcheck\n",
}


@pytest.fixture(scope="module")
def pooled():
    runtime = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
    with make_sandbox("pooled", max_containers=2, runtime=runtime) as box:
        yield box


@pytest.fixture(scope="module")
def graded(pooled):
    label = parse_label(LABEL)
    results = {}
    runtime = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
    with make_sandbox("cold", max_containers=2, runtime=runtime) as cold:
        for name, program in PROGRAMS.items():
            request = label.request(program, Limits(timeout_s=20))
            results[name] = (pooled.run(request), cold.run(request))
    return results


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_forked_from_the_seed_ends_as_in_a_new_interpreter(graded, name):
    pooled, cold = graded[name]

    def seen(result):
        return result.verdict, [(t.nodeid, t.outcome, t.message, t.exc_type) for t in result.tests]

    assert len(cold.tests) == len(INPUTS)
    assert seen(pooled) == seen(cold)


def test_the_programs_end_in_every_way(graded):
    messages = "\n".join(t.message or "" for pooled, _ in graded.values() for t in pooled.tests)
    for told in ("status 1", "status 3", "signal 2", "signal 15", "Traceback", "ZeroDivisionError",
                 "direct cause", "bye 4", "EOFError", "UnicodeEncodeError", "ran past", "ModuleNotFoundError"):
        assert told in messages
    assert graded["right"][0].verdict.value == "passed"
    passing = ["unflushed_at_exit", "exit_handler_prints", "reads_all_stdin"]
    if not os.environ.get("REWARDBOX_TEST_RUNTIME"):  # under gVisor no run may start a thread, in either mode
        passing.append("thread_prints_late")
    for name in passing:
        assert graded[name][0].verdict.value == "passed", name


def test_a_program_that_kills_the_seed_at_once_fails_only_its_own_input(pooled):
    # Killed before the seed could tell the program's pid: that input is spent and its end
    # unknown (failed, as killed); it is never run again, where its parent would be the
    # test process itself.
    program = ("import os, signal\ntry:\n    os.close(os.open('/tmp/first', os.O_CREAT | os.O_EXCL))\n"
               "    os.kill(os.getppid(), signal.SIGKILL)  # the first program only: its parent is the seed\n"
               "except FileExistsError:\n    pass\n") + READ + "print(a + b)\n"

    for _ in range(3):  # the seed dies before or after telling the pid: both ways, the same grades
        result = pooled.run(parse_label(LABEL).request(program, Limits(timeout_s=20)))
        assert result.verdict.value == "failed", result
        assert [t.outcome.value for t in result.tests] == ["failed", "passed", "passed"], result.tests
        assert "signal 9" in (result.tests[0].message or "")


def test_a_program_that_kills_the_seed_leaves_the_next_inputs_their_runs(pooled):
    # The first input's program kills its parent, the seed serving the run's programs (its
    # own exit is then not known: failed); the next inputs are run by new interpreters.
    program = READ + "import os, signal\nif a == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\nprint(a + b)\n"

    result = pooled.run(parse_label(LABEL).request(program, Limits(timeout_s=20)))

    assert [t.outcome.value for t in result.tests] == ["failed", "passed", "passed"]
    assert "signal 9" in result.tests[0].message
