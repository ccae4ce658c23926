"""A pooled container's runs start from a zygote that has already reported a
failure (rbzygote.WARM_TESTS): what pytest's report of a failure builds on
first use (inspect's map of every loaded module's file, tokenize's patterns,
about 10 ms) is built once per container, not in every run that fails. Most
samples of an RL batch fail, so this is most runs' cost."""

import os

from rewardbox.sandbox import Limits, RunRequest, Verdict
from rewardbox.sandbox.pool import PooledSandbox

RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None

# Read before this process has reported any failure of its own.
TESTS = {"test_solution.py": '''
import inspect
import tokenize

from solution import add


def test_the_failure_report_finds_its_caches_filled():
    assert len(inspect._filesbymodname) > 100, len(inspect._filesbymodname)
    assert tokenize._compile.cache_info().currsize > 0


def test_add():
    assert add(1, 2) == 3
'''}


def test_a_run_finds_what_a_failure_report_needs_already_built():
    with PooledSandbox(max_containers=1, reuse=1000, retry_s=20, runtime=RUNTIME) as box:
        for _ in range(2):  # the container's first run and a later one
            result = box.run(RunRequest(files={"solution.py": "def add(a, b):\n    return a + b\n"}, tests=TESTS,
                                        limits=Limits(timeout_s=20)))
            assert result.verdict is Verdict.PASSED, (result.message, result.stdout)
            assert [t.outcome for t in result.tests] == ["passed", "passed"], result.tests
