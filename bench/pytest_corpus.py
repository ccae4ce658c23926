"""Grades every reference solution of bench/.cache/pytest_corpus.jsonl.gz with
its own pytest module, out of the tests' process and in it (issue 17), and
says how many grade the same and what differed.

    .venv/bin/python bench/pytest_corpus.py [--workers 2] [--mode pooled] [--limit N] [--source kodcode]
                                            [--paths both|out|in] [--output bench/results/pytest_corpus.json]

For each (solution, module) pair the solution is the completion and two labels
are scored with `CodeReward`:

    out   {"pytest": module}                        the default path
    in    {"pytest": module, "in_process": true}    the old path, kept by the option

Two grades are the same when reward, verdict and every test's outcome agree.
A difference is listed with both verdicts, the tests that changed (outcome,
exception type and message on each side) and what the static survey
(`pytest_corpus_survey.py`) finds in the module, the likely reason.

Code without the option: a label's `in_process` is then ignored (both labels
are the old path: the comparison would be trivially 100%) or rejected (a
label error). Either way this is said first, and only the default label runs,
which on such code is the in-process path: the baseline, how many reference
solutions score 1.0 today and why the others do not. `--paths both` runs both
labels anyway.

Containers run on the machine's engine with `--workers` at once (default 1)
and are never swept: other users of the engine keep theirs.
"""

import argparse
import ast
import json
import sys
import time
from collections import Counter
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from pytest_corpus_survey import BREAKING, CORPUS, load, survey  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pytest_corpus.json"


def option_support() -> str:
    """'supported', 'ignored' or 'rejected': what this code does with a pytest
    label's `in_process`."""
    from rewardbox.rewards.labels import LabelError, PytestLabel, parse_label

    if "in_process" in PytestLabel.model_fields:
        return "supported"
    try:
        parse_label({"pytest": "def test_a():\n    pass\n", "in_process": True})
    except LabelError:
        return "rejected"
    return "ignored"


def labels(row: dict, path: str, testcase_prefix: bool = False) -> Any:
    module = prefix_testcases(row["pytest"]) if testcase_prefix else row["pytest"]
    return {"pytest": module} if path == "out" else {"pytest": module, "in_process": True}


