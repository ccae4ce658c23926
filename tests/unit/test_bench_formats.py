"""The benchmark's corpus per label format (bench/formats.py) and its
`bare-program` contestant (bench/bench.py), on a tiny made-up problem: each
format's label is one rewardbox parses, with the cases it should hold; each
variant's program gets its class from its exit status alone; the diffs
against bare-program compare only pass or not; and the tail is also read
outside the tests' own time. No network, no Docker."""

import importlib.util
import random
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rewardbox.rewards.labels import parse_label
from rewardbox.sandbox import Limits

BENCH = Path(__file__).parents[2] / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))  # formats.py and bench.py import corpus by its name
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load("corpus")
formats = _load("formats")
bench = _load("bench")

PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TEST = ("def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate([1], [2]) == [1, 2]\n"
        "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9\n    assert candidate((1,), (2,)) == (1, 2)\n"
        "    assert candidate(-1, 1) == 0\n")
PROBLEM = corpus.Problem(task_id="Fake/0", prompt=PROMPT, canonical_solution="    return a + b\n", test=TEST,
                         entry_point="add")
# No variant run here loops: the deadline only has to outlast a memory hog reaching RLIMIT_AS on a
# loaded machine (2 s did not, once, in CI: timeout instead of out_of_memory).
LIMITS = Limits(timeout_s=30.0)


def _sample(kind: str, fmt: str):
    return formats.in_format(corpus.variant(PROBLEM, kind, random.Random(0)), PROBLEM, fmt)


def test_asserts_name_the_entry_point_and_keep_every_plain_assert():
    assert formats.assert_cases(PROBLEM) == [
        "assert add(1, 2) == 3", "assert add([1], [2]) == [1, 2]", "assert abs(add(0.5, 0.25) - 0.75) < 1e-09",
        "assert add((1,), (2,)) == (1, 2)", "assert add(-1, 1) == 0"]
    shared = PROBLEM.model_copy(update={"test": "def check(candidate):\n    x = candidate(1, 2)\n    assert x == 3\n"})
    assert formats.in_format(corpus.variant(shared, "canonical", random.Random(0)), shared, "asserts") is None


def test_call_cases_are_literal_calls_with_json_arguments():
    # not abs(...) < ...: not a call compared by ==; not tuples as arguments: a call label's are JSON lists
    assert formats.literal_cases(PROBLEM) == [([1, 2], 3), ([[1], [2]], [1, 2]), ([-1, 1], 0)]


@pytest.mark.parametrize("fmt", formats.FORMATS)
def test_each_format_is_a_label_rewardbox_parses_with_its_cases(fmt):
    label = parse_label(_sample("canonical", fmt).label)
    assert label.kind == fmt
    assert label.expected.total == {"check": 5, "asserts": 5, "pytest": 5, "call": 3, "stdio": 3}[fmt]


@pytest.mark.parametrize("fmt", formats.FORMATS)
def test_bare_program_gets_each_variant_its_class_from_the_exit_status(fmt):
    contestant = bench.CONTESTANTS["bare-program"](1, LIMITS)
    for kind in ("canonical", "crash_some", "wrong_all", "truncated", "memory"):
        sample = _sample(kind, fmt)
        [item] = bench.prepared([sample], LIMITS, fmt, [PROBLEM])
        result = contestant(item)
        assert result["verdict"] == sample.expected, (kind, result)
        assert result["passed"] == (item["total"] if kind == "canonical" else 0)  # all or nothing


@pytest.mark.parametrize("fmt", ["call", "stdio"])
def test_bare_gets_each_variant_its_class_from_the_plain_module_of_a_call_or_stdio_label(fmt):
    contestant = bench.Bare(1, LIMITS)
    for kind in ("canonical", "crash_some", "wrong_all", "truncated"):
        sample = _sample(kind, fmt)
        [item] = bench.prepared([sample], LIMITS, fmt, [PROBLEM])
        assert contestant(item)["verdict"] == sample.expected, kind


def test_a_stdio_crash_some_crashes_on_some_inputs_though_each_input_is_a_fresh_process():
    # corpus.py's crash counts calls: in a fresh process per input that is every input or none
    sample = _sample("crash_some", "stdio")
    [item] = bench.prepared([sample], LIMITS, "stdio", [PROBLEM])
    contestant = bench.BareProgram(1, LIMITS)
    crashed = 0
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / bench.PROGRAM_FILE).write_text(item["program"]["source"])
        for stdin in item["program"]["inputs"]:
            _, code, _, err = contestant.run(Path(work), stdin, time.monotonic() + 30)
            crashed += code != 0 and "broken on" in err
    assert 0 < crashed < len(item["program"]["inputs"])


def test_an_asserts_crash_some_crashes_among_the_asserts_kept():
    # check's cases are 1 assert and 4 loops; the asserts label keeps the one assert (one call)
    loops = "".join(f"    for x{i} in [{i}]:\n        assert candidate(x{i}, 0) == x{i}\n" for i in range(4))
    problem = PROBLEM.model_copy(update={"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n" + loops})
    assert len(corpus.split_cases(problem)) == 5 and len(formats.assert_cases(problem)) == 1
    contestant = bench.BareProgram(1, LIMITS)
    for seed in range(8):  # corpus.py's crash picks among 5 calls: some seeds spare the first
        sample = formats.in_format(corpus.variant(problem, "crash_some", random.Random(seed)), problem, "asserts")
        [item] = bench.prepared([sample], LIMITS, "asserts", [problem])
        assert contestant(item)["verdict"] == "failed", seed


