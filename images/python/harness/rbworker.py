"""The completion's worker process: imports /work/solution.py and answers
calls from the test process with plain data.

argv: REQUESTS_FD REPLIES_FD

Nothing here is trusted: the completion runs in this process and can change
any of it. The test process treats every reply as untrusted plain data, and
holds the expected values itself.
"""

import builtins
import importlib.util
import os
import sys
import traceback

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbwire  # noqa: E402

SOLUTION = "/work/solution.py"
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
    sys.path.append("/work")
    try:
        module = import_solution()
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the completion's doing
        rbwire.write_frame(replies, {"import_error": describe(exc)})
        return
    rbwire.write_frame(replies, {"ready": True})
    while True:
        try:
            request = rbwire.read_frame(requests)
        except EOFError:
            return
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


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: the completion's atexit hooks and threads do not matter
