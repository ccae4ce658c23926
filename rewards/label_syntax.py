"""The syntax-tree analysis behind generated tests (docs/labels.md): what a
`check` label's test binds and reads, which helpers a code prompt defines,
whether `check` splits into one test per assert, whether a completion defines
the entry point. Pure functions of source text; nothing runs.
"""

import ast
import builtins
import functools
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

from rewardbox.rewards.syntax import MAX_HOST_PARSE_CHARS, TooComplex, parse

# The language's builtins: `_` is not one, though an interactive session or a
# doctest in this process binds it in `builtins` (a check's `for _ in` is its own).
_BUILTIN_NAMES = frozenset(n for n in dir(builtins) if n != "_")


def parse_tests(source: str) -> ast.Module:
    try:
        return parse(source)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"test code does not parse: {exc}") from None


def _binding(node: ast.AST) -> str | None:
    """The name `node` binds, if it binds one (`x = `, `def x`, `import x`...)."""
    if isinstance(node, ast.Name):
        return node.id if isinstance(node.ctx, (ast.Store, ast.Del)) else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.alias):
        return (node.asname or node.name).split(".")[0]
    if isinstance(node, ast.ExceptHandler):
        return node.name
    return None


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere (an over-approximation is safe)."""
    return {name for node in ast.walk(tree) if (name := _binding(node))}


def _loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Names(NamedTuple):
    """What test code reads and binds, from one walk of its tree."""

    free: set[str]  # read but never bound, builtins left out: the solution's functions, or modules
    module_like: set[str]  # free names only ever read as `name.attr`: maybe a module
    bound: set[str]  # every name bound anywhere (`_bound_names`)
    star: bool  # a `from m import *` anywhere


def _names(tree: ast.AST) -> _Names:
    bound: set[str] = set()
    loads: list[ast.Name] = []
    as_base: set[str] = set()
    bases: set[int] = set()
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.append(node)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            as_base.add(node.value.id)
            bases.add(id(node.value))
        elif name := _binding(node):
            bound.add(name)
        star |= isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    free = {n.id for n in loads} - bound - _BUILTIN_NAMES
    elsewhere = {n.id for n in loads if id(n) not in bases}
    return _Names(free, (as_base - elsewhere) & free, bound, star)


def free_names(source: str) -> list[str]:
    """Names the test code uses but never defines: the solution's functions."""
    return sorted(_names(parse_tests(source)).free)


def module_like(source: str) -> list[str]:
    """Free names the tests only ever use as `name.attr`: maybe a module."""
    return sorted(_names(parse_tests(source)).module_like)


