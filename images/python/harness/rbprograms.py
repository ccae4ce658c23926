"""A stdin/stdout label's program, run once per input as a fork of a clean
interpreter instead of a new one (a pooled container's seed; rbzygote.Seed).

A new interpreter per input costs its start (about 10 ms), more than most
programs run. The seed is a fork of the test process made before it read its
key or test data, so it holds nothing a program may not see; here it serves
the run's programs: for each input the test process hands it the program's
stdin (a memory file) and its stdout and stderr pipes, and it forks a process
that runs the solution as `python3 -I -B solution.py` would, in its own
process group, and tells its pid and, when it ends, its exit status.

What a program sees is a fresh interpreter's: `__main__` its own module,
sys.argv and sys.path as under -I, new standard streams on its fds, the
default signal handlers, no exit handlers of ours, the environment of a run;
what it leaves when it ends (exit status, the traceback of an uncaught
exception, SystemExit's text, its threads joined and exit handlers run, its
output flushed) is the interpreter's (tests/docker/test_programs.py holds the
two side by side).

Messages (one per packet on the seed's SOCK_SEQPACKET socket):
    -> b"run" + fds: stdin, stdout, stderr
    <- b"pid PID", later b"exit CODE" (as subprocess's returncode); or b"error ERRNO" if it could not fork
"""

import atexit
import builtins
import contextlib
import faulthandler
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import types

import rblibc
import rbprotocol

HARNESS_DIR = "/opt/rewardbox"
MESSAGE_BYTES = 64


class ProgramServerGone(Exception):
    """The seed no longer answers (a program killed it): the run goes on with new interpreters."""


class ProgramLost(ProgramServerGone):
    """The seed took this input and died before it told the program's pid: most
    likely this input's own program killed it, and its end is not known (its
    input is spent, so it is not run again)."""


class Programs:
    """The test process's handle on the seed serving programs."""

    def __init__(self, sock):
        self.sock = sock
        self.gone = False  # a program killed the seed: the next inputs go to new interpreters

    def start(self, stdin_fd):
        """A started run of the program (a ProgramProcess), its output on pipes."""
        if self.gone:
            raise ProgramServerGone
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        sent = False
        try:
            socket.send_fds(self.sock, [b"run"], [stdin_fd, out_w, err_w])
            sent = True
            reply = self.sock.recv(MESSAGE_BYTES)
        except OSError:
            reply = b""
        finally:
            os.close(out_w)
            os.close(err_w)
        word, _, value = reply.partition(b" ")
        if word == b"pid" and value.isdigit():
            return ProgramProcess(self, int(value), os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))
        os.close(out_r)
        os.close(err_r)
        if word == b"error" and value.isdigit():
            raise OSError(int(value), os.strerror(int(value)))
        self.gone = True
        raise ProgramLost if sent else ProgramServerGone

    def close(self):
        self.sock.close()


class ProgramProcess:
    """One run of the program, shaped like subprocess.Popen for rbcheck.run_program."""

    def __init__(self, programs, pid, stdout, stderr):
        self.programs, self.pid, self.stdout, self.stderr = programs, pid, stdout, stderr
        self.returncode = None

    def wait(self, timeout=None):
        if self.returncode is not None:
            return self.returncode
        self.programs.sock.settimeout(None if timeout is None else max(timeout, 0.001))  # 0 would not block at all
        try:
            reply = self.programs.sock.recv(MESSAGE_BYTES)
        except (TimeoutError, BlockingIOError):
            raise subprocess.TimeoutExpired("solution", timeout) from None
        except OSError:
            reply = b""
        finally:
            self.programs.sock.settimeout(None)
        word, _, value = reply.partition(b" ")
        # The seed gone too (killed with its program): the program's end is not known; it did not exit 0.
        self.returncode = int(value) if word == b"exit" and value.lstrip(b"-").isdigit() else -signal.SIGKILL
        self.programs.gone = self.programs.gone or word != b"exit"
        return self.returncode


def serve(sock):
    """In the seed: forks a program per request until the test process ends; never returns."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 3)
        except OSError:
            os._exit(0)
        if data != b"run" or len(fds) != 3:
            os._exit(0)  # the test process ended
        # The child tells it has its own session (closing `ready`) before its pid goes
        # out: a kill of its process group must never miss it.
        ready_r, ready_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (*fds, ready_r, ready_w):
                os.close(fd)
            sock.send(b"error %d" % (exc.errno or 0))
            continue
        if pid == 0:
            sock.close()
            os.close(ready_r)
            run_as_main(fds, ready_w)
        for fd in (*fds, ready_w):
            os.close(fd)
        os.read(ready_r, 1)
        os.close(ready_r)
        sock.send(b"pid %d" % pid)
        _, status = os.waitpid(pid, 0)
        sock.send(b"exit %d" % os.waitstatus_to_exitcode(status))


def run_as_main(fds, ready):
    """In the program's process: the solution as `python3 -I -B solution.py`
    would run it on these stdin, stdout and stderr, in a session of its own
    (as subprocess's start_new_session); never returns."""
    code = 1
    try:
        os.setsid()
        os.close(ready)
        rblibc.set_dumpable(True)  # as after an exec; the seed stays closed
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        _fresh_interpreter()
        code = _run(rbprotocol.SOLUTION_PATH)
        code = _finalize(code)
    finally:
        os._exit(code)


def _fresh_interpreter():
    """What a new interpreter started with -I -B would have that a fork of ours does not."""
    atexit._clear()  # ours, and those of modules it imported, are not the program's
    faulthandler.disable()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_IGN)
    for number in (signal.SIGTERM, signal.SIGCHLD, signal.SIGALRM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, signal.SIG_DFL)
    # The runs' LANG, C.UTF-8, is a locale Python coerces to: its stdin and stdout
    # take surrogateescape (Python/initconfig.c, config_get_stdio_errors).
    sys.stdin = sys.__stdin__ = _stream(0, "<stdin>", "surrogateescape")
    sys.stdout = sys.__stdout__ = _stream(1, "<stdout>", "surrogateescape")
    sys.stderr = sys.__stderr__ = _stream(2, "<stderr>", "backslashreplace", line_buffering=True)
    sys.argv[:] = [rbprotocol.SOLUTION_PATH]
    sys.path[:] = [path for path in sys.path if path not in (HARNESS_DIR, rbprotocol.WORK_DIR)]
    for name, module in list(sys.modules.items()):  # ours are not on its path: it cannot import them
        if (getattr(module, "__file__", None) or "").startswith(HARNESS_DIR + "/"):
            del sys.modules[name]
    sys.excepthook = sys.__excepthook__
    threading.excepthook = threading.__excepthook__


def _stream(fd, name, errors, line_buffering=False):
    """A standard stream as the interpreter makes it (Python/pylifecycle.c
    create_stdio: UTF-8 locale, not a terminal)."""
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    raw.name = name
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, newline="\n", line_buffering=line_buffering)


def _run(path):
    """Runs the file as `__main__`; the exit code the interpreter would take."""
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit as exc:
        return _system_exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - the program's, told as the interpreter tells it
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # from the program's frame, not this one
        return -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _system_exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code if -2 ** 31 <= code < 2 ** 31 else -1
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{code}\n")
        sys.stderr.flush()
    return 1


def _finalize(code):
    """As the interpreter's exit: join the threads, run the exit handlers, flush
    the streams (120 when stdout cannot be flushed); an uncaught
    KeyboardInterrupt ends the process by SIGINT."""
    threading._shutdown()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - the interpreter reports it and exits 120
        sys.excepthook(*sys.exc_info())
        code = 120 if code == 0 else code
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code
