"""A dataset's pytest module whose tests are bare functions runs each test's
call phase alone, without its setup and teardown phases.

pytest runs every test in three phases, each a call through a dozen hooks
that makes a report. For a test with no fixture (none requested, none
autouse, no xunit setup function, which pytest turns into autouse fixtures)
and no mark, in a plain module or class, setup and teardown have nothing to
do: no fixture to fill, no finalizer to run, no mark to evaluate; their two
passing reports are never shown or recorded. Most tests of a dataset's module
are such (`from solution import f`, `def test_x(): assert f(1) == 2`).

`BareItems` is a plugin of the prepared session, dormant until a run arms it.
It answers `pytest_runtest_protocol` for an item only when every item of the
session is bare, so the setup state that pytest's own phases keep is never
half set up. The call phase is pytest's own (`call_and_report`): every hook
on it (the solution's failure check, captured logs, unraisable exceptions,
skip and xfail outcomes) and every wrapper of the protocol (assertion
rewriting's explanations, warnings) run as under pytest's loop;
tests/docker/test_bare_items.py holds the two side by side.
"""

import os

import pytest
from _pytest.logging import caplog_handler_key, caplog_records_key
from _pytest.main import Dir, Session
from _pytest.python import Class, Function, Module
from _pytest.runner import call_and_report

# The nodes whose setup and teardown are no-ops (not Package: its __init__.py's xunit functions).
BARE_NODES = (Session, Dir, Module, Class, Function)


class BareItems:
    def __init__(self):
        self.armed = False
        self.bare = None  # whether every item of the session is bare, told at the first item

    def arm(self):
        self.armed = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if not self.armed:
            return None
        if self.bare is None:
            self.bare = all(_bare(each) for each in item.session.items)
        if not self.bare:
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        # What the logging plugin's setup phase leaves for its call phase, and its teardown takes away.
        item.stash[caplog_records_key] = {}
        try:
            call_and_report(item, "call")
        finally:
            for key in (caplog_records_key, caplog_handler_key):
                if key in item.stash:
                    del item.stash[key]
            os.environ.pop("PYTEST_CURRENT_TEST", None)  # as the teardown phase ends
            item._request = False
            item.funcargs = None
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


def _bare(item):
    """A plain test function (or method) with no fixture and no mark, whose
    collectors set nothing up."""
    return (type(item) is Function and not item.fixturenames and next(item.iter_markers(), None) is None
            and all(type(node) in BARE_NODES for node in item.listchain()))
