"""What the adversarial suite shares: the `add` task in every label format,
the honest answers each attack is measured against, and a batch of attacks
graded at once so the module's runs share the session's containers.

Every attack is an `Attack` (a completion, a label, limits) under a key; a
module lists its attacks in `ATTACKS`, and the `batch` fixture (conftest.py)
grades the ones its selected tests use, in parallel, then checks the host.
"""

import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from add_task import ADD_TESTS

from rewardbox.rewards import GradingPolicy
from rewardbox.rewards.grade import Grade
from rewardbox.sandbox import Limits
from rewardbox.sandbox.modes import DEFAULT_MODE

# The docker tier's runtime (the `sandbox` fixture reads the same variable): a
# few answers differ under gVisor's kernel, and the README's threat model says which.
GVISOR = os.environ.get("REWARDBOX_TEST_RUNTIME") == "runsc"
# And its sandbox mode: in a pool's container the harness is pid 1, which takes no
# signal from inside (the cold mode's supervisor can be stopped, and the run times out),
# and whose stdin and stdout cannot be opened. gVisor protects neither way.
POOLED = (os.environ.get("REWARDBOX_TEST_MODE") or DEFAULT_MODE) != "cold"
POOLED_RUNC = POOLED and not GVISOR
POLICY = GradingPolicy()  # the session's CodeReward grades with the default policy
TOKEN = secrets.token_hex(8)  # names files an escaping write would leave on the host
ESCAPE_NAME = f"rewardbox-escape-{TOKEN}"
SECRET_NAME = "REWARDBOX_ADVERSARIAL_SECRET"
QUICK = Limits(timeout_s=3)  # for attacks that run until a limit stops them
# For runs that must not time out, even on a loaded host: no attack under these
# limits hangs, so the room costs no time.
ROOMY = Limits(timeout_s=60)
CASE_TIMEOUT_S = 10  # per case of a generated format, for the same reason

# `add(a, b)` in each format, three tests each. A completion defines `add` and,
# run as a program (stdio), reads "a b" and prints the sum.
FORMATS: dict[str, Any] = {
    "pytest": {"pytest": ADD_TESTS},
    "asserts": {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-2, 5) == 3"],
                "case_timeout_s": CASE_TIMEOUT_S},
    "check": {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
                      "    assert candidate(-2, 5) == 3\n", "entry_point": "add", "case_timeout_s": CASE_TIMEOUT_S},
    "call": {"fn_name": "add", "inputs": [[1, 2], [0, 0], [-2, 5]], "outputs": [3, 0, 3],
             "case_timeout_s": CASE_TIMEOUT_S},
    "stdio": {"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"],
              "case_timeout_s": CASE_TIMEOUT_S},
}
MAIN = '\n\nif __name__ == "__main__":\n    a, b = map(int, input().split())\n    print(add(a, b))\n'
HONEST_RIGHT = "def add(a, b):\n    return a + b\n" + MAIN
HONEST_WRONG = "def add(a, b):\n    return a - b + 1\n" + MAIN  # wrong on all three cases


@dataclass(frozen=True)
class Attack:
    completion: str
    label: Any = field(default_factory=lambda: FORMATS["pytest"])
    limits: Limits = ROOMY


def baselines(formats=FORMATS) -> dict[str, Attack]:
    """The honest right and honest wrong answer for each format."""
    runs = {}
    for fmt in formats:
        runs[f"honest-right-{fmt}"] = Attack(HONEST_RIGHT, FORMATS[fmt])
        runs[f"honest-wrong-{fmt}"] = Attack(HONEST_WRONG, FORMATS[fmt])
    return runs


def show(grade: Grade) -> str:
    """A grade, for assertion messages."""
    tests = [(t.name, t.outcome.value, (t.message or "")[-400:]) for t in grade.tests]
    return f"{grade.reward} {grade.verdict} {grade.message!r} {grade.error!r} {tests}"


def messages(grade: Grade) -> str:
    return "\n".join(t.message or "" for t in grade.tests)
