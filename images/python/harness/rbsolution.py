"""The solution as a dataset's pytest module sees it, from a process the
completion never runs in.

`install()` puts an import hook for `solution` in front of sys.meta_path
before collection. Importing it starts the completion's worker (rbworker.py:
forked from the zygote in a pooled container, a fresh interpreter otherwise),
which imports /work/solution.py and reports what it defines; the module the
tests get is a stand-in built from that report. Plain values are copied;
functions, classes and every other object stay in the worker and are held
here as `Handle`s, whose calls, attribute reads, iteration, `len`, indexing
and operators are forwarded (the contract is rbhandle.py's). What comes back
is plain data of exact builtin types, so an always-equal object, a `str`
whose `strip()` returns itself or an `int` subclass never reaches the tests'
comparisons as itself; the recording plugin, pytest and the builtins of this
process are out of the completion's reach.

Failures are rbcheck's: the worker ending or breaking the protocol is a
WorkerError (graded killed), its memory running out an OutOfMemory; the
solution's exception is raised here as its nearest builtin class (or as the
stand-in class of an exception the solution defines), with its message.
"""

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import signal
import sys
import threading
import weakref

import pytest

import rbcheck
import rbhandle
import rbwire
from rbcgroup import oom_kills

MODULE = "solution"
# Attributes that pytest and inspect probe on any object (fixture markers,
# marks, wrappers, signatures): never asked of the solution, so that its
# objects cannot pose as fixtures, marks or test functions of their own making.
_PROBED_PREFIXES = ("_pytest", "__pytest", "pytestmark", "_fixture", "__test__", "__wrapped__", "__signature__",
                    "__code__", "__func__", "__self__", "__get__", "__set__", "__mro_entries__",
                    "__class_getitem__", "__origin__", "__dataclass", "__attrs")
_SYNC_DEPTH = 50


def install(failures):
    """Before collection: `solution` resolves to the stand-in (and only here:
    the work dir is not on sys.path, so nothing the completion writes there is
    imported into this process), and `failures` (the prepared session's
    FailurePlugin) keeps a test from passing over the worker's end."""
    rbcheck._oom_kills_at_start = oom_kills()
    # The worker runs as our uid: a SIGINT from it ends this process (graded
    # killed) rather than raising a KeyboardInterrupt that a test's bare `except:` takes.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    process = SolutionProcess()
    sys.meta_path.insert(0, _Finder(process))
    failures.process = process


class FailurePlugin:
    """A test during which the worker ended fails with that failure, even if
    its own code swallowed it (a bare `except:`, `pytest.raises(BaseException)`),
    as rbcheck.check does for generated tests: the host grades the run killed.

    Registered with the prepared session (pytest_runner.PreparedSession), which
    saves each run pluggy's registration of a plugin; dormant until `install`
    gives it the run's solution process. `tryfirst`: the outermost wrapper of
    the call, as it was when each run registered it last."""

    def __init__(self):
        self.process = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        process = self.process
        if process is None:
            return (yield)
        before = process.failure
        result = yield
        if process.worker is not None and process.failure is not None and before is None:
            raise process.failure.with_traceback(None)
        return result


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, process):
        self.process = process

    def find_spec(self, fullname, path=None, target=None):
        if fullname != MODULE:
            return None
        return importlib.machinery.ModuleSpec(MODULE, self, origin="<the solution's process>")

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        __tracebackhide__ = True
        self.process.fill(module)


