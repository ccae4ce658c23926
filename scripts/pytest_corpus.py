"""Builds bench/.cache/pytest_corpus.jsonl.gz: real (reference solution, pytest
module) pairs, to measure how pytest labels grade (bench/pytest_corpus.py,
issue 17: in the tests' process and out of it).

    python scripts/pytest_corpus.py --kodcode /path/to/KodCode-AI/kodcode --exercism /path/to/exercism/python
                                    [--out FILE]

Each path is a clone (a bare git directory or a work tree) read at HEAD with
git: files are read as text, never imported or run. Only dataset rows are
taken: a solution and the test module it was checked with.

KodCode (https://github.com/KodCode-AI/kodcode, data CC BY-NC 4.0): the demo
runs of the self-verification step, `demo/*/self_verification_*/<id>/<trial>/`.
Each trial directory holds what KodCode's pipeline ran: `solution.py` (a
GPT-written solution), `test_solution.py` (its tests, with the
`from solution import *` line KodCode's runner puts in front) and
`test_result.txt` (KodCode's own verdict: Pass, Fail, Fail - Timed Out). The
module is taken as KodCode ran it. The dataset keeps the questions with a
passing trial (KodCode-V1's rows are such trials); the failing ones are kept
here too, marked, since a wrong answer must grade the same both ways as well.

Exercism's Python track (https://github.com/exercism/python, MIT): each
exercise whose `.meta/config.json` names one solution file, one test file, an
example (practice) or exemplar (concept) solution and no other file. The tests
import the exercise's module by its name (`from two_fer import two_fer`); that
import is renamed to `solution`, the label's module (`import two_fer` becomes
`import solution as two_fer`), nothing else changes. Most are
`unittest.TestCase` modules.

A row: id, source (owner/name), commit, path (the directory in the source),
licence, subset, source_result (KodCode's verdict; "Pass" for Exercism's
reference solutions, which its CI runs against the tests), solution, pytest.
"""

import argparse
import ast
import gzip
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

OUT = Path(__file__).parents[1] / "bench/.cache/pytest_corpus.jsonl.gz"
KODCODE = "KodCode-AI/kodcode"
EXERCISM = "exercism/python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kodcode", type=Path, required=True, help="a clone of KodCode-AI/kodcode")
    parser.add_argument("--exercism", type=Path, required=True, help="a clone of exercism/python")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = [*kodcode_rows(args.kodcode), *exercism_rows(args.exercism)]
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    # mtime 0: the same rows give the same bytes
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode())
    counts: dict[str, int] = {}
    for row in rows:
        key = f"{row['source']} {row['source_result']}"
        counts[key] = counts.get(key, 0) + 1
    print(f"{len(rows)} pairs -> {args.out}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
          file=sys.stderr)


class Repo:
    """Files of one commit of a git clone, read through one `git cat-file --batch`."""

    def __init__(self, path: Path):
        self.path = path
        self.commit = self._git("rev-parse", "HEAD^{commit}").strip()
        self.files = self._git("ls-tree", "-r", "--name-only", self.commit).splitlines()
        self._batch = subprocess.Popen(["git", "-C", str(path), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE)

    def _git(self, *command: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *command], check=True, capture_output=True,
                              text=True).stdout

    def read(self, name: str) -> str:
        assert self._batch.stdin is not None and self._batch.stdout is not None
        self._batch.stdin.write(f"{self.commit}:{name}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise FileNotFoundError(name)
        data = self._batch.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8")

    def close(self) -> None:
        assert self._batch.stdin is not None
        self._batch.stdin.close()
        self._batch.wait()


def kodcode_rows(path: Path) -> list[dict]:
    repo = Repo(path)
    rows = []
    for name in repo.files:
        parts = PurePosixPath(name).parts
        # demo/<run>/self_verification_<run>/<prompt id>/<trial>/test_result.txt
        if len(parts) != 6 or parts[0] != "demo" or not parts[2].startswith("self_verification_") \
                or parts[5] != "test_result.txt":
            continue
        directory = str(PurePosixPath(name).parent)
        result = repo.read(name).splitlines()[0].strip()
        subset = json.loads(repo.read(f"{directory}/data.json"))["metadata"]["mode"]
        rows.append({
            "id": f"kodcode/{subset}/{parts[3]}/{parts[4]}",
            "source": KODCODE, "commit": repo.commit, "path": directory, "licence": "CC-BY-NC-4.0",
            "subset": subset, "source_result": result,
            "solution": repo.read(f"{directory}/solution.py"),
            "pytest": repo.read(f"{directory}/test_solution.py"),
        })
    repo.close()
    return sorted(rows, key=lambda row: row["id"])


def exercism_rows(path: Path) -> list[dict]:
    repo = Repo(path)
    rows = []
    for name in repo.files:
        parts = PurePosixPath(name).parts
        if len(parts) != 5 or parts[0] != "exercises" or parts[3:] != (".meta", "config.json"):
            continue
        directory = f"exercises/{parts[1]}/{parts[2]}"
        files = json.loads(repo.read(name)).get("files", {})
        example = files.get("example") or files.get("exemplar") or []
        if len(files.get("solution", [])) != 1 or len(files.get("test", [])) != 1 or len(example) != 1 \
                or files.get("editor"):
            print(f"skipped {directory}: other files than one solution, one test, one example", file=sys.stderr)
            continue
        module = PurePosixPath(files["solution"][0]).stem
        rows.append({
            "id": f"exercism/{parts[1]}/{parts[2]}",
            "source": EXERCISM, "commit": repo.commit, "path": directory, "licence": "MIT",
            "subset": parts[1], "source_result": "Pass",
            "solution": repo.read(f"{directory}/{example[0]}"),
            "pytest": rename_import(repo.read(f"{directory}/{files['test'][0]}"), module),
        })
    repo.close()
    return sorted(rows, key=lambda row: row["id"])


def rename_import(source: str, module: str, to: str = "solution") -> str:
    """`source` with its imports of `module` made imports of `to`, by the syntax
    tree's positions (a string or comment naming the module is left alone).

    >>> rename_import("from two_fer import (\\n    two_fer,\\n)\\nimport two_fer\\n", "two_fer")
    'from solution import (\\n    two_fer,\\n)\\nimport solution as two_fer\\n'
    """
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # line (0-based), start col, end col, new text
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == module and node.level == 0:
            line = lines[node.lineno - 1]
            start = line.index(module, node.col_offset + len("from"))
            edits.append((node.lineno - 1, start, start + len(module), to))
        elif isinstance(node, ast.Import) and node.lineno == node.end_lineno:
            for alias in node.names:
                if alias.name == module:
                    line = lines[node.lineno - 1]
                    start = line.index(module, node.col_offset + len("import"))
                    edits.append((node.lineno - 1, start, start + len(module),
                                  to if alias.asname else f"{to} as {module}"))
    for number, start, end, text in sorted(edits, reverse=True):
        lines[number] = lines[number][:start] + text + lines[number][end:]
    renamed = "".join(lines)
    ast.parse(renamed)
    return renamed


if __name__ == "__main__":
    main()
