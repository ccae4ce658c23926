"""A dataset's pytest module whose tests are bare (no fixture, no mark) runs
each test's call phase alone (rbbareitems.BareItems). Its records, terminal
text and exit status must be exactly those of pytest's own three phases over
the same module, for every way a test can end: run here inside the sandbox
image, both ways from the same prepared session, as a pooled run calls
pytest_runner.main, the solution in its worker."""

import textwrap

import pytest

from rewardbox import Limits, parse_label
from tests.docker.in_image import run_script

ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = ("def add(a, b):\n    if a == 2:\n        raise ValueError('boom')\n"
             "    if a == 3:\n        return [a, b]\n    return a - b\n")

# name: (test module, solution, whether the bare loop runs it)
SAMPLES = {
    "passes": ("""
        from solution import add

        def test_one():
            assert add(1, 0) == 1

        def test_two():
            assert add(1, 1) == 2
    """, ADD, True),
    "fails_every_way": ("""
        import pytest
        from solution import add

        def test_wrong_value():
            assert add(1, 1) == 2

        def test_raises_in_the_solution():
            assert add(2, 1) == 3

        def test_explained_comparison():
            assert add(3, 1) == [3, 2]

        def test_did_not_raise():
            with pytest.raises(ValueError):
                add(1, 1)

        def test_raises_as_expected():
            with pytest.raises(ValueError, match="boom"):
                add(2, 1)

        def test_fail():
            pytest.fail("told to")

        def test_exits_the_interpreter():
            import sys
            sys.exit(5)
    """, WRONG_ADD, True),
    "skips_and_xfails_inside": ("""
        import pytest
        from solution import add

        def test_skips():
            pytest.skip("not today")

        def test_xfails():
            pytest.xfail("known")

        def test_passes():
            assert add(1, 1) == 2
    """, ADD, True),
    "in_a_class": ("""
        from solution import add

        class TestAdd:
            def test_method(self):
                assert add(1, 1) == 2

            def test_failing_method(self):
                assert add(1, 1) == 3
    """, ADD, True),
    "prints_logs_and_warns": ("""
        import logging
        import warnings
        from solution import add

        def test_prints():
            print("hello from the test")
            assert add(1, 1) == 2

        def test_logs_then_fails():
            logging.getLogger("x").warning("a warning")
            assert add(1, 1) == 3

        def test_warns():
            warnings.warn("careful", UserWarning)
            assert add(1, 1) == 2
    """, ADD, True),
    "async_test": ("""
        from solution import add

        async def test_async():
            assert add(1, 1) == 2

        def test_sync():
            assert add(1, 1) == 2
    """, ADD, True),
    "worker_dies_under_a_bare_except": ("""
        from solution import add

        def test_swallows():
            try:
                add(2, 1)
            except BaseException:
                pass

        def test_after():
            assert add(1, 1) == 2
    """, "import os\ndef add(a, b):\n    if a == 2:\n        os._exit(1)\n    return a + b\n", True),
    "exit_and_interrupt": ("""
        import pytest
        from solution import add

        def test_first():
            assert add(1, 1) == 2

        def test_exit():
            pytest.exit("enough", returncode=3)

        def test_never():
            pass
    """, ADD, True),
    "keyboard_interrupt": ("""
        from solution import add

        def test_first():
            assert add(1, 1) == 2

        def test_interrupts():
            raise KeyboardInterrupt

        def test_never():
            pass
    """, ADD, True),
    # Not bare: pytest's own phases run these, every item of the session.
    "a_fixture": ("""
        from solution import add

        def test_plain():
            assert add(1, 1) == 2

        def test_with_a_fixture(tmp_path):
            assert add(1, 1) == 3
    """, ADD, False),
    "a_mark": ("""
        import pytest
        from solution import add

        def test_plain():
            assert add(1, 1) == 2

        @pytest.mark.xfail
        def test_marked():
            assert add(1, 1) == 3
    """, ADD, False),
    "setup_module": ("""
        from solution import add

        def setup_module():
            print("module set up")

        def test_plain():
            assert add(1, 1) == 2
    """, ADD, False),
    "unittest_case": ("""
        import unittest
        from solution import add

        class TestAdd(unittest.TestCase):
            def test_method(self):
                self.assertEqual(add(1, 1), 3)
    """, ADD, False),
    "import_crashes": ("""
        from solution import add

        def test_plain():
            assert add(1, 1) == 2
    """, "raise RuntimeError('at import')\n", False),
}

SCRIPT = r'''
import rbzygote

SAMPLES = json.loads(sys.argv[1])
os.mkdir("/work/.tests")
prepared = rbzygote.prepare_session()
arm = prepared.bare_items.arm


def run(sample, bare_loop):
    """pytest_runner.main in a child, as a pooled run calls it: its records,
    exit status, and whether the bare loop ran it."""
    os.chmod("/work/.tests", 0o755)  # a run empties its test files and leaves them read-only
    for path, text in sample["files"].items():
        path = os.path.join("/work", path)
        if os.path.exists(path):
            os.remove(path)
        with open(path, "w") as f:
            f.write(text)

    def before(records):
        prepared.bare_items.arm = arm if bare_loop else (lambda: None)

    def after(records):
        os.write(records, b"loop " + (b"bare" if prepared.bare_items.bare else b"pytest") + b"\n")

    return main_in_child(prepared, -1, sample["test_files"], before, after)

out = {}
for name, sample in SAMPLES.items():
    out[name] = {"pytest": run(sample, False), "bare": run(sample, True)}
print(json.dumps(out))
'''


def _sample(module, solution):
    request = parse_label({"pytest": textwrap.dedent(module)}).request(solution, Limits())
    (test_name, test_text), = request.tests.items()
    files = {**request.files, f".tests/{test_name}": test_text}
    return {"files": files, "test_files": [f"/work/.tests/{test_name}"]}


@pytest.fixture(scope="module")
def outcomes(docker_client):
    samples = {name: _sample(module, solution) for name, (module, solution, _) in SAMPLES.items()}
    return run_script(docker_client, SCRIPT, samples, "bare-items")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_bare_tests_end_as_under_pytests_three_phases(outcomes, name):
    reference, bare = outcomes[name]["pytest"], outcomes[name]["bare"]
    assert reference["loop"] == "pytest"
    assert bare["loop"] == ("bare" if SAMPLES[name][2] else "pytest")
    assert reference["records"], "no records: the comparison would be blind"
    assert (bare["status"], bare["records"]) == (reference["status"], reference["records"])


def test_the_samples_cover_every_way_a_test_ends(outcomes):
    statuses = {outcomes[name]["pytest"]["status"] for name in SAMPLES}
    assert {0, 1, 2, 3} <= statuses  # passed, failed, interrupted, pytest.exit's code
    records = [r for name in SAMPLES if SAMPLES[name][2] for r in outcomes[name]["pytest"]["records"]]
    assert {"passed", "failed", "skipped", "xfailed"} <= {r.get("outcome") for r in records}
    assert {"ValueError", "Failed", "SystemExit"} <= {r.get("exc_type") for r in records}
    explained = [r["message"] for r in records if r.get("name") == "test_explained_comparison"]
    assert explained and "[3, 2]" in explained[0]
