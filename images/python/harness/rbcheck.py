"""Checks for generated tests (assert lists, check functions, stdin/stdout and
call-based cases), run in the pytest process.

The completion never runs in this process. Its functions run in a worker
process (rbworker.py) and come back as plain data; its programs run as
separate processes fed each case's input. The cases and expected values
arrive from the supervisor through an in-memory fd (`load`), never through a
file, so the completion cannot read what it will be compared with.

Test data, one JSON object:
    mode            "stdio" | "call" | "python"
    cases           stdio:  [{"input": str, "output": str}]
                    call:   [{"name": str, "args": [...], "output": value}]
                    python: [{"source": str}]  (an assert, or a statement that asserts)
    setup           python: module source run once in the tests' namespace
    proxies         python: {name in the tests: name of the solution's function}
    modules         python: free names only used as `name.attr` (a module, if one exists)
    case_timeout_s  per test
    float_tolerance relative and absolute, for floats in outputs
    compare         stdio and call: "tokens" (absent: the default), "exact" or "float" (rbcompare)
"""

import builtins
import importlib
import importlib.util
import json
import math
import os
import select
import selectors
import signal
import subprocess
import sys
import time

import rbcompare
import rbprograms
import rbprotocol
import rbstack
import rbwire
from rbcgroup import oom_kills

WORKER = "/opt/rewardbox/rbworker.py"
SOLUTION = rbprotocol.SOLUTION_PATH
SHOW_CHARS = 300
OUTPUT_CAP_BYTES = 16 << 20
# As rbrun.child_env: one thread per numerical library, within the pids limit.
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": rbprotocol.WORK_DIR, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

DATA = None
# In a pooled container, a process forked from the warm zygote before this
# process read any secret, ready to become the first worker (rbzygote.Seed).
SEED = None
_namespace = None
_worker = None
_programs = None  # the seed serving the run's programs (rbprograms), False once it is gone
_deadline = math.inf
_oom_kills_at_start = None
_oom_struck = False
_struck = None  # the RunFailure the current case hit, if any
# Exceptions that would end the tests' process (KeyboardInterrupt ends pytest's
# session; SystemExit, raised here, is caught by any bare `except:`).
_PROCESS_ENDING = frozenset({"SystemExit", "KeyboardInterrupt"})


class RunFailure(BaseException):
    """A test stopped by the run, not by an answer: the case's deadline, the
    solution's process ending, the memory limit.

    A BaseException, so that a test's `except Exception` or `except
    AssertionError` (a check that expects the solution to assert) cannot take
    it for the solution's answer; what a bare `except:` or
    `pytest.raises(BaseException)` swallows, `check` raises again when the
    case's body returns. pytest reports it as the test's failure (only
    KeyboardInterrupt and its own Exit end a session), and the record names it
    `rbcheck.<class>`, which the host grades (sandbox/verdict.py, rewards/grade.py).
    """


class CaseTimeout(RunFailure):
    """The case ran past its time limit."""


class WorkerError(RunFailure):
    """The solution's process ended (exit, signal, from any thread; or asked
    to: SystemExit or KeyboardInterrupt out of a call) or broke the protocol
    without answering: the host grades the run as killed."""


class SolutionImportError(WorkerError):
    """Importing the solution raised: a crash of the completion (the host grades
    a run where every test failed this way as an import error)."""


def load(raw):
    global DATA, _oom_kills_at_start
    DATA = json.loads(raw)
    _oom_kills_at_start = oom_kills()


def _out_of_memory():
    """Whether the kernel's OOM killer has struck in this container since the
    tests started. The run's verdict is then out_of_memory, whatever the rest
    of its tests do, so they fail at once instead of filling the memory again."""
    global _oom_struck
    if not _oom_struck and _oom_kills_at_start is not None:
        _oom_struck = (oom_kills() or 0) > _oom_kills_at_start
    return _oom_struck


class SolutionTraceback(Exception):
    """The cause of an exception re-raised from the solution's process: what
    it raised there, and where. A cause, not a note: `pytest.raises(match=)`
    reads notes."""


class OutOfMemory(WorkerError):
    """The solution's process was killed by the kernel's OOM killer (graded out_of_memory)."""


def _raise_if_out_of_memory():
    __tracebackhide__ = True
    if _out_of_memory():
        raise OutOfMemory("the solution ran out of memory (killed by the kernel's OOM killer)")