class SolutionProcess:
    """The worker, started at the first import of `solution`, for the whole
    session: the tests' module-level names are handles into it."""

    def __init__(self):
        self.worker = None
        self.failure = None  # what the import raised, or the RunFailure that ended the worker
        self.proxies = weakref.WeakValueDictionary()  # handle id -> Handle: `is` holds for one object
        self.released = []
        self.exceptions = {}  # name -> stand-in class of an exception the solution defines
        self.lock = threading.Lock()  # a test's threads share one pipe: one request at a time

    # -- the module ---------------------------------------------------------

    def fill(self, module):
        """Starts the worker and fills the stand-in module; an import that
        failed raises what today's in-process import would, every time it is tried."""
        __tracebackhide__ = True
        if self.failure is not None:
            raise _again(self.failure)
        hide_test_sources()
        try:
            self.worker = rbcheck.Worker()
            reply = self.request({"op": "names"})
        except rbcheck.SolutionImportError as failure:
            self.failure = _import_failure(failure)
            raise _again(self.failure) from None
        except rbcheck.RunFailure as failure:
            self.failure = failure
            raise
        if not isinstance(reply.get("names"), dict) or not isinstance(reply.get("exceptions", {}), dict):
            raise self._broken()
        for name, base in reply.get("exceptions", {}).items():
            cls = getattr(builtins, str(base), None)
            if isinstance(name, str) and isinstance(cls, type) and issubclass(cls, Exception):
                self.exceptions[name] = type(name, (cls,), {"__module__": MODULE})
        for name, tree in reply["names"].items():
            if not isinstance(name, str) or name.startswith("__"):
                continue
            setattr(module, name, self.exceptions[name] if name in self.exceptions else self.decode(tree))
        every = reply.get("all")
        if isinstance(every, list) and all(type(n) is str for n in every):
            module.__all__ = every
        module.__file__ = "/work/solution.py"

    # -- requests -----------------------------------------------------------

    def request(self, message):
        """The worker's reply to `message`, its output relayed; a RunFailure
        (the run's, which no test's `except` turns into a pass) when the worker
        is gone. One failure ends it for the session: the run is graded killed."""
        __tracebackhide__ = True
        if self.failure is not None and self.worker is not None:
            raise _again(self.failure)
        if self.released:
            message["release"], self.released = self.released, []
        try:
            rbcheck._raise_if_out_of_memory()
            with self.lock:
                reply = self.worker.exchange(message)
        except rbcheck.RunFailure as failure:
            self.worker.close()
            if not isinstance(failure, rbcheck.OutOfMemory) and rbcheck._out_of_memory():
                failure = rbcheck.OutOfMemory("the solution ran out of memory (killed by the kernel's OOM killer)")
            self.failure = failure
            raise failure from None
        for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
            text = reply.get(key)
            if isinstance(text, str) and text:
                stream.write(text)
        return reply

    def value(self, message, what, args=(), kwargs=None):
        """The value an op gave, decoded (a call's `args` and `kwargs` changed
        in place as the solution changed them); the solution's exception raised."""
        __tracebackhide__ = True
        reply = self.request(message)
        if "raised" in reply:
            raise self.exception(what, reply["raised"])
        for key, problem in (("unusable", "cannot be used"), ("unsendable", "gave a value that cannot cross")):
            if key in reply:
                error = reply[key] if isinstance(reply[key], dict) else {}
                raise AssertionError(f"the solution's {what} {problem}: {error.get('type')}: {error.get('message')}")
        if "value" not in reply:
            raise self._broken()
        try:
            value = self.decode(reply["value"])
            for key, tree in reply.get("sync") or ():
                old = args[key] if type(key) is int and 0 <= key < len(args) else (
                    (kwargs or {}).get(key) if type(key) is str else None)
                if old is not None:
                    _sync_into(old, self.decode(tree), 0)
        except (TypeError, ValueError, KeyError, IndexError, RecursionError, rbwire.WireError):
            raise self._broken() from None
        return value

    def exception(self, what, error):
        """The solution's exception as the tests see it: the stand-in of its own
        class when the module defines it, else its nearest builtin (rbcheck)."""
        if isinstance(error, dict) and error.get("solution_class") in self.exceptions:
            exc = self.exceptions[error["solution_class"]](str(error.get("message")))
            exc.__cause__ = rbcheck.SolutionTraceback(f"{what} raised {error.get('type')}: {error.get('message')}\n"
                                                      f"{error.get('traceback', '')}".rstrip())
            return exc
        failure = rbcheck.solution_exception(what, error)
        if isinstance(failure, rbcheck.RunFailure):  # SystemExit, KeyboardInterrupt: the worker asked to end
            self.worker.close()
            self.failure = failure
        return failure

    def _broken(self):
        self.worker.close()
        self.failure = rbcheck.WorkerError("the solution's process broke the protocol")
        return self.failure

    # -- values ---------------------------------------------------------------

    def encode(self, value):
        return rbhandle.encode(value, self._ref)

    def _ref(self, obj):
        if type(obj) is Handle and obj._process is self:
            return {"$": "ref", "v": [obj._id, *obj._path]}
        raise TypeError(f"a {type(obj).__name__} cannot cross to the solution's process (only plain data and "
                        "the solution's own objects)")

    def decode(self, tree):
        return rbhandle.decode(tree, self._proxy)

    def _proxy(self, tag, body):
        if tag == "handle" and len(body) == 3 and type(body[0]) is int and type(body[1]) is str \
                and type(body[2]) is str:
            proxy = self.proxies.get(body[0])
            if proxy is None:
                proxy = Handle(self, body[0], body[1], body[2][:200])
                self.proxies[body[0]] = proxy
            return proxy
        if tag == "method" and len(body) == 2 and type(body[0]) is int and type(body[1]) is str:
            # It keeps its owner's handle alive: `push = Stack().push` must go on working.
            return Handle(self, body[0], "function", body[1][:200], (body[1],), self.proxies.get(body[0]))
        raise rbwire.WireError(f"bad {tag}")

    def release(self, number):
        self.released.append(number)

