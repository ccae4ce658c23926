"""The benchmark's corpus in each label format (`bench.py --format`), made
from the same HumanEval samples (corpus.py), and the program each sample is
for the `bare-program` contestant (a program judged by its exit status).

    check    HumanEval's own label, as corpus.py builds it
    asserts  the check label's cases (one assert each) on the entry point's
             name: `assert candidate(x) == y` becomes `assert f(x) == y`;
             cases that are not a plain assert are left out
    call     {fn_name, inputs, outputs} from the cases `candidate(<literal
             args>) == <literal>` whose arguments are JSON data (what a call
             label's inputs are); problems with none are left out
    stdio    the same literal cases, the completion made a program that reads
             one JSON argument list on stdin and prints the JSON of the result;
             the outputs are that JSON (compared as tokens, the default)
    pytest   the baselines' plain pytest module (corpus.plain_test_module) as a
             pytest label

Every format keeps the variants, so each has right and wrong answers. A
`crash_some` completion crashes on some of its calls by count (corpus.py; in
asserts, among the calls of the asserts kept); in call and stdio, where a call
may run in a process of its own (stdio: one per input), it crashes instead on
a seeded subset of the cases' arguments.
"""

import ast
import json
import random
from typing import Any

from corpus import BenchSample, Problem, _wrapper, plain_test_module, split_cases, test_data

FORMATS = ("check", "asserts", "call", "stdio", "pytest")

STDIO_MAIN = '''

if __name__ == "__main__":
    import json as _rb_json
    import sys as _rb_sys
    print(_rb_json.dumps({name}(*_rb_json.loads(_rb_sys.stdin.read()))))
'''

CALL_MAIN = '''

_RB_CASES = [
{cases}]
for _rb_args, _rb_want in _RB_CASES:
    assert {name}(*_rb_args) == _rb_want, (_rb_args, _rb_want)
'''


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node) if node.id == self.old else node


def assert_cases(problem: Problem) -> list[str]:
    """The check label's cases that are a plain assert, `candidate` renamed
    to the entry point."""
    out = []
    for case in split_cases(problem):
        try:
            tree = ast.parse(case["source"])
        except SyntaxError:
            continue
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
            continue
        out.append(ast.unparse(_Rename("candidate", problem.entry_point).visit(tree)))
    return out


