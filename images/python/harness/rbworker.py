"""The completion's worker process: imports /work/solution.py and answers
calls from the test process with plain data.

argv: REQUESTS_FD REPLIES_FD

Nothing here is trusted: the completion runs in this process and can change
any of it. The test process treats every reply as untrusted plain data, and
holds the expected values itself.
"""

import importlib.util
import os
import sys
import traceback

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbwire  # noqa: E402

SOLUTION = "/work/solution.py"
MESSAGE_CHARS = 1000


def describe(exc):
    return {"type": type(exc).__name__, "message": str(exc)[:MESSAGE_CHARS],
            "traceback": "".join(traceback.format_exception(exc))[-MESSAGE_CHARS:]}


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
        try:
            function = resolve(module, request["name"])
            args = rbwire.decode(request["args"])
            kwargs = rbwire.decode(request["kwargs"])
            value = function(*args, **kwargs)
            reply = {"value": rbwire.encode(value)}
        except BaseException as exc:  # noqa: BLE001 - reported to the test as the call's outcome
            reply = {"raised": describe(exc)}
        rbwire.write_frame(replies, reply)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: the completion's atexit hooks and threads do not matter