def check_function(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            if not node.args.args:
                raise ValueError("check() takes no argument for the candidate")
            return node
    raise ValueError("the test defines no top-level function check(candidate)")


def defined_name(entry_point: str) -> str:
    """The top-level name the solution defines for `entry_point`
    ("Solution().add" is defined by class Solution)."""
    return entry_point.split("(")[0].split(".")[0]


class _PromptHelpers(NamedTuple):
    """What a trusted code prompt brings to the tests: its imports, helper
    functions, classes and assignments (`source`), and the names of the
    functions it leaves for the solution to write (`stubs`)."""

    source: str
    defines: frozenset[str]
    stubs: frozenset[str]
    star: bool


_NO_HELPERS = _PromptHelpers("", frozenset(), frozenset(), False)


@functools.lru_cache(maxsize=256)
def _prompt_helpers(prompt: str, defined: str) -> _PromptHelpers:
    """The helpers of a code prompt, the entry point's own definition left out
    (the solution's). A prompt too large or too deep to parse here brings none."""
    if len(prompt) > MAX_HOST_PARSE_CHARS:
        return _NO_HELPERS
    try:
        tree = parse(prompt)
    except (SyntaxError, ValueError):
        return _NO_HELPERS
    kept: list[ast.stmt] = []
    stubs: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == defined:
                continue
            if not isinstance(node, ast.ClassDef) and _is_stub(node):
                stubs.add(node.name)
                continue
            kept.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                and defined not in _bound_names(node)):
            kept.append(node)
    module = ast.Module(body=kept, type_ignores=[])
    star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in kept)
    return _PromptHelpers(ast.unparse(module) + "\n" if kept else "", frozenset(_bound_names(module)) - stubs,
                          frozenset(stubs), star)


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function the prompt declares without writing it: a docstring, `pass`
    or `...` (the task asks the solution to write it)."""
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in node.body)


class CheckPlan(NamedTuple):
    """How a check label runs: its cases, the module run once before them,
    which names stand for the solution's functions, and the names only a
    code prompt could define (`needs`: the label has no prompt of its own)."""

    cases: tuple[str, ...]
    setup: str
    proxies: dict[str, str]
    modules: tuple[str, ...]
    needs: frozenset[str]

    def data(self) -> dict[str, Any]:
        return {"setup": self.setup, "proxies": self.proxies, "modules": list(self.modules)}


def plan_check(test: str, entry_point: str, prompt: str | None) -> CheckPlan:
    """Which names of the test are the solution's: the candidate; the entry
    point where the test calls it by name (HumanEval/33); functions the prompt
    leaves to the solution. Every other free name is the label's (its test's or
    its prompt's helpers, run in the tests' process) or a module; a name nobody
    trusted defines is never taken from the solution: with no prompt the label
    needs one (`needs`), with one it is unusable."""
    tree = parse_tests(test)
    check = check_function(tree)
    param = check.args.args[0].arg
    helpers = _prompt_helpers(prompt, defined_name(entry_point)) if prompt else _NO_HELPERS
    names = _names(tree)
    free = names.free
    modules = names.module_like - helpers.defines
    proxies = {param: entry_point}
    if entry_point.isidentifier() and entry_point in free:
        proxies[entry_point] = entry_point
    proxies |= {n: n for n in sorted(free & helpers.stubs)}
    unknown = free - set(proxies) - helpers.defines - modules
    star = helpers.star or names.star
    # A star import may define the unknown names; if it does not, NameError: the label's failure, never a pass.
    setup = helpers.source + "\n\n" + test if free & helpers.defines or (helpers.star and unknown) else test
    unknown = set() if star else unknown
    proxies |= {m: m for m in sorted(modules)}  # a module if one exists, else a proxy with no attributes
    whole = (f"check({param})",)
    if unknown:
        return CheckPlan(whole, setup, proxies, tuple(sorted(modules)), frozenset(unknown))
    solution = frozenset(n for n in proxies if n not in modules)
    trusted = [tree, parse(helpers.source)] if helpers.source else [tree]
    bound = names.bound.union(*(_bound_names(t) for t in trusted[1:]))
    cases = (None if star else _split_check(check, solution, trusted, bound)) or whole
    return CheckPlan(tuple(cases), setup, proxies, tuple(sorted(modules)), frozenset())


def _split_check(check: ast.FunctionDef, solution: frozenset[str], trusted: list[ast.Module],
                 bound: set[str]) -> list[str] | None:
    """The statements of `check` as tests of their own, or None: run whole.

    Test j runs, in their original order, the statements before it that do not
    call the solution, then statement j (the last test also runs the
    statements after it). That is the whole check, minus the other tests, so
    it is split only where leaving those out provably changes nothing: every
    statement is pure (`_Effects`: it may bind names, never change an object,
    call unknown code, hold a lazy iterator or leave the function), no name a
    test binds is read by another statement, and no local of check is also a
    global or a builtin (read before check binds it, it would not be the
    same name run apart). A check that star-imports is never split."""
    body = check.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    if any(isinstance(n, (ast.Return, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await))
           for s in body for n in _walk_same_scope(s)):
        return None  # control flow, or a scope, only check itself has
    binds = [_scope_bindings(s) for s in body]  # once per statement: a check may hold thousands
    effects = _Effects(solution, trusted, bound, Counter(n for names in binds for n in names), check)
    scans = [effects.scan(s) for s in body]
    tests = [i for i, (_, uses) in enumerate(scans) if uses]
    if len(tests) < 2 or not all(pure for pure, _ in scans[:tests[-1]]):  # the last test runs after all others
        return None
    loads = [_loaded_names(s) for s in body]
    if any(effects.unsafe_globals & names for names in loads):
        return None
    # A local of check that is also a global or a builtin: read before check binds it, the function raises
    # UnboundLocalError where a statement run apart would read the global.
    if any(names & (effects.globals | solution) for names in binds):
        return None
    readers = Counter(name for names in loads for name in names)
    for i in tests[:-1]:
        if any(readers[name] > (name in loads[i]) for name in binds[i]):  # another statement reads it
            return None
    is_test = set(tests)
    cases = []
    for i in tests:
        before = [body[k] for k in range(i) if k not in is_test]
        after = body[i + 1:] if i == tests[-1] else []
        cases.append(ast.unparse(ast.Module(body=[*before, body[i], *after], type_ignores=[])))
    return cases


def _walk_same_scope(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk without descending into functions, classes or lambdas (a
    `return` in a helper defined inside check belongs to the helper)."""
    yield node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_same_scope(child)


