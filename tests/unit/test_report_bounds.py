"""Scale without false verdicts, the pure parts: the default run deadline that
grows with a label's tests, and the bounds on what the harness sends (records,
messages, the report), none of which may turn into a verdict against the
solution. The same runs in real containers: tests/docker/test_scale.py."""

import argparse
import hashlib
import hmac
import json
import sys
from pathlib import Path

import pytest

from rewardbox.rewards import CodeReward
from rewardbox.sandbox import Limits, Verdict
from rewardbox.sandbox.models import MAX_DEFAULT_TIMEOUT_S, PER_TEST_TIMEOUT_S, default_timeout_s
from rewardbox.sandbox.protocol import MAX_REPORT_BYTES, PROTOCOL_VERSION, REPORT_PREFIX, TEXT_CAPS, parse_report
from rewardbox.sandbox.runner import REPORT_MARGIN_BYTES
from rewardbox.sandbox.verdict import ContainerFacts, judge

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import pytest_runner  # noqa: E402
import rbrun  # noqa: E402

KEY = b"k" * 32
NONCE = "n" * 64


# -- the default run deadline --------------------------------------------------------------------

@pytest.mark.parametrize("tests, timeout_s", [(0, 10.0), (1, 10.5), (60, 40.0), (220, 120.0), (10_000, 120.0)])
def test_default_deadline_grows_with_the_tests_up_to_its_cap(tests, timeout_s):
    assert default_timeout_s(tests) == timeout_s == Limits().for_tests(tests).timeout_s


def test_the_issue_slow_correct_program_gets_its_time():
    """60 cases of 0.2 s each (12 s of work) ran past the old fixed 10 s."""
    assert Limits().for_tests(60).timeout_s >= 60 * 0.2 + 10


def test_a_deadline_given_is_kept_even_the_default_value():
    assert Limits(timeout_s=10).for_tests(10_000).timeout_s == 10
    assert Limits(timeout_s=300).for_tests(1).timeout_s == 300
    assert Limits.model_validate({"timeout_s": 4}).for_tests(500).timeout_s == 4


def test_other_limits_given_keep_the_growing_deadline():
    limits = Limits(memory_mb=256).for_tests(100)
    assert (limits.timeout_s, limits.memory_mb) == (60.0, 256)
    assert limits.for_tests(100) == limits  # applied again: the same


def test_code_reward_sizes_the_deadline_by_the_label(fake_sandbox, result):
    box = fake_sandbox(*[result(Verdict.FAILED)] * 3)
    label = {"tests": [f"assert f({i}) == {i}" for i in range(60)]}
    CodeReward(box).grade("def f(x):\n    return x\n", label)
    CodeReward(box, limits=Limits(timeout_s=7)).grade("def f(x):\n    return x\n", label)
    CodeReward(box).grade("def f(x):\n    return x\n", {"tests": ["assert f(1) == 1"]})
    assert [r.limits.timeout_s for r in box.requests] == [40.0, 7.0, 10.5]


def test_the_cli_gives_no_deadline_unless_told():
    from rewardbox.cli import _settings

    def limits(**flags):
        return _settings(argparse.Namespace(config=None, **flags)).limits

    assert "timeout_s" not in limits(timeout_s=None, memory_mb=512).model_fields_set
    assert limits(timeout_s=10.0, memory_mb=512).for_tests(500).timeout_s == 10


def test_the_cap_is_documented():
    page = (ROOT / "docs" / "sandbox.md").read_text()
    assert f"{MAX_DEFAULT_TIMEOUT_S:g} s" in page and f"{PER_TEST_TIMEOUT_S:g} s per test" in page


# -- records: every one the test process sends fits, whatever it reports --------------------------

class Pipe:
    def __init__(self):
        self.lines = []

    def write(self, fd, data):
        self.lines.append(data)
        return len(data)


