"""The contract between a dataset's pytest module and the completion's worker
process (written down once, here; rbworker.py serves it, rbsolution.py
speaks it from the tests' process).

Frames are rbwire's (length-prefixed JSON). The worker imports the solution,
then says hello, as it does for the generated formats (rbcheck.Worker):

    -> {"ready": true}  |  {"import_error": DESCRIPTION}   (rbworker.describe)

Requests (one op each), answered in order:

    {"op": "names"}  -> {"names": {NAME: V}, "all": [NAME...] | null,
                         "exceptions": {NAME: BUILTIN_BASE}, "out", "err"}
        the solution module's namespace (no dunders), its `__all__` when a
        list of strings, and the exception classes it defines (the tests'
        process makes a class of that builtin base for each, so that
        `pytest.raises(solution.MyError)` works)
    {"op": "call",    "t": TARGET, "args": [V...], "kwargs": {"$":"dict",..}}
        (calling a class gives a handle to the instance, even of a builtin's
        subclass: the test constructed it to hold it)
    {"op": "getattr", "t": TARGET, "name": str}
    {"op": "setattr", "t": TARGET, "name": str, "value": V}
    {"op": "delattr", "t": TARGET, "name": str}
    {"op": "apply",   "fn": OPERATION, "args": [V...]}   (OPERATIONS below)
    {"op": "plain",   "t": TARGET}     {"is": bool, "value": V}: the builtin
                                       base value of a builtin subclass instance
    + "release": [HANDLE_ID...] on any request: handles the tests dropped

Replies: {"value": V} | {"raised": DESCRIPTION} | {"unusable": DESCRIPTION}
| {"unsendable": DESCRIPTION}, each with "out"/"err" (what the solution
printed during the op, relayed into the test's sys.stdout/sys.stderr) and,
after a call, "sync": [[ARG_INDEX | KWARG_NAME, V]...] (arguments the call
changed in place: `nums.sort()` inside the solution shows in the test's list).

Values (V) are rbwire's plain data, a range or a slice ({"$": "range" |
"slice", "v": [START, STOP, STEP]}), a builtin class by name ({"$": "type", "v": "int"}: each side
takes its own), plus three tags:
    {"$": "handle", "v": [ID, KIND, TYPE_NAME]}   an object held by the worker
    {"$": "method", "v": [ID, NAME]}              a bound method of handle ID
    {"$": "ref",    "v": [ID, NAME...]}           tests -> worker only: the
                                                  object of handle ID (then
                                                  getattr along NAME...)
A TARGET is the `v` of a ref. KIND is "function", "class", "iterator" or
"object": what the proxy in the tests' process offers.

What crosses as plain data is an exact builtin value: a subclass (an always-
equal str or int) arrives as its base value, read through the base type's
methods, as in the generated formats. Every bound is here: the depth of a
value, the frame size (rbwire), the number of handles, the output relayed.
"""

import builtins

import rbwire

MAX_HANDLES = 200_000
MAX_DEPTH = 200  # nesting of a value, both ways; deeper is "cannot cross"
RELAY_CHARS = 1 << 20  # output of one op relayed; beyond it goes straight to the stream (counted)
REPR_CHARS = 10_000
HANDLE_BYTES = 19  # the tree of a handle or a ref, {"$":"ref","v":[1]} at least

HANDLE_KINDS = ("function", "class", "iterator", "object")

# What `apply` may run in the worker, by name: the operators and builtins a
# proxy forwards. Results cross by the rules above.
OPERATIONS = frozenset({
    "len", "contains", "getitem", "setitem", "delitem", "iter", "next", "bool", "repr", "str", "hash",
    "eq", "ne", "lt", "le", "gt", "ge",
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift", "rshift",
    "neg", "pos", "abs", "invert", "int", "float", "index", "complex", "round", "reversed", "format",
    "isinstance", "issubclass", "dir", "enter", "exit",
})
# Comparisons the solution answers only when both sides are its objects (the
# test chose to compare two of them); a handle against plain data is compared
# on the tests' side, so an always-equal object never answers for a value.
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


class TooDeep(ValueError):
    """A value nested past MAX_DEPTH."""