def _sync_into(old, new, depth):
    """`old` (the test's list, dict or set) made equal to `new`, in place;
    containers inside kept where both sides have one, so rows of a matrix the
    test holds change too."""
    if isinstance(old, list) and type(new) is list:
        if len(old) == len(new) and depth < _SYNC_DEPTH:
            for i, (a, b) in enumerate(zip(list.__iter__(old), new)):
                if isinstance(a, (list, dict, set)) and type(b) is type(a).__mro__[-2]:
                    _sync_into(a, b, depth + 1)
                else:
                    list.__setitem__(old, i, b)
        else:
            list.__setitem__(old, slice(None), new)
    elif isinstance(old, dict) and type(new) is dict:
        for k in [k for k in dict.keys(old) if k not in new]:
            dict.__delitem__(old, k)
        for k, b in new.items():
            a = dict.get(old, k)
            if isinstance(a, (list, dict, set)) and type(b) is type(a).__mro__[-2] and depth < _SYNC_DEPTH:
                _sync_into(a, b, depth + 1)
            else:
                dict.__setitem__(old, k, b)
    elif isinstance(old, set) and type(new) is set:
        set.clear(old)
        set.update(old, new)


def hide_test_sources():
    """Empties the test modules pytest has imported, before the completion
    starts: their source (the expected values) is then only in this process's
    memory, which the completion (same uid) cannot read, not in a file it can
    open. Their lines stay in linecache for pytest's failure messages (an
    entry without mtime is never checked against the file). The supervisor
    takes an emptied test file for the one it wrote (rbrun.digest_files)."""
    wanted = set(sys.argv[5:])
    for path in _imported_test_files(wanted):
        try:
            with open(path, "rb") as f:
                data = f.read()
            lines = data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
            linecache.cache[path] = (len(data), None, lines, path)
            directory = os.path.dirname(path)
            os.chmod(directory, 0o755)
            os.chmod(path, 0o644)
            os.truncate(path, 0)
            os.chmod(path, 0o444)
            os.chmod(directory, 0o555)
        except OSError:
            continue  # the grade does not depend on it: what the file held is the tests' own


