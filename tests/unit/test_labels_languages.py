"""Labels with a `language`: stdio labels (and the datasets' shapes that become
them) carry it, the Python-only formats refuse another, and a label extracts
its program in its language."""

import json

import pytest

from rewardbox.rewards import LabelError, StdioLabel, parse_label
from rewardbox.sandbox import Limits

CASES = [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"}]
STDIO = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
CPP = "#include <cstdio>\nint main() { int a, b; scanf(\"%d %d\", &a, &b); printf(\"%d\\n\", a + b); }\n"
PY = "print(sum(map(int, input().split())))\n"
BOTH = f"```python\n{PY}```\nOr in C++:\n```cpp\n{CPP}```"


@pytest.mark.parametrize("raw, language", [
    pytest.param(STDIO, "python", id="default"),
    pytest.param({**STDIO, "language": "C++"}, "cpp", id="stdio-alias"),
    pytest.param({**STDIO, "language": "golang"}, "go", id="stdio-golang"),
    pytest.param({**STDIO, "language": "Python3"}, "python", id="stdio-python3"),
    pytest.param({"language": "cpp", "test_cases": CASES}, "cpp", id="open-r1-cpp"),
    pytest.param({"language": "java", "test_cases": CASES}, "java", id="open-r1-java"),
    pytest.param({"language": "python", "test_cases": CASES}, "python", id="open-r1-python"),
    pytest.param({"test_cases": CASES}, "python", id="open-r1-without-language"),
    pytest.param({"input_output": json.dumps(STDIO), "language": "rust"}, "rust", id="apps-shape"),
    pytest.param({"input": ["1 2\n"], "output": ["3\n"], "language": "cpp17"}, "cpp", id="codecontests-shape"),
    pytest.param({"kind": "stdio", **STDIO, "language": "nodejs"}, "javascript", id="explicit-kind"),
])
def test_a_stdio_label_carries_its_language_by_name(raw, language):
    label = parse_label(raw)

    assert isinstance(label, StdioLabel)
    assert label.language == language
    assert label.code_language() == language


@pytest.mark.parametrize("raw", [
    pytest.param({**STDIO, "language": "cobol"}, id="stdio"),
    pytest.param({"language": "COBOL", "test_cases": CASES}, id="open-r1"),
])
def test_an_unknown_language_is_the_dataset_s_error(raw):
    with pytest.raises(LabelError) as caught:
        parse_label(raw)

    assert "bad stdio label: language: unknown language" in str(caught.value)
    assert "(known: cpp, cpp20, go, java, javascript, python, rust)" in str(caught.value)


CHECK = "def check(candidate):\n    assert candidate(1) == 2\n"


@pytest.mark.parametrize("raw, kind", [
    pytest.param({"tests": ["assert f(1) == 2"]}, "asserts", id="asserts"),
    pytest.param({"test": CHECK, "entry_point": "f"}, "check", id="check"),
    pytest.param({"fn_name": "f", "inputs": [[1]], "outputs": [2]}, "call", id="call"),
    pytest.param({"pytest": "def test_a():\n    pass\n"}, "pytest", id="pytest"),
])
@pytest.mark.parametrize("language", ["cpp", "java", "cobol", 3])
def test_the_other_formats_are_python_only(raw, kind, language):
    with pytest.raises(LabelError) as caught:
        parse_label({**raw, "language": language})

    assert str(caught.value) == (f"bad {kind} label: label: the {kind} format is Python only, not language "
                                 f"{language!r}; a program in another language needs a stdio label (inputs and outputs)")


@pytest.mark.parametrize("raw", [
    pytest.param({"tests": ["assert f(1) == 2"]}, id="asserts"),
    pytest.param({"test": CHECK, "entry_point": "f"}, id="check"),
    pytest.param({"fn_name": "f", "inputs": [[1]], "outputs": [2]}, id="call"),
    pytest.param({"pytest": "def test_a():\n    pass\n"}, id="pytest"),
])
@pytest.mark.parametrize("language", ["python", "Py", "python3"])
def test_the_other_formats_take_python_by_any_name(raw, language):
    assert parse_label({**raw, "language": language}) == parse_label(raw)


def test_a_label_extracts_its_program_in_its_language():
    assert parse_label(STDIO).program(BOTH) == PY
    assert parse_label({**STDIO, "language": "cpp"}).program(BOTH) == CPP
    assert parse_label({**STDIO, "language": "java"}).program(BOTH) is None  # no Java in it
    assert parse_label({"tests": ["assert f(1) == 2"]}).program(BOTH) == PY


def test_a_program_in_another_language_never_becomes_a_python_run():
    request = parse_label({**STDIO, "language": "cpp"}).request(CPP, Limits())

    assert (request.language, request.files) == ("cpp", {"main.cpp": CPP})
    assert "solution.py" not in request.files


def test_a_python_stdio_request_is_unchanged_by_the_language_field():
    default, named = parse_label(STDIO), parse_label({**STDIO, "language": "py"})

    assert default == named
    assert default.request(PY, Limits()) == named.request(PY, Limits())
    assert "language" not in json.loads(named.request(PY, Limits()).test_data or "{}")