def _json_exact(value: Any) -> bool:
    """Whether `value` survives a trip through JSON unchanged, types included."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(map(_json_exact, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    return False


def _jsonable(value: Any) -> bool:
    """Whether JSON can write `value`, tuples as lists (a call label's
    comparison takes a tuple for a list)."""
    if isinstance(value, tuple):
        return all(map(_jsonable, value))
    if isinstance(value, list):
        return all(map(_jsonable, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return _json_exact(value)


def literal_cases(problem: Problem) -> list[tuple[list[Any], Any]]:
    """(arguments, expected value) of each case `candidate(<literals>) ==
    <literal>`: arguments JSON data as they are, the value JSON-writable."""
    out = []
    for case in split_cases(problem):
        try:
            node = ast.parse(case["source"]).body[0]
        except (SyntaxError, IndexError):
            continue
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Eq)):
            continue
        call, want_node = node.test.left, node.test.comparators[0]
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "candidate"
                and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)):
            continue
        try:
            args = [ast.literal_eval(a) for a in call.args]
            want = ast.literal_eval(want_node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if _json_exact(args) and _jsonable(want):
            out.append((args, want))
    return out


def _counted_crash(problem: Problem, sample: BenchSample, calls: int) -> str:
    """crash_some for asserts: as corpus.py's, on a seeded subset of its first
    `calls` calls (the check label's may be past the asserts kept)."""
    rng = random.Random(sample.id)
    crashing = sorted(rng.sample(range(1, calls + 1), max(1, rng.randint(1, max(1, calls // 2)))))
    body = (f"if _rb_calls in {set(crashing)!r}:\n        raise RuntimeError('broken on call %d' % _rb_calls)\n"
            f"    return _rb_original(*args, **kwargs)")
    return problem.prompt + problem.canonical_solution + _wrapper(problem.entry_point, body)


def _keyed_crash(problem: Problem, sample: BenchSample, cases: list[tuple[list[Any], Any]]) -> str:
    """crash_some for call and stdio: raises on a seeded subset of the cases' arguments."""
    rng = random.Random(sample.id)
    keys = sorted({json.dumps(args) for args, _ in cases})
    crashing = sorted(rng.sample(keys, max(1, rng.randint(1, max(1, len(keys) // 2)))))
    body = (f"import json as _rb_json\n    if _rb_json.dumps(list(args)) in {set(crashing)!r}:\n"
            f"        raise RuntimeError('broken on ' + _rb_json.dumps(list(args)))\n"
            f"    return _rb_original(*args, **kwargs)")
    return problem.prompt + problem.canonical_solution + _wrapper(problem.entry_point, body)


def in_format(sample: BenchSample, problem: Problem, fmt: str) -> BenchSample | None:
    """`sample` with the label (and, for stdio, the program) of format `fmt`,
    or None when its problem has no case in that format."""
    if fmt == "check":
        return sample
    name = problem.entry_point
    if fmt == "pytest":
        return sample.model_copy(update={"label": {"pytest": plain_test_module(test_data(
            problem.test, name, problem.prompt))}})
    if fmt == "asserts":
        asserts = assert_cases(problem)
        if not asserts:
            return None
        setup = json.loads(test_data(problem.test, name, problem.prompt)).get("setup") or ""
        completion = _counted_crash(problem, sample, len(asserts)) if sample.variant == "crash_some" \
            else sample.completion
        return sample.model_copy(update={"label": {"kind": "asserts", "tests": asserts, "setup": setup},
                                         "completion": completion})
    cases = literal_cases(problem)
    if not cases:
        return None
    completion = _keyed_crash(problem, sample, cases) if sample.variant == "crash_some" else sample.completion
    if fmt == "call":
        label = {"kind": "call", "fn_name": name, "inputs": [a for a, _ in cases],
                 "outputs": [json.loads(json.dumps(w)) for _, w in cases]}
        return sample.model_copy(update={"label": label, "completion": completion})
    if fmt == "stdio":
        label = {"kind": "stdio", "inputs": [json.dumps(a) + "\n" for a, _ in cases],
                 "outputs": [json.dumps(w) + "\n" for _, w in cases]}
        return sample.model_copy(update={"label": label, "completion": completion + STDIO_MAIN.format(name=name)})
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def corpus_in_format(samples: list[BenchSample], problems: list[Problem], fmt: str) -> list[BenchSample]:
    by_id = {p.task_id: p for p in problems}
    return [s for s in (in_format(s, by_id[s.task_id], fmt) for s in samples) if s is not None]


def bare_program(sample: BenchSample, problem: Problem, fmt: str, code: str) -> dict:
    """What `bare-program` runs for the sample: `source` once (exit status
    judges), or for stdio once per input, its stdout against the output.
    `code` is the completion's program as rewardbox runs it (label.program)."""
    name = problem.entry_point
    if fmt in ("check", "pytest"):
        return {"source": f"{code}\n\n{problem.test}\n\ncheck({name})\n"}
    if fmt == "asserts":
        label = sample.label
        return {"source": "\n".join([code, "", label["setup"], "", *label["tests"], ""])}
    cases = literal_cases(problem)
    if fmt == "call":
        rows = "".join(f"    ({args!r}, {want!r}),\n" for args, want in cases)
        return {"source": code + CALL_MAIN.format(cases=rows, name=name)}
    if fmt == "stdio":
        return {"source": code, "inputs": sample.label["inputs"], "outputs": sample.label["outputs"]}
    raise ValueError(f"unknown format {fmt!r}")