def _scope_bindings(node: ast.AST) -> set[str]:
    """The names a statement binds in the scope it runs in: a nested
    function's or lambda's locals and comprehension variables left out, the
    targets of `:=` (which bind in the enclosing scope) kept."""
    bound: set[str] = set()

    def visit(n: ast.AST, in_comprehension: bool) -> None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
            return
        if isinstance(n, ast.Lambda):
            return
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            bound.add(n.target.id)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and not in_comprehension:
            bound.add(n.id)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        inner = in_comprehension or isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
        for child in ast.iter_child_nodes(n):
            visit(child, inner)

    visit(node, False)
    return bound


# Functions that read their arguments and build a new value: running them once
# more, or not at all, changes nothing another statement sees.
_PURE_BUILTINS = frozenset(
    "abs all any ascii bin bool bytes callable chr complex dict divmod enumerate filter float format frozenset "
    "hasattr hash hex int isinstance issubclass len list map max min oct ord pow range repr reversed round set "
    "slice sorted str sum tuple type zip".split()) | frozenset(
        n for n in dir(builtins) if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n),
                                                                                         BaseException))
# Builtins whose value is a one-pass iterator: shared between statements, a
# test that consumes it would change what the next one sees.
_LAZY_BUILTINS = frozenset({"enumerate", "filter", "map", "reversed", "zip"})
# Methods of builtin types and of math and copy that build a new value.
_PURE_METHODS = frozenset(
    "capitalize casefold center count encode endswith expandtabs find format index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust lower "
    "lstrip partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split "
    "splitlines startswith strip swapcase title upper zfill decode hex fromhex copy get items keys values "
    "difference intersection isdisjoint issubset issuperset symmetric_difference union bit_length "
    "is_integer as_integer_ratio conjugate deepcopy "
    "acos acosh asin asinh atan atan2 atanh ceil comb copysign cos cosh degrees dist erf erfc exp expm1 fabs "
    "factorial floor fmod frexp fsum gamma gcd hypot isclose isfinite isinf isnan isqrt lcm ldexp lgamma log "
    "log10 log1p log2 modf perm prod radians remainder sin sinh sqrt tan tanh trunc".split())
_PURE_STATEMENTS = (ast.Assert, ast.Assign, ast.AnnAssign, ast.Expr, ast.For, ast.While, ast.If, ast.Pass,
                    ast.Break, ast.Continue, ast.Raise, ast.Try, ast.Import, ast.ImportFrom, ast.FunctionDef)


