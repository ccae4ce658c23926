"""The CLI's pure helpers: reading rollout lines, writing result records, the summary;
and `rewardbox score` end to end on rewards that need no sandbox (the format reward).

`rewardbox.cli.main` on code labels builds a real `Sandbox`, so that belongs to the docker tier.
"""

import gzip
import json
import threading
from concurrent.futures import Future

import pytest

from rewardbox.cli import _answer, _record, _sample, _summary, _write_answers, main
from rewardbox.rewards import GradingPolicy, RewardOutput, Sample, grade, grade_no_code
from rewardbox.rewards.code import output
from rewardbox.rewards.expected import ExpectedTests
from rewardbox.sandbox import EngineUnavailable, Outcome, RunResult, TestResult, Verdict

EXPECTED = ExpectedTests(counts={(None, "test_a"): 1, (None, "test_b"): 1})
POLICY = GradingPolicy()


def graded(verdict: Verdict, *outcomes: Outcome, **fields):
    tests = tuple(TestResult(nodeid=f"test_solution.py::{name}", name=name, outcome=o, duration_s=0.125)
                  for name, o in zip(["test_a", "test_b"], outcomes))
    g = grade(RunResult(verdict=verdict, tests=tests, **fields), EXPECTED, POLICY)
    return output(g.model_copy(update={"kind": "pytest"}))


def ungradable(error):
    return RewardOutput.unscorable(error, verdict=None)


# --- _sample ------------------------------------------------------------------

@pytest.mark.parametrize("line, expected", [
    pytest.param('{"id": 7, "completion": "x = 1", "label": {"pytest": "def test_a(): pass"}}\n',
                 Sample(id=7, completion="x = 1", label={"pytest": "def test_a(): pass"}), id="int-id"),
    pytest.param('{"id": "q-1", "completion": "c", "label": "{\\"pytest\\": \\"t\\"}", "prompt": "p"}',
                 Sample(id="q-1", completion="c", label='{"pytest": "t"}', prompt="p"), id="string-id-json-label"),
    pytest.param('{"completion": "c", "label": null}', Sample(completion="c", label=None), id="no-id-null-label"),
    pytest.param('{"id": 1, "completion": "c", "label": 3, "extra": [1, 2]}', Sample(id=1, completion="c", label=3),
                 id="extra-keys-ignored"),
    pytest.param('{"id": 2, "completion": [{"role": "assistant", "content": "x = 1"}], "label": 3}',
                 Sample(id=2, completion="x = 1", label=3), id="chat-completion"),
])
def test_rollout_lines_become_samples(line, expected):
    assert _sample(line, 1) == expected


@pytest.mark.parametrize("line, sample_id, error", [
    pytest.param('{"id": 5, "completion": "x", "label": ', None, "line 3: not JSON: Expecting value",
                 id="truncated-json"),
    pytest.param("not json at all", None, "line 3: not JSON: Expecting value", id="not-json"),
    pytest.param('{"id": 5, "label": {}}', 5, "line 3: not a rollout record: completion: Field required",
                 id="missing-completion-keeps-id"),
    pytest.param('{"id": "abc", "completion": 12, "label": {}}', "abc",
                 "line 3: not a rollout record: completion: Input should be a valid string", id="bad-completion-keeps-id"),
    pytest.param('{"id": "abc", "completion": [{"role": "user", "content": "x"}], "label": {}}', "abc",
                 "line 3: not a rollout record: completion: Input should be a valid string",
                 id="chat-completion-without-assistant-keeps-id"),
    pytest.param('{"id": {"nested": 1}, "completion": "x", "label": {}}', {"nested": 1},
                 "line 3: not a rollout record: id.str: Input should be a valid string", id="bad-id-kept-as-is"),
    pytest.param("[1, 2, 3]", None, "line 3: not a rollout record: ", id="array"),
    pytest.param('"a string"', None, "line 3: not a rollout record: ", id="string"),
    pytest.param("null", None, "line 3: not a rollout record: ", id="null"),
])
def test_unreadable_lines_become_answered_errors(line, sample_id, error):
    done = _sample(line, 3)

    assert isinstance(done, Future)
    assert done.done()
    g = done.result(timeout=0)
    assert (g.reward, g.score, g.verdict) == (None, None, None)
    assert g.metadata["error"].startswith(error)
    assert "\n" not in g.metadata["error"]  # one line, naming the field
    assert _record(done, g)["id"] == sample_id


# --- _record ------------------------------------------------------------------

def test_record_of_a_graded_sample():
    sample = Sample(id="q-9", completion="c", label={})
    g = graded(Verdict.FAILED, Outcome.PASSED, Outcome.FAILED, duration_s=1.234567, message="m" * 600)

    record = _record(sample, g)

    assert record == {
        "id": "q-9",
        "reward": 0.5,
        "score": 0.75,
        "verdict": "failed",
        "passed": 1,
        "total": 2,
        "duration_s": 1.2346,
        "message": "m" * 500,
        "error": None,
        "kind": "pytest",
        "tests": [
            {"nodeid": "test_solution.py::test_a", "outcome": "passed", "duration_s": 0.125},
            {"nodeid": "test_solution.py::test_b", "outcome": "failed", "duration_s": 0.125},
        ],
    }
    assert json.loads(json.dumps(record)) == record


