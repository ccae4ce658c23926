"""`rewards.labels.parse_label`: dataset labels in, a usable label or `LabelError` out."""

import json

import pytest

from rewards import LabelError, PytestLabel, parse_label
from rewards.labels import SOLUTION_FILE, TEST_FILE
from sandbox import Limits

TESTS = ("from solution import add\n\n"
         "def test_one():\n    assert add(1, 2) == 3\n\n"
         "def test_two():\n    assert add(0, 0) == 0\n")


@pytest.mark.parametrize("raw", [
    pytest.param({"pytest": TESTS}, id="dict"),
    pytest.param(json.dumps({"pytest": TESTS}), id="json-string"),
    pytest.param(json.dumps({"pytest": TESTS}).encode(), id="json-bytes"),
    pytest.param({"kind": "pytest", "pytest": TESTS}, id="explicit-kind"),
    pytest.param(json.dumps({"kind": "pytest", "pytest": TESTS}), id="explicit-kind-json"),
    pytest.param({"kind": None, "pytest": TESTS}, id="null-kind-falls-back-to-keys"),
    pytest.param({"pytest": TESTS, "source": "mbpp", "difficulty": 3}, id="extra-keys-ignored"),
])
def test_pytest_label_formats(raw):
    label = parse_label(raw)

    assert isinstance(label, PytestLabel)
    assert label.kind == "pytest"
    assert label.pytest == TESTS
    assert label.expected.counts == {(None, "test_one"): 1, (None, "test_two"): 1}
    assert label.expected.total == 2


def test_label_builds_the_run_request():
    limits = Limits(timeout_s=3.0, memory_mb=256)

    request = parse_label({"pytest": TESTS}).request("def add(a, b):\n    return a + b\n", limits)

    assert request.files == {SOLUTION_FILE: "def add(a, b):\n    return a + b\n"}
    assert request.tests == {TEST_FILE: TESTS}
    assert request.limits == limits
    assert (SOLUTION_FILE, TEST_FILE) == ("solution.py", "test_solution.py")


@pytest.mark.parametrize("raw, message", [
    pytest.param({"kind": "nope", "pytest": TESTS}, "unknown label kind 'nope' (known: pytest)", id="unknown-kind"),
    pytest.param('{"kind": "mbpp"}', "unknown label kind 'mbpp' (known: pytest)", id="unknown-kind-json"),
    pytest.param({"kind": 7}, "unknown label kind 7 (known: pytest)", id="non-string-kind"),
    pytest.param({"answer": "42"}, "cannot tell the label's format from its keys ['answer']", id="unknown-keys"),
    pytest.param({}, "cannot tell the label's format from its keys []", id="empty-object"),
    pytest.param("42", "label must be a JSON object, got int", id="json-number"),
    pytest.param('"def test_a(): pass"', "label must be a JSON object, got str", id="json-string-of-string"),
    pytest.param("[1, 2]", "label must be a JSON object, got list", id="json-array"),
    pytest.param("null", "label must be a JSON object, got NoneType", id="json-null"),
    pytest.param(None, "label must be a JSON object, got NoneType", id="none"),
    pytest.param(42, "label must be a JSON object, got int", id="int"),
    pytest.param(["assert f(1) == 2"], "label must be a JSON object, got list", id="list"),
    pytest.param("{'pytest': 'x'}", "label is not valid JSON: ", id="python-repr-not-json"),
    pytest.param("", "label is not valid JSON: ", id="empty-string"),
    pytest.param("def test_a(): pass", "label is not valid JSON: ", id="raw-module-not-json"),
    pytest.param({"kind": "pytest"}, "bad pytest label: ", id="kind-without-module"),
    pytest.param({"pytest": 123}, "bad pytest label: ", id="module-not-a-string"),
    pytest.param({"pytest": ""}, "the pytest label holds no tests", id="empty-module"),
    pytest.param({"pytest": "from solution import f\n\ndef helper():\n    assert f()\n"},
                 "the pytest label holds no tests", id="no-test-functions"),
    pytest.param({"pytest": "class TestA:\n    def __init__(self): pass\n    def test_x(self): pass\n"},
                 "the pytest label holds no tests", id="only-uncollectable-class"),
    pytest.param({"pytest": "def test_a(:\n    pass\n"}, "the pytest label holds no tests", id="syntax-error"),
    pytest.param({"pytest": "def test_a():\n    pass\n\x00"}, "the pytest label holds no tests", id="null-byte"),
])
def test_unusable_labels_raise_label_error(raw, message):
    with pytest.raises(LabelError) as caught:
        parse_label(raw)

    assert str(caught.value).startswith(message)


def test_label_error_is_a_value_error():
    # Callers that only know ValueError still catch a bad label.
    assert issubclass(LabelError, ValueError)


@pytest.mark.parametrize("kind", [["pytest"], {"name": "pytest"}])
def test_unhashable_kind_is_a_label_error(kind):
    with pytest.raises(LabelError, match="unknown label kind"):
        parse_label({"kind": kind, "pytest": TESTS})


def test_labels_are_frozen():
    label = parse_label({"pytest": TESTS})

    with pytest.raises(ValueError, match="frozen"):
        label.pytest = "def test_other(): pass"
    assert label.pytest == TESTS
