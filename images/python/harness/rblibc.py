"""libc, opened once per process. `ctypes.CDLL(None)` builds a new function
pointer class each time it is called: 0.2 ms and about 45 copy-on-write faults
in a fork of the zygote, where a run's test process and the solution's worker
called it three times and once. Opened here when a module imports this one (the
zygote's, before it forks; the supervisor's, at its start), each run only
calls it."""

import ctypes

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
_prctl = LIBC.prctl  # looked up now: ctypes keeps it on LIBC, made once


def set_dumpable(dumpable):
    """prctl(PR_SET_DUMPABLE): whether same-uid processes may ptrace this one,
    read its memory and open its /proc/<pid>/fd."""
    return _prctl(PR_SET_DUMPABLE, 1 if dumpable else 0, 0, 0, 0)