def prefix_testcases(source: str) -> str:
    """`source` with each `unittest.TestCase` class whose name does not start
    with Test renamed Test<name> (pytest collects such classes whatever their
    name; a label's count of expected tests, on /work/main at 21f2544, does not).

    >>> prefix_testcases("import unittest\\nclass TwoFerTest(unittest.TestCase):\\n    pass\\n")
    'import unittest\\nclass TestTwoFerTest(unittest.TestCase):\\n    pass\\n'
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source  # the label says so itself
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("Test") and \
                any(ast.unparse(b).split(".")[-1] == "TestCase" for b in node.bases):
            line = lines[node.lineno - 1]
            start = line.index(node.name, line.index("class"))
            lines[node.lineno - 1] = line[:start] + "Test" + line[start:]
    return "".join(lines)


def outcome(grade) -> dict:
    """What of a grade is compared, and what explains it."""
    return {
        "reward": grade.reward, "score": grade.score,
        "verdict": grade.verdict.value if grade.verdict is not None else None,
        "passed": grade.passed, "total": grade.total, "error": grade.error, "message": (grade.message or "")[:2000],
        "duration_s": round(grade.duration_s, 3),
        "tests": {t.nodeid: {"outcome": str(getattr(t.outcome, "value", t.outcome)), "exc_type": t.exc_type,
                             "message": (t.message or "")[:300]} for t in grade.tests},
    }


def same(a: dict, b: dict) -> bool:
    return a["reward"] == b["reward"] and a["verdict"] == b["verdict"] and \
        {k: v["outcome"] for k, v in a["tests"].items()} == {k: v["outcome"] for k, v in b["tests"].items()}


def reason(result: dict) -> str:
    """Why a grade is not 1.0, in a few words: the verdict, and the commonest
    exception of the failing tests (with its first line for an import)."""
    if result["score"] == 1.0:
        return "passed"
    if result["verdict"] is None:
        return f"unusable label: {(result['error'] or '')[:80]}"
    failing = [t for t in result["tests"].values() if t["outcome"] not in ("passed", "skipped")]
    kinds = Counter(_kind(t) for t in failing)
    if not kinds:
        return f"{result['verdict']}{_import_detail(result['message'])}"
    kind = kinds.most_common(1)[0][0]
    detail = ""
    if kind in ("ModuleNotFoundError", "ImportError", "NameError"):
        detail = _import_detail(next(t["message"] for t in failing if _kind(t) == kind))
    return f"{result['verdict']}/{kind}{detail}"


def _kind(test: dict) -> str:
    """A failing test's exception type (an assertion's report is its text: AssertionError)."""
    kind = test["exc_type"] or test["outcome"]
    return kind if kind.replace(".", "").replace("_", "").isalnum() else "AssertionError"


def _import_detail(message: str) -> str:
    """The line of a message naming a missing module or name, if any."""
    for line in (message or "").splitlines():
        if "No module named" in line or "cannot import" in line or "is not defined" in line:
            return ": " + line.strip().removeprefix("E").strip()[:90]
    return ""


def changed_tests(a: dict, b: dict) -> dict:
    names = sorted(set(a["tests"]) | set(b["tests"]))
    return {n: {"out": a["tests"].get(n), "in": b["tests"].get(n)} for n in names
            if (a["tests"].get(n) or {}).get("outcome") != (b["tests"].get(n) or {}).get("outcome")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--workers", type=int, default=1, help="containers at once")
    parser.add_argument("--mode", default="pooled", help="sandbox mode: pooled, fresh, cold")
    parser.add_argument("--paths", choices=("auto", "both", "out", "in"), default="auto",
                        help="auto: both where this code has the option, else only the default label")
    parser.add_argument("--source", help="only rows whose id starts with this (kodcode, exercism/practice, ...)")
    parser.add_argument("--limit", type=int, help="only the first N rows (after --source)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--testcase-prefix", action="store_true",
                        help="rename unittest.TestCase classes not named Test* (Exercism's) to Test<name>: code "
                             "that counts only Test* classes rejects those modules as holding no tests")
    args = parser.parse_args()

    from rewardbox.rewards import CodeReward, Sample
    from rewardbox.sandbox.modes import make_sandbox

    support = option_support()
    paths = {"auto": ("out", "in") if support == "supported" else ("out",), "both": ("out", "in"),
             "out": ("out",), "in": ("in",)}[args.paths]
    print(f"this code's pytest labels: in_process {support}", file=sys.stderr)
    if support != "supported":
        print(f"  the option is {support} here: the default label is the in-process path, so only it runs "
              f"(the baseline){'; --paths both: the comparison is trivial' if 'in' in paths else ''}",
              file=sys.stderr)
    if support == "rejected" and "in" in paths:
        print("  the in_process labels will be unusable (a label error) on this code", file=sys.stderr)

    rows = load(args.corpus)
    if args.source:
        rows = [r for r in rows if r["id"].startswith(args.source)]
    rows = rows[:args.limit] if args.limit else rows
    results: dict[str, dict[str, dict]] = {r["id"]: {} for r in rows}
    started = time.monotonic()
    with make_sandbox(args.mode, max_containers=args.workers, sweep=False) as sandbox:
        reward = CodeReward(sandbox)
        futures = {reward.submit_grade(Sample(id=f"{r['id']}:{p}", completion=r["solution"],
                                          label=labels(r, p, args.testcase_prefix))):
                   (r["id"], p) for r in rows for p in paths}
        for done, future in enumerate(as_completed(futures), 1):
            row_id, path = futures[future]
            results[row_id][path] = outcome(future.result())
            if done % 50 == 0 or done == len(futures):
                print(f"  {done}/{len(futures)} graded, {time.monotonic() - started:.0f} s", file=sys.stderr)
    elapsed = time.monotonic() - started

    report = summarize(rows, results, paths, support)
    report.update({"testcase_prefix": args.testcase_prefix, "option": support, "paths": list(paths),
                   "mode": args.mode, "workers": args.workers,
                   "elapsed_s": round(elapsed, 1), "corpus": str(args.corpus)})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"report": report, "results": results}, indent=1) + "\n")
    print(f"\nresults: {args.output} ({elapsed:.0f} s)", file=sys.stderr)
    return 0


def summarize(rows: list[dict], results: dict, paths: tuple[str, ...], support: str) -> dict:
    by_id = {r["id"]: r for r in rows}
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(f"{r['source']} ({r['source_result']})", []).append(r["id"])
    report: dict[str, Any] = {"pairs": len(rows)}
    for path in paths:
        name = {"out": "default label" + ("" if support == "supported" else " (in process on this code)"),
                "in": "in_process label"}[path]
        print(f"\n== {name}: reference solutions scoring 1.0")
        scored = {}
        for group, ids in sorted(groups.items()):
            n = sum(1 for i in ids if results[i][path]["score"] == 1.0)
            print(f"  {group:40} {n:5} / {len(ids):<5} {100 * n / len(ids):5.1f}%")
            scored[group] = [n, len(ids)]
        every = list(results)
        n = sum(1 for i in every if results[i][path]["score"] == 1.0)
        print(f"  {'all':40} {n:5} / {len(every):<5} {100 * n / max(len(every), 1):5.1f}%")
        reasons = Counter(reason(results[i][path]) for i in every if results[i][path]["score"] != 1.0)
        print("  why the others do not (verdict/commonest exception of the failing tests):")
        for text, count in reasons.most_common(25):
            print(f"    {count:5}  {text}")
        durations = sorted(results[i][path]["duration_s"] for i in every)
        if durations:
            print(f"  run time per module: median {durations[len(durations) // 2]:.2f} s, "
                  f"p90 {durations[int(len(durations) * 0.9)]:.2f} s")
        report[path] = {"score_1": scored, "reasons": dict(reasons.most_common())}
    if set(paths) == {"out", "in"}:
        differing = [i for i in results if not same(results[i]["out"], results[i]["in"])]
        print(f"\n== out of process vs in process: {len(results) - len(differing)} / {len(results)} grade the same "
              f"({100 * (len(results) - len(differing)) / max(len(results), 1):.1f}%)"
              + ("  [trivial: the option is not supported by this code]" if support != "supported" else ""))
        for group, ids in sorted(groups.items()):
            n = sum(1 for i in ids if i not in differing)
            print(f"  {group:40} {n:5} / {len(ids):<5} same")
        features = Counter()
        listed = []
        for i in differing:
            out, inside = results[i]["out"], results[i]["in"]
            found = survey(by_id[i]["solution"], by_id[i]["pytest"])
            hints = sorted(f for f in found if f in BREAKING or f == "third_party")
            features.update(hints or ["(none found statically)"])
            tests = changed_tests(out, inside)
            print(f"\n  {i}: out {out['verdict']} {out['passed']}/{out['total']} reward {out['reward']}, "
                  f"in {inside['verdict']} {inside['passed']}/{inside['total']} reward {inside['reward']}; "
                  f"survey: {', '.join(hints) or 'nothing'}")
            for name, sides in list(tests.items())[:5]:
                o, n_ = sides["out"] or {}, sides["in"] or {}
                first = (o.get("message") or "").strip().splitlines()
                print(f"    {name}: out {o.get('outcome')} {o.get('exc_type') or ''} "
                      f"{(first[-1] if first else '')[:120]} | in {n_.get('outcome')} {n_.get('exc_type') or ''}")
            listed.append({"id": i, "out": {k: out[k] for k in ("reward", "verdict", "passed", "total")},
                           "in": {k: inside[k] for k in ("reward", "verdict", "passed", "total")},
                           "survey": found, "tests": tests})
        print("\n  the survey's features among the differing modules:")
        for feature, count in features.most_common():
            print(f"    {count:5}  {feature}")
        report["same"] = [len(results) - len(differing), len(results)]
        report["differences"] = listed
    return report


if __name__ == "__main__":
    sys.exit(main())
