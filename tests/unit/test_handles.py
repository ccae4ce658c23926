"""The pure parts of pytest labels' stand-in `solution`, imported from the
image's source: the value encoding with handles (rbhandle), the worker's
table of held objects (rbworker.Handles, driven with a module object in this
process), the tests' side's proxies against a scripted worker (a fake only
here), arguments changed in place, and the label option that keeps the old way."""

import json
import sys
import types
from collections import Counter, namedtuple
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import rbhandle  # noqa: E402
import rbsolution  # noqa: E402
import rbwire  # noqa: E402
import rbworker  # noqa: E402

from rewardbox.rewards import parse_label  # noqa: E402
from rewardbox.sandbox import Limits  # noqa: E402
from rewardbox.sandbox.protocol import encode_request  # noqa: E402


def wire(tree):
    """As a frame carries it."""
    return json.loads(json.dumps(tree))


# -- rbhandle: values both ways -------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, True, 3, -2**5000, 1.5, float("inf"), "x\ud800", b"\x00", 1j, [1, [2]],
                                   (1, "a"), {1: [2]}, {3}, frozenset({4}), {(1, 2): {"k": None}}, range(1, 10, 3),
                                   int, ValueError, [list, range(0)], slice(1, None, -1)])
def test_plain_values_round_trip_exactly(value):
    back = rbhandle.decode(wire(rbhandle.encode(value)))
    assert back == value and type(back) is type(value)


def test_a_class_by_name_is_only_ever_the_builtin_one():
    class int:  # noqa: A001 - a solution's class named like a builtin
        pass

    assert rbhandle.encode(int, lambda o: "handle") == "handle"
    with pytest.raises(rbwire.WireError):
        rbhandle.decode({"$": "type", "v": "eval"})  # a builtin function is no class