def check(index):
    """The body of generated test number `index`. A RunFailure the case hit
    fails it, whatever the case's own code made of it."""
    __tracebackhide__ = True  # the failure message, not the harness's frames
    global _deadline, _struck
    # The solution's processes (same uid) may signal this one: a SIGINT ends it
    # (graded killed), never surfacing as a KeyboardInterrupt that a bare `except:` swallows.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _deadline = time.monotonic() + DATA["case_timeout_s"]
    _struck = None
    case = DATA["cases"][index]
    mode = DATA["mode"]
    try:
        if mode == "stdio":
            _check_stdio(case)
        elif mode == "call":
            _check_call(case)
        else:
            _check_python(case)
    except RunFailure:
        _struck = None
        raise
    except BaseException:
        if _struck is None:
            raise
    struck, _struck = _struck, None
    if struck is not None:
        raise struck.with_traceback(None)  # the case caught it and went on: it still fails


def show(value):
    text = repr(value)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + f"... ({len(text)} chars)"


# -- comparisons: the rules are rbcompare's, documented in the README ("Comparison rules")

def _compare():
    """The label's comparison mode and tolerance."""
    return DATA.get("compare", rbcompare.DEFAULT_MODE), DATA["float_tolerance"]


# -- stdin/stdout ----------------------------------------------------------

def _check_stdio(case):
    __tracebackhide__ = True
    stdout, stderr, code = run_program(case["input"])
    if code != 0:
        raise AssertionError(f"the program exited with {_status(code)} on input {show(case['input'])}\n"
                             f"stderr: {show(stderr.decode('utf-8', 'replace')[-2000:])}")
    got = stdout.decode("utf-8", "replace")
    if not rbcompare.same_output(got, case["output"], *_compare()):
        raise AssertionError(f"wrong output for input {show(case['input'])}\n"
                             f"expected: {show(case['output'])}\ngot:      {show(got)}")


def _status(code):
    return f"signal {-code}" if code < 0 else f"status {code}"


