"""The benchmark's corpus builder (bench/corpus.py) on a tiny made-up problem:
the same seed gives the same corpus, asserts are split one per test as the
check label splits them, the plain pytest module the baselines run holds one
test per case, and each variant is built to get its class. No network, no Docker."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"rbbench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus = _load("corpus")

PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TEST = ("METADATA = {}\n\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
        "    assert candidate(0, 0) == 0\n    assert candidate(-1, 1) == 0\n    assert True\n")
PROBLEMS = [corpus.Problem(task_id=f"Fake/{i}", prompt=PROMPT, canonical_solution="    return a + b\n",
                           test=TEST, entry_point="add") for i in range(6)]


def test_same_seed_same_corpus_other_seed_other_mix():
    first = corpus.build_corpus(PROBLEMS, None, hostile_share=0.1, seed=3)
    assert first == corpus.build_corpus(PROBLEMS, None, hostile_share=0.1, seed=3)
    assert [s.id for s in first] != [s.id for s in corpus.build_corpus(PROBLEMS, None, hostile_share=0.1, seed=4)]


def test_the_whole_corpus_has_every_variant_and_its_hostile_share():
    samples = corpus.build_corpus(PROBLEMS, None, hostile_share=0.1, seed=0)
    regular = [s for s in samples if not s.hostile]
    assert {s.variant for s in regular} >= set(corpus.VARIANTS)
    assert sum(s.variant == "canonical" for s in samples) == len(PROBLEMS)
    hostile = [s for s in samples if s.hostile]
    assert {s.variant for s in hostile} == {"loop", "memory"}
    assert len(hostile) == -(-len(regular) * 0.1 // 0.9)  # ceil: a tenth of all samples
    assert len({s.id for s in regular}) == len(regular)


def test_a_sized_corpus_has_that_many_samples_hostile_ones_included():
    samples = corpus.build_corpus(PROBLEMS, 10, hostile_share=0.2, seed=1)
    assert len(samples) == 10
    assert sum(s.hostile for s in samples) == 2
    assert not samples[0].hostile and not samples[-1].hostile  # spread, not bunched at an end


def test_asserts_are_split_one_per_test_as_the_check_label_splits_them():
    cases = corpus.split_cases(PROBLEMS[0])
    # `assert True` uses no candidate: not a test, it runs where check runs it (after the last call)
    assert [c["source"] for c in cases] == ["assert candidate(1, 2) == 3", "assert candidate(0, 0) == 0",
                                           "assert candidate(-1, 1) == 0\nassert True"]
    data = corpus.test_data(TEST, "add", PROMPT)
    module = corpus.plain_test_module(data)
    functions = [n.name for n in ast.parse(module).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    assert functions == ["test_check_0", "test_check_1", "test_check_2"]


def test_shared_state_keeps_check_whole():
    shared = "def check(candidate):\n    x = candidate(1, 2)\n    assert x == 3\n    assert candidate(x, 0) == 3\n"
    problem = PROBLEMS[0].model_copy(update={"test": shared})
    assert [c["source"] for c in corpus.split_cases(problem)] == ["check(candidate)"]


def test_each_variant_is_built_to_get_its_class(tmp_path):
    """The plain module of the baselines, run with pytest on the variants of
    the fake problem, and its JUnit report read as the baselines read it:
    every variant gets the class it was built for."""
    bench = _load("bench")
    rng = __import__("random").Random(0)
    data = corpus.test_data(TEST, "add", PROMPT)
    got = {}
    for kind in ("canonical", "crash_some", "wrong_all", "truncated"):
        sample = corpus.variant(PROBLEMS[0], kind, rng)
        work = tmp_path / kind
        work.mkdir()
        (work / "solution.py").write_text(sample.completion)
        (work / "test_solution.py").write_text(corpus.plain_test_module(data))
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=r.xml",
                              "test_solution.py"], cwd=work, capture_output=True, text=True, timeout=120,
                             env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"})
        got[kind] = (sample.expected, bench.classify(False, run.returncode, (work / "r.xml").read_text(), 3))
    assert got["canonical"] == ("passed", ("passed", 3))
    assert got["crash_some"] == ("failed", ("failed", 2))  # one of its three calls raises
    assert got["wrong_all"] == ("failed", ("failed", 0))
    assert got["truncated"] == ("syntax_error", ("syntax_error", 0))
    assert bench.classify(True, None, None, 3) == ("timeout", 0)
    assert bench.classify(False, 137, None, 3) == ("out_of_memory", 0)  # killed by the OOM killer, no report


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variant"):
        corpus.variant(PROBLEMS[0], "nope", __import__("random").Random(0))


def test_bench_imports_without_docker():
    bench = _load("bench")  # docker is imported only when a container mode runs
    assert "docker" not in vars(bench)