def test_stdio_programs_print_the_json_the_label_expects():
    sample = _sample("canonical", "stdio")
    assert sample.label["inputs"] == ["[1, 2]\n", "[[1], [2]]\n", "[-1, 1]\n"]
    assert sample.label["outputs"] == ["3\n", "[1, 2]\n", "0\n"]
    assert 'if __name__ == "__main__":' in sample.completion


def test_program_verdict_reads_the_exit_alone():
    assert bench.program_verdict(True, None, "") == "timeout"
    assert bench.program_verdict(False, 0, "MemoryError") == "passed"  # exit 0 is all it reads
    assert bench.program_verdict(False, 1, "Traceback ...\nMemoryError\n") == "out_of_memory"
    assert bench.program_verdict(False, 1, '  File "prog.py", line 3\nSyntaxError: invalid syntax\n') == "syntax_error"
    assert bench.program_verdict(False, 1, "Traceback ...\nAssertionError\n") == "failed"


def test_against_bare_program_diffs_compare_pass_or_not_only():
    items = [{"id": i, "hostile": False} for i in "abc"]

    def run(*verdicts):
        return {"results": [{"id": i, "verdict": v, "reward": float(v == "passed")} for i, v in zip("abc", verdicts)]}

    runs = {"bare-program": run("passed", "failed", "failed"), "rewardbox": run("passed", "syntax_error", "passed")}
    assert bench.disagreements(items, runs) == {"bare-program": [], "rewardbox": ["c"]}
    graded = {"bare": run("passed", "failed", "failed"), "rewardbox": run("passed", "syntax_error", "failed")}
    assert bench.disagreements(items, graded) == {"bare": [], "rewardbox": ["b"]}  # classes, where both grade


def test_the_tail_outside_the_tests_leaves_out_their_own_time_and_the_samples_that_hit_a_limit():
    def figures(results):
        return {"results": results, "wall_s": 1.0, "host_cpu_self_s": 0.0, "host_cpu_children_s": 0.0,
                "engine_cpu_s": 0.0, "engine_cpu_raw_s": 0.0, "container_cpu_s": 0.0, "peak_rss_mib": 1.0,
                "containers_seen": 0, "containers_started": 0}

    # Nine samples of 0.1 s of our own, one of 0.1 s plus 0.9 s of slow tests, one that timed out.
    timed = [{"verdict": "passed", "latency_s": 0.1 + tests, "tests_s": tests} for tests in [0.0] * 9 + [0.9]]
    timed.append({"verdict": "timeout", "latency_s": 5.0, "tests_s": 0.0})
    row = bench.summarize("rewardbox", figures(timed), len(timed))
    assert row["p99_calm_s"] / row["p50_calm_s"] > 5  # the slow tests make the calm tail
    assert row["p50_outside_tests_s"] == row["p99_outside_tests_s"] == 0.1  # our own part has none
    untimed = bench.summarize("bare-program", figures([{"verdict": "passed", "latency_s": 0.1}] * 3), 3)
    assert untimed["p50_outside_tests_s"] is None
    table = bench.table([row, untimed], {"rewardbox": [], "bare-program": []}, {"rewardbox": 0, "bare-program": 0})
    assert "p99/p50 outside tests" in table.splitlines()[0]
    assert [line.split(" | ")[9].strip() for line in table.splitlines()[1:]] == ["1.00", "-"]


def test_corpus_in_format_leaves_out_problems_without_cases():
    no_literals = PROBLEM.model_copy(update={"task_id": "Fake/1", "test": (
        "def check(candidate):\n    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9\n"
        "    assert candidate(1, 2) > 2\n")})
    samples = [corpus.variant(p, "canonical", random.Random(0)) for p in (PROBLEM, no_literals)]
    assert [s.task_id for s in formats.corpus_in_format(samples, [PROBLEM, no_literals], "call")] == ["Fake/0"]
    assert len(formats.corpus_in_format(samples, [PROBLEM, no_literals], "asserts")) == 2
    with pytest.raises(ValueError, match="unknown format"):
        formats.in_format(samples[0], PROBLEM, "nope")


def test_rounds_give_each_mode_its_median_round_and_the_ratios_round_by_round():
    def runs(bare_wall, ours_wall):
        return {"bare-program": {"wall_s": bare_wall}, "rewardbox": {"wall_s": ours_wall}}

    rounds = [runs(1.0, 2.0), runs(1.2, 1.6), runs(0.9, 3.0)]
    assert bench.median_round(rounds, "bare-program")["wall_s"] == 1.0
    assert bench.median_round(rounds, "rewardbox")["wall_s"] == 2.0
    assert bench.median_round(rounds[:2], "rewardbox")["wall_s"] == 2.0  # of two, the slower one
    per_round = {"bare-program": [100.0, 80.0], "rewardbox": [50.0, 60.0], "bare": [10.0, 10.0]}
    assert bench.round_ratios(per_round) == {"rewardbox": [0.5, 0.75]}
    assert bench.round_ratios({"rewardbox": [50.0]}) == {}
