"""What real pytest modules do that cannot cross a process boundary (issue 17):
a static survey of bench/.cache/pytest_corpus.jsonl.gz by syntax trees.

    .venv/bin/python bench/pytest_corpus_survey.py [--corpus FILE] [--examples 3] [--json FILE]

Out of process, the tests hold a stand-in `solution` module: calls cross as
plain data, the solution's objects stay behind as handles. A module that
depends on sharing the solution's process is found here by what it does with
the names it imports from `solution` (`from solution import f`, every name the
solution defines for `from solution import *`, `import solution as s`):

    patch_solution     monkeypatch/mock.patch of the solution's names, or assigning their attributes
    patch_shared       patching what both processes read for themselves: builtins (input, print, open),
                       sys (stdin, argv, stdout), os.environ, time, random, or seeding random,
                       setrecursionlimit, chdir: the solution's process would not see it
    introspection      inspect.* / dis.* of a solution object, its __doc__/__name__/__dict__/... , vars/dir
    identity           `is` / `is not` between two values that are not constants (maybe solution objects)
    isinstance_class   isinstance/issubclass/type() against a class the solution defines
    subclass_solution  a test class derived from a class the solution defines
    foreign_exception  pytest.raises/assertRaises/except of an exception class that is not a builtin
                       (the solution's own, numpy's, json's): exceptions cross as their builtin type
    callable_argument  a lambda, a test function or a test class given to the solution (or its decorator)
    non_plain_value    a value built by a non-builtin type (collections, datetime, decimal, fractions,
                       io, numpy, a class of the test's own) given to the solution or compared with
    in_place_argument  a call whose result is dropped, given a list/dict/set (or a parameter) the test
                       reads afterwards: the solution mutates its argument
    redirect_stdout    sys.stdout replaced or contextlib.redirect_stdout/stderr (capsys is supported)
    capture_fixture    capsys/capfd (supported by the design: listed to see how much rides on it)
    timing             time.time/perf_counter/timeit/signal.alarm in the test: a deadline the hop adds to
    reload             importlib.reload, sys.modules
    concurrency        threading, multiprocessing, concurrent.futures, asyncio in the test
    temp_files         tmp_path/tmpdir/tempfile (files outside the work directory)
    third_party        imports a module the sandbox image lacks (numpy, pandas, ..., or a module name
                       the tests' author invented): fails both ways

The findings are static and approximate (a name bound twice, say); each comes
with its line, and `--examples` prints some of them.
"""

import argparse
import ast
import builtins
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "bench/.cache/pytest_corpus.jsonl.gz"
FEATURES = ("patch_solution", "patch_shared", "introspection", "identity", "isinstance_class",
            "subclass_solution", "foreign_exception", "callable_argument", "non_plain_value",
            "in_place_argument", "redirect_stdout", "capture_fixture", "timing", "reload", "concurrency",
            "temp_files", "third_party")
# Features that can change a grade across the boundary (capture_fixture and temp_files are expected to work;
# timing and concurrency only may).
BREAKING = ("patch_solution", "patch_shared", "introspection", "identity", "isinstance_class",
            "subclass_solution", "foreign_exception", "callable_argument", "non_plain_value",
            "in_place_argument", "redirect_stdout", "reload")
SHARED_MODULES = {"builtins", "sys", "os", "time", "random", "datetime", "io", "socket", "subprocess",
                  "shutil", "pathlib", "requests", "urllib", "logging", "math", "uuid"}
NON_PLAIN_MODULES = {"collections", "datetime", "decimal", "fractions", "io", "numpy", "pandas", "array",
                     "enum", "dataclasses", "queue", "pathlib", "uuid"}
DUNDERS = {"__dict__", "__file__", "__name__", "__doc__", "__code__", "__annotations__", "__module__",
           "__qualname__", "__wrapped__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__",
           "__slots__", "__mro__", "__bases__", "__subclasses__"}