def test_record_of_an_ungradable_sample():
    record = _record(Sample(id=3, completion="c", label=None), ungradable("label must be a JSON object"))

    assert record == {"id": 3, "reward": None, "score": None, "verdict": None, "error": "label must be a JSON object"}


def test_record_of_a_future_without_an_id():
    future: Future = Future()
    g = ungradable("broken")
    future.set_result(g)

    assert _record(future, g)["id"] is None


# --- _summary -----------------------------------------------------------------

def test_summary():
    grades = [
        graded(Verdict.PASSED, Outcome.PASSED, Outcome.PASSED),  # 1.0
        graded(Verdict.FAILED, Outcome.PASSED, Outcome.FAILED),  # 0.5
        graded(Verdict.TIMEOUT),  # -0.5
        output(grade_no_code(2, POLICY).model_copy(update={"kind": "pytest"})),  # -1.0
        ungradable("bad label"),  # not in the mean
    ]

    summary = _summary(grades, elapsed_s=2.0)

    assert summary.splitlines() == [
        "samples      5",
        "mean reward  0.000",
        "pass rate    0.200",
        "verdicts     failed 1, no_code 1, passed 1, timeout 1, unscorable 1",
        "throughput   2.50 samples/s (2.0 s)",
    ]


def test_summary_of_nothing():
    assert _summary([], elapsed_s=0.0).splitlines() == [
        "samples      0",
        "mean reward  0.000",
        "pass rate    0.000",
        "verdicts     ",
        "throughput   0.00 samples/s (0.0 s)",
    ]


def test_summary_when_nothing_was_gradable():
    lines = _summary([ungradable("a"), ungradable("b")], elapsed_s=1.0).splitlines()

    assert lines[1:4] == ["mean reward  0.000", "pass rate    0.000", "verdicts     unscorable 2"]


def test_a_sample_the_sandbox_failed_is_answered_unscored_not_penalised():
    failed: Future = Future()
    failed.set_exception(EngineUnavailable("the Docker engine is out of disk space (...)"))

    out = _answer(failed)

    assert (out.reward, out.score) == (None, None)
    assert out.metadata["sandbox_error"] is True
    assert out.metadata["error"] == "sandbox error: the Docker engine is out of disk space (...)"


def test_any_failure_of_a_sample_is_answered_unscored_not_penalised():
    failed: Future = Future()
    failed.set_exception(KeyError("a bug of ours"))

    out = _answer(failed)

    assert (out.reward, out.score) == (None, None)
    assert out.metadata["internal_error"] is True
    assert "sandbox_error" not in out.metadata
    assert out.metadata["error"] == "internal error: KeyError: 'a bug of ours'"


# --- reading lines ---------------------------------------------------------------

def test_a_line_of_invalid_utf8_is_answered_with_its_id():
    done = _sample(b'{"id": "u-1", "completion": "caf\xe9", "label": 1}\n', 4)

    out = done.result(timeout=0)
    assert out.metadata["error"] == "line 4: not UTF-8: invalid continuation byte at byte 32"
    assert _record(done, out)["id"] == "u-1"