def encode(value, on_object=None, depth=0, budget=None):
    """The wire tree of `value`: rbwire's plain data, with `on_object(obj)`
    giving the tree of anything else (a handle, a ref), or TypeError without it.
    Subclasses of builtin types cross as their base value (rbwire's rule). A
    value sure to be over the frame limit fails as it is met (rbwire.Budget);
    a container met again at the same depth is encoded once."""
    if depth > MAX_DEPTH:
        raise TooDeep(f"a value nested deeper than {MAX_DEPTH} levels cannot cross the sandbox boundary")
    if budget is None:
        budget = rbwire.Budget()
    # By the real type (issubclass of type(value)), never isinstance: an object
    # whose __class__ lies about its type is no builtin's value, it is a handle.
    kind = type(value)
    if value is None or kind in (bool, int, float, str, bytes, complex):
        return rbwire.encode(value, budget)
    if issubclass(kind, (list, tuple, set, frozenset, dict)):
        key = (id(value), depth)  # by depth too: the same container deeper down may be past MAX_DEPTH there
        made = budget.again(key)
        if made is not None:
            return made
        left_before = budget.left
        if issubclass(kind, dict):
            budget.items(dict.__len__(value), each=4, tagged=True)
            tree = {"$": "dict", "v": [[encode(k, on_object, depth + 1, budget), encode(v, on_object, depth + 1, budget)]
                                       for k, v in dict.items(value)]}
        else:
            base = next(t for t in (list, tuple, set, frozenset) if issubclass(kind, t))
            budget.items(base.__len__(value), tagged=base is not list)
            items = [encode(v, on_object, depth + 1, budget) for v in base.__iter__(value)]
            tree = items if base is list else {"$": base.__name__, "v": items}
        return budget.keep(key, value, tree, left_before)
    if issubclass(kind, (int, float, str, bytes, complex)):
        return rbwire.encode(value, budget)
    if kind is range:  # range cannot be subclassed: its three numbers are all of it
        budget.items(3, tagged=True)
        return {"$": "range", "v": [rbwire.encode(value.start, budget), rbwire.encode(value.stop, budget),
                                    rbwire.encode(value.step, budget)]}
    if kind is slice:  # h[1:3] on a handle: slice cannot be subclassed either
        budget.items(3, tagged=True)
        return {"$": "slice", "v": [encode(part, on_object, depth + 1, budget)
                                    for part in (value.start, value.stop, value.step)]}
    if issubclass(kind, type) and _builtin_type(getattr(value, "__name__", None)) is value:
        budget.spend(rbwire.Budget.TAG_BYTES + 2)
        return {"$": "type", "v": value.__name__}  # int, str, ValueError: the other side's own
    if on_object is None:
        return rbwire.encode(value, budget)  # rbwire's TypeError, with its message
    budget.spend(HANDLE_BYTES)
    return on_object(value)


def decode(tree, on_tag=None, depth=0):
    """The value `encode` described; `on_tag(tag, body)` makes the value of a
    handle, method or ref tag (WireError without it, or for a tag it refuses)."""
    if depth > MAX_DEPTH:
        raise TooDeep(f"a value nested deeper than {MAX_DEPTH} levels")
    kind = type(tree)
    if tree is None or kind in (bool, int, float, str):
        return tree
    if kind is list:
        return [decode(v, on_tag, depth + 1) for v in tree]
    if kind is not dict or set(tree) != {"$", "v"}:
        raise rbwire.WireError(f"not an encoded value: {str(tree)[:80]}")
    tag, body = tree["$"], tree["v"]
    if tag in ("handle", "method", "ref"):
        if on_tag is None or type(body) is not list:
            raise rbwire.WireError(f"a {tag} where none may be")
        return on_tag(tag, body)
    if tag in ("tuple", "set", "frozenset"):
        if type(body) is not list:
            raise rbwire.WireError(f"bad {tag}")
        items = [decode(v, on_tag, depth + 1) for v in body]
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        if type(body) is not list or any(type(p) is not list or len(p) != 2 for p in body):
            raise rbwire.WireError("bad dict")
        return {decode(k, on_tag, depth + 1): decode(v, on_tag, depth + 1) for k, v in body}
    if tag == "range":
        if type(body) is not list or len(body) != 3:
            raise rbwire.WireError("bad range")
        start, stop, step = (rbwire.decode(v) for v in body)
        if not all(type(n) is int for n in (start, stop, step)) or step == 0:
            raise rbwire.WireError("bad range")
        return range(start, stop, step)
    if tag == "slice":
        if type(body) is not list or len(body) != 3:
            raise rbwire.WireError("bad slice")
        return slice(*(decode(v, on_tag, depth + 1) for v in body))
    if tag == "type":
        cls = _builtin_type(body)
        if cls is None:
            raise rbwire.WireError(f"no builtin type {str(body)[:80]!r}")
        return cls
    return rbwire.decode(tree)  # int, bytes, complex: checked there


def _builtin_type(name):
    """The builtin class of that name on this side (int, list, ValueError), or None."""
    cls = getattr(builtins, name, None) if type(name) is str else None
    return cls if isinstance(cls, type) else None


def handle_kind(value):
    """What a proxy offers for `value`: called (function, class), advanced
    (iterator), or read and operated on (object)."""
    if isinstance(value, type):
        return "class"
    if hasattr(type(value), "__next__"):
        return "iterator"
    if callable(value):
        return "function"
    return "object"
