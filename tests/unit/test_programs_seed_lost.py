"""The test process's handle on the seed serving a stdio label's programs
(images/python/harness/rbprograms.py): a seed that takes an input and dies
before telling the program's pid has spent that input (ProgramLost: it fails,
never run again, where a new interpreter's parent would be the test process),
and every later input goes to new interpreters without asking it again."""

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "python" / "harness"))
import rbprograms  # noqa: E402


def programs_with_a_seed_that(behaves):
    """A seed in a thread: it takes the request (and its fds), then `behaves`."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def seed():
        _, fds, _, _ = socket.recv_fds(theirs, 64, 3)
        for fd in fds:
            os.close(fd)
        behaves(theirs)

    threading.Thread(target=seed, daemon=True).start()
    return rbprograms.Programs(ours)


def stdin():
    fd = os.memfd_create("stdin")
    os.write(fd, b"1 2\n")
    return fd


def test_a_seed_dead_after_taking_the_input_has_spent_it():
    def takes_then_dies(theirs):
        theirs.close()  # killed by the program it forked: no pid ever comes back

    programs = programs_with_a_seed_that(takes_then_dies)
    feed = stdin()
    try:
        with pytest.raises(rbprograms.ProgramLost):
            programs.start(feed)
        assert programs.gone
        with pytest.raises(rbprograms.ProgramServerGone) as later:  # not asked again
            programs.start(feed)
        assert type(later.value) is rbprograms.ProgramServerGone
    finally:
        os.close(feed)


def test_a_seed_that_answers_starts_the_program():
    def answers(theirs):
        theirs.send(b"pid 4242")

    programs = programs_with_a_seed_that(answers)
    feed = stdin()
    try:
        process = programs.start(feed)
        assert (process.pid, programs.gone) == (4242, False)
        process.stdout.close()
        process.stderr.close()
    finally:
        os.close(feed)
