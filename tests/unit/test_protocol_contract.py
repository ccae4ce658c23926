"""The host-harness contract: reports made by the harness's own code
(images/python/harness, imported by path as the image runs it) read by the
host's parser (`parse_report`, the typed `Report`) and judged. A key renamed on
one side only fails here, before any container runs.

The program, syntax and harness-error reports come from `rbrun.handle`
itself, run on the host in a temporary work dir (no sweep: nothing else of the
host is touched); the pytest report's records come from the test process's
plugin and the supervisor's record reader, its outer report from
`pytest_report`, its line from `write_report`. The other way, a request the
host encodes (`encode_request`, the typed `WireRequest`) is read by the
harness's own reader (`rbrun.read_request`) and run by `handle`."""

import io
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rewardbox.sandbox import Outcome, RunRequest, Verdict
from rewardbox.sandbox import protocol as host
from rewardbox.sandbox.errors import HarnessError
from rewardbox.sandbox.verdict import ContainerFacts, judge

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "images" / "python" / "harness"))
import pytest_runner  # noqa: E402
import rbprotocol  # noqa: E402
import rbrun  # noqa: E402

NONCE = "c" * 64
KEY = b"k" * 32
FACTS = ContainerFacts(exit_code=0, duration_s=1.0)
# kill_everything_else is for pid 1 of a container only; a program run drops the zygote's spare first.
NO_SWEEP = SimpleNamespace(sweep=lambda: None, drop_spare=lambda: None)


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setattr(rbrun, "WORK_DIR", str(tmp_path))
    monkeypatch.setattr(rbrun, "TESTS_DIR", str(tmp_path / ".tests"))
    return tmp_path


def sent(report: dict, monkeypatch) -> bytes:
    """The container's stdout: some output of the run, then the report line `write_report` writes."""
    out = io.BytesIO(b"output of the run, no newline")
    monkeypatch.setattr(rbrun.sys, "stdout", SimpleNamespace(buffer=out))
    rbrun.write_report(NONCE.encode(), report)
    return out.getvalue()


def host_reads(report: dict, monkeypatch) -> host.Report:
    parsed = host.parse_report(sent(report, monkeypatch), NONCE)
    assert isinstance(parsed, host.Report)
    return parsed


def program(source: str, **request) -> dict:
    return rbrun.handle({"nonce": NONCE, "files": {"main.py": source}, "tests": {}, "test_data": None,
                              "timeout_s": 20, "output_limit_bytes": 1 << 20, "program": "main.py",
                              "stdin": "", "fetch_files": [], **request}, NO_SWEEP)


def test_the_host_reads_the_harness_constants_from_the_same_file():
    loaded = Path(host.harness_protocol().__file__)
    assert loaded.read_bytes() == (ROOT / "images" / "python" / "harness" / "rbprotocol.py").read_bytes()
    assert (host.PROTOCOL_VERSION, host.REPORT_PREFIX, host.READY, host.PHASE_HARNESS_ERROR) == (
        rbprotocol.PROTOCOL_VERSION, rbprotocol.REPORT_PREFIX, rbprotocol.READY, rbprotocol.PHASE_HARNESS_ERROR)


def test_a_program_report(work, monkeypatch):
    report = host_reads(program("import sys\nprint('hi')\nopen('out.txt', 'w').write('x')\nsys.exit(3)\n",
                                fetch_files=["out.txt"]), monkeypatch)
    assert (report.version, report.phase, report.returncode) == (rbprotocol.PROTOCOL_VERSION, "program", 3)
    result = judge(report, FACTS)
    assert result.verdict is Verdict.FAILED and result.message == "the program exited with status 3"
    assert (result.exit_code, result.stdout, result.files) == (3, "hi\n", {"out.txt": "eA=="})


def test_a_program_that_does_not_compile(work, monkeypatch):
    result = judge(host_reads(program("def f(:\n"), monkeypatch), FACTS)
    assert result.verdict is Verdict.SYNTAX_ERROR and result.message.startswith("SyntaxError: ")


