"""A sample's text is parsed once on the host, whoever reads it (is it code,
does it define the entry point, what does it import; a label's test planned):
the trees are shared, so no reader may change one."""

import ast

import pytest

from rewardbox.rewards import syntax
from rewardbox.rewards.extract import extract_code
from rewardbox.rewards.label_syntax import defines, plan_check, top_imports
from rewardbox.rewards.labels import parse_label
from rewardbox.rewards.needed_modules import needed_modules
from rewardbox.rewards.syntax import MAX_HOST_PARSE_CHARS, TooComplex, parse
from rewardbox.sandbox import Limits

PROMPT = ('from typing import List\n\n\ndef _pair(a, b):\n    return [a, b]\n\n\n'
          'def add(a: float, b: float) -> float:\n    """The sum."""\n')
TEST = ("def check(candidate):\n    xs = _pair(1, 2)\n    assert candidate(*xs) == 3\n"
        "    assert candidate(2, 2) == 4\n    assert math.isclose(candidate(0.1, 0.2), 0.3)\n")
COMPLETION = "```python\nimport math\n\ndef add(a, b):\n    return math.fsum([a, b])\n```"


def test_the_same_text_is_parsed_once():
    source = "def f():\n    return 41 + 1\n"
    assert parse(source) is parse(source)
    assert parse(source + "\n") is not parse(source)


def test_the_trees_kept_are_bounded_in_number_and_text():
    first = parse("first = 1\n")
    for i in range(syntax._TREES_MAX):
        parse(f"x{i} = {i}\n")
    assert parse("first = 1\n") is not first
    big = "x = 1\n" * (MAX_HOST_PARSE_CHARS // 6 + 1)  # above what the host parses for a completion
    assert parse(big) is not parse(big)
    assert len(syntax._TREES) <= syntax._TREES_MAX
    assert syntax._trees_chars == sum(len(s) for s in syntax._TREES) <= syntax._TREES_MAX_CHARS


def test_text_python_refuses_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(TooComplex):
            parse("x = " + "- " * 5000 + "1")
        with pytest.raises(SyntaxError):
            parse("def f(:\n")


def test_no_reader_changes_a_shared_tree():
    code = extract_code(COMPLETION)
    trees = {text: (parse(text), ast.dump(parse(text), include_attributes=True)) for text in (code, PROMPT, TEST)}
    label = parse_label({"test": TEST, "entry_point": "add", "prompt": PROMPT})
    program = label.program(COMPLETION)
    label.request(program, Limits())
    assert label.expected.total == 3
    defines(code, "add")
    top_imports(PROMPT)
    needed_modules(code)
    plan_check(TEST, "add", PROMPT)
    for text, (tree, dump) in trees.items():
        assert parse(text) is tree, "the tree was parsed again: nothing here tests sharing"
        assert ast.dump(tree, include_attributes=True) == dump
