"""What each label format runs: the generated test module, the `RunRequest`
(expected values only in `test_data`), how a check function is split into
tests, the program a completion becomes; and the harness's pure parts, imported
from the image's source: the wire format (rbwire). The comparisons are test_compare.py's."""

import ast
import json
import os
import sys
import types
from pathlib import Path

import pytest

from rewardbox.rewards import CheckLabel, LabelError, parse_label
from rewardbox.rewards.labels import SOLUTION_FILE, TEST_FILE
from rewardbox.sandbox import Limits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import rbgenerated  # noqa: E402
import rbwire  # noqa: E402

CODE = "def add(a, b):\n    return a + b\n"
LIMITS = Limits(timeout_s=4.0, memory_mb=256)
# Expected values no completion could guess; none may appear in the test module.
SECRET_INT, SECRET_TEXT = 73191, "expected-7f3a9c"

GENERATED = {
    "asserts": ({"tests": [f"assert add(1, 2) == {SECRET_INT}", "assert add(0, 0) == 0",
                           f"assert add('a', 'b') != '{SECRET_TEXT}'"], "setup": "import math"},
                "test_assert", 3),
    "check": ({"test": f"def check(candidate):\n    assert candidate(1, 2) == {SECRET_INT}\n"
                       f"    assert candidate('x', 'y') != '{SECRET_TEXT}'\n", "entry_point": "add"},
              "test_check", 2),
    "stdio": ({"inputs": ["1 2\n", "3 4\n", "5 6\n", "7 8\n"],
               "outputs": [f"{SECRET_INT}\n", "7\n", f"{SECRET_TEXT}\n", "15\n"]}, "test_case", 4),
    "call": ({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [SECRET_INT, SECRET_TEXT]}, "test_case", 2),
    "open-r1": ({"language": "python", "test_cases": [{"input": "1\n", "output": f"{SECRET_INT}\n", "type": "stdin_stdout"}]},
                "test_case", 1),
    "apps": ({"input_output": json.dumps({"inputs": ["1\n", "2\n"], "outputs": [f"{SECRET_TEXT}\n", "2\n"]})},
             "test_case", 2),
}


# -- the generated test module -------------------------------------------------------

@pytest.mark.parametrize("fmt", list(GENERATED))
def test_one_generated_test_per_case(fmt):
    raw, prefix, cases = GENERATED[fmt]

    label = parse_label(raw)

    names = [f"{prefix}_{i}" for i in range(cases)]
    assert label.expected.total == cases
    assert label.expected.counts == {(None, name): 1 for name in names}
    module = label.request(CODE, LIMITS).tests[TEST_FILE]
    assert [line for line in module.splitlines() if line.startswith("def ")] == [f"def {n}():" for n in names]


@pytest.mark.parametrize("fmt", list(GENERATED))
def test_generated_tests_call_the_harness_with_their_index(fmt, monkeypatch):
    raw, prefix, cases = GENERATED[fmt]
    called = []
    monkeypatch.setitem(sys.modules, "rbcheck", types.SimpleNamespace(check=called.append))
    namespace: dict = {}

    exec(compile(parse_label(raw).request(CODE, LIMITS).tests[TEST_FILE], TEST_FILE, "exec"), namespace)
    for i in range(cases):
        namespace[f"{prefix}_{i}"]()

    assert called == list(range(cases))


@pytest.mark.parametrize("fmt", list(GENERATED))
def test_the_harness_runs_every_generated_module_without_pytests_loop(fmt):
    """The module the host writes is the shape the harness's generated loop
    accepts (rbgenerated): a change of either side that the other does not
    follow would quietly send every generated run through pytest's own loop."""
    raw, prefix, cases = GENERATED[fmt]
    request = parse_label(raw).request(CODE, LIMITS)
    text = request.tests[TEST_FILE]
    tree = ast.parse(text)

    found = rbgenerated._case_functions(text, cases)
    assert [name for name, _ in found] == [f"{prefix}_{i}" for i in range(cases)]
    assert rbgenerated._case_functions(text, cases + 1) is None
    # Each case's function, made from the harness's template, is the code compiling the module gives.
    compiled = {c.co_name: c for c in compile(tree, TEST_FILE, "exec").co_consts if isinstance(c, types.CodeType)}
    for i, (name, line) in enumerate(found):
        made = rbgenerated._case_function({}, TEST_FILE, name, line, i).__code__
        want = compiled[name]
        assert (made.co_code, made.co_consts, made.co_names, made.co_filename, made.co_firstlineno, list(made.co_lines())) == (
            want.co_code, want.co_consts, want.co_names, want.co_filename, want.co_firstlineno, list(want.co_lines()))


