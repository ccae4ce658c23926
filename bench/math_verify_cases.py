"""The (gold, prediction, expected) cases that Math-Verify's own test suite
asserts, with each test's options, read from the math-verify sdist on PyPI.

    .venv/bin/python bench/math_verify_cases.py [--sdist FILE] [--json FILE]

The sdist (math_verify-<version>.tar.gz, holding the suite's tests/test_*.py)
is the one of the installed math-verify's version, pinned in constraints.txt:
`make install` downloads it with pip into bench/.cache (git-ignored). It is
read in place with tarfile; the test files are parsed as syntax trees, never
imported or run, and nothing is extracted. Run as a script it prints the
counts and, with --json, writes the cases for inspection (default path under
bench/.cache). The cases are Apache-2.0, Copyright 2025 HuggingFace Inc. (the
sdist's LICENCE).

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
import importlib.metadata
import json
import math
import sys
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

CACHE = Path(__file__).parent / ".cache"
HELPER = "compare_strings"
HELPER_FILE = "tests/test_all.py"
OPTIONS = ("match_types", "precision", "strict", "allow_set_relation_comp")
GOLD, PRED, EXPECTED = ("gold",), ("pred",), ("expected", "result")


def sdist_path(cache: Path = CACHE) -> Path:
    """Where `make install` puts the sdist of the installed math-verify."""
    return cache / f"math_verify-{importlib.metadata.version('math-verify')}.tar.gz"


def load(sdist: Path | None = None) -> dict[str, Any]:
    """The cases and the helper's defaults, read from the sdist (default: `sdist_path()`)."""
    sdist = sdist or sdist_path()
    if not sdist.is_file():
        raise FileNotFoundError(f"{sdist} is missing: run `make install` (it downloads math-verify's sdist from PyPI "
                                "with pip, for Math-Verify's own test cases)")
    with tarfile.open(sdist, "r:gz") as archive:
        sources = {}
        for member in archive.getmembers():
            parts = PurePosixPath(member.name).parts  # math_verify-<version>/tests/test_x.py
            if (member.isfile() and len(parts) == 3 and parts[1] == "tests"
                    and parts[2].startswith("test_") and parts[2].endswith(".py")):
                sources["/".join(parts[1:])] = archive.extractfile(member).read().decode("utf-8")
    if HELPER_FILE not in sources:
        raise ValueError(f"{sdist} holds no {HELPER_FILE}: not a math-verify sdist with its tests")
    defaults = _helper_defaults(ast.parse(sources[HELPER_FILE]))
    cases = [case for name in sorted(sources) for case in _cases(name, ast.parse(sources[name]), defaults)]
    return {"source": f"{sdist.name} (math-verify's sdist on PyPI)", "files": sorted(sources),
            "helper_defaults": defaults, "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="default: the installed version's, in bench/.cache")
    parser.add_argument("--json", type=Path, nargs="?", const=CACHE / "math_verify_cases.json",
                        help="write the cases there (default bench/.cache/math_verify_cases.json)")
    args = parser.parse_args()
    document = load(args.sdist)
    cases = document["cases"]
    via = {kind: sum(case["via"] == kind for case in cases) for kind in ("helper", "parse")}
    print(f"{len(cases)} cases ({via['helper']} through {HELPER}, {via['parse']} through parse and verify) "
          f"from {len(document['files'])} test files of {document['source']}")
    if args.json:
        args.json.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"-> {args.json}", file=sys.stderr)


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