def plugin():
    pipe = Pipe()
    runner = pytest_runner.RecordPlugin(KEY, 99)
    runner._write = pipe.write
    return runner, pipe


def feed(lines) -> rbrun.Records:
    records = rbrun.Records(KEY)
    for line in lines:
        records.feed(line)
    return records


class Item:
    def __init__(self, nodeid, name="test_p", cls=None):
        self.nodeid, self.name, self.originalname, self.cls = nodeid, name, name, cls


class Session:
    def __init__(self, items):
        self.items = items


def test_ten_thousand_collected_ids_cross_in_several_records_and_arrive_as_one():
    runner, pipe = plugin()
    nodeids = [f".tests/test_solution.py::test_p[{i}]" for i in range(10_000)]
    runner.pytest_collection_finish(Session([Item(n) for n in nodeids]))
    assert len(pipe.lines) > 10 and max(map(len, pipe.lines)) <= rbrun.MAX_RECORD_BYTES
    records = feed(pipe.lines)
    assert records.rejected == 0
    assert records.records == [{"event": "collected", "nodeids": nodeids, "more": False}]


def test_a_collected_list_cut_short_says_so():
    runner, pipe = plugin()
    runner.pytest_collection_finish(Session([Item(f"t.py::test_p[{'x' * 200}{i}]") for i in range(1000)]))
    records = feed(pipe.lines[:-1])
    assert records.records[0]["more"] is True and 0 < len(records.records[0]["nodeids"]) < 1000


class Rep:
    def __init__(self, nodeid, message, when="call"):
        self.nodeid, self.when, self.longrepr, self.duration = nodeid, when, message, 0.1
        self.failed, self.skipped, self.passed = True, False, False


def test_a_record_stays_under_the_bound_however_long_its_texts():
    """The longest texts, each character 12 bytes of JSON (outside the BMP)."""
    runner, pipe = plugin()
    huge = "\U0001F600" * 100_000
    nodeid = f"t.py::TestC::test_{huge}[{huge}]"
    runner.pytest_collection_finish(Session([Item(nodeid, name=f"test_{huge}", cls=type("TestC", (), {}))]))
    runner.pytest_runtest_logreport(Rep(nodeid, f"{huge}: {huge}"))
    runner.pytest_runtest_logfinish(nodeid, None)
    runner.pytest_collectreport(type("R", (), {"failed": True, "nodeid": nodeid, "longrepr": huge})())
    assert max(map(len, pipe.lines)) <= rbrun.MAX_RECORD_BYTES
    records = feed(pipe.lines)
    assert records.rejected == 0
    collected, test, error = records.records
    assert collected["nodeids"] == [test["nodeid"]] == [error["nodeid"]]  # the judge matches them
    assert len(test["nodeid"]) <= TEXT_CAPS["nodeid"] and len(test["message"]) <= TEXT_CAPS["message"]


def test_cut_ids_stay_distinct():
    long = "x" * 1000
    cut = {pytest_runner._nodeid(f"t.py::test_p[{long}{i}]") for i in range(100)}
    assert len(cut) == 100 and max(map(len, cut)) <= pytest_runner.NODEID_CHARS + 20
    assert pytest_runner._nodeid("t.py::test_a") == "t.py::test_a"


def test_a_line_over_the_bound_is_still_rejected():
    records = feed([b"x" * (rbrun.MAX_RECORD_BYTES + 1)])
    assert records.rejected == 1 and records.pending == bytearray()


def test_records_split_anywhere_across_chunks_arrive_whole():
    runner, pipe = plugin()
    runner.pytest_collection_finish(Session([Item(f"t.py::test_p[{i}]") for i in range(3000)]))
    stream = b"".join(pipe.lines)
    records = feed(stream[i:i + 777] for i in range(0, len(stream), 777))
    assert records.rejected == 0 and len(records.records[0]["nodeids"]) == 3000