@pytest.mark.parametrize("fmt", list(GENERATED))
def test_a_generated_module_is_taken_without_parsing_it(fmt, tmp_path, monkeypatch):
    """Every sample of a label has the same module: the test process reads
    its shape from the text, it does not parse it (issue 21)."""
    raw, prefix, cases = GENERATED[fmt]
    request = parse_label(raw).request(CODE, LIMITS)
    path = tmp_path / TEST_FILE
    path.write_text(request.tests[TEST_FILE])

    parse, parsed = ast.parse, []

    def counted(source, *args, **kwargs):
        parsed.append(source)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counted)
    tests = rbgenerated.GeneratedTests()
    armed = tests.arm([str(path)], json.loads(request.test_data), str(tmp_path))
    monkeypatch.undo()

    assert armed
    assert [f.__name__ for f in tests.functions] == [f"{prefix}_{i}" for i in range(cases)]
    assert parsed == []


@pytest.mark.parametrize("change", [
    ("rbcheck.check(1)", "rbcheck.check(0)"),  # two tests of one case
    ("def test_case_1():", "@decorated\ndef test_case_1():"),
    ("def test_case_1():", "def test_case_1(tmp_path):"),
    ("    rbcheck.check(1)", "    rbcheck.check(1)\n    rbcheck.check(0)"),
    ("import rbcheck", "import rbcheck as check"),
    ("import rbcheck", "import rbcheck\nimport pytest"),
    ("rbcheck.check(1)", "rbcheck.check(01)"),  # not Python
    ("def test_case_1", "def test_case_\u00b2"),  # a word character, not an identifier's
    ("\n", "\r\n"),
    ("cases are", 'cases\n"""\nrbcheck.check = print\n"""\nare'),  # code between two docstrings
    ('"""Generated', 'r"""Generated'),
    ("import rbcheck", "import rbcheck \\\n    as check"),  # a continued line
    ("\n\n\ndef test_case_0", ' """\n\n\ndef test_case_0'),  # the first test inside a string
    ("    rbcheck.check(1)\n", "    rbcheck.check(1)\n# a comment\n"),
])
def test_a_module_of_another_shape_keeps_pytests_loop(change):
    """The generated shape is read from the module's text, not its tree: any
    other text, however close, keeps pytest's own loop."""
    module = parse_label({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]}).request(
        CODE, LIMITS).tests[TEST_FILE]
    assert [name for name, _ in rbgenerated._case_functions(module, 2)] == ["test_case_0", "test_case_1"]
    old, new = change
    assert old in module

    assert rbgenerated._case_functions(module.replace(old, new), 2) is None


@pytest.mark.parametrize("code", ["import pytest; pytest.skip('x')", "import logging", "warnings.warn('x')"])
def test_label_code_that_pytests_hooks_act_on_keeps_pytests_loop(code):
    data = json.loads(parse_label({"tests": [code], "setup": "import math"}).request(CODE, LIMITS).test_data)
    assert rbgenerated._plain_label_code({**data, "cases": [{"source": "assert 1"}]})

    assert not rbgenerated._plain_label_code(data)


@pytest.mark.parametrize("fmt", list(GENERATED))
def test_the_test_file_holds_no_expected_values(fmt):
    raw, _, _ = GENERATED[fmt]

    request = parse_label(raw).request(CODE, LIMITS)

    module = request.tests[TEST_FILE]
    data = json.loads(request.test_data)
    assert str(SECRET_INT) not in module and SECRET_TEXT not in module
    assert str(SECRET_INT) in request.test_data or SECRET_TEXT in request.test_data
    assert set(request.tests) == {TEST_FILE}
    assert request.files == {SOLUTION_FILE: CODE}
    assert request.limits == LIMITS
    assert len(data["cases"]) == parse_label(raw).expected.total