def _imported_test_files(wanted):
    """The test files (of `wanted`) imported so far. The one importing
    `solution` is on the stack (its module, or a function or fixture of it):
    found there without a walk of sys.modules, which reads every module the
    zygote holds and, in a fork of it, copies their pages (2 ms a run). Any
    other is only found by that walk, made when the stack does not hold them all."""
    found = set()
    frame = sys._getframe(1)
    while frame is not None and len(found) < len(wanted):
        path = frame.f_globals.get("__file__")
        if path in wanted:
            found.add(path)
        frame = frame.f_back
    if len(found) < len(wanted):
        found.update(path for path in (getattr(m, "__file__", None) for m in list(sys.modules.values()))
                     if path in wanted)
    return sorted(found)


def _import_failure(failure):
    """What importing `solution` raises here when the solution's import raised
    there: the same builtin class and message (ImportError and
    ModuleNotFoundError grade as import_error, others as collection_error,
    MemoryError as out_of_memory); SystemExit, KeyboardInterrupt, pytest's
    skip or the solution's own BaseException stay the SolutionImportError."""
    error = getattr(failure, "error", {})
    cls = getattr(builtins, str(error.get("builtin")), None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(f"{error.get('message')}\n(in the solution's process)\n{error.get('traceback', '')}".rstrip())
        except Exception:  # noqa: BLE001 - a builtin that wants more than a message (UnicodeDecodeError)
            exc = None
        if type(exc) is cls:
            return exc
    return failure


def _again(failure):
    """A copy of a stored failure to raise once more (a raised exception keeps its traceback)."""
    try:
        copy = type(failure)(*failure.args)
    except Exception:  # noqa: BLE001
        return failure.with_traceback(None)
    return copy


def _probed(name):
    return name.startswith(_PROBED_PREFIXES)


class Handle:
    """One of the solution's objects, held in its process. Every use is a
    request there; what comes back crosses by rbhandle's rules.

    `==` and ordering consult the solution only between two of its objects
    (the test chose to compare them); a handle against plain data compares the
    plain base value of a builtin's subclass here, and is unequal otherwise.
    `in`, `len`, indexing, iteration and truth are the solution's answers, as
    they would be in process. Identity holds while the test keeps the handle."""

    __slots__ = ("_process", "_id", "_kind", "_type", "_path", "_owner", "__weakref__")

    def __init__(self, process, number, kind, type_name, path=(), owner=None):
        object.__setattr__(self, "_process", process)
        object.__setattr__(self, "_id", number)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_path", tuple(path))
        object.__setattr__(self, "_owner", owner)

    def __del__(self):
        if not self._path:
            try:
                self._process.release(self._id)
            except Exception:  # noqa: BLE001 - interpreter teardown
                pass

    def _what(self):
        return f"{self._type}" if not self._path else f"{self._path[-1]}()"

    def _apply(self, fn, *args):
        __tracebackhide__ = True
        process = self._process
        return process.value({"op": "apply", "fn": fn, "args": [process.encode(a) for a in args]},
                             f"{self._what()} ({fn})")

    # -- calls and attributes -------------------------------------------------

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        process = self._process
        message = {"op": "call", "t": [self._id, *self._path], "args": [process.encode(a) for a in args],
                   "kwargs": process.encode(dict(kwargs))}
        return process.value(message, self._what(), args, kwargs)

    def __getattr__(self, name):
        __tracebackhide__ = True
        if _probed(name):
            raise AttributeError(name)
        return self._process.value({"op": "getattr", "t": [self._id, *self._path], "name": name},
                                   f"{self._type}.{name}")

    def __setattr__(self, name, value):
        __tracebackhide__ = True
        process = self._process
        process.value({"op": "setattr", "t": [self._id, *self._path], "name": name, "value": process.encode(value)},
                      f"{self._type}.{name}")

    def __delattr__(self, name):
        __tracebackhide__ = True
        self._process.value({"op": "delattr", "t": [self._id, *self._path], "name": name}, f"{self._type}.{name}")

    def __mro_entries__(self, bases):
        raise TypeError(f"the solution's class {self._type} lives in the solution's process: a test cannot "
                        "subclass it (use the label option in_process)")

    # -- protocols -------------------------------------------------------------

    def __repr__(self):
        try:
            text = self._apply("repr", self)
        except Exception:  # noqa: BLE001 - the solution's __repr__ raised: still a text to show
            text = None
        return text if type(text) is str else f"<solution {self._type} object>"

    def __str__(self):
        text = self._apply("str", self)
        if type(text) is not str:
            raise TypeError("__str__ returned non-string")
        return text

    def __format__(self, spec):
        return self._apply("format", self, spec)

    def __bool__(self):
        return self._apply("bool", self) is True

    def __len__(self):
        return self._apply("len", self)

    def __iter__(self):
        return self._apply("iter", self)

    def __next__(self):
        return self._apply("next", self)

    def __reversed__(self):
        return self._apply("reversed", self)

    def __contains__(self, item):
        return self._apply("contains", self, item) is True

    def __getitem__(self, key):
        return self._apply("getitem", self, key)

    def __setitem__(self, key, value):
        self._apply("setitem", self, key, value)

    def __delitem__(self, key):
        self._apply("delitem", self, key)

    def __hash__(self):
        return hash((Handle, self._id, self._path))

    def __dir__(self):
        names = self._apply("dir", self)
        return names if isinstance(names, list) else []

    def __enter__(self):
        return self._apply("enter", self)

    def __exit__(self, *exc_info):
        return self._apply("exit", self, None, None, None)  # the exception itself cannot cross

    def __instancecheck__(self, obj):
        try:
            return self._apply("isinstance", obj, self) is True
        except TypeError:  # an object of the tests' own: never an instance of the solution's class
            return False

    def __subclasscheck__(self, cls):
        try:
            return self._apply("issubclass", cls, self) is True
        except TypeError:
            return False

    # -- comparisons: see the class's docstring ----------------------------------

    def _plain(self):
        answer = self._process.value({"op": "plain", "t": [self._id, *self._path]}, f"{self._type} (value)")
        return answer.get("value") if type(answer) is dict and answer.get("is") is True else NotImplemented

    def _compare(self, fn, other, local):
        if type(other) is Handle:
            return self._apply(fn, self, other)
        mine = self._plain()
        return NotImplemented if mine is NotImplemented else local(mine, other)

    def __eq__(self, other):
        return self._compare("eq", other, lambda a, b: a == b)

    def __ne__(self, other):
        result = self._compare("ne", other, lambda a, b: a != b)
        return True if result is NotImplemented and type(other) is not Handle else result

    def __lt__(self, other):
        return self._compare("lt", other, lambda a, b: a < b)

    def __le__(self, other):
        return self._compare("le", other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compare("gt", other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._compare("ge", other, lambda a, b: a >= b)

    # -- arithmetic: the solution computes, the result crosses as data ----------

    def __neg__(self):
        return self._apply("neg", self)

    def __pos__(self):
        return self._apply("pos", self)

    def __abs__(self):
        return self._apply("abs", self)

    def __invert__(self):
        return self._apply("invert", self)

    def __int__(self):
        return self._apply("int", self)

    def __float__(self):
        return self._apply("float", self)

    def __index__(self):
        return self._apply("index", self)

    def __complex__(self):
        return self._apply("complex", self)

    def __round__(self, *args):
        return self._apply("round", self, *args)


def _binary(fn):
    def forward(self, other):
        try:
            return self._apply(fn, self, other)
        except TypeError:
            return NotImplemented

    def backward(self, other):
        try:
            return self._apply(fn, other, self)
        except TypeError:
            return NotImplemented

    return forward, backward


for _fn, _name in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                   ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"), ("matmul", "matmul"),
                   ("and_", "and"), ("or_", "or"), ("xor", "xor"), ("lshift", "lshift"), ("rshift", "rshift")):
    _forward, _backward = _binary(_fn)
    setattr(Handle, f"__{_name}__", _forward)
    setattr(Handle, f"__r{_name}__", _backward)
del _fn, _name, _forward, _backward