def test_a_solution_that_does_not_compile(work, monkeypatch):
    report = rbrun.handle({"nonce": NONCE, "files": {"solution.py": "def f(:\n"},
                                "tests": {"test_solution.py": "def test_a():\n    pass\n"}, "test_data": None,
                                "timeout_s": 20, "output_limit_bytes": 1 << 20}, NO_SWEEP)
    result = judge(host_reads(report, monkeypatch), FACTS)
    assert result.verdict is Verdict.SYNTAX_ERROR and result.message.startswith("SyntaxError: ")
    assert result.message != "SyntaxError: "  # the harness's account of the error reached the host


def test_a_harness_failure_is_raised_as_ours(work, monkeypatch):
    report = host_reads(rbrun.handle({"nonce": NONCE}, NO_SWEEP), monkeypatch)  # no files: a broken request
    assert report.phase == host.PHASE_HARNESS_ERROR and report.message.startswith("KeyError")
    attacked = host_reads({**rbrun.handle({"nonce": NONCE}, NO_SWEEP), "harness_attacked": True}, monkeypatch)
    assert judge(attacked, FACTS).verdict is Verdict.KILLED


class Item:
    def __init__(self, nodeid):
        self.nodeid, self.name, self.originalname, self.cls = nodeid, nodeid.rsplit("::", 1)[1], None, None


class Passed:
    when, failed, skipped, passed, longrepr, duration = "call", False, False, True, None, 0.25

    def __init__(self, nodeid):
        self.nodeid = nodeid


def pytest_report(nodeids: list[str], ran: list[str]) -> dict:
    """The pytest phase's report, its records sent by the test process's plugin
    and read back by the supervisor as a real run does."""
    lines = []
    plugin = pytest_runner.RecordPlugin(KEY, 99)
    plugin._write = lambda fd, data: lines.append(data) or len(data)
    plugin.pytest_collection_finish(SimpleNamespace(items=[Item(n) for n in nodeids]))
    for nodeid in ran:
        plugin.pytest_runtest_logreport(Passed(nodeid))
        plugin.pytest_runtest_logfinish(nodeid, None)
    plugin.pytest_sessionfinish(None, 0)
    records = rbrun.Records(KEY)
    for line in lines:
        records.feed(line)
    run = rbrun.PytestRun(returncode=0, timed_out=False, output_exceeded=False, duration_s=0.5, stdout="",
                               stderr="", output_bytes=0, records=records)
    return {"version": rbprotocol.PROTOCOL_VERSION, **rbrun.pytest_report(run, tests_modified=False)}


def test_a_pytest_report(monkeypatch):
    nodeids = ["test_solution.py::test_a", "test_solution.py::test_b"]
    report = host_reads(pytest_report(nodeids, nodeids), monkeypatch)
    result = judge(report, FACTS)
    assert result.verdict is Verdict.PASSED
    assert [(t.nodeid, t.outcome, t.duration_s) for t in result.tests] == [(n, Outcome.PASSED, 0.25) for n in nodeids]
    crashed = judge(host_reads(pytest_report(nodeids, nodeids[:1]), monkeypatch), FACTS)
    assert crashed.verdict is Verdict.KILLED and "1 collected test(s) never reported" in crashed.message


def test_a_report_of_another_version_is_refused(work, monkeypatch):
    report = {**program("pass\n"), "version": rbprotocol.PROTOCOL_VERSION + 1}
    with pytest.raises(HarnessError, match="protocol version"):
        host.parse_report(sent(report, monkeypatch), NONCE)


def test_a_request_built_on_the_host_is_read_and_run_by_the_harness(work, monkeypatch):
    request = RunRequest(files={"main.py": "import sys\nprint(sys.stdin.read().upper())\n"}, program="main.py",
                         stdin="hi", fetch_files=("main.py",))
    read = rbrun.read_request(host.encode_request(request, NONCE))
    assert read["nonce"] == NONCE
    result = judge(host_reads(rbrun.handle(read, NO_SWEEP), monkeypatch), FACTS)
    assert (result.verdict, result.stdout, list(result.files)) == (Verdict.PASSED, "HI\n", ["main.py"])


