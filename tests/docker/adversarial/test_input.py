"""Hostile input: completions and labels that are empty, binary, huge or
broken. Each gets a verdict (or, for a label that cannot be used, no reward
and an error naming why) and no sample fails the batch it is in.
"""

import json

import pytest
import requests

from adversarial.attacks import FORMATS, HONEST_RIGHT, HONEST_WRONG, Attack, baselines, show
from rewardbox.sandbox import Verdict

TEN_MB_OF_COMMENTS = ("#" * 99 + "\n") * (100 * 1024)
BROKEN_TESTS = {
    "tests-import-a-missing-module": {"pytest": "import not_a_module_rewardbox\nfrom solution import add\n\n"
                                                "def test_small():\n    assert add(1, 2) == 3\n"},
    "tests-raise-at-import": {"pytest": "from solution import add\nraise RuntimeError('broken dataset')\n\n"
                                        "def test_small():\n    assert add(1, 2) == 3\n"},
}

# Python refuses these with RecursionError or MemoryError, not SyntaxError: the
# model's syntax error all the same, never a failure of ours.
TOO_DEEP = {
    "nested-unary-operators": "x = " + "- " * 5000 + "1\n",
    "long-sum": "x = " + "+".join(["1"] * 50_000) + "\n",
    "long-elif-table": "def table(x):\n    if x == 0:\n        return 0\n"
                       + "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, 10_000)),
}
# Text that is not UTF-8 coming back from the container: a lone surrogate in an
# exception's message (the code itself is ASCII).
ODD_TEXT = {
    "lone-surrogate-raised": 'def add(a, b):\n    raise ValueError("\\ud800 \\udfff")\n',
    "lone-surrogate-at-import": 'raise ImportError("\\ud800")\n',
}

ATTACKS = {
    **baselines(["pytest", "call", "stdio"]),
    "empty-completion-pytest": Attack(""),
    "empty-completion-call": Attack("", FORMATS["call"]),
    "whitespace-completion-pytest": Attack(" \n\t\n"),
    "null-bytes-pytest": Attack(HONEST_RIGHT.replace("return a + b", "return a + b  # \x00")),
    "null-bytes-stdio": Attack(HONEST_RIGHT.replace("return a + b", "return a + b  # \x00"), FORMATS["stdio"]),
    # In a comment, as the model wrote them: they reach the file and Python accepts them.
    "lone-surrogates-in-a-comment-pytest": Attack(HONEST_RIGHT.replace("return a + b", "return a + b  # \udcff\ud800")),
    "lone-surrogates-in-a-comment-call": Attack(HONEST_RIGHT.replace("return a + b", "return a + b  # \udcff\ud800"),
                                                FORMATS["call"]),
    "lone-surrogates-in-code-pytest": Attack(HONEST_RIGHT.replace("return a + b", "return a + b \udcff")),
    "lone-surrogates-in-code-stdio": Attack(HONEST_RIGHT.replace("return a + b", "return a + b \udcff"),
                                            FORMATS["stdio"]),
    "10-mb-completion-pytest": Attack(HONEST_RIGHT + TEN_MB_OF_COMMENTS),
    "10-mb-completion-call": Attack(HONEST_RIGHT + TEN_MB_OF_COMMENTS, FORMATS["call"]),
    "very-long-line-pytest": Attack(HONEST_RIGHT + "LONG = '" + "y" * (2 << 20) + "'\n"),
    "very-long-line-stdio": Attack(HONEST_RIGHT + "LONG = '" + "y" * (2 << 20) + "'\n", FORMATS["stdio"]),
    "label-not-json": Attack(HONEST_RIGHT, '{"pytest": "from solution import add'),
    "label-json-list-cut-short": Attack(HONEST_RIGHT, '[{"fn_name": "add", "inputs": [[1, 2]]'),
    "label-with-null-bytes": Attack(HONEST_RIGHT, {"pytest": "def test_a():\n    pass\x00\n"}),
    **{f"{name}-{answer}": Attack(source, label)
       for name, label in BROKEN_TESTS.items()
       for answer, source in (("right", HONEST_RIGHT), ("wrong", HONEST_WRONG))},
    **{f"{name}-{fmt}": Attack(HONEST_RIGHT + code, FORMATS[fmt])
       for name, code in TOO_DEEP.items() for fmt in ("pytest", "stdio")},
    **{f"{name}-{fmt}": Attack(code, FORMATS[fmt]) for name, code in ODD_TEXT.items() for fmt in ("pytest", "call")},
}