PRESENT = set(sys.stdlib_module_names) | {"pytest", "_pytest", "solution", "pluggy", "iniconfig", "packaging"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--examples", type=int, default=0, help="print this many findings per feature")
    parser.add_argument("--json", type=Path, help="write every module's findings here")
    args = parser.parse_args()
    rows = load(args.corpus)
    findings = {row["id"]: survey(row["solution"], row["pytest"]) for row in rows}
    print(table(rows, findings))
    if args.examples:
        for feature in FEATURES:
            shown = [(i, f[feature]) for i, f in findings.items() if f.get(feature)][:args.examples]
            for module_id, notes in shown:
                print(f"{feature:19} {module_id}: {'; '.join(notes[:3])}")
    if args.json:
        args.json.write_text(json.dumps(findings, indent=1) + "\n")


def load(path: Path = CORPUS) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def table(rows: list[dict], findings: dict[str, dict[str, list[str]]]) -> str:
    """Modules per feature, by source and in all."""
    sources = sorted({row["source"] for row in rows})
    by_source = {s: [row["id"] for row in rows if row["source"] == s] for s in sources}
    head = f"{'feature':20}" + "".join(f"{s:>26}" for s in [*sources, "all"])
    lines = [head, "-" * len(head)]

    def cell(ids: list[str], test) -> str:
        n = sum(1 for i in ids if test(findings[i]))
        return f"{n:>5} / {len(ids):<5} {100 * n / max(len(ids), 1):5.1f}%"

    every = [row["id"] for row in rows]
    for feature in FEATURES:
        lines.append(f"{feature:20}" + "".join(f"{cell(ids, lambda f, feature=feature: bool(f.get(feature))):>26}"
                                              for ids in [*by_source.values(), every]))
    lines.append("-" * len(head))
    lines.append(f"{'any that may break':20}" + "".join(
        f"{cell(ids, lambda f: any(f.get(x) for x in BREAKING)):>26}" for ids in [*by_source.values(), every]))
    return "\n".join(lines)


def survey(solution: str, test: str) -> dict[str, list[str]]:
    """Feature -> findings ("line N: what") of one test module against its solution."""
    try:
        tree = ast.parse(test)
    except SyntaxError as exc:
        return {"unparsable": [str(exc)]}
    try:
        defined, imported = _top_level_names(ast.parse(solution))
    except SyntaxError:
        defined, imported = set(), {}
    return _Survey(tree, defined, imported).run()


def _top_level_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The names a solution defines (def, class, assignment), and the names it
    imports with the module each comes from: `from solution import *` gives the
    tests both."""
    defined: set[str] = set()
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            imported |= {(a.asname or a.name).split(".")[0]: a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {a.asname or a.name: node.module.split(".")[0] for a in node.names if a.name != "*"}
    return {n for n in defined if not n.startswith("_")}, {k: v for k, v in imported.items() if not k.startswith("_")}


class _Survey:
    def __init__(self, tree: ast.Module, solution_defines: set[str], solution_imports: dict[str, str]):
        self.tree = tree
        self.found: dict[str, list[str]] = defaultdict(list)
        self.solution_names: set[str] = set()     # names bound to the solution's objects
        self.solution_modules: set[str] = set()   # names bound to the solution module
        self.modules: dict[str, str] = {}         # name -> the module it comes from (import x / from x import y)
        self.test_functions: set[str] = set()
        self.test_classes: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "solution":
                for alias in node.names:
                    if alias.name == "*":
                        self.solution_names |= solution_defines
                        self.modules |= solution_imports  # the same module objects, read by both processes
                    else:
                        self.solution_names.add(alias.asname or alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.modules[alias.asname or alias.name] = node.module.split(".")[0]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if top == "solution":
                        self.solution_modules.add(alias.asname or "solution")
                    else:
                        self.modules[alias.asname or top] = top
                    if top not in PRESENT:
                        self.note("third_party", node, alias.name)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] not in PRESENT:
                self.note("third_party", node, node.module)
        for node in tree.body:
            fixture = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                "fixture" in _dotted(d if not isinstance(d, ast.Call) else d.func) for d in node.decorator_list)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test") \
                    and not fixture:
                self.test_functions.add(node.name)
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("Test"):
                self.test_classes.add(node.name)
        # a name the test itself defines is the test's, whatever `import *` brought
        own = self.test_functions | self.test_classes
        self.solution_names -= own

    def note(self, feature: str, node: ast.AST, what: str) -> None:
        self.found[feature].append(f"line {getattr(node, 'lineno', '?')}: {what}"[:160])

    def is_solution(self, node: ast.AST) -> bool:
        """The expression names a solution object (f, Cls, solution, solution.f, Cls.attr)."""
        if isinstance(node, ast.Name):
            return node.id in self.solution_names or node.id in self.solution_modules
        if isinstance(node, ast.Attribute):
            return self.is_solution(node.value)
        return False

    def calls_solution(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.is_solution(node.func)

    def run(self) -> dict[str, list[str]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Compare):
                self.compare(node)
            elif isinstance(node, ast.Attribute) and node.attr in DUNDERS and self.is_solution(node.value):
                self.note("introspection", node, ast.unparse(node))
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if self.is_solution(base) and not isinstance(base, ast.Attribute) or \
                            isinstance(base, ast.Attribute) and self.is_solution(base):
                        self.note("subclass_solution", node, f"class {node.name}({ast.unparse(base)})")
                for deco in node.decorator_list:
                    if self.is_solution(deco if not isinstance(deco, ast.Call) else deco.func):
                        self.note("callable_argument", deco, f"@{ast.unparse(deco)} on class {node.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                self.assign(node)
            elif isinstance(node, ast.ExceptHandler) and node.type is not None:
                if any(self.foreign_exception(n) for n in _flat(node.type)):
                    self.note("foreign_exception", node, f"except {ast.unparse(node.type)}")
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    expr = item.context_expr
                    if isinstance(expr, ast.Call) and _dotted(expr.func).split(".")[-1] in (
                            "redirect_stdout", "redirect_stderr"):
                        self.note("redirect_stdout", node, ast.unparse(expr))
        return {k: v for k, v in self.found.items() if v}

    def call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        last = name.split(".")[-1]
        first_arg = node.args[0] if node.args else None
        # patching
        if last in ("setattr", "delattr", "setitem", "delitem") and name.split(".")[0] == "monkeypatch" or \
                last in ("patch", "object", "dict", "multiple") and ("patch" in name or "mock" in name):
            self.patch(node, name, first_arg)
        elif last in ("setenv", "delenv", "chdir", "syspath_prepend") and name.startswith("monkeypatch") or name in (
                "random.seed", "sys.setrecursionlimit", "os.chdir", "os.putenv", "np.random.seed",
                      "numpy.random.seed", "sys.set_int_max_str_digits") or \
                last == "seed" and self.modules.get(name.split(".")[0]) == "random":
            self.note("patch_shared", node, ast.unparse(node))
        # introspection
        module = self.modules.get(name.split(".")[0], name.split(".")[0])
        if (module in ("inspect", "dis") or name in ("vars", "dir")) and any(self.is_solution(a) for a in node.args):
            self.note("introspection", node, ast.unparse(node))
        # isinstance
        if name in ("isinstance", "issubclass") and len(node.args) == 2 and \
                any(self.is_solution(n) for n in _flat(node.args[1])):
            self.note("isinstance_class", node, ast.unparse(node))
        # exceptions
        if last in ("raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp") and first_arg is not None \
                and any(self.foreign_exception(n) for n in _flat(first_arg)):
            self.note("foreign_exception", node, ast.unparse(node)[:80])
        # values of non-builtin types compared with (assertEqual(x, date(...)))
        if last.startswith("assert") and any(self.non_plain(a) for a in node.args):
            self.note("non_plain_value", node, ast.unparse(node)[:100])
        # timing, reload, concurrency
        if name in ("time.time", "time.perf_counter", "time.monotonic", "time.process_time", "timeit.timeit",
                    "timeit.repeat", "signal.alarm", "signal.setitimer") or \
                module == "time" and last in ("time", "perf_counter", "monotonic") or module == "timeit":
            self.note("timing", node, name)
        if name in ("importlib.reload", "reload") or name.startswith("sys.modules"):
            self.note("reload", node, ast.unparse(node)[:80])
        if module in ("threading", "multiprocessing", "concurrent", "asyncio") or \
                name.split(".")[0] in ("threading", "multiprocessing", "asyncio"):
            self.note("concurrency", node, name)
        if module == "tempfile":
            self.note("temp_files", node, name)
        # what crosses into a solution call
        if self.is_solution(node.func):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self.argument(node, arg)

    def patch(self, node: ast.Call, name: str, first_arg: ast.AST | None) -> None:
        target = first_arg
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            head = target.value.split(".")[0]
            if head == "solution" or head in self.solution_names:
                self.note("patch_solution", node, ast.unparse(node)[:100])
            elif head in SHARED_MODULES or head in sys.stdlib_module_names:
                self.note("patch_shared", node, ast.unparse(node)[:100])
        elif target is not None and self.is_solution(target):
            self.note("patch_solution", node, ast.unparse(node)[:100])
        elif target is not None:
            head = _dotted(target).split(".")[0]
            module = self.modules.get(head, head)
            if module in sys.stdlib_module_names:
                self.note("patch_shared", node, ast.unparse(node)[:100])

    def argument(self, call: ast.Call, arg: ast.AST) -> None:
        for sub in ast.walk(arg):
            if isinstance(sub, ast.Lambda):
                self.note("callable_argument", call, ast.unparse(call)[:100])
                return
            if isinstance(sub, ast.Name) and sub.id in self.test_functions | self.test_classes and \
                    not (isinstance(arg, ast.Call) and sub is arg.func and sub.id in self.test_functions):
                if sub.id in self.test_classes and any(isinstance(c, ast.Call) and c.func is sub
                                                       for c in ast.walk(arg)):
                    self.note("non_plain_value", call, ast.unparse(call)[:100])
                else:
                    self.note("callable_argument", call, ast.unparse(call)[:100])
                return
            if self.non_plain(sub):
                self.note("non_plain_value", call, ast.unparse(call)[:100])
                return

    def foreign_exception(self, node: ast.AST) -> bool:
        """An exception class that is not a builtin: the solution's, or a module's (a local name of
        unknown value, a helper's parameter say, is not counted)."""
        if isinstance(node, ast.Attribute):
            return _dotted(node).split(".")[0] != "builtins"
        if isinstance(node, ast.Name) and not _builtin_exception(node):
            return node.id in self.solution_names or node.id in self.modules
        return False

    def non_plain(self, node: ast.AST) -> bool:
        """`node` builds a value of a type that is not a builtin: datetime(...), Counter(...), Fraction(...)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and not self.calls_solution(sub):
                head = _dotted(sub.func).split(".")[0]
                if self.modules.get(head) in NON_PLAIN_MODULES and head not in self.solution_names:
                    return True
        return False

    def compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        if any(self.non_plain(o) for o in operands) and any(
                isinstance(n, ast.Name) or self.calls_solution(n) for o in operands for n in ast.walk(o)):
            self.note("non_plain_value", node, ast.unparse(node)[:100])
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if isinstance(op, (ast.Is, ast.IsNot)) and not isinstance(left, ast.Constant) and \
                    not isinstance(right, ast.Constant):
                self.note("identity", node, ast.unparse(node)[:100])
            if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, ast.Call) and _dotted(a.func) == "type" and self.is_solution(b):
                        self.note("isinstance_class", node, ast.unparse(node)[:100])

    def assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and self.is_solution(target.value):
                self.note("patch_solution", node, ast.unparse(target) + " = ...")
            dotted = _dotted(target) if isinstance(target, (ast.Attribute, ast.Subscript)) else ""
            if dotted in ("sys.stdout", "sys.stderr"):
                self.note("redirect_stdout", node, dotted + " = ...")
            elif dotted in ("sys.stdin", "sys.argv", "builtins.input", "builtins.print", "os.environ"):
                self.note("patch_shared", node, dotted + " = ...")

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        params = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]} - {"self", "cls"}
        for fixture in ("capsys", "capfd", "capsysbinary", "capfdbinary"):
            if fixture in params:
                self.note("capture_fixture", node, f"{node.name}({fixture})")
        if params & {"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"}:
            self.note("temp_files", node, node.name)
        for deco in node.decorator_list:
            if self.is_solution(deco if not isinstance(deco, ast.Call) else deco.func):
                self.note("callable_argument", deco, f"@{ast.unparse(deco)} on {node.name}")
        self.in_place(node, params)

    def in_place(self, node: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]) -> None:
        """`f(xs)` as a statement, xs a list/dict/set literal (or a parameter), xs read afterwards."""
        data = set(params)
        statements = list(_statements(node.body))
        for index, stmt in enumerate(statements):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                value = stmt.value
                plain = isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) \
                    or isinstance(value, ast.Call) and _dotted(value.func) in ("list", "dict", "set", "bytearray") \
                    or isinstance(value, ast.BinOp) and isinstance(value.left, ast.List)
                (data.add if plain else data.discard)(stmt.targets[0].id)
            if isinstance(stmt, ast.Expr) and self.calls_solution(stmt.value):
                call = stmt.value
                args = {a.id for a in call.args if isinstance(a, ast.Name)} & data
                later = {n.id for s in statements[index + 1:] for n in ast.walk(s) if isinstance(n, ast.Name)}
                if args & later:
                    self.note("in_place_argument", stmt, ast.unparse(call)[:100])


def _statements(body: list[ast.stmt]):
    """The statements of a body in order, nested blocks (with, for, if, try) flattened."""
    for stmt in body:
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)):
                yield from _statements(inner)
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _statements(handler.body)


def _builtin_exception(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and isinstance(getattr(builtins, node.id, None), type) and \
        issubclass(getattr(builtins, node.id), BaseException)


def _flat(node: ast.AST) -> list[ast.AST]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return "?"


if __name__ == "__main__":
    main()
