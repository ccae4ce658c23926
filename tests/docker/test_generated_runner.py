"""Generated tests (asserts, check, call, stdio labels) skip pytest's
collection and per-test protocol (rbgenerated.GeneratedTests). Their records,
terminal text and exit status must be exactly those of pytest's own loop over
the same module, for every way a case can end: run here inside the sandbox
image, both ways from the same prepared session, the solution in its worker."""

import pytest

from rewardbox import Limits, parse_label
from tests.docker.in_image import run_script

ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = ("def add(a, b):\n    if a == 2:\n        raise ValueError('boom')\n"
             "    if a == 3:\n        return {1, 2}\n    return a - b\n")
CHECK = {"test": "def check(candidate):\n    assert candidate(1, 0) == 1\n    assert candidate(1, 1) == 2\n"
                 "    assert candidate(2, 1) == 3\n    assert candidate(3, 1) == 4\n", "entry_point": "add"}
ASSERTS = {"tests": ["assert add(1, 0) == 1", "assert add(1, 1) == 2, 'one and one'", "assert add(2, 1) == 3",
                     "assert add(3, 1) == 4"]}
CALL = {"fn_name": "add", "inputs": [[1, 0], [1, 1], [2, 1], [3, 1]], "outputs": [1, 2, 3, 4]}
STDIO = {"inputs": ["1 0\n", "1 1\n", "2 1\n"], "outputs": ["1\n", "2\n", "3\n"], "case_timeout_s": 1}
PROGRAM = "a, b = map(int, input().split())\n"

# name: (label, solution, whether the generated loop runs it)
SAMPLES = {
    "check_passes": (CHECK, ADD, True),
    "check_fails": (CHECK, WRONG_ADD, True),
    "asserts_fail": (ASSERTS, WRONG_ADD, True),
    "call_fails": (CALL, WRONG_ADD, True),
    "call_missing_function": (CALL, "def sub(a, b):\n    return a - b\n", True),
    "stdio_fails": (STDIO, PROGRAM + "if a == 2:\n    raise SystemExit(3)\nprint(a - b)\n", True),
    "stdio_times_out": (STDIO, PROGRAM + "while a == 1 and b == 1:\n    pass\nprint(a + b)\n", True),
    "import_crashes": (ASSERTS, "raise RuntimeError('at import')\n", True),
    "worker_exits": (CALL, "import os\ndef add(a, b):\n    if a == 2:\n        os._exit(1)\n    return a + b\n", True),
    "prints": ({"tests": ["print('hello'); assert add(1, 1) == 2", "assert add(1, 1) == 3"]}, ADD, True),
    "setup_fails": ({"tests": ["assert add(1, 1) == 2"], "setup": "raise ValueError('bad setup')"}, ADD, True),
    "check_exits": ({"test": "def check(candidate):\n    assert candidate(1, 1) == 2\n    raise SystemExit(4)\n",
                     "entry_point": "add"}, ADD, True),
    "check_interrupts": ({"tests": ["assert add(1, 1) == 2", "raise KeyboardInterrupt", "assert add(1, 1) == 2"]},
                         ADD, True),
    "many_cases": ({"tests": [f"assert add({i}, 1) == {i + 1 if i % 7 else 0}" for i in range(400)]}, ADD, True),
    # Label code that pytest's per-test hooks act on keeps pytest's loop.
    "uses_pytest": ({"tests": ["import pytest; pytest.skip('later')", "assert add(1, 1) == 2"]}, ADD, False),
    "uses_logging": ({"tests": ["import logging; logging.getLogger('x').warning('w'); assert False"]}, ADD, False),
}

SCRIPT = r'''
import rbzygote

SAMPLES = json.loads(sys.argv[1])
os.mkdir("/work/.tests")
prepared = rbzygote.prepare_session()
arm = prepared.generated.arm


def run(sample, generated_loop):
    """pytest_runner.main in a child, as a pooled run calls it: its records,
    exit status, whether the generated loop ran it, and what its test data's fd held after."""
    data = os.memfd_create("data")
    os.write(data, sample["test_data"].encode())
    os.lseek(data, 0, os.SEEK_SET)

    def before(records):
        def spy(*args):
            armed = arm(*args) if generated_loop else False
            os.write(records, b"loop " + (b"generated" if armed else b"pytest") + b"\n")
            return armed
        prepared.generated.arm = spy

    outcome = main_in_child(prepared, data, sample["test_files"], before)
    outcome["data_left"] = os.fstat(data).st_size  # this is a held copy, as the supervisor's, the zygote's and the seed's
    os.close(data)
    return outcome

out = {}
for name, sample in SAMPLES.items():
    for path, text in sample["files"].items():
        with open(os.path.join("/work", path), "w") as f:
            f.write(text)
    out[name] = {"pytest": run(sample, False), "generated": run(sample, True)}
    for path in sample["files"]:
        os.remove(os.path.join("/work", path))
print(json.dumps(out))
'''


def _sample(label, solution):
    request = parse_label(label).request(solution, Limits())
    (test_name, test_text), = request.tests.items()
    files = {**request.files, f".tests/{test_name}": test_text}
    return {"files": files, "test_files": [f"/work/.tests/{test_name}"], "test_data": request.test_data}


@pytest.fixture(scope="module")
def outcomes(docker_client):
    samples = {name: _sample(label, solution) for name, (label, solution, _) in SAMPLES.items()}
    return run_script(docker_client, SCRIPT, samples, "generated-runner")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_generated_tests_end_as_under_pytests_loop(outcomes, name):
    reference, generated = outcomes[name]["pytest"], outcomes[name]["generated"]
    assert reference["loop"] == "pytest"
    assert generated["loop"] == ("generated" if SAMPLES[name][2] else "pytest")
    assert any(r.get("event") == "test" for r in reference["records"]) or name == "check_interrupts"
    assert (generated["status"], generated["records"]) == (reference["status"], reference["records"])


def test_the_test_data_is_emptied_once_the_test_process_read_it(outcomes):
    # Under gVisor a same-user process can open a non-dumpable one's /proc/<pid>/fd: a copy
    # of the data's fd held elsewhere (the supervisor's, the zygote's) must hold nothing.
    left = {(name, loop): runs[loop]["data_left"] for name, runs in outcomes.items() for loop in runs}
    assert left == dict.fromkeys(left, 0)


def test_the_samples_cover_every_way_a_case_ends(outcomes):
    statuses = {outcomes[name]["pytest"]["status"] for name in SAMPLES}
    assert {0, 1, 2} <= statuses  # passed, failed, interrupted
    exc_types = {r.get("exc_type") for runs in outcomes.values() for r in runs["pytest"]["records"]}
    assert {"AssertionError", "ValueError", "rbcheck.CaseTimeout", "SystemExit"} <= exc_types
    collected = [r for r in outcomes["many_cases"]["generated"]["records"] if r.get("event") == "collected"]
    assert len(collected) > 1 and sum(len(r["nodeids"]) for r in collected) == 400