# case -> the verdict and reward it must get
GRADED = {
    "empty-completion-pytest": (Verdict.NO_CODE, -1.0),
    "empty-completion-call": (Verdict.NO_CODE, -1.0),
    "whitespace-completion-pytest": (Verdict.NO_CODE, -1.0),
    "null-bytes-pytest": (Verdict.SYNTAX_ERROR, -1.0),
    "null-bytes-stdio": (Verdict.SYNTAX_ERROR, -1.0),
    "lone-surrogates-in-a-comment-pytest": (Verdict.PASSED, 1.0),
    "lone-surrogates-in-a-comment-call": (Verdict.PASSED, 1.0),
    "lone-surrogates-in-code-pytest": (Verdict.SYNTAX_ERROR, -1.0),
    "lone-surrogates-in-code-stdio": (Verdict.SYNTAX_ERROR, -1.0),
    "10-mb-completion-pytest": (Verdict.PASSED, 1.0),
    "10-mb-completion-call": (Verdict.PASSED, 1.0),
    "very-long-line-pytest": (Verdict.PASSED, 1.0),
    "very-long-line-stdio": (Verdict.PASSED, 1.0),
}


@pytest.mark.parametrize("case", list(GRADED))
def test_odd_completion_gets_its_verdict(batch, case):
    grade = batch[case]
    assert (grade.verdict, grade.reward) == GRADED[case], show(grade)
    fmt = case.rsplit("-", 1)[1]
    if grade.reward < 1.0:  # no odd input beats an honest wrong answer
        assert grade.reward <= batch[f"honest-wrong-{fmt}"].reward


@pytest.mark.core
@pytest.mark.parametrize("case, verdict, reward", [
    *[(f"{name}-{fmt}", Verdict.SYNTAX_ERROR, -1.0) for name in TOO_DEEP for fmt in ("pytest", "stdio")],
    *[(f"lone-surrogate-raised-{fmt}", Verdict.FAILED, 0.0) for fmt in ("pytest", "call")],
    *[(f"lone-surrogate-at-import-{fmt}", Verdict.IMPORT_ERROR, -1.0) for fmt in ("pytest", "call")],
])
def test_code_python_refuses_or_odd_text_back_gets_a_verdict(batch, case, verdict, reward):
    grade = batch[case]  # which also serialises it
    assert (grade.verdict, grade.reward) == (verdict, reward), show(grade)


@pytest.mark.parametrize("case, error", [
    ("label-not-json", "label is not valid JSON"),
    ("label-json-list-cut-short", "label is not valid JSON"),
    ("label-with-null-bytes", "cannot contain null bytes"),
    # The tests need a module the image does not hold: the dataset's need, whatever the answer (issue 19).
    ("tests-import-a-missing-module-right", "the label's tests import not_a_module_rewardbox, which the sandbox image"),
    ("tests-import-a-missing-module-wrong", "the label's tests import not_a_module_rewardbox, which the sandbox image"),
])
def test_unusable_label_gets_no_reward_and_says_why(batch, case, error):
    grade = batch[case]
    assert (grade.reward, grade.verdict) == (None, None), show(grade)
    assert error in grade.error


@pytest.mark.parametrize("case, wrong, verdict", [
    ("tests-raise-at-import-right", "tests-raise-at-import-wrong", Verdict.COLLECTION_ERROR),
])
def test_tests_that_fail_to_import_give_no_signal(batch, case, wrong, verdict):
    # A right and a wrong answer get the same verdict and reward: the label, not
    # the completion, decides it.
    right, wrong = batch[case], batch[wrong]
    assert right.verdict is wrong.verdict is verdict, (show(right), show(wrong))
    assert right.reward == wrong.reward == -1.0


def test_undecodable_bytes_and_lone_surrogates_over_http(server_url):
    label = json.dumps(FORMATS["pytest"]).encode()
    raw = (b'{"samples": [{"completion": "def add(a, b):\\n    return a + b  # \xff\xfe\xc3", "label": '
           + label + b'}]}')
    escaped = {"samples": [{"completion": "def add(a, b):\n    return a + b \udcff", "label": FORMATS["pytest"]}]}

    rejected = requests.post(f"{server_url}/v1/rewards", data=raw, headers={"Content-Type": "application/json"},
                             timeout=60)
    graded = requests.post(f"{server_url}/v1/rewards", data=json.dumps(escaped),
                           headers={"Content-Type": "application/json"}, timeout=60)

    assert 400 <= rejected.status_code < 500, rejected.text
    assert graded.status_code == 200, graded.text
    [result] = graded.json()["results"]
    assert (result["verdict"], result["reward"]) == ("syntax_error", -1.0), result
    assert requests.get(f"{server_url}/healthz", timeout=30).status_code == 200
