"""`rewardbox.rewards.labels.parse_label`: every label format and its aliases in, a usable
label or a `LabelError` out (docs/labels.md)."""

import json

import pytest

from rewardbox.rewards import AssertLabel, CallLabel, CheckLabel, LabelError, MathLabel, PytestLabel, StdioLabel, parse_label
from rewardbox.sandbox import Limits

KINDS = "asserts, call, check, math, pytest, stdio"
TESTS = ("from solution import add\n\n"
         "def test_one():\n    assert add(1, 2) == 3\n\n"
         "def test_two():\n    assert add(0, 0) == 0\n")
CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"

# One label of each format, spelled by its keys alone.
FORMATS = {
    "pytest": ({"pytest": TESTS}, PytestLabel),
    "asserts": ({"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"], "setup": "import math"}, AssertLabel),
    "check": ({"test": CHECK, "entry_point": "add"}, CheckLabel),
    "stdio": ({"inputs": ["1 2\n", "0 0\n"], "outputs": ["3\n", "0\n"]}, StdioLabel),
    "call": ({"fn_name": "add", "inputs": [[1, 2], [0, 0]], "outputs": [3, 0]}, CallLabel),
    "math": ({"answer": "\\frac{1}{2}"}, MathLabel),
}


def spellings(raw: dict, kind: str) -> dict[str, object]:
    """The same label as datasets ship it: an object or a JSON string (or its
    bytes), told apart by its keys or by an explicit kind."""
    explicit = {**raw, "kind": kind}
    return {
        "keys": raw,
        "keys-json": json.dumps(raw),
        "keys-json-bytes": json.dumps(raw).encode(),
        "kind": explicit,
        "kind-json": json.dumps(explicit),
        "null-kind-falls-back-to-keys": {**raw, "kind": None},
        "extra-keys-ignored": {**raw, "source": "some-dataset", "difficulty": 3},
    }


@pytest.mark.parametrize("kind, spelling", [
    pytest.param(kind, spelling, id=f"{kind}-{spelling}")
    for kind, (raw, _) in FORMATS.items() for spelling in spellings(raw, kind)
])
def test_every_format_by_keys_and_by_kind(kind, spelling):
    raw, cls = FORMATS[kind]

    label = parse_label(spellings(raw, kind)[spelling])

    assert type(label) is cls
    assert label.kind == kind
    assert label == parse_label(raw)  # every spelling gives the same label


def test_the_fields_of_each_format():
    pytest_label = parse_label(FORMATS["pytest"][0])
    asserts = parse_label(FORMATS["asserts"][0])
    check = parse_label(FORMATS["check"][0])
    stdio = parse_label(FORMATS["stdio"][0])
    call = parse_label(FORMATS["call"][0])
    math = parse_label(FORMATS["math"][0])

    assert pytest_label.pytest == TESTS
    assert (asserts.tests, asserts.setup) == (["assert add(1, 2) == 3", "assert add(0, 0) == 0"], "import math")
    assert (check.test, check.entry_point, check.prompt) == (CHECK, "add", None)
    assert (stdio.inputs, stdio.outputs) == (["1 2\n", "0 0\n"], ["3\n", "0\n"])
    assert (call.fn_name, call.inputs, call.outputs) == ("add", [[1, 2], [0, 0]], [3, 0])
    assert math.answer == "\\frac{1}{2}"


def test_generated_formats_default_and_take_their_limits():
    default = parse_label(FORMATS["stdio"][0])
    tuned = parse_label({**FORMATS["call"][0], "case_timeout_s": 1, "float_tolerance": 1e-3, "compare": "exact"})

    assert (default.case_timeout_s, default.float_tolerance, default.compare) == (3.0, 1e-6, "tokens")
    assert (tuned.case_timeout_s, tuned.float_tolerance, tuned.compare) == (1.0, 1e-3, "exact")


@pytest.mark.parametrize("compare", ["tokens", "exact", "float"])
@pytest.mark.parametrize("raw", [
    pytest.param({"inputs": ["1\n"], "outputs": ["1\n"]}, id="stdio"),
    pytest.param({"fn_name": "f", "inputs": [[1]], "outputs": [1]}, id="call"),
    pytest.param({"input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})}, id="apps-outside"),
    pytest.param({"language": "python", "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}]},
                 id="open-r1"),
])
def test_the_comparison_mode_reaches_the_tests(raw, compare):
    label = parse_label({**raw, "compare": compare})

    assert label.compare == compare
    assert json.loads(label.request("x = 1\n", Limits(timeout_s=4.0, memory_mb=256)).test_data)["compare"] == compare


def test_the_comparison_mode_inside_apps_input_output():
    label = parse_label({"input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"], "compare": "float"})})

    assert label.compare == "float"