def run_program(stdin_text):
    """Run the solution as a program on one input, within the case's deadline.
    Returns (stdout, stderr, returncode)."""
    __tracebackhide__ = True
    _raise_if_out_of_memory()
    feed = os.memfd_create("stdin")
    os.write(feed, stdin_text.encode("utf-8", "surrogatepass"))
    os.lseek(feed, 0, os.SEEK_SET)
    try:
        child = _start_program(feed)
    finally:
        os.close(feed)
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ, out)
    sel.register(child.stderr, selectors.EVENT_READ, err)
    try:
        while sel.get_map():
            left = _deadline - time.monotonic()
            if left <= 0:
                raise CaseTimeout(f"the program ran past {DATA['case_timeout_s']} s on input {show(stdin_text)}")
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif len(key.data) < OUTPUT_CAP_BYTES:
                    key.data.extend(chunk)
            if len(out) >= OUTPUT_CAP_BYTES:
                raise AssertionError(f"the program wrote more than {OUTPUT_CAP_BYTES} bytes")
        code = child.wait(timeout=max(0.0, _deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise CaseTimeout(f"the program ran past {DATA['case_timeout_s']} s on input {show(stdin_text)}") from None
    finally:
        _kill_group(child)
        child.stdout.close()
        child.stderr.close()
    return bytes(out), bytes(err), code


def _start_program(feed):
    """The solution started as a program on stdin `feed`: another language's
    run argv (its binary, compiled once for the sample), or a fork of the seed
    when the run has one (rbprograms), else a new interpreter."""
    global _programs
    if DATA.get("run") is not None:
        return subprocess.Popen(DATA["run"], stdin=feed, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=rbprotocol.WORK_DIR, env={**ENV, **DATA.get("env", {})}, start_new_session=True,
                                preexec_fn=rbstack.unlimited_stack)
    if _programs is None and SEED is not None:
        _programs = _take_seed().start_programs()
    if _programs:
        try:
            return _programs.start(feed)
        except rbprograms.ProgramServerGone as exc:  # a program killed it: the next ones are not the worse for it
            _programs.close()
            _programs = False
            if isinstance(exc, rbprograms.ProgramLost):  # this input's program, most likely: its input is spent
                raise AssertionError("the program was killed (signal 9) with the process that started it, "
                                     "before its own end could be known") from None
    return subprocess.Popen([sys.executable, "-I", "-B", SOLUTION], stdin=feed, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=rbprotocol.WORK_DIR, env=ENV, start_new_session=True)


def _kill_group(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    child.wait()


# -- calls into the solution ---------------------------------------------------

def _take_seed():
    global SEED
    seed, SEED = SEED, None
    return seed


class Worker:
    """The solution imported once in its own process, answering calls.

    Replies are untrusted plain data; what the tests see of them is decided
    here: a value, the solution's exception (`solution_exception`), or a
    RunFailure when the process ended, broke the protocol or ran out of time.
    """

    def __init__(self, greet=True):
        __tracebackhide__ = True
        self.process = None
        self.requests = self.replies = -1
        self.greeted = False
        try:
            requests_r, self.requests = os.pipe()
            self.replies, replies_w = os.pipe()
            seed = _take_seed()
            self.process = seed.start(requests_r, replies_w) if seed is not None else subprocess.Popen(
                [sys.executable, "-I", "-B", WORKER, str(requests_r), str(replies_w)],
                stdin=subprocess.DEVNULL, cwd=rbprotocol.WORK_DIR, env=ENV, pass_fds=(requests_r, replies_w),
                start_new_session=True)
            os.close(requests_r)
            os.close(replies_w)
        except OSError as exc:  # pipes or processes exhausted: the solution's processes hold them
            self.close()
            raise WorkerError(f"the solution's process could not be started: {exc}") from None
        if greet:
            self.greet()

    def greet(self):
        """Waits for the solution's import to end (the worker's hello), under
        the case's deadline; raises what it failed of."""
        __tracebackhide__ = True
        try:
            hello = self._read()
        except RunFailure:
            self.close()  # an import still running must not go on using the next cases' CPU
            raise
        if "import_error" in hello:
            self.close()
            error = hello["import_error"]
            error = error if isinstance(error, dict) else {}
            failure = SolutionImportError(f"importing the solution failed: {error.get('type')}: "
                                          f"{error.get('message')}\n{error.get('traceback', '')}")
            failure.error = error  # what a pytest module's import of it raises (rbsolution)
            raise failure
        self.greeted = True

    def exchange(self, request):
        """One request, its reply (a dict); a RunFailure if the process ended,
        broke the protocol or ran past the case's deadline."""
        __tracebackhide__ = True
        try:
            rbwire.write_frame(self.requests, request)
        except OSError:
            self._ended()  # the process ended before it could read the request
        return self._read()

    def call(self, name, args, kwargs):
        __tracebackhide__ = True
        reply = self.exchange({"name": name, "args": rbwire.encode(list(args)), "kwargs": rbwire.encode(dict(kwargs))})
        if "raised" in reply:
            raise solution_exception(name, reply["raised"])
        for key, what in (("unusable", "cannot be called"), ("unsendable", "returned a value that cannot be compared")):
            if key in reply:
                error = reply[key] if isinstance(reply[key], dict) else {}
                raise AssertionError(f"the solution's {name}() {what}: {error.get('type')}: {error.get('message')}")
        try:
            return rbwire.decode(reply["value"])
        except (KeyError, TypeError, ValueError, RecursionError, rbwire.WireError):
            raise WorkerError("the solution's process broke the protocol: not a value") from None

    def _read(self):
        __tracebackhide__ = True
        def wait(fd):
            left = _deadline - time.monotonic()
            # poll, not a selector: two a reply, and an epoll selector is three system calls and an fd.
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            # No case deadline (a pytest module's calls): the run's deadline, kept by the supervisor, bounds it.
            if left <= 0 or not poller.poll(None if left == math.inf else math.ceil(left * 1000)):
                raise CaseTimeout(f"the call ran past {DATA['case_timeout_s']} s")

        try:
            reply = rbwire.read_frame(self.replies, wait)
        except EOFError:
            self._ended()
        except (rbwire.WireError, OSError) as exc:
            raise WorkerError(f"the solution's process broke the protocol: {exc}") from None
        if not isinstance(reply, dict):
            raise WorkerError("the solution's process broke the protocol")
        return reply

    def _ended(self):
        """The process closed its end without answering: it is killed (it may
        have closed its pipes and gone on running) and the case fails."""
        __tracebackhide__ = True
        self.close()
        if time.monotonic() >= _deadline:
            raise CaseTimeout(f"the call ran past {DATA['case_timeout_s']} s") from None
        raise WorkerError(f"the solution's process ended ({_status(self.process.returncode)}) "
                          "before answering") from None

    def close(self):
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process is not None:
            _kill_group(self.process)


def solution_exception(name, error):
    """What the tests see of an exception the solution raised in `name`,
    from the reply's plain strings: its nearest builtin class (looked up by
    name in `builtins`) with its message, so that `except ValueError` and
    `pytest.raises(ValueError)` in a check behave as they would around the
    solution's own code; where it came from is its cause (SolutionTraceback).

    SystemExit and KeyboardInterrupt are the solution asking its process to
    end: a WorkerError, as if it had (raised here as themselves they would end
    the tests' process). A solution's own class with no builtin base but
    BaseException, GeneratorExit, or a builtin that cannot be made from one
    message (UnicodeDecodeError, ExceptionGroup): an AssertionError."""
    if not isinstance(error, dict):
        return WorkerError("the solution's process broke the protocol: not an exception")
    kind, message = str(error.get("type")), str(error.get("message"))
    base = str(error.get("builtin") or kind)
    detail = f"{name}() raised {kind}: {message}\n{error.get('traceback', '')}".rstrip()
    if base in _PROCESS_ENDING:
        return WorkerError(f"the solution's process asked to end: {detail}")
    cls = getattr(builtins, base, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(message)
        except Exception:  # noqa: BLE001 - a constructor that wants more than a message
            exc = None
        if type(exc) is cls:
            exc.__cause__ = SolutionTraceback(detail)
            return exc
    return AssertionError(detail)


def call(name, *args, **kwargs):
    """Call the solution's `name` in the worker. A RunFailure costs this case
    (any later call in it fails the same way at once), and the next case
    starts a fresh worker."""
    __tracebackhide__ = True
    global _worker, _deadline, _struck
    if _struck is not None:
        raise _struck.with_traceback(None)
    try:
        _raise_if_out_of_memory()
        if _worker is None:
            _worker = Worker(greet=False)
        if not _worker.greeted:
            _worker.greet()
            # Starting the worker (importing the solution) had its own case_timeout_s;
            # under load it must not eat the time of the case that happened to come first.
            _deadline = time.monotonic() + DATA["case_timeout_s"]
        return _worker.call(name, args, kwargs)
    except RunFailure as failure:
        if _worker is not None:
            _worker.close()
            _worker = None
        # A process the OOM killer took looks like any other that ended.
        _struck = failure if isinstance(failure, OutOfMemory) or not _out_of_memory() else OutOfMemory(
            "the solution ran out of memory (killed by the kernel's OOM killer)")
        raise _struck from None


def start_worker():
    """For labels whose cases call the solution's functions: its worker
    started now, once this process has read its key and test data, so that
    the solution imports while pytest sets the session up, not in the first
    case. That case still waits for the import (`call`), under its deadline."""
    global _worker
    if DATA.get("mode") not in ("call", "python") or _worker is not None:
        return
    # Code of the solution runs from here on: a SIGINT it sends ends this process (graded killed).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        _worker = Worker(greet=False)
    except RunFailure:
        pass  # the first case that calls it starts it again, and fails as it would have


class Proxy:
    """Stands in the tests' namespace for a function of the solution."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return call(self._name, *args, **kwargs)

    def __repr__(self):
        return f"<solution.{self._name}>"


def _check_call(case):
    __tracebackhide__ = True
    got = call(case["name"], *case["args"])
    want = case["output"]
    if rbcompare.same_return(got, want, *_compare()):
        return
    raise AssertionError(f"{case['name']}({', '.join(show(a) for a in case['args'])})\n"
                         f"expected: {show(want)}\ngot:      {show(got)}")


def _check_python(case):
    global _namespace
    __tracebackhide__ = True
    if _namespace is None:
        namespace = {"__name__": "rewardbox_tests"}
        try:
            exec(compile(DATA.get("setup") or "", "<setup>", "exec"), namespace)
        except Exception as exc:  # the label's code: every test fails with its reason, none half set up
            _namespace = f"the label's setup failed: {type(exc).__name__}: {show(str(exc))}"
        else:
            # Into the setup's own globals: functions it defines (check) call the solution too. A name
            # the label's code defines stays the label's (a star import, a helper): never the solution's.
            namespace.update({alias: _module_or_proxy(alias, name) for alias, name in DATA["proxies"].items()
                              if alias not in namespace})
            _namespace = namespace
    if isinstance(_namespace, str):
        raise AssertionError(_namespace)
    namespace = dict(_namespace)
    try:
        exec(compile(case["source"], "<test>", "exec"), namespace)
    except AssertionError as exc:
        if str(exc):
            raise
        raise AssertionError(f"failed: {show(case['source'])}") from None


def _module_or_proxy(alias, name):
    """A free name of the tests: a standard module the dataset forgot to
    import (MBPP asserts use `math.` after the solution imported it), when the
    tests only ever read its attributes; else the solution's function."""
    if alias in DATA.get("modules", ()) and importlib.util.find_spec(alias) is not None:
        return importlib.import_module(alias)
    return Proxy(name)