def test_stdio_test_data():
    label = parse_label({"inputs": ["1 2\n"], "outputs": ["3\n"], "case_timeout_s": 1, "float_tolerance": 0.01,
                         "compare": "float"})

    data = json.loads(label.request(CODE, LIMITS).test_data)

    assert data == {"mode": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}], "case_timeout_s": 1.0,
                    "float_tolerance": 0.01, "compare": "float"}


def test_call_test_data():
    label = parse_label({"fn_name": "add", "inputs": [[1, 2], [[1], {"a": 1}]], "outputs": [3, [[1], {"a": 1}]]})

    data = json.loads(label.request(CODE, LIMITS).test_data)

    assert data == {"mode": "call", "case_timeout_s": 3.0, "float_tolerance": 1e-6, "compare": "tokens", "cases": [
        {"name": "add", "args": [1, 2], "output": 3},
        {"name": "add", "args": [[1], {"a": 1}], "output": [[1], {"a": 1}]},
    ]}


def test_asserts_test_data_proxies_the_solutions_functions():
    label = parse_label({"tests": ["assert add(1, 2) == 3", "assert math.isclose(area(1.0), math.pi)",
                                   "assert len(helper([1])) == 1", "assert sorted(pair()) == [1, 2]"],
                         "setup": "import math\n\ndef helper(x):\n    return x\n"})

    data = json.loads(label.request(CODE, LIMITS).test_data)

    # Free names only: not builtins (len, sorted), not what the setup binds (math, helper).
    assert data["proxies"] == {"add": "add", "area": "area", "pair": "pair"}
    assert data["setup"] == "import math\n\ndef helper(x):\n    return x\n"
    assert data["mode"] == "python"
    assert [c["source"] for c in data["cases"]] == label.tests


def test_pytest_label_runs_its_module_and_has_no_test_data():
    module = "from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n"

    request = parse_label({"pytest": module}).request(CODE, LIMITS)

    assert request.tests == {TEST_FILE: module}
    assert request.files == {SOLUTION_FILE: CODE}
    assert request.test_data is None


def test_numpy_values_in_a_call_label_become_plain_data():
    np = pytest.importorskip("numpy")
    raw = {"fn_name": "add", "inputs": [[np.int64(1), 2]], "outputs": [np.int64(3)]}

    try:
        label = parse_label(raw)
    except LabelError:
        return  # refusing the label is fine too
    data = json.loads(label.request(CODE, LIMITS).test_data)

    assert data["cases"] == [{"name": "add", "args": [1, 2], "output": 3}]


# -- splitting a check function --------------------------------------------------------------

def split(test: str, entry_point: str = "f") -> tuple[list[str], dict[str, str]]:
    data = json.loads(parse_label({"test": test, "entry_point": entry_point}).request(CODE, LIMITS).test_data)
    return [c["source"] for c in data["cases"]], data["proxies"]


def test_independent_asserts_are_one_test_each():
    sources, proxies = split("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
                             "    assert candidate(3) == 4\n")

    assert sources == ["assert candidate(1) == 2", "assert candidate(2) == 3", "assert candidate(3) == 4"]
    assert proxies == {"candidate": "f"}


def test_the_parameter_may_have_any_name():
    sources, proxies = split("def check(fn):\n    assert fn(1) == 2\n    assert fn(2) == 3\n", "inc")

    assert sources == ["assert fn(1) == 2", "assert fn(2) == 3"]
    assert proxies == {"fn": "inc"}


