"""No import cycle among rewardbox's own modules.

A cycle works only while every module in it reaches the other's names late
(inside a function, or after its own definitions), so it breaks the day
someone moves an import; it also says two modules are one. The graph is read
from the source (AST), function-level imports included: those are the cycles
Python forgives at import time and that this test does not. Imports under
`if TYPE_CHECKING:` are left out: they never run.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Each folder and the package it installs as (pyproject's package-dir);
# the longest folder first, so that rewards/adapters is not taken for rewards.
PACKAGES = {
    "rewards/adapters": "rewardbox.adapters",
    "rewards/server": "rewardbox.rewards.server",
    "rewards": "rewardbox.rewards",
    "sandbox": "rewardbox.sandbox",
    "images": "rewardbox.images",
    "rewardbox": "rewardbox",
}
# The in-container harness runs in the sandbox with the standard library only.
SKIP = ("images/python/harness",)


def _module_name(path: Path) -> str | None:
    rel = path.relative_to(ROOT).as_posix()
    if any(rel.startswith(skip + "/") for skip in SKIP):
        return None
    for folder, package in sorted(PACKAGES.items(), key=lambda item: -len(item[0])):
        if rel.startswith(folder + "/"):
            parts = rel[len(folder) + 1:-len(".py")].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join([package, *parts])
    return None


def project_modules() -> dict[str, Path]:
    modules = {}
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            name = _module_name(path)
            if name is not None and "/build/" not in path.as_posix():
                modules.setdefault(name, path)
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, name: str, is_package: bool):
    """The module names each import statement of `tree` names (a `from X import
    y` names X and X.y: y may be a submodule)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = set(_imports(tree, name, path.name == "__init__.py"))
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one
    module (Tarjan), each as the path of modules around it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_a_cycle(graph, component) for component in components]


def _a_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first, back to the start
        node = frontier.pop(0)
        for target in sorted(graph[node] & component):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                frontier.append(target)
    return sorted(component)  # pragma: no cover - a component always has a cycle


def test_the_graph_sees_the_project():
    graph = import_graph(project_modules())
    assert "rewardbox.sandbox.runner" in graph["rewardbox.sandbox.pool"]
    assert "rewardbox.rewards.server.service" in graph["rewardbox.rewards.server.health"]
    assert "rewardbox.sandbox.ray_backend" in graph["rewardbox.sandbox.modes"]  # imported inside make_sandbox


def test_the_cycle_finder_finds_a_function_level_cycle():
    tree = {"a": "def f():\n    import b\n", "b": "from a import x\n", "c": "import a\n"}
    graph = {name: {t for t in _imports(ast.parse(src), name, False) if t in tree} for name, src in tree.items()}
    assert find_cycles(graph) == [["a", "b", "a"]]
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
    assert not set(_imports(ast.parse(guarded), "b", False)) & {"a"}


def test_no_import_cycle():
    cycles = find_cycles(import_graph(project_modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


# The layers, lowest first, as the README's "Layout" section gives them: a
# module imports only from its own layer or a lower one. The settings sit under
# the adapters and read each layer's configuration models, which are leaves
# (CONFIG_MODULES), so they may be read from anywhere.
LAYERS = (
    "rewardbox",  # the package root: __version__ and the lazy public API, which imports nothing at import time
    "rewardbox.images",
    "rewardbox.sandbox",
    "rewardbox.rewards",
    "rewardbox.settings",
    "rewardbox.adapters",
    "rewardbox.rewards.server",
    "rewardbox.doctor",
    "rewardbox.cli",
    "rewardbox.__main__",
)
CONFIG_MODULES = ("rewardbox.rewards.server.config",)


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix naming `module`'s layer."""
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len)
    return LAYERS.index(best)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{source} ({LAYERS[layer_of(source)]}) imports {target} ({LAYERS[layer_of(target)]})"
                  for source, targets in graph.items() for target in targets
                  if target not in CONFIG_MODULES and layer_of(target) > layer_of(source))


def test_the_layering_finder_finds_an_upward_import():
    graph = {"rewardbox.sandbox.runner": {"rewardbox.rewards.code", "rewardbox.images"},
             "rewardbox.settings": {"rewardbox.rewards.server.config"}}
    assert layering_violations(graph) == [
        "rewardbox.sandbox.runner (rewardbox.sandbox) imports rewardbox.rewards.code (rewardbox.rewards)"]


def test_each_layer_imports_only_those_below_it():
    violations = layering_violations(import_graph(project_modules()))
    assert not violations, "imports against the layering (README, Layout):\n" + "\n".join(violations)


def test_the_package_root_imports_nothing_of_its_own_at_import_time():
    """`import rewardbox` stays cheap and cycle-free: the public API loads on first use."""
    tree = ast.parse((ROOT / "rewardbox" / "__init__.py").read_text())
    eager = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
             and any(name.startswith("rewardbox") for name in _imports(node, "rewardbox", True))]
    assert not eager, [ast.unparse(node) for node in eager]