def test_json_nested_thousands_deep_is_answered_not_a_crash():
    done = _sample(b'{"id": 1, "completion": "c", "label": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 2)

    assert done.result(timeout=0).metadata["error"].startswith("line 2: not JSON: JSON nested 100001 deep")


def test_a_byte_order_mark_on_the_first_line_is_no_error():
    assert _sample(b'\xef\xbb\xbf{"id": 1, "completion": "c", "label": 3}', 1) == Sample(id=1, completion="c", label=3)


GOOD = b'{"id": "fenced", "completion": "```python\\nx = 1\\n```", "label": 1}\n'
ROLLOUTS = [
    GOOD,
    b'{"id": "latin-1", "completion": "caf\xe9", "label": 1}\n',
    b"\n",  # blank: no rollout, no answer
    b'{"id": "deep", "label": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n",
    b"not json\n",
    b'{"id": "plain", "completion": "no code here", "label": 1}',  # no newline at the end
]


def score_file(tmp_path, *flags: str, data: bytes = b"".join(ROLLOUTS), name: str = "rollouts.jsonl"):
    """`rewardbox score` with the format reward (no sandbox, no worker process): the status and the records."""
    rollouts = tmp_path / name
    rollouts.write_bytes(data)
    output = tmp_path / "results.jsonl"
    status = main(["score", str(rollouts), "-o", str(output), "--no-progress", "-r", "format_one_code_block", *flags])
    return status, [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def test_every_line_is_answered_in_order_and_bad_ones_alone_fail(tmp_path):
    status, records = score_file(tmp_path)

    assert status == 0
    assert [r["id"] for r in records] == ["fenced", "latin-1", None, None, "plain"]
    assert [r["reward"] for r in records] == [1.0, None, None, None, 0.0]
    assert [(r["error"] or "").split(":")[0] for r in records] == ["", "line 2", "line 4", "line 5", ""]


@pytest.mark.parametrize("name", ["rollouts.jsonl.gz", "rollouts.jsonl"])  # by suffix, by the magic bytes
def test_a_gzip_input_is_read(tmp_path, name):
    status, records = score_file(tmp_path, data=gzip.compress(b"".join(ROLLOUTS)), name=name)

    assert status == 0
    assert [r["id"] for r in records] == ["fenced", "latin-1", None, None, "plain"]


def test_a_stop_answers_what_finished_and_the_rest_as_interrupted(tmp_path):
    done: Future = Future()
    done.set_result(RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed"}))
    samples = [Sample(id=i, completion="c", label=1) for i in range(4)]
    futures = [done, Future(), done, None]  # the last was never submitted
    stop = threading.Event()
    stop.set()

    with open(tmp_path / "out.jsonl", "w") as sink:
        outputs = _write_answers(samples, futures, sink, stop)

    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["id"], r["reward"], r["error"]) for r in records] == [
        (0, 1.0, None),
        (1, None, "interrupted before it was scored"),
        (2, 1.0, None),
        (3, None, "interrupted before it was scored"),
    ]
    assert len(outputs) == 4


# --- clear errors before anything is written ------------------------------------------

@pytest.mark.parametrize("flags, error", [
    (["--timeout-s", "-1"], "rewardbox: --timeout-s: input should be greater than 0, not -1.0"),
    (["--timeout-s", "0"], "rewardbox: --timeout-s: input should be greater than 0, not 0.0"),
    (["--timeout-s", "inf"], "rewardbox: --timeout-s: input should be a finite number, not inf"),
    (["--memory-mb", "-5"], "rewardbox: --memory-mb: input should be greater than or equal to 32, not -5"),
    (["-r", "correctness=1e308,format_one_code_block=1e308"],
     "rewardbox: --reward 'correctness=1e308,format_one_code_block=1e308': the weights sum to inf; "
     "use smaller weights (only their ratios matter)"),
    (["-r", "correctness=-1"],
     "rewardbox: --reward 'correctness=-1': weight of 'correctness' must be a finite number >= 0, got -1.0"),
])
def test_a_bad_setting_is_one_clear_line_and_the_output_is_untouched(tmp_path, capsys, flags, error):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(GOOD)
    output = tmp_path / "results.jsonl"
    output.write_text("earlier results\n")

    assert main(["score", str(rollouts), "-o", str(output), "--no-progress", *flags]) == 2

    assert capsys.readouterr().err.splitlines() == [error]
    assert output.read_text() == "earlier results\n"


def test_a_missing_input_is_one_clear_line_and_the_output_is_untouched(tmp_path, capsys):
    output = tmp_path / "results.jsonl"
    output.write_text("earlier results\n")

    assert main(["score", str(tmp_path / "nope.jsonl"), "-o", str(output), "--no-progress"]) == 2

    assert capsys.readouterr().err.splitlines() == [f"rewardbox: cannot read {tmp_path}/nope.jsonl: No such file or directory"]
    assert output.read_text() == "earlier results\n"


def test_a_broken_gzip_input_is_one_clear_line_and_the_output_is_untouched(tmp_path, capsys):
    rollouts = tmp_path / "rollouts.jsonl.gz"
    rollouts.write_bytes(gzip.compress(GOOD * 100)[:-20])
    output = tmp_path / "results.jsonl"
    output.write_text("earlier results\n")

    assert main(["score", str(rollouts), "-o", str(output), "--no-progress"]) == 2

    assert capsys.readouterr().err.startswith(f"rewardbox: cannot read {rollouts}: ")
    assert output.read_text() == "earlier results\n"


def test_an_output_in_a_missing_directory_is_one_clear_line(tmp_path, capsys):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(GOOD)

    assert main(["score", str(rollouts), "-o", str(tmp_path / "no" / "results.jsonl"), "--no-progress"]) == 2

    assert capsys.readouterr().err.splitlines() == [
        f"rewardbox: cannot write {tmp_path}/no/results.jsonl: no directory {tmp_path}/no"]
    assert not (tmp_path / "no").exists()


def test_the_input_as_output_is_refused_not_emptied(tmp_path, capsys):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(GOOD)

    assert main(["score", str(rollouts), "-o", str(rollouts), "--no-progress"]) == 2

    assert capsys.readouterr().err.splitlines() == [f"rewardbox: cannot write {rollouts}: it is the input"]
    assert rollouts.read_bytes() == GOOD


@pytest.mark.parametrize("flags, error", [
    (["--memory-mb", "-5"], "rewardbox: --memory-mb: input should be greater than or equal to 32, not -5"),
    (["--max-waiting", "0"], "rewardbox: --max-waiting: input should be greater than or equal to 1, not 0"),
])
def test_serve_refuses_a_bad_setting_in_one_clear_line(capsys, flags, error):
    assert main(["serve", "--port", "0", *flags]) == 2
    assert capsys.readouterr().err.splitlines() == [error]
