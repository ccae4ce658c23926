"""The completion's worker process: imports /work/solution.py and answers
calls from the test process with plain data.

argv: REQUESTS_FD REPLIES_FD

Two kinds of request: a generated test's call by name (`{"name", "args",
"kwargs"}`, rbcheck.Worker), and the ops of a dataset's pytest module
(`{"op": ...}`, rbsolution), whose contract is written in rbhandle.py.

Nothing here is trusted: the completion runs in this process and can change
any of it. The test process treats every reply as untrusted plain data, and
holds the expected values itself.
"""

import builtins
import importlib.util
import io
import operator
import os
import sys
import traceback
import types

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbhandle  # noqa: E402
import rbprotocol  # noqa: E402
import rbwire  # noqa: E402

SOLUTION = rbprotocol.SOLUTION_PATH
MESSAGE_CHARS = 1000


def describe(exc):
    """An exception as plain strings: its class's name, the name of its nearest
    builtin class (what the tests re-raise, rbcheck.solution_exception), its
    message (the lone string argument as given: a KeyError's key unquoted) and
    traceback. The solution's `__str__` may raise: it must not end this process."""
    args = getattr(exc, "args", ())
    lone = args[0] if isinstance(args, tuple) and len(args) == 1 and type(args[0]) is str else None
    return {"type": _safe(lambda: type(exc).__name__), "builtin": _builtin_base(type(exc)),
            "message": (lone if lone is not None else _safe(lambda: str(exc)))[:MESSAGE_CHARS],
            "traceback": _safe(lambda: "".join(traceback.format_exception(exc)))[-MESSAGE_CHARS:]}


def _builtin_base(cls):
    """`except ValueError` catches a subclass of ValueError: the first builtin class in the MRO."""
    for base in cls.__mro__:
        if isinstance(base.__name__, str) and getattr(builtins, base.__name__, None) is base:
            return base.__name__
    return "BaseException"


def _safe(text):
    try:
        value = text()
        return value if type(value) is str else "?"
    except BaseException:  # noqa: BLE001 - the solution's code, however it fails
        return "?"


