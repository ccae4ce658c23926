"""Reads the (gold, prediction, expected) cases that Math-Verify's own test
suite asserts, with each test's options, into tests/data/math_verify_cases.json.

    python scripts/math_verify_cases.py /path/to/Math-Verify [--commit SHA] [--out FILE]

The path is a clone of https://github.com/huggingface/Math-Verify (a bare git
directory or a work tree); the files are read at `--commit` (default HEAD) with
`git show`, and the commit is written beside the cases. Only data is taken:
the test files are read as syntax trees, never imported or run.

A case is a `pytest.mark.parametrize` row of a test whose parameters name a
gold answer, a prediction and the expected result, or a literal assertion
`compare_strings(gold, pred, ...) == expected`. Its options are the keyword
arguments the test passes to the suite's `compare_strings` helper (literal, or
one of the row's parameters), over that helper's own defaults; a test that
calls `verify(parse(gold), parse(pred))` directly gets no options (math-verify's
defaults), marked `"via": "parse"`.
"""

import argparse
import ast
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

HELPER = "compare_strings"
HELPER_FILE = "tests/test_all.py"
OPTIONS = ("match_types", "precision", "strict", "allow_set_relation_comp")
GOLD, PRED, EXPECTED = ("gold",), ("pred",), ("expected", "result")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone of huggingface/Math-Verify")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "tests/data/math_verify_cases.json")
    args = parser.parse_args()
    commit = _git(args.repo, "rev-parse", f"{args.commit}^{{commit}}").strip()
    files = sorted(name for name in _git(args.repo, "ls-tree", "--name-only", commit, "tests/").split()
                   if Path(name).name.startswith("test_") and name.endswith(".py"))
    defaults = _helper_defaults(ast.parse(_git(args.repo, "show", f"{commit}:{HELPER_FILE}")))
    cases = [case for name in files
             for case in _cases(name, ast.parse(_git(args.repo, "show", f"{commit}:{name}")), defaults)]
    document = {
        "source": "https://github.com/huggingface/Math-Verify",
        "commit": commit,
        "license": "Apache-2.0, Copyright 2025 HuggingFace Inc.: see math_verify_cases.LICENSE",
        "generated_by": "scripts/math_verify_cases.py",
        "helper_defaults": defaults,
        "cases": cases,
    }
    args.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases from {len(files)} files at {commit} -> {args.out}", file=sys.stderr)


def _git(repo: Path, *command: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True, text=True).stdout


def _helper_defaults(module: ast.Module) -> dict[str, Any]:
    helper = next(node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == HELPER)
    names = [arg.arg for arg in helper.args.args]
    values = dict(zip(names[len(names) - len(helper.args.defaults):], helper.args.defaults))
    return {name: ast.literal_eval(values[name]) for name in OPTIONS}


def _cases(file: str, module: ast.Module, defaults: dict[str, Any]) -> list[dict[str, Any]]:
    cases = []
    for test in (node for node in module.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
        call = _call(test)
        for decorator in test.decorator_list:
            if isinstance(decorator, ast.Call) and _dotted(decorator.func) == "pytest.mark.parametrize":
                argnames, argvalues = decorator.args[:2]
                names = [name.strip() for name in ast.literal_eval(argnames).split(",")]
                if not (_find(names, GOLD) and _find(names, PRED) and _find(names, EXPECTED)):
                    continue
                for index, row in enumerate(_literal(argvalues)):
                    values = dict(zip(names, row))
                    cases.append(_case(file, test.name, index, values[_find(names, GOLD)], values[_find(names, PRED)],
                                       values[_find(names, EXPECTED)], call, defaults, values))
        if not test.decorator_list:
            for index, (gold, pred, expected, keywords) in enumerate(_literal_assertions(test)):
                cases.append(_case(file, test.name, index, gold, pred, expected, ("helper", keywords), defaults, {}))
    return cases


def _case(file: str, test: str, index: int, gold: str, pred: str, expected: Any,
          call: tuple[str, dict[str, ast.expr]] | None, defaults: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    if call is None:
        raise SystemExit(f"{file}::{test} calls neither {HELPER} nor verify(parse(...)): its options are unknown")
    via, keywords = call
    options: dict[str, Any] = {}
    if via == "helper":
        options = dict(defaults)
        for name, value in keywords.items():
            options[name] = row[value.id] if isinstance(value, ast.Name) else ast.literal_eval(value)
    return {"id": f"{file}::{test}[{index}]", "gold": gold, "pred": pred, "expected": bool(expected),
            "via": via, "options": options}


def _call(test: ast.FunctionDef) -> tuple[str, dict[str, ast.expr]] | None:
    """How the test compares its row: through the helper (with which keywords) or parse and verify directly."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and _dotted(node.func) == HELPER:
            return "helper", {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg in OPTIONS}
        if (isinstance(node, ast.Call) and _dotted(node.func) == "verify" and len(node.args) == 2
                and all(isinstance(arg, ast.Call) and _dotted(arg.func) == "parse" and len(arg.args) == 1
                        and not arg.keywords for arg in node.args) and not node.keywords):
            return "parse", {}
    return None


def _literal_assertions(test: ast.FunctionDef) -> list[tuple[str, str, Any, dict[str, ast.expr]]]:
    """`assert compare_strings("<gold>", "<pred>", ...) == <expected>` with literal arguments."""
    found = []
    for node in ast.walk(test):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and _dotted(node.left.func) == HELPER
                and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
            gold, pred = (ast.literal_eval(arg) for arg in node.left.args[:2])
            keywords = {keyword.arg: keyword.value for keyword in node.left.keywords if keyword.arg in OPTIONS}
            found.append((gold, pred, ast.literal_eval(node.comparators[0]), keywords))
    return found


def _literal(node: ast.expr) -> Any:
    """A literal, where f-strings may format a call of a `math` function on literals
    (`f"{math.sqrt(17):.15f}"`): that much is evaluated, nothing else is."""

    class Fold(ast.NodeTransformer):
        def visit_JoinedStr(self, joined: ast.JoinedStr) -> ast.Constant:
            return ast.Constant("".join(_formatted(part) for part in joined.values))

    return ast.literal_eval(Fold().visit(node))


def _formatted(part: ast.expr) -> str:
    if isinstance(part, ast.Constant):
        return str(part.value)
    assert isinstance(part, ast.FormattedValue) and part.conversion == -1, ast.dump(part)
    value = part.value
    if isinstance(value, ast.Call) and _dotted(value.func).startswith("math.") and not value.keywords:
        value = getattr(math, _dotted(value.func).removeprefix("math."))(*map(ast.literal_eval, value.args))
    else:
        value = ast.literal_eval(value)
    spec = "".join(_formatted(piece) for piece in part.format_spec.values) if part.format_spec else ""
    return format(value, spec)


def _find(names: list[str], wanted: tuple[str, ...]) -> str | None:
    return next((name for name in names if name in wanted), None)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


if __name__ == "__main__":
    main()