class _Effects:
    """A conservative reading of what check's code can do in the tests'
    process. A statement is pure when it can only bind names: no object is
    changed (no method but `_PURE_METHODS`, no item or attribute assignment,
    no `+=`, no `del`), every call is to a pure builtin, to the solution (its
    arguments are copied to another process), or to a helper of the label's
    code that is pure itself; no lazy iterator outlives the expression that
    consumes it; no `global`, `return` or `yield` at check's level."""

    def __init__(self, solution: frozenset[str], trusted: list[ast.Module], bound: set[str], local: Counter[str],
                 check: ast.FunctionDef):
        """`bound`: every name the trusted code binds; `local`: how many times
        each name is bound by a statement of check's body, in its scope."""
        self.solution = solution
        self.bound = bound
        self.builtins = _PURE_BUILTINS - self.bound  # `str = ...` anywhere: not the builtin
        top: Counter[str] = Counter(n for tree in trusted for node in tree.body for n in _scope_bindings(node))
        self.globals = set(top) | _BUILTIN_NAMES
        defs = {node.name: node for tree in trusted for node in tree.body
                if isinstance(node, ast.FunctionDef) and node is not check}
        defs |= {s.name: s for s in check.body if isinstance(s, ast.FunctionDef)}
        # Only a name bound once, by its def, is surely that function when called.
        self.helpers = {name: node for name, node in defs.items()
                        if (local[name] == 1 if name in local else top[name] == 1)}
        self._helper_effects: dict[str, tuple[bool, bool]] = {}
        # Module-level values a test may read but must not find changed by an earlier one.
        self.unsafe_globals: set[str] = set()
        for tree in trusted:
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
                    continue
                if not isinstance(node, ast.Assign) or not self.scan(node)[0]:
                    self.unsafe_globals |= _scope_bindings(node)

    def scan(self, node: ast.AST, in_function: bool = False) -> tuple[bool, bool]:
        """(pure, whether it may call the solution)."""
        consumed: set[int] = set()
        idle: set[int] = set()  # a bare `print`: read, not run
        for n in ast.walk(node):
            consumed.update(id(arg) for arg in _consumed(n))
            if isinstance(n, ast.Expr):
                idle.add(id(n.value))
        pure, uses = True, False
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.stmt):
                pure &= isinstance(n, _PURE_STATEMENTS) or (in_function and isinstance(n, ast.Return))
                if isinstance(n, ast.FunctionDef):  # defining it runs nothing but its defaults
                    pure &= not n.decorator_list
                    stack += [*n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)]
                    continue
                if isinstance(n, (ast.Assign, ast.AnnAssign)):
                    pure &= all(_names_only(t) for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
            elif isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
                pure = False
            elif isinstance(n, ast.GeneratorExp):
                pure &= id(n) in consumed
            elif isinstance(n, ast.Call):
                pure &= self._call(n, consumed)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                ok, calls_solution = self._name(n.id)
                pure &= ok or id(n) in idle
                uses |= calls_solution
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                pure &= n.attr not in _MUTATORS and not n.attr.startswith("__")
            stack.extend(ast.iter_child_nodes(n))
        return pure, uses

    def _call(self, call: ast.Call, consumed: set[int]) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in self.builtins:
                return func.id not in _LAZY_BUILTINS or id(call) in consumed
            return func.id in self.solution or func.id in self.helpers  # the name is read (`_name`) in turn
        return isinstance(func, ast.Attribute) and func.attr in _PURE_METHODS

    def _name(self, name: str) -> tuple[bool, bool]:
        """A name read: the solution's, a helper (which may run), a builtin, or data."""
        if name in self.solution:
            return True, True
        if name in self.helpers:
            if name not in self._helper_effects:
                self._helper_effects[name] = (False, True)  # recursion: not pure
                helper = self.helpers[name]
                self._helper_effects[name] = self.scan(ast.Module(body=helper.body, type_ignores=[]), True)
            return self._helper_effects[name]
        if name not in self.bound and callable(getattr(builtins, name, None)) and not isinstance(
                getattr(builtins, name), type):
            return name in self.builtins, False  # `next`, `print`, `setattr` passed around may run
        return True, False


# Methods that change their object, read as a value (`map(out.append, xs)`).
_MUTATORS = frozenset({"add", "append", "clear", "discard", "extend", "insert", "pop", "popitem", "remove",
                       "reverse", "send", "setdefault", "sort", "update", "write"})


def _consumed(node: ast.AST) -> Iterator[ast.expr]:
    """The sub-expressions of `node` that are iterated where they stand (a
    call's arguments, what a loop or comprehension iterates): a lazy value
    there never reaches another statement."""
    if isinstance(node, ast.Call):
        yield from node.args
        yield from (k.value for k in node.keywords)
        yield from (a.value for a in node.args if isinstance(a, ast.Starred))
    elif isinstance(node, (ast.comprehension, ast.For)):
        yield node.iter


def _names_only(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, ast.Starred):
        return _names_only(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_names_only(t) for t in target.elts)
    return False


def defines(code: str | None, name: str) -> bool:
    """Whether `code` defines `name` at its top level (a function or class)."""
    if not code:
        return False
    # A top-level definition starts a line: what decides for code too costly to parse here, or too deep to parse.
    by_lines = re.search(rf"^(?:async[ \t]+def|def|class)[ \t]+{re.escape(name)}\b", code, re.MULTILINE) is not None
    if len(code) > MAX_HOST_PARSE_CHARS:
        return by_lines
    try:
        tree = parse(code)
    except TooComplex:
        return by_lines
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
               for n in tree.body)


def top_imports(code: str) -> str:
    """The prompt's top-level imports (`from typing import List`), which a
    completion that rewrites the whole function often leaves out (none taken
    from a prompt too large to parse here)."""
    if len(code) > MAX_HOST_PARSE_CHARS:
        return ""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return ""
    lines = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines) + "\n" if lines else ""
