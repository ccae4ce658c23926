"""The pytest child: runs the tests with a configuration the grader owns and
sends one signed record per event to the supervisor (the collected list in
as many records as it takes, each marked whether `more` follow).

argv: KEY_FD RECORDS_FD DATA_FD SOLUTION TEST_FILE...
    DATA_FD   -1: no test data (a dataset's pytest module)
    SOLUTION  "worker": the module's `import solution` gets rbsolution's
              stand-in, the completion runs in a process of its own;
              "in-process": it is imported here (the label's `in_process`)

The key is read and its fd closed before collection, that is before any
completion code is imported, so writing to the records pipe, pre-seeding it or
exiting early gains nothing: the supervisor drops records whose signature does
not match and counts them as tampering, and the host counts missing tests as
failed.

The completion never runs in this process, unless a pytest label asks for
it (`in_process`: then code that goes looking for the plugin through gc or
patches pytest's reporting can forge results; README, threat model). A
dataset's pytest module gets a stand-in `solution` (rbsolution); generated
tests (asserts, check functions, stdin/stdout, call-based) call it through
rbcheck and compare plain data, with the expected values read from DATA_FD
into this process's memory.
"""

import faulthandler
import hashlib
import hmac
import json
import os
import sys

import _pytest.main as _pytest_main
import pytest
from _pytest import timing
from _pytest._code import ExceptionInfo
from _pytest.config import ExitCode, UsageError, _prepareconfig
from _pytest.main import Failed, Session
from _pytest.outcomes import exit

sys.path.insert(0, "/opt/rewardbox")  # -I leaves the script's directory out
import rbbareitems  # noqa: E402
import rbgenerated  # noqa: E402
import rblibc  # noqa: E402
import rbprotocol  # noqa: E402
import rbsolution  # noqa: E402
import rbtraceback  # noqa: E402

WORK_DIR = rbprotocol.WORK_DIR
HARNESS_DIR = rbprotocol.HARNESS_DIR  # rbcheck, for generated tests
# Every text a record carries is cut here, so that a record stays below the
# supervisor's MAX_RECORD_BYTES (64 KiB) however long a test's id or failure is:
# 2,000 + 260 + 2 x 500 + 200 characters, at most 12 bytes each in JSON.
MESSAGE_CHARS = 2000  # the tail: pytest's failure text ends with the error
NODEID_CHARS = 240  # the head, then a digest of the rest: cut ids stay distinct
NAME_CHARS = 500  # a test function's or class's name (rewardbox.sandbox.protocol cuts there too)
EXC_TYPE_CHARS = 200
TERMINAL_CHARS = 2000  # the tail of pytest's own terminal output
SHORT_TRACEBACK_SOURCE_BYTES = 8 * 1024  # see traceback_style
# The collected list goes out in records of about this size: 10,000 ids are many records, never one too long.
COLLECTED_CHUNK_BYTES = 16 * 1024


