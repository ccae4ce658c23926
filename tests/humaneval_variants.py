"""Wrong variants of HumanEval's canonical solutions, shared by the unit and docker tiers."""

import ast


def broken_program(problem: dict) -> str:
    """The canonical program (prompt + body) with the entry point's last
    `return` (by line) made `return None`: still valid code, no longer right."""
    program = problem["prompt"] + problem["canonical_solution"]
    function = next(n for n in ast.parse(program).body
                    if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"])
    last = max((n for n in ast.walk(function) if isinstance(n, ast.Return)), key=lambda n: n.lineno)
    lines = program.splitlines(keepends=True)
    first = lines[last.lineno - 1]
    lines[last.lineno - 1:last.end_lineno] = [first[:len(first) - len(first.lstrip())] + "return None\n"]
    changed = "".join(lines)
    assert changed.startswith(problem["prompt"]) and changed != program
    return changed