def test_the_harness_reads_exactly_the_request_s_fields():
    """A key renamed on one side only: the harness reads `request["key"]` or
    `request.get("key")` for each field of the host's `WireRequest`, and no other."""
    read = set()
    for name in ("supervisor.py", "pool_supervisor.py", "rbrun.py", "rbprogram.py"):
        source = (ROOT / "images" / "python" / "harness" / name).read_text()
        read |= {key or got for key, got in re.findall(r'request(?:\["(\w+)"\]|\.get\("(\w+)")', source)}
    assert read == set(host.WireRequest.model_fields)


PYTEST_RUN = RunRequest(files={"solution.py": "x = 1\ud800"}, tests={"test_x.py": "def test_x(): pass"})
PROGRAM_RUN = RunRequest(files={"main.py": "print(1)"}, program="main.py", stdin="in", fetch_files=("out.txt",),
                         binary_files={"data/a.bin": "AAE="})


@pytest.mark.parametrize("request_, wire", [
    (PYTEST_RUN, b'{"nonce": "n", "files": {"solution.py": "x = 1\\ud800"}, "tests": {"test_x.py": "def test_x(): pass"}, '
                 b'"test_data": null, "timeout_s": 10.0, "output_limit_bytes": 1048576}'),
    (PYTEST_RUN.model_copy(update={"solution_in_process": True, "test_data": "d"}),
     b'{"nonce": "n", "files": {"solution.py": "x = 1\\ud800"}, "tests": {"test_x.py": "def test_x(): pass"}, '
     b'"test_data": "d", "timeout_s": 10.0, "output_limit_bytes": 1048576, "solution_in_process": true}'),
    (PROGRAM_RUN, b'{"nonce": "n", "files": {"main.py": "print(1)"}, "tests": {}, "test_data": null, "timeout_s": 10.0, '
                  b'"output_limit_bytes": 1048576, "binary_files": {"data/a.bin": "AAE="}, "program": "main.py", '
                  b'"stdin": "in", "fetch_files": ["out.txt"]}'),
], ids=["pytest", "in-process", "program"])
def test_the_wire_bytes_of_a_request_are_what_they_always_were(request_, wire):
    assert host.encode_request(request_, "n") == wire


HARNESS_SOURCES = ("supervisor.py", "pool_supervisor.py", "rbrun.py", "rbprogram.py", "pytest_runner.py")


def harness_reports(work: Path) -> dict[str, dict]:
    """One report of each kind, made by the harness's own code."""
    nodeids = ["test_solution.py::test_a"]
    return {
        "program": program("import sys\nsys.exit(1)\n", fetch_files=["missing.txt"]),
        "syntax": program("def f(:\n"),
        "harness_error": rbrun.handle({"nonce": NONCE}, NO_SWEEP),
        "pytest": pytest_report(nodeids, nodeids),
    }


def test_every_key_the_harness_writes_is_a_field_the_host_reads(work, monkeypatch):
    """`Report` and `Record` allow extra keys (a forged record is dropped, not
    fatal), so a key renamed on one side would otherwise pass unnoticed, its
    field silently at its default."""
    for kind, report in harness_reports(work).items():
        parsed = host_reads(report, monkeypatch)
        assert not parsed.model_extra, f"{kind} report: keys the host does not know: {sorted(parsed.model_extra)}"
        for record in parsed.records:
            assert not record.model_extra, f"{kind} record: keys the host does not know: {sorted(record.model_extra)}"


@pytest.mark.parametrize("model", [host.Report, host.Record], ids=["report", "record"])
def test_every_field_the_host_reads_is_written_by_the_harness(model):
    """The other way: each field of the host's model is a key some harness
    code writes (`"key":`, `report["key"]` or `key=` in report.update)."""
    source = "\n".join((ROOT / "images" / "python" / "harness" / name).read_text() for name in HARNESS_SOURCES)
    unwritten = [field for field in model.model_fields
                 if not re.search(rf'"{field}"\s*[:\]]|\b{field}=', source)]
    assert not unwritten, f"fields no harness code writes: {unwritten}"