class RecordPlugin:
    """Registered before pytest is configured (a pooled container's zygote
    builds the session before any run exists), armed with the run's key and
    records fd in the test process, before collection."""

    def __init__(self, key=None, fd=None):
        self._terminal = Tail(TERMINAL_CHARS)
        self._reporter = None
        # Bound now, so later monkeypatching of os/json/hmac does not reach us.
        self._new_mac = hmac.new
        self._write = os.write
        self._dumps = json.dumps
        self._sign = None
        self._fd = None
        self._items = {}
        self._collect_errors = {}
        self._phases = {}
        if key is not None:
            self.arm(key, fd)

    def arm(self, key, fd):
        new_mac = self._new_mac
        self._sign = lambda body: new_mac(key, body, hashlib.sha256).hexdigest().encode()
        self._fd = fd
        if self._reporter is not None:  # the session's clock starts with the run, not with the zygote
            self._reporter._session_start = timing.Instant()

    def _emit(self, record):
        body = self._dumps(record, separators=(",", ":")).encode()
        self._write(self._fd, self._sign(body) + b" " + body + b"\n")

    @pytest.hookimpl(trylast=True)  # after the terminal plugin made its reporter
    def pytest_configure(self, config):
        """pytest's own report (progress, tracebacks, summary) goes to a tail
        kept here, not to the test process's stdout: the supervisor counts that
        stream against the solution's output limit, and pytest's account of 220
        long failures is ours, not the solution's output."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)
            self._reporter = pytest.TerminalReporter(config, self._terminal)
            config.pluginmanager.register(self._reporter, "terminalreporter")

    def terminal(self):
        """The last record: the tail of pytest's own report, whole once the session finished."""
        self._emit({"event": "terminal", "text": self._terminal.text()})

    def pytest_collection_finish(self, session):
        for item in session.items:
            cls = getattr(item, "cls", None)
            self._items[item.nodeid] = {
                "name": _cut(getattr(item, "originalname", item.name), NAME_CHARS),
                "cls": _cut(cls.__name__, NAME_CHARS) if cls is not None else None,
            }
        chunk, size = [], 0
        for nodeid in self._items:
            nodeid = _nodeid(nodeid)
            length = len(self._dumps(nodeid)) + 1
            if chunk and size + length > COLLECTED_CHUNK_BYTES:
                self._emit({"event": "collected", "nodeids": chunk, "more": True})
                chunk, size = [], 0
            chunk.append(nodeid)
            size += length
        self._emit({"event": "collected", "nodeids": chunk, "more": False})

    def pytest_exception_interact(self, node, call, report):
        if report.when == "collect":
            exc = call.excinfo.value
            # pytest wraps an ImportError of the test module in its own CollectError.
            cause = exc.__cause__ or exc.__context__ if call.excinfo.typename == "CollectError" else None
            self._collect_errors[node.nodeid] = type(cause or exc).__name__

    def pytest_collectreport(self, report):
        if report.failed:
            self._emit({
                "event": "collect_error",
                "nodeid": _nodeid(report.nodeid),
                "exc_type": _cut(self._collect_errors.get(report.nodeid), EXC_TYPE_CHARS),
                "message": _tail(str(report.longrepr), MESSAGE_CHARS),
            })

    def pytest_runtest_logreport(self, report):
        phases = self._phases.setdefault(report.nodeid, [])
        phases.append(report)

    def pytest_runtest_logfinish(self, nodeid, location):
        reports = self._phases.pop(nodeid, [])
        outcome, message, exc_type = "passed", None, None
        for rep in reports:
            if getattr(rep, "wasxfail", None) is not None:
                outcome = "xfailed" if rep.skipped else "xpassed"
            elif rep.failed:
                outcome = "failed" if rep.when == "call" else "error"
            elif rep.skipped:
                outcome = "skipped"
            else:
                continue
            message = _tail(str(rep.longrepr), MESSAGE_CHARS) if rep.longrepr else None
            exc_type = _cut(_exc_type(rep), EXC_TYPE_CHARS)
            break
        call = [rep for rep in reports if rep.when == "call"]
        info = self._items.get(nodeid, {})
        self._emit({
            "event": "test",
            "nodeid": _nodeid(nodeid),
            "name": info.get("name"),
            "cls": info.get("cls"),
            "outcome": outcome if reports else "error",
            "duration_s": round(call[0].duration, 6) if call else 0.0,
            "message": message,
            "exc_type": exc_type,
        })

    def pytest_sessionfinish(self, session, exitstatus):
        self._emit({"event": "finished", "exitstatus": int(exitstatus)})


class Tail:
    """A text stream that keeps only its last `keep` characters."""

    def __init__(self, keep):
        self.keep = keep
        self._text = ""

    def write(self, text):
        self._text = (self._text + text)[-self.keep:]
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def text(self):
        return self._text


def _cut(text, chars):
    return text if text is None or len(text) <= chars else text[:chars]


def _tail(text, chars):
    return text if len(text) <= chars else text[-chars:]


def _nodeid(nodeid):
    """A test id of at most NODEID_CHARS + 20 characters: longer ones (a
    parametrized test's long argument) keep their head and a digest of the
    whole, so that two cut ids are still told apart."""
    if len(nodeid) <= NODEID_CHARS:
        return nodeid
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{nodeid[:NODEID_CHARS]}...#{digest}"


