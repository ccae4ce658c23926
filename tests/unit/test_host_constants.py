"""The host keeps no copy of the harness's constants: each value it sends to
or expects from the container is the harness's own (rbprotocol.py)."""

import inspect

from rewardbox.rewards import labels
from rewardbox.sandbox import engine, pool
from rewardbox.sandbox.protocol import harness_protocol

RB = harness_protocol()


def test_container_user_and_work_dir_are_the_harness_s():
    assert f"{RB.SANDBOX_UID}:{RB.SANDBOX_GID}" == engine.SANDBOX_USER
    assert engine.WORK_DIR == RB.WORK_DIR


def test_pool_runs_the_harness_s_supervisor():
    assert pool.POOL_COMMAND[-1] == f"{RB.HARNESS_DIR}/pool_supervisor.py"


def test_labels_write_the_harness_s_solution_file():
    assert labels.SOLUTION_FILE == RB.SOLUTION_FILE


def test_host_modules_hold_no_literal_copy():
    # A literal would drift from the harness unnoticed: the values are read, not written.
    for module, literals in (
        (engine, ("10001", '"/work"')),
        (pool, ("/opt/rewardbox",)),
        (labels, ('"solution.py"',)),
    ):
        source = inspect.getsource(module)
        for literal in literals:
            assert literal not in source, (module.__name__, literal)