def test_the_whole_check_runs_when_split_is_unsafe_or_pointless():
    whole = ["check(candidate)"]

    # A statement binds a name that a later one reads: shared state.
    assert split("def check(candidate):\n    y = candidate(1)\n    assert y == 2\n    assert candidate(2) == 3\n")[0] == whole
    assert split("def check(candidate):\n    assert (y := candidate(1)) == 2\n    assert y == 2\n"
                 "    assert candidate(2) == 3\n")[0] == whole
    # Control flow that a split would change.
    assert split("def check(candidate):\n    assert candidate(1) == 2\n    if candidate(0) == 1:\n        return\n"
                 "    assert candidate(2) == 3\n")[0] == whole
    assert split("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n    return\n")[0] == whole
    assert split("def check(candidate):\n    global G\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n")[0] == whole
    # A single test is the whole check anyway.
    assert split("def check(candidate):\n    assert candidate(1) == 2\n")[0] == whole
    assert split("def check(candidate):\n    pass\n")[0] == whole


def test_statements_that_do_not_use_the_candidate_run_before_the_tests_after_them():
    sources, _ = split("METADATA = {}\n\ndef check(candidate):\n    '''Docstring.'''\n    import math\n    x = 5\n"
                       "    assert candidate(1) == 2\n    assert True\n    assert math.sqrt(x * 5) == x\n"
                       "    assert candidate(2) == 3\n")

    # `assert True` and the assert on x do not use the candidate: not tests of their own, run in their place.
    assert sources == ["import math\nx = 5\nassert candidate(1) == 2",
                       "import math\nx = 5\nassert True\nassert math.sqrt(x * 5) == x\nassert candidate(2) == 3"]


def test_loops_that_use_the_candidate_are_one_test_each():
    sources, _ = split("def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
                       "    for j in range(3):\n        assert candidate(-j) == 1 - j\n    assert candidate(9) == 10\n")

    assert sources == ["for i in range(3):\n    assert candidate(i) == i + 1",
                       "for j in range(3):\n    assert candidate(-j) == 1 - j",
                       "assert candidate(9) == 10"]


def test_loops_sharing_a_variable_run_whole():
    # Conservative: the second loop reads `i`, which the first binds.
    sources, _ = split("def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
                       "    for i in range(3):\n        assert candidate(-i) == 1 - i\n")

    assert sources == ["check(candidate)"]


def test_helpers_of_the_test_module_stay_in_the_tests():
    sources, proxies = split("def helper(x):\n    return x + 1\n\ndef check(candidate):\n"
                             "    assert helper(candidate(1)) == 3\n    assert candidate(2) == 3\n")

    assert sources == ["assert helper(candidate(1)) == 3", "assert candidate(2) == 3"]
    assert proxies == {"candidate": "f"}


def test_a_helper_defined_in_check_does_not_force_a_whole_check():
    sources, _ = split("def check(candidate):\n    def close(a, b):\n        return abs(a - b) < 1e-6\n"
                       "    assert close(candidate(1), 2)\n    assert close(candidate(2), 3)\n")

    assert len(sources) == 2


def test_the_whole_check_still_gets_its_setup():
    test = "METADATA = {'a': 1}\n\ndef check(candidate):\n    y = candidate(1)\n    assert y == 2\n"

    data = json.loads(parse_label({"test": test, "entry_point": "f"}).request(CODE, LIMITS).test_data)

    assert data["setup"] == test
    assert data["cases"] == [{"source": "check(candidate)"}]


# -- the program a completion becomes --------------------------------------------------------

PROMPT = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'
TOTAL_CHECK = "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n"
CONTINUED = PROMPT + "    return sum(xs)\n"


def total_label(**extra) -> CheckLabel:
    return parse_label({"test": TOTAL_CHECK, "entry_point": "total", **extra})


def test_a_body_continuation_is_joined_to_the_prompt():
    assert total_label(prompt=PROMPT).program("    return sum(xs)\n") == CONTINUED


def test_a_continuation_in_a_fence_is_joined_to_the_prompt():
    assert total_label(prompt=PROMPT).program("```python\n    return sum(xs)\n```\n") == CONTINUED


def test_a_full_rewrite_gets_the_prompts_imports():
    rewrite = "def total(xs: List[int]) -> int:\n    return sum(xs)\n"

    assert total_label(prompt=PROMPT).program(rewrite) == "from typing import List\n" + rewrite