def test_subclasses_cross_as_their_base_value_without_their_code():
    class Always(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

        def __iter__(self):
            raise AssertionError("never called")

    Pair = namedtuple("Pair", "a b")
    for value, want in ((Always("x"), "x"), (Counter("aab"), {"a": 2, "b": 1}), (Pair(1, 2), (1, 2))):
        back = rbhandle.decode(wire(rbhandle.encode(value)))
        assert back == want and type(back) is type(want)


def test_other_objects_need_a_handle_maker():
    obj = object()
    with pytest.raises(TypeError):
        rbhandle.encode([obj])
    tree = rbhandle.encode([obj], lambda o: {"$": "handle", "v": [7, "object", "object"]})
    assert tree == [{"$": "handle", "v": [7, "object", "object"]}]
    with pytest.raises(rbwire.WireError):
        rbhandle.decode(tree)  # no maker: a handle where none may be
    assert rbhandle.decode(tree, lambda tag, body: (tag, body)) == [("handle", [7, "object", "object"])]


def test_an_object_lying_about_its_class_is_no_builtin_value():
    class Liar:
        __class__ = property(lambda self: int)

    assert isinstance(Liar(), int)  # what isinstance believes
    assert rbhandle.encode(Liar(), lambda o: "handle") == "handle"


def test_nesting_is_bounded_both_ways():
    deep = []
    for _ in range(rbhandle.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(rbhandle.TooDeep):
        rbhandle.encode(deep)
    tree = []
    for _ in range(rbhandle.MAX_DEPTH + 5):
        tree = [tree]
    with pytest.raises(rbhandle.TooDeep):
        rbhandle.decode(tree)


def test_a_container_shared_at_two_depths_is_bounded_at_each():
    chain = []
    for _ in range(rbhandle.MAX_DEPTH - 10):
        chain = [chain]
    rbhandle.encode([chain, chain])  # within the bound at depth 1
    deeper = chain
    for _ in range(20):
        deeper = [deeper]
    with pytest.raises(rbhandle.TooDeep):  # the same list met again 20 levels down is past it
        rbhandle.encode([chain, deeper])


def test_a_handle_value_sure_to_be_over_the_frame_limit_is_refused_as_it_is_met():
    row = [0] * 1000
    with pytest.raises(rbwire.WireError, match="over the frame limit"):
        rbhandle.encode([row] * 100_000, lambda obj: {"$": "ref", "v": [1]})


@pytest.mark.parametrize("tree", [{"$": "tuple", "v": 3}, {"$": "dict", "v": [[1]]}, {"$": "nope", "v": 1},
                                  {"a": 1}])
def test_malformed_trees_are_wire_errors(tree):
    with pytest.raises(rbwire.WireError):
        rbhandle.decode(tree)


# -- rbworker.Handles: the worker's side, on a module object -----------------------------------------

SOLUTION = '''
MOD = 7
class Stack(list):
    def push(self, x):
        self.append(x)
        print("pushed", x)
class Always:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def always():
    return Always()
def fill(xs):
    xs.append(1)
class Oops(KeyError):
    pass
def oops():
    raise Oops("k")
'''


@pytest.fixture
def handles():
    module = types.ModuleType("solution")
    exec(SOLUTION, vars(module))
    return rbworker.Handles(module)


def ask(handles, **request):
    return wire(handles.serve(wire(request)))


def test_names_tell_values_handles_and_exception_classes(handles):
    reply = ask(handles, op="names")
    assert reply["names"]["MOD"] == 7
    assert reply["names"]["Stack"]["$"] == "handle" and reply["names"]["Stack"]["v"][1] == "class"
    assert reply["exceptions"] == {"Oops": "KeyError"}


def test_a_constructed_object_is_held_its_output_relayed_and_its_methods_need_no_handle(handles):
    stack_class = ask(handles, op="names")["names"]["Stack"]["v"][0]
    made = ask(handles, op="call", t=[stack_class], args=[], kwargs={"$": "dict", "v": []})
    assert made["value"]["$"] == "handle"  # a list subclass, constructed: held, not copied
    number = made["value"]["v"][0]
    method = ask(handles, op="getattr", t=[number], name="push")["value"]
    assert method == {"$": "method", "v": [number, "push"]}
    pushed = ask(handles, op="call", t=[number, "push"], args=[5], kwargs={"$": "dict", "v": []})
    assert pushed["value"] is None and pushed["out"] == "pushed 5\n"
    assert ask(handles, op="plain", t=[number])["value"] == {"$": "dict", "v": [["is", True], ["value", [5]]]}
    before = len(handles.objects)
    ask(handles, op="names", release=[number])
    assert len(handles.objects) == before - 1


def test_a_returned_object_is_a_handle_and_arguments_changed_in_place_come_back(handles):
    names = ask(handles, op="names")["names"]
    got = ask(handles, op="call", t=[names["always"]["v"][0]], args=[], kwargs={"$": "dict", "v": []})
    assert got["value"]["$"] == "handle" and got["value"]["v"][2] == "Always"
    filled = ask(handles, op="call", t=[names["fill"]["v"][0]], args=[[0]], kwargs={"$": "dict", "v": []})
    assert filled["sync"] == [[0, [0, 1]]]


def test_exceptions_name_the_solutions_own_class(handles):
    names = ask(handles, op="names")["names"]
    reply = ask(handles, op="call", t=[names["oops"]["v"][0]], args=[], kwargs={"$": "dict", "v": []})
    assert reply["raised"]["builtin"] == "KeyError" and reply["raised"]["solution_class"] == "Oops"


def test_unknown_ops_handles_and_operations_are_refused(handles):
    assert "unusable" in ask(handles, op="apply", fn="system", args=[])
    assert "unusable" in ask(handles, op="getattr", t=[999], name="x")
    assert "unusable" in ask(handles, op="launch")


def test_the_handle_count_is_bounded(handles, monkeypatch):
    names = ask(handles, op="names")["names"]
    monkeypatch.setattr(rbhandle, "MAX_HANDLES", len(handles.objects) + 1)
    always = names["always"]["v"][0]
    assert ask(handles, op="call", t=[always], args=[], kwargs={"$": "dict", "v": []})["value"]["$"] == "handle"
    assert "unsendable" in ask(handles, op="call", t=[always], args=[], kwargs={"$": "dict", "v": []})


# -- the tests' side: proxies against a scripted worker ------------------------------------------------

class ScriptedProcess(rbsolution.SolutionProcess):
    """Answers ops from a table instead of a worker (the only fake here)."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers
        self.asked = []

    def request(self, message):
        self.asked.append(message)
        op = message["op"] if message["op"] != "apply" else message["fn"]
        return self.answers[op]


def test_an_always_equal_handle_never_equals_plain_data():
    process = ScriptedProcess({"plain": {"value": {"$": "dict", "v": [["is", False], ["value", None]]}},
                               "eq": {"value": True}})
    handle = rbsolution.Handle(process, 1, "object", "Always")
    assert not handle == 3 and handle != 3 and not handle == "x"  # noqa: SIM201 (== and != are asked apart)
    assert [m["op"] for m in process.asked] == ["plain", "plain", "plain"]  # never the solution's __eq__
    other = rbsolution.Handle(process, 2, "object", "Always")
    assert handle == other  # two of its objects: the test chose to let it compare them
    assert process.asked[-1]["fn"] == "eq"


def test_a_builtin_subclass_handle_compares_by_its_plain_value():
    process = ScriptedProcess({"plain": {"value": {"$": "dict", "v": [["is", True], ["value", [1, 2]]]}}})
    handle = rbsolution.Handle(process, 1, "object", "Stack")
    assert handle == [1, 2] and handle != [2, 1]


def test_test_objects_cannot_cross_but_handles_go_by_reference():
    process = ScriptedProcess({})
    handle = rbsolution.Handle(process, 4, "object", "Node")
    assert process.encode([handle, 1]) == [{"$": "ref", "v": [4]}, 1]
    with pytest.raises(TypeError, match="cannot cross"):
        process.encode(lambda x: x)


def test_pytests_probes_are_never_asked_of_the_solution():
    process = ScriptedProcess({})
    handle = rbsolution.Handle(process, 1, "function", "add")
    for name in ("_pytestfixturefunction", "pytestmark", "__test__", "__wrapped__", "__signature__"):
        assert not hasattr(handle, name)
    assert process.asked == []


def test_arguments_changed_in_place_change_the_tests_own_objects():
    row0, row1 = [1, 2], [3, 4]
    matrix = [row0, row1]
    rbsolution._sync_into(matrix, [[3, 1], [4, 2]], 0)
    assert matrix == [[3, 1], [4, 2]] and matrix[0] is row0  # rows the test holds change too
    xs = [3, 1, 2]
    rbsolution._sync_into(xs, [1, 2, 3, 4], 0)
    assert xs == [1, 2, 3, 4]
    d, s = {"a": [1], "b": 2}, {1, 2}
    rbsolution._sync_into(d, {"a": [1, 5]}, 0)
    rbsolution._sync_into(s, {3}, 0)
    assert d == {"a": [1, 5]} and s == {3}


def test_an_import_failure_keeps_its_builtin_class():
    failure = rbsolution.rbcheck.SolutionImportError("importing the solution failed")
    failure.error = {"type": "ModuleNotFoundError", "builtin": "ModuleNotFoundError", "message": "No module named 'x'"}
    assert type(rbsolution._import_failure(failure)) is ModuleNotFoundError
    failure.error = {"type": "SystemExit", "builtin": "SystemExit", "message": "0"}
    assert rbsolution._import_failure(failure) is failure  # a RunFailure: never a SystemExit here


# -- the label option ------------------------------------------------------------------------------------

def test_in_process_reaches_the_supervisor_only_when_asked():
    tests = "from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n"
    default = parse_label({"pytest": tests}).request("def add(a, b): return a + b", Limits())
    old = parse_label({"pytest": tests, "in_process": True}).request("def add(a, b): return a + b", Limits())
    assert not default.solution_in_process and old.solution_in_process
    assert "solution_in_process" not in json.loads(encode_request(default, "n"))
    assert json.loads(encode_request(old, "n"))["solution_in_process"] is True