def test_kind_wins_over_keys():
    # A label with the keys of two formats is what its kind says.
    raw = {"tests": ["assert add(1, 2) == 3"], "test": CHECK, "entry_point": "add"}

    assert parse_label(raw).kind == "check"
    assert parse_label({**raw, "kind": "asserts"}).kind == "asserts"


# -- other datasets' spellings ------------------------------------------------------

APPS_STDIO = {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}
APPS_CALL = {"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [[3], [10]]}


@pytest.mark.parametrize("raw", [
    pytest.param({"input_output": json.dumps(APPS_STDIO)}, id="json-string"),
    pytest.param({"input_output": APPS_STDIO}, id="already-decoded"),
    pytest.param(json.dumps({"input_output": json.dumps(APPS_STDIO)}), id="whole-row-as-json"),
    pytest.param({"input_output": json.dumps(APPS_STDIO), "difficulty": "interview"}, id="other-columns"),
])
def test_apps_input_output_is_stdio(raw):
    label = parse_label(raw)

    assert isinstance(label, StdioLabel)
    assert (label.inputs, label.outputs) == (APPS_STDIO["inputs"], APPS_STDIO["outputs"])


def test_apps_input_output_with_fn_name_is_call_based():
    label = parse_label({"input_output": json.dumps(APPS_CALL)})

    assert isinstance(label, CallLabel)
    assert (label.fn_name, label.inputs, label.outputs) == ("add", [[1, 2], [5, 5]], [[3], [10]])
    assert label.expected.total == 2


@pytest.mark.parametrize("language", ["python", "python3", "Python", "py"])
def test_open_r1_verification_info_is_stdio(language):
    raw = {"language": language, "test_cases": [
        {"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
        {"input": "5 5\n", "output": "10\n", "type": "stdin_stdout"},
        {"input": "0 0\n", "output": "0\n"},  # the type defaults to stdin_stdout
    ]}

    label = parse_label(json.dumps(raw))

    assert isinstance(label, StdioLabel)
    assert (label.inputs, label.outputs) == (["1 2\n", "5 5\n", "0 0\n"], ["3\n", "10\n", "0\n"])
    assert label.expected.total == 3


def test_open_r1_keeps_its_options():
    raw = {"language": "python", "case_timeout_s": 1.5, "float_tolerance": 0.01,
           "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}]}

    label = parse_label(raw)

    assert (label.case_timeout_s, label.float_tolerance) == (1.5, 0.01)


def test_mbpp_columns_are_asserts():
    raw = {"test_list": ["assert f(1) == 2", "assert f(2) == 3"], "test_setup_code": "OFFSET = 1",
           "test_imports": ["import math", "import re"], "challenge_test_list": []}

    label = parse_label(raw)

    assert isinstance(label, AssertLabel)
    assert label.tests == ["assert f(1) == 2", "assert f(2) == 3"]
    assert label.setup == "import math\nimport re\nOFFSET = 1"
    assert label.expected.total == 2


def test_mbpp_columns_without_setup():
    label = parse_label({"test_list": ["assert f(1) == 2"]})

    assert (label.tests, label.setup) == (["assert f(1) == 2"], "")


def test_codecontests_singular_keys_are_stdio():
    label = parse_label({"input": ["1 2\n", "5 5\n"], "output": ["3\n", "10\n"]})

    assert isinstance(label, StdioLabel)
    assert (label.inputs, label.outputs) == (["1 2\n", "5 5\n"], ["3\n", "10\n"])


def test_stdio_cases_given_as_lists_of_lines_are_joined():
    label = parse_label({"inputs": [["2", "1 2"], "3\n"], "outputs": [["3"], "3\n"]})

    assert (label.inputs, label.outputs) == (["2\n1 2\n", "3\n"], ["3\n", "3\n"])


def test_humaneval_row_is_a_check_with_its_prompt():
    prompt = "def add(a, b):\n    \"\"\"Add.\"\"\"\n"
    label = parse_label({"task_id": "HumanEval/0", "prompt": prompt, "test": CHECK, "entry_point": "add",
                         "canonical_solution": "    return a + b\n"})

    assert isinstance(label, CheckLabel)
    assert label.prompt == prompt


# -- math answers -------------------------------------------------------------------

@pytest.mark.parametrize("raw, answer", [
    pytest.param("42", "42", id="json-number"),
    pytest.param(42, "42", id="int"),
    pytest.param(3.5, "3.5", id="float"),
    pytest.param(-7, "-7", id="negative"),
    pytest.param('"7"', "7", id="json-string-of-string"),
    pytest.param("\\frac{1}{2}", "\\frac{1}{2}", id="bare-latex"),
    pytest.param("  x = 3  ", "x = 3", id="bare-stripped"),
    pytest.param("def test_a(): pass", "def test_a(): pass", id="short-line-is-an-answer"),
    pytest.param(b"42", "42", id="bytes"),
    pytest.param({"answer": 7}, "7", id="object-with-number"),
    pytest.param({"answer": " 7 "}, "7", id="object-stripped"),
    pytest.param({"kind": "math", "answer": "#### 5"}, "5", id="explicit-kind"),
    pytest.param("#### 72", "72", id="gsm8k-marker"),
    pytest.param("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72", "72", id="gsm8k-answer"),
    pytest.param({"answer": "Half of 2,000 is 1,000.\n#### 1,000"}, "1,000", id="gsm8k-object"),
    pytest.param("a #### b #### 9", "9", id="gsm8k-last-marker"),
])
def test_math_answers(raw, answer):
    label = parse_label(raw)

    assert isinstance(label, MathLabel)
    assert label.kind == "math"
    assert label.answer == answer


def test_a_bare_answer_may_be_long_but_not_too_long():
    assert parse_label("x" * 1000).answer == "x" * 1000
    with pytest.raises(LabelError, match="nor a short answer"):
        parse_label("x" * 1001)


# -- labels that cannot be used ---------------------------------------------------------

@pytest.mark.parametrize("raw, message", [
    # kinds and keys
    pytest.param({"kind": "nope", "pytest": TESTS}, f"unknown label kind 'nope' (known: {KINDS})", id="unknown-kind"),
    pytest.param('{"kind": "mbpp"}', f"unknown label kind 'mbpp' (known: {KINDS})", id="unknown-kind-json"),
    pytest.param({"kind": 7}, f"unknown label kind 7 (known: {KINDS})", id="non-string-kind"),
    pytest.param({"kind": ["pytest"], "pytest": TESTS}, "unknown label kind ['pytest']", id="list-kind"),
    pytest.param({"kind": {"name": "pytest"}, "pytest": TESTS}, "unknown label kind {'name': 'pytest'}", id="dict-kind"),
    pytest.param({}, "cannot tell the label's format from its keys []", id="empty-object"),
    pytest.param({"question": "q", "solution": "s"}, "cannot tell the label's format from its keys ['question', 'solution']",
                 id="unknown-keys"),
    pytest.param({"fn_name": "add"}, "cannot tell the label's format from its keys ['fn_name']", id="fn-name-alone"),
    pytest.param({"test": CHECK}, "cannot tell the label's format from its keys ['test']", id="check-without-entry-point"),
    # not an object, nor an answer
    pytest.param("[1, 2]", "label must be a JSON object or an answer, got list", id="json-array"),
    pytest.param("null", "label must be a JSON object or an answer, got NoneType", id="json-null"),
    pytest.param("true", "label must be a JSON object or an answer, got bool", id="json-bool"),
    pytest.param(None, "label must be a JSON object or an answer, got NoneType", id="none"),
    pytest.param(True, "label must be a JSON object or an answer, got bool", id="bool"),
    pytest.param(["assert f(1) == 2"], "label must be a JSON object or an answer, got list", id="list"),
    # text that is neither JSON nor a short answer
    pytest.param("", "label is not valid JSON: ", id="empty-string"),
    pytest.param("  \n ", "label is not valid JSON: ", id="blank-string"),
    pytest.param("{'pytest': 'x'}", "label is not valid JSON: ", id="python-repr"),
    pytest.param('{"tests": ["assert f(1) == 2"],}', "label is not valid JSON: ", id="brace-prefixed-invalid-json"),
    pytest.param("[1, 2", "label is not valid JSON: ", id="bracket-prefixed-invalid-json"),
    pytest.param("def test_a():\n    pass\n", "label is not valid JSON, nor a short answer: ", id="multi-line-module"),
    pytest.param("first line\nsecond line", "label is not valid JSON, nor a short answer: ", id="multi-line-text"),
    # pytest
    pytest.param({"kind": "pytest"}, "bad pytest label: ", id="pytest-kind-without-module"),
    pytest.param({"pytest": 123}, "bad pytest label: ", id="pytest-module-not-a-string"),
    pytest.param({"pytest": ""}, "the pytest label holds no tests", id="pytest-empty-module"),
    pytest.param({"pytest": "from solution import f\n\ndef helper():\n    assert f()\n"},
                 "the pytest label holds no tests", id="pytest-no-test-functions"),
    pytest.param({"pytest": "def test_a(:\n    pass\n"}, "test code does not parse: invalid syntax", id="pytest-syntax-error"),
    # asserts
    pytest.param({"tests": []}, "bad asserts label: ", id="asserts-empty-list"),
    pytest.param({"test_list": []}, "bad asserts label: ", id="mbpp-empty-list"),
    pytest.param({"tests": ["assert f(1) =="]}, "test code does not parse", id="assert-does-not-parse"),
    pytest.param({"tests": ["assert f(1) == 2", "assert f(2) == 3 3"]}, "test code does not parse",
                 id="second-assert-does-not-parse"),
    pytest.param({"tests": ["assert f(1) == 2"], "setup": "import ("}, "test code does not parse", id="setup-does-not-parse"),
    pytest.param({"tests": ["assert f(1) == 2\x00"]}, "test code does not parse", id="assert-with-null-byte"),
    pytest.param({"tests": "assert f(1) == 2"}, "bad asserts label: ", id="asserts-not-a-list"),
    # check
    pytest.param({"test": "def test(candidate):\n    assert candidate(1)\n", "entry_point": "f"},
                 "the test defines no top-level function check(candidate)", id="check-without-def-check"),
    pytest.param({"test": "class T:\n    def check(self, candidate):\n        assert candidate(1)\n", "entry_point": "f"},
                 "the test defines no top-level function check(candidate)", id="check-only-as-a-method"),
    pytest.param({"test": "def check():\n    assert True\n", "entry_point": "f"},
                 "check() takes no argument for the candidate", id="check-without-argument"),
    pytest.param({"test": "def check(candidate)\n    pass\n", "entry_point": "f"}, "test code does not parse",
                 id="check-does-not-parse"),
    pytest.param({"test": CHECK, "entry_point": ""}, "bad check label: ", id="check-empty-entry-point"),
    # stdio and call
    pytest.param({"inputs": ["1\n", "2\n"], "outputs": ["1\n"]}, "2 inputs but 1 outputs", id="stdio-length-mismatch"),
    pytest.param({"input": ["1\n"], "output": []}, "1 inputs but 0 outputs", id="codecontests-length-mismatch"),
    pytest.param({"fn_name": "f", "inputs": [[1]], "outputs": [1, 2]}, "1 inputs but 2 outputs", id="call-length-mismatch"),
    pytest.param({"input_output": json.dumps({"inputs": ["1\n"], "outputs": []})}, "1 inputs but 0 outputs",
                 id="apps-length-mismatch"),
    pytest.param({"inputs": [], "outputs": []}, "the stdio label holds no tests", id="stdio-no-cases"),
    pytest.param({"fn_name": "f", "inputs": [], "outputs": []}, "the call label holds no tests", id="call-no-cases"),
    pytest.param({"fn_name": "", "inputs": [[1]], "outputs": [1]}, "bad call label: ", id="call-empty-fn-name"),
    pytest.param({"fn_name": "f", "inputs": [1, 2], "outputs": [1, 2]}, "bad call label: ", id="call-args-not-lists"),
    pytest.param({"inputs": [1], "outputs": ["1\n"]}, "bad stdio label: ", id="stdio-input-not-text"),
    pytest.param({"inputs": ["1\n"], "outputs": ["1\n"], "case_timeout_s": 0}, "bad stdio label: ", id="zero-case-timeout"),
    pytest.param({"inputs": ["1\n"], "outputs": ["1\n"], "float_tolerance": -1}, "bad stdio label: ",
                 id="negative-tolerance"),
    pytest.param({"inputs": ["1\n"], "outputs": ["1\n"], "compare": "loose"}, "bad stdio label: ", id="unknown-compare"),
    # APPS input_output
    pytest.param({"input_output": "{not json"}, "input_output is not valid JSON: ", id="input-output-invalid-json"),
    pytest.param({"input_output": ""}, "input_output is not valid JSON: ", id="input-output-empty"),
    pytest.param({"input_output": "[1, 2]"}, "input_output must be an object", id="input-output-array"),
    # open-r1
    pytest.param({"language": "cobol", "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}]},
                 "bad stdio label: language: unknown language 'cobol' (known: cpp, cpp20, go, java, javascript, "
                 "python, rust)", id="open-r1-unknown-language"),
    pytest.param({"language": 3, "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}]},
                 "bad stdio label: language: must be a language's name, got int", id="open-r1-language-not-text"),
    pytest.param({"language": "python", "test_cases": [{"input": "f(1)", "output": "1", "type": "function_call"}]},
                 "test case types ['function_call'] are not supported (only stdin_stdout)", id="open-r1-function-call"),
    pytest.param({"language": "python", "test_cases": [{"input": "1\n", "output": "1\n", "type": "stdin_stdout"},
                                                        {"input": "f(1)", "output": "1", "type": "function_call"}]},
                 "test case types ['function_call', 'stdin_stdout'] are not supported", id="open-r1-mixed-types"),
    pytest.param({"language": "python", "test_cases": "1\n"}, "test_cases must be a list of objects", id="open-r1-not-a-list"),
    pytest.param({"language": "python", "test_cases": ["1\n"]}, "test_cases must be a list of objects",
                 id="open-r1-cases-not-objects"),
    pytest.param({"language": "python", "test_cases": [{"output": "1\n", "type": "stdin_stdout"}]}, "bad stdio label: ",
                 id="open-r1-case-without-input"),
    # math
    pytest.param({"answer": ""}, "bad math label: ", id="math-empty-answer"),
    pytest.param({"answer": "   "}, "bad math label: ", id="math-blank-answer"),
    pytest.param({"answer": None}, "cannot tell the label's format from its keys [] (null, read as absent: answer)",
                 id="math-null-answer"),
    # a required key that is null: named in the error (optional ones read as absent, below)
    pytest.param({"kind": "check", "test": CHECK, "entry_point": None}, "bad check label: entry_point: null, and required",
                 id="check-null-entry-point"),
    pytest.param({"test": CHECK, "entry_point": None, "tests": None},
                 "cannot tell the label's format from its keys ['test'] (null, read as absent: entry_point, tests)",
                 id="check-null-entry-point-by-keys"),
    pytest.param({"kind": "stdio", "inputs": ["1\n"], "outputs": None}, "bad stdio label: outputs: null, and required",
                 id="stdio-null-outputs"),
])
def test_unusable_labels_raise_label_error(raw, message):
    with pytest.raises(LabelError) as caught:
        parse_label(raw)

    assert message in str(caught.value)


def test_open_r1_without_cases_is_unusable():
    with pytest.raises(LabelError):
        parse_label({"language": "python", "test_cases": []})


def test_errors_name_the_format_and_the_field():
    with pytest.raises(LabelError) as caught:
        parse_label({"fn_name": "f", "inputs": "not a list", "outputs": [1]})

    assert str(caught.value).startswith("bad call label: inputs: ")


def test_label_error_is_a_value_error():
    # Callers that only know ValueError still catch a bad label.
    assert issubclass(LabelError, ValueError)


@pytest.mark.parametrize("kind", list(FORMATS))
def test_labels_are_frozen(kind):
    label = parse_label(FORMATS[kind][0])

    with pytest.raises(ValueError, match="frozen"):
        label.kind = "pytest"
    assert label.kind == kind


def test_equal_labels_are_parsed_once():
    # A GRPO group shares one label: its samples share one frozen label object.
    raw = {"tests": ["assert add(1, 2) == 3"], "setup": "import math"}

    first = parse_label(raw)

    assert parse_label(dict(reversed(list(raw.items())))) is first
    assert parse_label(json.dumps(raw)) is parse_label(json.dumps(raw))
    raw["tests"].append("assert add(0, 0) == 0")  # the caller's object stays the caller's
    assert first.tests == ["assert add(1, 2) == 3"]
    assert parse_label(raw).tests == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]


def test_label_values_that_are_not_json_data_are_refused():
    with pytest.raises(LabelError, match="a set is not JSON data"):
        parse_label({"fn_name": "f", "inputs": [[1]], "outputs": [{1, 2}]})


def test_an_unusable_label_fails_every_time():
    for _ in range(2):
        with pytest.raises(LabelError, match="2 inputs but 1 outputs"):
            parse_label({"inputs": ["1\n", "2\n"], "outputs": ["1\n"]})


# -- labels from an Arrow struct column (`datasets`): every row has every key, null where it had none

STRUCT_KEYS = sorted({key for raw, _ in FORMATS.values() for key in raw} | {"kind"})


@pytest.mark.parametrize("kind", list(FORMATS))
def test_a_struct_rows_null_keys_read_as_absent(kind):
    # `Dataset.from_list` of labels of every format: each row gets every other format's keys as null.
    raw, cls = FORMATS[kind]
    row = {key: raw.get(key) for key in STRUCT_KEYS}

    label = parse_label(row)

    assert type(label) is cls and label == parse_label(raw)
    assert parse_label(json.dumps(row)) == label  # the same row written out as JSON text


@pytest.mark.parametrize("raw, same_as", [
    pytest.param({"tests": ["assert add(1, 2) == 3"], "setup": None}, {"tests": ["assert add(1, 2) == 3"]},
                 id="asserts-null-setup"),
    pytest.param({"test_list": ["assert add(1, 2) == 3"], "test_setup_code": None, "test_imports": None},
                 {"tests": ["assert add(1, 2) == 3"]}, id="mbpp-null-setup"),
    pytest.param({"test": CHECK, "entry_point": "add", "prompt": None}, {"test": CHECK, "entry_point": "add"},
                 id="check-null-prompt"),
    pytest.param({"inputs": ["1 2\n"], "outputs": ["3\n"], "fn_name": None}, {"inputs": ["1 2\n"], "outputs": ["3\n"]},
                 id="stdio-null-fn-name"),
    pytest.param({"input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"], "fn_name": None})},
                 {"inputs": ["1 2\n"], "outputs": ["3\n"]}, id="apps-null-fn-name"),
    pytest.param({"fn_name": "f", "inputs": [[1]], "outputs": [1], "compare": None, "case_timeout_s": None,
                  "float_tolerance": None}, {"fn_name": "f", "inputs": [[1]], "outputs": [1]}, id="call-null-options"),
    pytest.param({"pytest": TESTS, "in_process": None}, {"pytest": TESTS}, id="pytest-null-in-process"),
    pytest.param({"answer": "7", "precision": None, "match_types": None, "strict": None}, {"answer": "7"},
                 id="math-null-options"),
    pytest.param({"language": None, "test_cases": [{"input": "1\n", "output": "1\n", "type": None}]},
                 {"inputs": ["1\n"], "outputs": ["1\n"]}, id="open-r1-null-language-and-type"),
])
def test_null_optional_keys_read_as_absent(raw, same_as):
    assert parse_label(raw) == parse_label(same_as)


def test_a_dict_argument_keeps_its_key_order():
    # HumanEval/95 as a call label: the function decides by the first key it iterates.
    # The label cache once keyed (and re-parsed) labels by JSON with sorted keys:
    # {"p": .., "A": .., "B": ..} reached the function as {"A": .., "B": .., "p": ..}.
    raw = {"fn_name": "check_dict_case", "inputs": [[{"p": "pineapple", "A": "banana", "B": "banana"}]],
           "outputs": [False]}
    data = json.loads(parse_label(raw).request("pass", Limits()).test_data)
    assert list(data["cases"][0]["args"][0]) == ["p", "A", "B"]
    reordered = {**raw, "inputs": [[{"A": "banana", "B": "banana", "p": "pineapple"}]]}
    data = json.loads(parse_label(reordered).request("pass", Limits()).test_data)
    assert list(data["cases"][0]["args"][0]) == ["A", "B", "p"]