def test_a_fenced_rewrite_among_prose():
    completion = ("Sum them:\n\n```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```\n\n"
                  "This is O(n).")

    assert total_label(prompt=PROMPT).program(completion) == ("from typing import List\n"
                                                             "def total(xs: List[int]) -> int:\n    return sum(xs)\n")


def test_the_sample_prompt_serves_when_the_label_has_none():
    label = total_label()

    assert label.program("    return sum(xs)\n", PROMPT) == CONTINUED
    assert label.program(CONTINUED, PROMPT) == CONTINUED  # the completion repeats the prompt


def test_the_labels_prompt_wins_over_a_chat_prompt():
    assert total_label(prompt=PROMPT).program("    return sum(xs)\n", "Please write total().") == CONTINUED


def test_a_chat_prompt_is_never_joined():
    label = total_label()

    # A prompt that does not define the entry point is not code to continue.
    assert label.program("def total(xs):\n    return sum(xs)\n", "Write total(xs).\n") == (
        "def total(xs):\n    return sum(xs)\n")
    assert label.program("    return sum(xs)\n", "Write total(xs).\n") is None


def test_no_code_is_no_program():
    assert total_label(prompt=PROMPT).program("I cannot solve this.") is None
    assert total_label(prompt=PROMPT).program("") is None


@pytest.mark.parametrize("fmt", ["asserts", "stdio", "call"])
def test_other_formats_take_the_code_as_it_is(fmt):
    label = parse_label(GENERATED[fmt][0])

    assert label.program("```python\nprint(1)\n```") == "print(1)\n"
    assert label.program("I cannot solve this.") is None


# -- rbwire: plain data across the boundary ---------------------------------------------------

@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 10**40, 1.5, float("inf"), "", "héllo\n", "\ud800", b"\x00\xffbytes", 2 + 3j,
    [], [1, [2, [3]]], (), (1, "a", (2.5,)), {}, {"a": 1, 2: [3], (1, 2): {"x": None}}, {1, 2, 3},
    frozenset({"a", (1, 2)}), {"$": "tuple", "v": [1]}, [{"$": 1, "v": 2}],
], ids=repr)
def test_wire_round_trip(value):
    tree = rbwire.encode(value)

    decoded = rbwire.decode(json.loads(json.dumps(tree)))

    assert decoded == value
    assert type(decoded) is type(value)


def test_wire_round_trip_keeps_nested_types():
    value = {"t": (1, [2, (3,)]), "s": frozenset({1})}

    decoded = rbwire.decode(json.loads(json.dumps(rbwire.encode(value))))

    assert type(decoded["t"]) is tuple and type(decoded["t"][1]) is list and type(decoded["t"][1][1]) is tuple
    assert type(decoded["s"]) is frozenset


