"""Check functions and asserts, run as the harness runs them: which names of a
test are the solution's (only what the label says: the candidate, the function
under test), and how `check` is split (never changing what it means). The
solution is run in this process by a fake `rbcheck.call`, its arguments and
results copied as the wire copies them; everything else is the image's own
`rbcheck._check_python`."""

import ast
import copy
import gzip
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rewardbox.rewards import LabelError, parse_label
from rewardbox.sandbox import Limits
from tests.humaneval_variants import broken_program

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import rbcheck  # noqa: E402

LIMITS = Limits(timeout_s=4.0, memory_mb=256)
with gzip.open(ROOT / "tests" / "data" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as _f:
    HUMANEVAL = {p["task_id"]: p for p in map(json.loads, _f)}


class CaseTimeout(Exception):
    pass


def solution_of(program: str) -> dict:
    namespace: dict = {"__name__": "solution"}
    exec(compile(program, "solution.py", "exec"), namespace)
    return namespace


def wire_call(solution: dict) -> Callable:
    """rbcheck.call, in this process: values cross as copies, never shared."""
    def call(name, *args, **kwargs):
        target = solution[name.split("(")[0]]() if "(" in name else solution
        function = getattr(target, name.rsplit(".", 1)[1]) if "(" in name else target[name]
        return copy.deepcopy(function(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
    return call


def run(data: str | dict, solution: dict, monkeypatch, cases: list[dict] | None = None) -> list[bool]:
    """Whether each case passes, run by the harness's `_check_python`."""
    data = json.loads(data) if isinstance(data, str) else data
    if cases is not None:
        data = {**data, "cases": cases}
    monkeypatch.setattr(rbcheck, "DATA", data)
    monkeypatch.setattr(rbcheck, "_namespace", None)
    monkeypatch.setattr(rbcheck, "call", wire_call(solution))
    return [passes(lambda case=case: rbcheck._check_python(case)) for case in data["cases"]]


def passes(body: Callable[[], object]) -> bool:
    def expire(*_):
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 3.0)
    try:
        body()
    except Exception:  # noqa: BLE001 - a failing test, whatever it raised
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return True


def check_label(test: str, entry_point: str = "f", **extra):
    return parse_label({"test": test, "entry_point": entry_point, **extra})


def data_of(label, prompt: str | None = None) -> dict:
    request = label.request("pass", LIMITS, prompt) if prompt is not None else label.request("pass", LIMITS)
    return json.loads(request.test_data)


def sources(test: str, entry_point: str = "f") -> list[str]:
    return [c["source"] for c in data_of(check_label(test, entry_point))["cases"]]


def humaneval_label(task: str, with_prompt: bool = True):
    p = HUMANEVAL[task]
    return check_label(p["test"], p["entry_point"], **({"prompt": p["prompt"]} if with_prompt else {}))


# -- names: the label's, or the solution's only where the label says so ------------------------

# Solutions that pass only if the tests take the prompt's helper from them (the examples).
HELPER_HACKS = {
    "HumanEval/32": "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
}


@pytest.mark.parametrize("task", sorted(HELPER_HACKS))
def test_a_solution_redefining_the_prompts_helper_fails(task, monkeypatch):
    label = humaneval_label(task)
    data = data_of(label)

    assert list(data["proxies"]) == ["candidate"]  # the helper is not the solution's
    assert run(data, solution_of(label.program(HELPER_HACKS[task])), monkeypatch) == [False]


@pytest.mark.parametrize("task", sorted(HELPER_HACKS))
def test_the_canonical_solution_still_passes_with_the_prompts_helper(task, monkeypatch):
    p = HUMANEVAL[task]
    label = humaneval_label(task)

    assert run(data_of(label), solution_of(label.program(p["canonical_solution"])), monkeypatch) == [True]


@pytest.mark.parametrize("task", sorted(HELPER_HACKS))
def test_without_a_label_prompt_the_helpers_come_from_the_samples_code_prompt(task, monkeypatch):
    p = HUMANEVAL[task]
    label = humaneval_label(task, with_prompt=False)
    own = label._test_data

    data = data_of(label, p["prompt"])

    assert list(data["proxies"]) == ["candidate"]
    assert run(data, solution_of(label.program(HELPER_HACKS[task], p["prompt"])), monkeypatch) == [False]
    assert run(data, solution_of(label.program(p["canonical_solution"], p["prompt"])), monkeypatch) == [True]
    assert label._test_data == own  # shared by samples of other prompts: the label is not changed


@pytest.mark.parametrize("task", sorted(HELPER_HACKS))
def test_without_any_code_prompt_the_label_cannot_be_graded(task):
    # The dataset gave only test and entry_point, the trainer a chat prompt: nothing trusted defines the
    # helper, and taking it from the solution would pass the hack. No reward rather than a wrong one.
    label = humaneval_label(task, with_prompt=False)

    with pytest.raises(LabelError, match="which neither its test nor a code prompt defines"):
        label.request("pass", LIMITS, "Please decode the string.")
    with pytest.raises(LabelError):
        label.request("pass", LIMITS)


def test_a_label_prompt_that_does_not_define_the_helper_is_unusable():
    with pytest.raises(LabelError, match="helper, which neither its test nor its prompt defines"):
        check_label("def check(candidate):\n    assert helper(candidate(1)) == 2\n",
                    prompt="def f(x):\n    '''Add one.'''\n")


def test_the_entry_point_called_by_its_name_is_the_solutions(monkeypatch):
    # HumanEval/33 compares the candidate with sort_third, the entry point itself.
    label = humaneval_label("HumanEval/33")
    data = data_of(label)

    assert data["proxies"] == {"candidate": "sort_third", "sort_third": "sort_third"}
    good = solution_of(label.program(HUMANEVAL["HumanEval/33"]["canonical_solution"]))
    assert all(run(data, good, monkeypatch))


def test_a_function_the_prompt_leaves_to_the_solution_is_the_solutions(monkeypatch):
    prompt = "def helper(x):\n    '''Double x.'''\n\n\ndef f(x):\n    '''Add one to helper(x).'''\n"
    label = check_label("def check(candidate):\n    assert candidate(1) == 3\n    assert helper(2) == 4\n",
                        prompt=prompt)
    data = data_of(label)

    assert data["proxies"] == {"candidate": "f", "helper": "helper"}
    good = solution_of("def helper(x):\n    return 2 * x\n\ndef f(x):\n    return helper(x) + 1\n")
    assert run(data, good, monkeypatch) == [True, True]


def test_the_prompts_helper_definitions_reach_the_tests_not_its_stub():
    label = humaneval_label("HumanEval/38")
    setup = data_of(label)["setup"]

    assert "def encode_cyclic(s: str):" in setup
    assert "def decode_cyclic" not in setup  # the entry point is the solution's
    assert setup.endswith(HUMANEVAL["HumanEval/38"]["test"])


def test_a_name_a_star_import_of_the_setup_defines_stays_the_labels(monkeypatch):
    # `isclose` is a free name of the asserts, yet `from math import *` defines it.
    label = parse_label({"tests": ["assert isclose(area(1), 3.14159, rel_tol=1e-4)"], "setup": "from math import *"})
    hack = solution_of("def isclose(*args, **kwargs):\n    return True\n\ndef area(r):\n    return 0\n")
    good = solution_of("def area(r):\n    return 3.14159 * r * r\n")

    assert run(data_of(label), hack, monkeypatch) == [False]
    assert run(data_of(label), good, monkeypatch) == [True]


def test_a_name_a_star_import_of_the_prompt_may_define_is_never_the_solutions(monkeypatch):
    label = check_label("def check(candidate):\n    assert candidate(16) == sqrt(16)\n",
                        prompt='from math import *\n\n\ndef f(x):\n    """The square root of x."""\n')
    data = data_of(label)
    hack = solution_of("def sqrt(x):\n    return 0\n\ndef f(x):\n    return 0\n")

    assert data["proxies"] == {"candidate": "f"}
    assert run(data, hack, monkeypatch) == [False]
    assert run(data, solution_of("def f(x):\n    return x ** 0.5\n"), monkeypatch) == [True]


def test_the_functions_under_test_of_asserts_are_the_solutions(monkeypatch):
    label = parse_label({"tests": ["assert add(1, 2) == 3", "assert twice(add(1, 1)) == 4"],
                         "setup": "def twice(x):\n    return 2 * x"})
    data = data_of(label)

    assert data["proxies"] == {"add": "add"}  # twice is the setup's
    hack = solution_of("def twice(x):\n    return 4\n\ndef add(a, b):\n    return 0\n")
    assert run(data, hack, monkeypatch) == [False, False]


def test_a_setup_that_fails_fails_every_test_with_its_reason(monkeypatch):
    label = parse_label({"tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"], "setup": "import no_such_module"})
    data = data_of(label)
    monkeypatch.setattr(rbcheck, "DATA", data)
    monkeypatch.setattr(rbcheck, "_namespace", None)

    for case in data["cases"]:
        with pytest.raises(AssertionError, match="the label's setup failed: ModuleNotFoundError"):
            rbcheck._check_python(case)


# -- splitting check never changes its meaning ---------------------------------------------

INC = solution_of("def f(x):\n    return x + 1 if isinstance(x, int) else sum(x)\n")


def test_a_name_rebound_between_tests_keeps_its_value_at_each(monkeypatch):
    # The first example: run before each test, `x = 2` made the first assert see x == 2.
    test = "def check(f):\n    x = 1\n    assert f(x) == 2\n    x = 2\n    assert f(x) == 3\n"

    assert sources(test) == ["x = 1\nassert f(x) == 2", "x = 1\nx = 2\nassert f(x) == 3"]
    assert run(data_of(check_label(test)), INC, monkeypatch) == [True, True]


def test_a_statement_that_changes_shared_state_runs_in_its_place(monkeypatch):
    # The second example: `data.append(4)` was hoisted before the first assert.
    test = "def check(f):\n    data = [1, 2, 3]\n    assert f(data) == 6\n    data.append(4)\n    assert f(data) == 10\n"

    assert sources(test) == ["check(f)"]
    assert run(data_of(check_label(test)), INC, monkeypatch) == [True]


def test_a_test_that_changes_what_a_later_statement_reads_runs_whole(monkeypatch):
    # The third example: the final assert ran on the empty list, before the calls.
    test = "def check(f):\n    out = []\n    out.append(f(1))\n    out.append(f(2))\n    assert out == [2, 3]\n"
    wrong = solution_of("def f(x):\n    return -1\n")

    assert sources(test) == ["check(f)"]
    assert run(data_of(check_label(test)), wrong, monkeypatch) == [False]
    assert run(data_of(check_label(test)), INC, monkeypatch) == [True]


@pytest.mark.parametrize("body", [
    # A lazy iterator: the first test would exhaust it for the second.
    "    pairs = zip([1, 2], [2, 3])\n    for a, b in pairs:\n        assert f(a) == b\n    for a, b in pairs:\n"
    "        assert f(a) == b\n",
    "    it = (i for i in range(3))\n    assert f(next(it)) == 1\n    assert f(next(it)) == 2\n",
    # A module-level helper that changes shared state.
    "    assert record(f(1)) == 1\n    assert record(f(2)) == 2\n",
    # Shared state changed through an item, an attribute, `+=`, `del`, an unknown call.
    "    d = {}\n    d['a'] = f(1)\n    assert d == {'a': 2}\n    assert f(2) == 3\n",
    "    xs = [1]\n    xs += [f(1)]\n    assert f(xs) == 3\n    assert f(2) == 3\n",
    "    import random\n    random.seed(1)\n    assert f(1) == 2\n    assert f(random.randint(1, 1)) == 2\n",
    # A local of check that is also a global (read before check binds it, it is not that global).
    "    assert f(SEEN[0] if SEEN else 1) == 2\n    SEEN = [1]\n    assert f(1) == 2\n",
    # Control flow and scopes only check itself has.
    "    assert f(1) == 2\n    assert f(2) == 3\n    return\n",
    "    global SEEN\n    assert f(1) == 2\n    assert f(2) == 3\n",
    "    assert f(1) == 2\n    if f(0) == 1:\n        return\n    assert f(2) == 3\n",
    # A test binds a name another statement reads.
    "    y = f(1)\n    assert y == 2\n    assert f(2) == 3\n",
    "    assert (y := f(1)) == 2\n    assert y == 2\n    assert f(2) == 3\n",
])
def test_checks_that_cannot_be_split_safely_run_whole(body):
    test = "SEEN = []\n\ndef record(x):\n    SEEN.append(x)\n    return len(SEEN)\n\ndef check(f):\n" + body

    assert sources(test) == ["check(f)"]


def test_the_last_test_may_change_state_nothing_after_it_reads():
    test = ("def check(f):\n    import random\n    assert f(1) == 2\n    for _ in range(3):\n"
            "        x = random.randint(0, 9)\n        assert f(x) == x + 1\n    assert True\n")

    assert sources(test) == ["import random\nassert f(1) == 2",
                             "import random\nfor _ in range(3):\n    x = random.randint(0, 9)\n"
                             "    assert f(x) == x + 1\nassert True"]


def test_pure_helpers_and_comprehensions_still_split():
    test = ("def close(a, b):\n    return abs(a - b) < 1e-6\n\ndef check(f):\n"
            "    def twice(v):\n        return [2 * x for x in v]\n    xs = twice([1, 2])\n"
            "    assert close(f(1), 2)\n    assert all(f(x) == x + 1 for x in xs)\n"
            "    assert sorted(map(f, xs), key=lambda v: -v) == [5, 3]\n")

    assert len(sources(test)) == 3


def test_a_solution_call_hidden_in_a_helper_is_a_test():
    test = ("def check(f):\n    def through(x):\n        return f(x)\n    assert through(1) == 2\n"
            "    assert through(2) == 3\n")

    assert sources(test) == ["def through(x):\n    return f(x)\nassert through(1) == 2",
                             "def through(x):\n    return f(x)\nassert through(2) == 3"]


# -- all of HumanEval: split and whole agree -----------------------------------------------------

def solutions(problem: dict) -> dict[str, dict]:
    canonical = problem["prompt"] + problem["canonical_solution"]
    none = solution_of(canonical)
    none[problem["entry_point"]] = lambda *args, **kwargs: None
    return {"canonical": solution_of(canonical), "none": none, "broken": solution_of(broken_program(problem))}


def statement_outcomes(problem: dict, solution: dict) -> tuple[bool, list[bool]]:
    """The reference, as HumanEval's own harness runs it (test and solution in
    one namespace; calls copied as ours are): whether check passes whole, and
    each statement of its body run in order, a failing one not stopping the rest."""
    namespace = {**solution, "__name__": "humaneval"}
    exec(compile(problem["test"], "test", "exec"), namespace)
    candidate = wire_call(solution)
    entry = problem["entry_point"]
    namespace[entry] = lambda *a, **k: candidate(entry, *a, **k)
    whole = passes(lambda: namespace["check"](namespace[entry]))
    check = next(n for n in ast.parse(problem["test"]).body if isinstance(n, ast.FunctionDef) and n.name == "check")
    param = check.args.args[0].arg
    body = [s for s in check.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    namespace[param] = namespace[entry]
    outcomes = []
    for statement in body:
        code = compile(ast.Module(body=[statement], type_ignores=[]), "check", "exec")
        outcomes.append(passes(lambda code=code: exec(code, namespace)))
    calls = [i for i, s in enumerate(body) if {param, entry} & {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}]
    return whole, [outcomes[i] for i in calls]


@pytest.fixture(scope="module")
def agreement() -> dict[str, dict]:
    results = {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for task, problem in HUMANEVAL.items():
            label = humaneval_label(task)
            data = data_of(label)
            param = next(n for n in ast.parse(problem["test"]).body
                         if isinstance(n, ast.FunctionDef) and n.name == "check").args.args[0].arg
            for name, solution in solutions(problem).items():
                results[(task, name)] = {
                    "split": run(data, solution, monkeypatch),
                    "whole": run(data, solution, monkeypatch, cases=[{"source": f"check({param})"}]),
                    "reference": statement_outcomes(problem, solution),
                }
    return results


@pytest.mark.parametrize("task", list(HUMANEVAL))
def test_humaneval_split_and_whole_agree(agreement, task):
    for name in ("canonical", "none", "broken"):
        result = agreement[(task, name)]
        split, (whole, statements) = result["split"], result["reference"]

        assert result["whole"] == [whole], name  # our whole run is HumanEval's
        assert all(split) == whole, name
        if len(split) > 1:  # a test per statement that calls the solution: each as it fares in the whole check
            assert split == statements, name
    assert agreement[(task, "canonical")]["split"] == [True] * len(agreement[(task, "canonical")]["split"])


def test_humaneval_is_split_where_it_can_be(agreement):
    split = {task: len(agreement[(task, "canonical")]["split"]) for task in HUMANEVAL}

    assert sum(n > 1 for n in split.values()) >= 158  # only checks with state shared across statements run whole
    assert {t for t, n in split.items() if n == 1} >= {"HumanEval/32", "HumanEval/38", "HumanEval/50"}
    # Wrong answers lose credit where the whole check fails, and only there.
    assert any(0 < sum(agreement[(t, "broken")]["split"]) < n for t, n in split.items() if n > 1)


def test_a_check_reads_the_same_whatever_this_process_bound_to_underscore(monkeypatch):
    # A doctest run earlier in the process binds builtins._; the container's has none.
    import builtins
    monkeypatch.setattr(builtins, "_", 42, raising=False)
    test_the_last_test_may_change_state_nothing_after_it_reads()