def _exc_type(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None or not crash.message:
        return None
    return crash.message.split(":", 1)[0].strip() or None


class PreparedSession:
    """pytest configured and its session started under our fixed ini, rootdir
    and options, before any run exists: nothing in it depends on a sample. A
    pooled container's zygote builds it once and every test process is a fork
    (rbzygote.py), which saves pytest's set-up per run (the plugins' hooks and
    fixtures, the parser, the config: most of a small run's cost); a fresh
    interpreter builds it first (`main`). A run then only arms the records
    plugin, sets its test files and traceback style, collects and runs.

    `fds` are the files the configured session holds open (logging's
    /dev/null handler): a test process must keep them, not close them and let
    their numbers be reused by a pipe that pytest would then write its log to."""

    def __init__(self):
        before = _open_fds()
        rbtraceback.install()
        self.plugin = RecordPlugin()
        self.generated = rbgenerated.GeneratedTests()
        self.bare_items = rbbareitems.BareItems()
        self.solution_failures = rbsolution.FailurePlugin()
        self.config = _prepareconfig(pytest_args([], tb="line"), plugins=[
            self.plugin, self.generated, self.bare_items, self.solution_failures])
        self.config._do_configure()
        self.session = Session.from_config(self.config)
        self.session.exitstatus = ExitCode.OK
        self.config.hook.pytest_sessionstart(session=self.session)
        self.fds = frozenset(_open_fds() - before)

    def run(self, test_files, tb):
        """pytest's own session protocol (_pytest.main.wrap_session and _main,
        pytest 8.4, pinned in the image) from collection on: the same exit
        statuses and hooks for every way a session ends
        (tests/docker/test_prepared_session.py holds it to pytest.main). Not
        the config's clean-up after unconfigure (garbage-collection passes for
        warnings nobody reads, undoing patches): the process exits after this run."""
        config, session = self.config, self.session
        config.option.tbstyle = tb
        config.args = list(test_files)
        try:
            try:
                session.exitstatus = _pytest_main._main(config, session) or 0
            except UsageError:
                session.exitstatus = ExitCode.USAGE_ERROR
                raise
            except Failed:
                session.exitstatus = ExitCode.TESTS_FAILED
            except (KeyboardInterrupt, exit.Exception):
                excinfo = ExceptionInfo.from_current()
                status = ExitCode.INTERRUPTED
                if isinstance(excinfo.value, exit.Exception) and excinfo.value.returncode is not None:
                    status = excinfo.value.returncode
                config.hook.pytest_keyboard_interrupt(excinfo=excinfo)
                session.exitstatus = status
            except BaseException:
                session.exitstatus = ExitCode.INTERNAL_ERROR
                excinfo = ExceptionInfo.from_current()
                try:
                    config.notify_exception(excinfo, config.option)
                except exit.Exception as exc:
                    if exc.returncode is not None:
                        session.exitstatus = exc.returncode
                    sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
                else:
                    if isinstance(excinfo.value, SystemExit):
                        sys.stderr.write("mainloop: caught unexpected SystemExit!\n")
        except UsageError as exc:  # as pytest.main reports it
            for message in exc.args:
                sys.stderr.write(f"ERROR: {message}\n")
        finally:
            excinfo = None
            os.chdir(session.startpath)
            try:
                config.hook.pytest_sessionfinish(session=session, exitstatus=session.exitstatus)
            except exit.Exception as exc:
                if exc.returncode is not None:
                    session.exitstatus = exc.returncode
                sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
            config.hook.pytest_unconfigure(config=config)
            self.plugin.terminal()
        return int(session.exitstatus)


def _open_fds():
    """This process's open fds (not the one the listing itself used)."""
    listed = [int(fd) for fd in os.listdir("/proc/self/fd")]
    return {fd for fd in listed if _is_open(fd)}


def _is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def main(prepared=None):
    """argv as the module's docstring says. `prepared`: a session built before
    this run (a pooled container's zygote); else it is built here, first."""
    # The expected values of generated tests live in this process's memory: keep
    # the completion's processes (same uid) out of /proc/<pid>/mem and fd.
    rblibc.set_dumpable(False)
    key_fd, records_fd, data_fd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    if prepared is None:
        prepared = PreparedSession()
    # A crash of this process tells where on its stderr (pytest's faulthandler
    # plugin would, on the stderr it saw when configured: the zygote's).
    faulthandler.enable(file=sys.stderr)
    with os.fdopen(key_fd, "rb") as f:
        key = f.read()
    prepared.plugin.arm(key, records_fd)
    del key
    sys.path.insert(0, HARNESS_DIR)  # -I leaves the script's directory out
    test_files = sys.argv[5:]
    if data_fd >= 0:
        import rbcheck

        with os.fdopen(data_fd, "rb") as f:
            rbcheck.load(f.read())
            # Emptied, not only closed: the harness's other processes held it too (the supervisor,
            # the zygote, the seed) and may not have closed theirs yet, and under gVisor a
            # same-user process can open a non-dumpable one's /proc/<pid>/fd. Nothing of the
            # completion runs before this line.
            os.ftruncate(data_fd, 0)
        prepared.generated.arm(test_files, rbcheck.DATA, WORK_DIR)
        rbcheck.start_worker()
    else:
        prepared.bare_items.arm()

    if data_fd < 0 and sys.argv[4] == "in-process":
        # The label asked for the old way: the completion is imported here as `solution`.
        # After pytest and the stdlib, so files in the work dir shadow neither.
        sys.path.append(WORK_DIR)
    elif data_fd < 0:
        # The stand-in. The work dir stays off the path, as for generated tests:
        # modules the completion plants there cannot reach this process.
        rbsolution.install(prepared.solution_failures)

    sys.exit(prepared.run(test_files, traceback_style(test_files, generated=data_fd >= 0)))


def traceback_style(test_files, generated):
    """How failures are told: "short" (the failing line of the test, then the
    error) for a dataset's small pytest module; "line" (the error alone) for
    generated tests, whose failing line is always `rbcheck.check(i)`, and for
    large modules. pytest parses the whole module again for each failure it
    shows in "short": 2,000 failing cases of a 2,000-test module take minutes,
    and a wrong answer would run into the deadline instead of failing."""
    if generated:
        return "line"
    size = sum(os.path.getsize(path) for path in test_files if os.path.isfile(path))
    return "short" if size <= SHORT_TRACEBACK_SOURCE_BYTES else "line"


def pytest_args(test_files, rootdir=WORK_DIR, tb="short"):
    return [
        "-c", "/opt/rewardbox/pytest.ini",  # our ini: none from the work dir
        "--rootdir", rootdir,
        "--noconftest",
        "--import-mode=importlib",  # the tests' directory stays off sys.path: nothing planted there is imported
        "-p", "no:cacheprovider",
        "-p", "no:stepwise",
        "-p", "no:faulthandler",  # enabled by main() on the run's own stderr
        "--capture=no",  # output goes to the supervisor, which caps it
        "-q", f"--tb={tb}", "--no-header",
        *test_files,
    ]


if __name__ == "__main__":
    main()