def test_pytest_terminal_output_is_kept_apart_as_a_tail():
    runner, pipe = plugin()
    runner._terminal.write("." * 50_000 + "\n1 failed, 9999 passed in 3.2s\n")
    runner.terminal()
    records = feed(pipe.lines)
    assert records.records == [] and records.terminal.endswith("1 failed, 9999 passed in 3.2s\n")
    assert len(records.terminal) <= pytest_runner.TERMINAL_CHARS


# -- messages and the report as a whole ----------------------------------------------------------

def signed(record: dict) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return hmac.new(KEY, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n"


def failing_run(tests: int, message_chars: int = 2000) -> dict:
    nodeids = [f".tests/test_solution.py::test_case_{i}" for i in range(tests)]
    lines = [signed({"event": "collected", "nodeids": nodeids})]
    lines += [signed({"event": "test", "nodeid": n, "name": n.rsplit("::", 1)[1], "cls": None, "outcome": "failed",
                      "duration_s": 0.001, "message": "E" * message_chars, "exc_type": "AssertionError"})
              for n in nodeids]
    records = feed(lines)
    assert records.rejected == 0
    return {"version": PROTOCOL_VERSION, "phase": "pytest", "returncode": 1, "timed_out": False, "output_exceeded": False,
            "stdout": "", "stderr": "", "records": records.records, "rejected_records": 0, "tests_modified": False}


def host_reads(report: dict):
    body = rbrun.report_body(report)
    line = REPORT_PREFIX + hmac.new(NONCE.encode(), body, hashlib.sha256).hexdigest().encode() + b" " + body
    assert len(line) + 2 <= REPORT_MARGIN_BYTES  # the host reads it whole beyond any output limit
    return parse_report(b"\n" + line + b"\n", NONCE)


def test_messages_are_budgeted_first_ones_whole():
    report = failing_run(2000)
    messages = [r["message"] for r in report["records"] if r["event"] == "test"]
    assert messages[0] == "E" * 2000
    assert sum(len(m or "") for m in messages) <= rbrun.MESSAGES_CHARS + 2000
    assert messages[-1] is None or len(messages[-1]) <= rbrun.SHORT_MESSAGE_CHARS + 3


def test_ten_thousand_failing_tests_with_long_messages_grade_exactly():
    report = host_reads(failing_run(10_000))
    result = judge(report, ContainerFacts())
    assert result.verdict is Verdict.FAILED and not result.tampered and len(result.tests) == 10_000
    assert result.message == ""


def test_a_report_over_the_bound_sheds_messages_then_fails_as_ours():
    report = failing_run(10)
    report["records"][1]["message"] = "x" * MAX_REPORT_BYTES
    shed = json.loads(rbrun.report_body(report))
    assert shed["phase"] == "pytest" and all(r.get("message") is None for r in shed["records"])
    report["records"] *= 100_000 // len(report["records"])  # no message left to shed
    report["recycle"] = "kept"
    failed = json.loads(rbrun.report_body(report))
    assert failed["phase"] == "harness_error" and failed["recycle"] == "kept"
    assert "over" in failed["message"]


def test_the_host_and_the_harness_agree_on_the_bound():
    assert rbrun.MAX_REPORT_BYTES == MAX_REPORT_BYTES < REPORT_MARGIN_BYTES


def test_failures_are_told_without_reparsing_large_modules(tmp_path):
    """pytest's "short" style parses the whole module again for each failure."""
    small, large = tmp_path / "test_small.py", tmp_path / "test_large.py"
    small.write_text("def test_a():\n    assert False\n")
    large.write_text("".join(f"def test_{i}():\n    assert False\n\n" for i in range(1000)))
    assert pytest_runner.traceback_style([str(small)], generated=False) == "short"
    assert pytest_runner.traceback_style([str(large)], generated=False) == "line"
    assert pytest_runner.traceback_style([str(small)], generated=True) == "line"
    assert "--tb=line" in pytest_runner.pytest_args([str(large)], tb="line")