class AlwaysEqualStr(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class SneakyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize("value", [
    pytest.param(object(), id="object"),
    pytest.param([1, object()], id="nested-in-list"),
    pytest.param(len, id="function"),
    pytest.param(iter([1]), id="iterator"),
])
def test_wire_refuses_anything_but_plain_data(value):
    with pytest.raises(TypeError, match="cannot cross the sandbox boundary"):
        rbwire.encode(value)


@pytest.mark.parametrize("value, plain", [
    pytest.param(SneakyInt(3), 3, id="int-subclass"),
    pytest.param(AlwaysEqualStr("x"), "x", id="str-subclass-always-equal"),
    pytest.param([1, SneakyInt(2)], [1, 2], id="nested-in-list"),
    pytest.param({"k": AlwaysEqualStr("v")}, {"k": "v"}, id="nested-in-dict"),
    pytest.param({AlwaysEqualStr("k"): 1}, {"k": 1}, id="dict-key"),
    pytest.param(type("Bag", (list,), {})([1]), [1], id="list-subclass"),
])
def test_wire_reduces_subclasses_to_exact_builtin_values(value, plain):
    decoded = rbwire.decode(rbwire.encode(value))

    assert decoded == plain
    assert _exact_types(decoded)
    assert decoded != {"k": "other"} and decoded != "other" and decoded != 4  # no always-equal object survives


def _exact_types(value):
    if type(value) in (list, tuple, set, frozenset):
        return all(_exact_types(v) for v in value)
    if type(value) is dict:
        return all(_exact_types(k) and _exact_types(v) for k, v in value.items())
    return type(value) in (type(None), bool, int, float, str, bytes, complex)


# Made when the test runs: pytest keeps its parameters for the whole session (hundreds of MB here).
@pytest.mark.parametrize("make", [
    pytest.param(lambda: [["x" * 1000] * 100] * 1000, id="shared-rows-of-shared-strings"),
    pytest.param(lambda: [0] * (40 << 20), id="long-list"),
    pytest.param(lambda: "3" * (80 << 20), id="long-string"),
    pytest.param(lambda: {i: "x" * 1000 for i in range(70_000)}, id="dict-of-strings"),
])
def test_wire_refuses_a_value_sure_to_be_over_the_frame_limit_as_it_meets_it(make):
    with pytest.raises(rbwire.WireError, match=f"over the frame limit of {rbwire.MAX_FRAME_BYTES} bytes"):
        rbwire.encode(make())


def test_wire_encodes_a_shared_container_once_and_counts_it_at_each_place():
    row = [1, (2, "three")]
    value = {"a": [row, row], "b": (row,)}
    budget = rbwire.Budget()

    tree = rbwire.encode(value, budget)

    assert rbwire.decode(json.loads(json.dumps(tree))) == {"a": [[1, (2, "three")]] * 2, "b": ([1, (2, "three")],)}
    assert tree["v"][0][1][0] is tree["v"][0][1][1]  # made once
    assert budget.limit - budget.left <= len(json.dumps(tree, separators=(",", ":")))
    rows = [row] * 100_000  # counted 100,000 times: 2 MB of JSON against a 1 MB budget
    with pytest.raises(rbwire.WireError):
        rbwire.encode(rows, rbwire.Budget(limit=1 << 20))


@pytest.mark.parametrize("tree", [
    pytest.param({"a": 1}, id="bare-object"),
    pytest.param({"$": "tuple"}, id="tag-without-value"),
    pytest.param({"$": "tuple", "v": [], "x": 1}, id="extra-key"),
    pytest.param({"$": "object", "v": "os.system"}, id="unknown-tag"),
    pytest.param({"$": "function", "v": []}, id="function-tag"),
    pytest.param([1, {"$": "nope", "v": 1}], id="nested-unknown-tag"),
])
def test_wire_refuses_malformed_values(tree):
    with pytest.raises(rbwire.WireError):
        rbwire.decode(tree)


def frame_pipe(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def test_frames_round_trip():
    read, write = os.pipe()
    message = {"name": "add", "args": rbwire.encode([1, (2, 3)]), "kwargs": rbwire.encode({})}

    rbwire.write_frame(write, message)
    rbwire.write_frame(write, {"value": None})
    os.close(write)

    try:
        assert rbwire.read_frame(read) == message
        assert rbwire.read_frame(read) == {"value": None}
        with pytest.raises(EOFError):
            rbwire.read_frame(read)
    finally:
        os.close(read)


@pytest.mark.parametrize("data, error", [
    pytest.param((rbwire.MAX_FRAME_BYTES + 1).to_bytes(4, "big"), rbwire.WireError, id="over-the-size-limit"),
    pytest.param((5).to_bytes(4, "big") + b"nope!", rbwire.WireError, id="not-json"),
    pytest.param((10).to_bytes(4, "big") + b'{"a":', EOFError, id="truncated-body"),
    pytest.param(b"\x00\x00", EOFError, id="truncated-header"),
])
def test_malformed_frames(data, error):
    read = frame_pipe(data)
    try:
        with pytest.raises(error):
            rbwire.read_frame(read)
    finally:
        os.close(read)


def test_read_frame_waits_through_the_callers_wait():
    read = frame_pipe((2).to_bytes(4, "big") + b"{}")
    waited = []
    try:
        assert rbwire.read_frame(read, waited.append) == {}
    finally:
        os.close(read)
    assert waited and set(waited) == {read}