def import_solution():
    spec = importlib.util.spec_from_file_location("solution", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    spec.loader.exec_module(module)
    return module


def resolve(module, name):
    """A function of the solution by name. LeetCode-style methods are found
    too: a bare method name of class `Solution`, or `Solution().method`."""
    if "()." in name:
        class_name, method = name.split("().", 1)
        return getattr(getattr(module, class_name)(), method)
    if hasattr(module, name):
        return getattr(module, name)
    holder = getattr(module, "Solution", None)
    if isinstance(holder, type) and hasattr(holder, name):
        return getattr(holder(), name)
    raise NameError(f"the solution defines no {name!r}")


def main():
    requests, replies = int(sys.argv[1]), int(sys.argv[2])
    sys.path.append(rbprotocol.WORK_DIR)
    try:
        module = import_solution()
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the completion's doing
        rbwire.write_frame(replies, {"import_error": describe(exc)})
        return
    rbwire.write_frame(replies, {"ready": True})
    handles = None
    while True:
        try:
            request = rbwire.read_frame(requests)
        except EOFError:
            return
        if isinstance(request, dict) and "op" in request:
            handles = handles or Handles(module)
            reply = handles.serve(request)
            try:
                rbwire.write_frame(replies, reply)
            except (rbwire.WireError, ValueError, RecursionError, MemoryError) as exc:  # over the frame limit
                del reply
                rbwire.write_frame(replies, {"unsendable": describe(exc)})
            continue
        # Three outcomes the tests tell apart: no such function (a failed test), the
        # function raised (its exception, re-raised there), a value that cannot cross.
        try:
            function = resolve(module, request["name"])
            args = rbwire.decode(request["args"])
            kwargs = rbwire.decode(request["kwargs"])
        except BaseException as exc:  # noqa: BLE001 - the solution's module, however it fails
            rbwire.write_frame(replies, {"unusable": describe(exc)})
            continue
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported to the test as the call's outcome
            rbwire.write_frame(replies, {"raised": describe(exc)})
            continue
        try:
            rbwire.write_frame(replies, {"value": rbwire.encode(value)})
        except (TypeError, ValueError, RecursionError, rbwire.WireError) as exc:
            rbwire.write_frame(replies, {"unsendable": describe(exc)})


class Handles:
    """The objects a pytest module holds in the tests' process, by handle id,
    and the ops on them (rbhandle.py). Output printed during an op is caught
    and sent with its reply, up to rbhandle.RELAY_CHARS; past that it goes
    straight to the process's own stream, which the supervisor counts."""

    def __init__(self, module):
        self.module = module
        self.objects = {}  # id -> object
        self.ids = {}  # id(object) -> id: one handle per object, so `is` holds in the tests
        self.next_id = 1

    def serve(self, request):
        for number in request.get("release") or ():
            obj = self.objects.pop(number, None) if type(number) is int else None
            if obj is not None and self.ids.get(id(obj)) == number:
                del self.ids[id(obj)]
        out, err = _Relay(sys.__stdout__), _Relay(sys.__stderr__)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            reply = self._serve(request)
        finally:
            sys.stdout, sys.stderr = saved
        try:
            reply["out"], reply["err"] = out.text(), err.text()
        except BaseException:  # noqa: BLE001 - a print of a str subclass that broke the buffer
            reply["out"] = reply["err"] = ""
        return reply

    def _serve(self, request):
        op = request.get("op")
        try:
            if op == "names":
                return self._names()
            args = self._decode(request.get("args", []))
            kwargs = self._decode(request.get("kwargs", {"$": "dict", "v": []}))
            if type(args) is not list or type(kwargs) is not dict:
                raise rbwire.WireError("bad arguments")
            target = self._target(request["t"]) if "t" in request else None
            if op == "apply":
                fn = request.get("fn")
                if fn not in rbhandle.OPERATIONS:
                    raise rbwire.WireError(f"no operation {fn!r}")
                run = lambda: _OPERATIONS.get(fn, getattr(operator, fn, None))(*args)  # noqa: E731
            elif op == "call":
                run = lambda: target(*args, **kwargs)  # noqa: E731
            elif op == "getattr":
                name = str(request["name"])
                run = lambda: getattr(target, name)  # noqa: E731
            elif op == "setattr":
                name, value = str(request["name"]), self._decode(request["value"])
                run = lambda: setattr(target, name, value)  # noqa: E731
            elif op == "delattr":
                name = str(request["name"])
                run = lambda: delattr(target, name)  # noqa: E731
            elif op == "plain":
                run = lambda: _plain(target)  # noqa: E731
            else:
                raise rbwire.WireError(f"no op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - a stale handle, or the solution's __getattr__ on the way
            return {"unusable": describe(exc)}
        try:
            value = run()
        except BaseException as exc:  # noqa: BLE001 - the solution's exception: the op's outcome
            return {"raised": self._describe(exc)}
        try:
            reply = {"value": self._encode(value, held=op == "call" and isinstance(target, type),
                                           owner=target if op == "getattr" else None,
                                           name=request.get("name"))}
            if op == "call":
                sync = self._changed(request, args, kwargs)
                if sync:
                    reply["sync"] = sync
            return reply
        except (TypeError, ValueError, RecursionError, MemoryError, rbwire.WireError) as exc:
            return {"unsendable": describe(exc)}
        except BaseException as exc:  # noqa: BLE001 - the solution's code reached while encoding
            return {"unsendable": describe(exc)}

    def _names(self):
        namespace = dict(vars(self.module))
        names, exceptions = {}, {}
        for name, value in namespace.items():
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(value, type) and issubclass(value, BaseException):
                exceptions[name] = _builtin_base(value)
            try:
                names[name] = self._encode(value, held=False)
            except BaseException:  # noqa: BLE001 - a value that cannot be told: the name is left out
                continue
        every = namespace.get("__all__")
        every = [str.__str__(n) for n in every] if isinstance(every, (list, tuple)) and all(
            isinstance(n, str) for n in every) else None
        return {"names": names, "all": every, "exceptions": exceptions}

    def _describe(self, exc):
        description = describe(exc)
        cls = type(exc)
        name = _safe(lambda: cls.__name__)
        if vars(self.module).get(name) is cls:
            description["solution_class"] = name  # one the tests can name: solution.MyError
        return description

    # -- values ------------------------------------------------------------

    def _encode(self, value, held, owner=None, name=None):
        if held and type(value) not in (type(None), bool, int, float, str, bytes, complex, list, tuple, dict,
                                        set, frozenset):
            return self._handle(value)  # a constructed object: the test holds it, whatever its base
        if owner is not None and isinstance(value, (types.MethodType, types.BuiltinMethodType,
                                                    types.MethodWrapperType)) and value.__self__ is owner:
            # A bound method is made anew at each access: called through its owner, it holds no handle.
            number = self.ids.get(id(owner))
            if number is not None and type(name) is str:
                return {"$": "method", "v": [number, name]}
        return rbhandle.encode(value, self._handle)

    def _handle(self, obj):
        number = self.ids.get(id(obj))
        if number is None:
            if len(self.objects) >= rbhandle.MAX_HANDLES:
                raise ValueError(f"more than {rbhandle.MAX_HANDLES} of the solution's objects held at once")
            number, self.next_id = self.next_id, self.next_id + 1
            self.objects[number] = obj
            self.ids[id(obj)] = number
        return {"$": "handle", "v": [number, rbhandle.handle_kind(obj), _safe(lambda: type(obj).__name__)]}

    def _decode(self, tree):
        return rbhandle.decode(tree, self._ref)

    def _ref(self, tag, body):
        if tag != "ref":
            raise rbwire.WireError(f"a {tag} sent to the solution")
        return self._target(body)

    def _target(self, body):
        if type(body) is not list or not body or type(body[0]) is not int or body[0] not in self.objects:
            raise rbwire.WireError("no such handle (released, or from another process)")
        obj = self.objects[body[0]]
        for name in body[1:]:
            obj = getattr(obj, str(name))
        return obj

    def _changed(self, request, args, kwargs):
        """The arguments the call changed in place, as they are now."""
        sync = []
        sent = request.get("args") or []
        for index, arg in enumerate(args):
            if isinstance(arg, (list, dict, set)) and index < len(sent):
                now = rbhandle.encode(arg, self._handle)
                if now != sent[index]:
                    sync.append([index, now])
        sent_kwargs = dict((k, v) for k, v in (request.get("kwargs") or {}).get("v", []) if type(k) is str)
        for key, arg in kwargs.items():
            if isinstance(arg, (list, dict, set)) and key in sent_kwargs:
                now = rbhandle.encode(arg, self._handle)
                if now != sent_kwargs[key]:
                    sync.append([key, now])
        return sync


def _plain(obj):
    """The builtin base value of an instance of a builtin's subclass, read
    through the base type's own methods (rbwire), or None."""
    if issubclass(type(obj), (bool, int, float, str, bytes, complex, list, tuple, dict, set, frozenset)):
        return {"is": True, "value": obj}  # encoded as its base type (rbhandle.encode)
    return {"is": False, "value": None}


def _enter(obj):
    return obj.__enter__()


def _exit(obj, *args):
    return obj.__exit__(*args)


_OPERATIONS = {
    "len": len, "iter": iter, "next": next, "bool": bool, "repr": lambda o: repr(o)[:rbhandle.REPR_CHARS],
    "str": lambda o: str(o)[:rbhandle.REPR_CHARS * 100], "hash": hash, "int": int, "float": float,
    "complex": complex, "round": round, "reversed": reversed, "format": format, "isinstance": isinstance,
    "issubclass": issubclass, "dir": dir, "enter": _enter, "exit": _exit,
    "contains": lambda container, item: item in container,
}


class _Relay(io.TextIOBase):
    """sys.stdout or sys.stderr during an op: kept for the reply up to
    RELAY_CHARS, the rest written through to the real stream."""

    def __init__(self, stream):
        self.stream = stream
        self.parts = []
        self.size = 0

    def write(self, text):
        text = str.__str__(text) if isinstance(text, str) else str(text)
        if self.size < rbhandle.RELAY_CHARS:
            self.parts.append(text)
            self.size += len(text)
        elif self.stream is not None:
            self.stream.write(text)
        return len(text)

    def writable(self):
        return True

    def text(self):
        return "".join(self.parts)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: the completion's atexit hooks and threads do not matter
