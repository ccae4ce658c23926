"""Every sandbox mode grades a fixed set of samples the same: each label
format's passing, partial and failing completions, and completions that crash,
loop, exhaust memory, flood the output or kill themselves, plus program runs.
Each mode scores the whole set on its own sandbox; the verdicts, rewards and
per-test outcomes must be identical, and the expected ones."""

import pytest
from test_label_formats_e2e import FORMATS

from rewardbox.rewards import CodeReward, Sample
from rewardbox.sandbox import Limits, RunRequest
from rewardbox.sandbox.modes import MODES, make_sandbox

LIMITS = Limits(timeout_s=4, memory_mb=256)
ADD_LABEL = FORMATS["pytest"][0]
CHECK_LABEL = FORMATS["check"][0]

# key -> (completion, label, expected verdict)
MISBEHAVING = {
    "syntax": ("def add(a, b)\n    return a + b\n", ADD_LABEL, "syntax_error"),
    "import-raises": ("raise ValueError('at import')\ndef add(a, b):\n    return a + b\n", ADD_LABEL,
                      "collection_error"),
    "import-missing": ("import no_such_module\ndef add(a, b):\n    return a + b\n", ADD_LABEL, "import_error"),
    "exit-at-import": ("import sys\nsys.exit(0)\n", ADD_LABEL, "collection_error"),
    "loop": ("def add(a, b):\n    while True:\n        pass\n", ADD_LABEL, "timeout"),
    "loop-check": ("    while True:\n        pass\n", CHECK_LABEL, "timeout"),
    "memory": ("def add(a, b):\n    hoard = []\n    while True:\n        hoard.append(b'x' * (16 << 20))\n",
               ADD_LABEL, "out_of_memory"),
    "flood": ("def add(a, b):\n    while True:\n        print('x' * 4096)\n", ADD_LABEL, "output_limit"),
    "kills-itself": ("import os, signal\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
                     ADD_LABEL, "killed"),
    # The thread is the worker's: it holds neither the tests' process nor the run (the worker is ended).
    "threads-left": ("import threading, time\n\ndef add(a, b):\n"
                     "    threading.Thread(target=time.sleep, args=(60,)).start()\n    return a + b\n",
                     ADD_LABEL, "passed"),
}

SAMPLES = [Sample(id=f"{fmt}-{which}", completion=completion, label=label, prompt=prompt)
           for fmt, (label, prompt, _, completions) in FORMATS.items()
           for which, (completion, _) in zip(("pass", "partial", "fail"), completions)]
SAMPLES += [Sample(id=key, completion=completion, label=label) for key, (completion, label, _) in MISBEHAVING.items()]

PROGRAMS = {
    "echo": ("import sys\nprint(sys.stdin.read().upper())\n", "hello", 0),
    "exit-3": ("import sys\nsys.exit(3)\n", "", 3),
}


def graded_by(mode: str) -> dict:
    with make_sandbox(mode, max_containers=2, retry_s=20, limits=LIMITS) as sandbox:
        outputs = CodeReward(sandbox, limits=LIMITS).score_many(SAMPLES)
        seen = {s.id: (out.verdict, out.reward,
                       [(t["name"], t["outcome"]) for t in out.metadata.get("tests", [])])
                for s, out in zip(SAMPLES, outputs, strict=True)}
        for key, (source, stdin, _) in PROGRAMS.items():
            result = sandbox.run(RunRequest(files={"main.py": source}, program="main.py", stdin=stdin, limits=LIMITS))
            seen[f"program-{key}"] = (result.verdict.value, result.exit_code, result.stdout)
    return seen


@pytest.fixture(scope="module")
def by_mode() -> dict[str, dict]:
    return {mode: graded_by(mode) for mode in MODES}


@pytest.mark.parametrize("mode", [m for m in MODES if m != "cold"])
def test_every_mode_grades_like_cold(by_mode, mode):
    cold, other = by_mode["cold"], by_mode[mode]
    differing = {key: (cold[key], other[key]) for key in cold if cold[key] != other[key]}
    assert differing == {}


@pytest.mark.parametrize("mode", MODES)
def test_the_grades_are_the_expected_ones(by_mode, mode):
    seen = by_mode[mode]
    for fmt, (_, _, total, completions) in FORMATS.items():
        for which, (_, passed) in zip(("pass", "partial", "fail"), completions):
            verdict, _, tests = seen[f"{fmt}-{which}"]
            assert verdict == ("passed" if passed == total else "failed"), (fmt, which, seen[f"{fmt}-{which}"])
            assert sum(outcome == "passed" for _, outcome in tests) == passed, (fmt, which)
    for key, (_, _, expected) in MISBEHAVING.items():
        assert seen[key][0] == expected, (key, seen[key])
    for key, (_, stdin, code) in PROGRAMS.items():
        verdict, exit_code, stdout = seen[f"program-{key}"]
        assert exit_code == code and stdout == (stdin.upper() + "\n" if code == 0 else "")
