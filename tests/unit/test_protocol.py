"""`rewardbox.sandbox.protocol`: the host <-> supervisor wire format."""

import base64
import hashlib
import hmac
import json

import pydantic
import pytest

from rewardbox.sandbox import Limits, RunRequest
from rewardbox.sandbox.protocol import (
    DEFAULT_TEXT_CAP,
    PROTOCOL_VERSION,
    REPORT_PREFIX,
    TEXT_CAPS,
    encode_request,
    new_nonce,
    parse_report,
)

NONCE = "a" * 64
REPORT = {"version": PROTOCOL_VERSION, "phase": "pytest", "returncode": 0, "records": [{"event": "finished", "exitstatus": 0}]}


def signed(report: dict | bytes, nonce: str = NONCE) -> bytes:
    """A report line as the supervisor writes it (of this protocol's version unless it says another)."""
    body = report if isinstance(report, bytes) else \
        json.dumps({"version": PROTOCOL_VERSION, **report}, separators=(",", ":")).encode()
    mac = hmac.new(nonce.encode(), body, hashlib.sha256).hexdigest().encode()
    return REPORT_PREFIX + mac + b" " + body


def parse(stdout: bytes, nonce: str = NONCE) -> dict | None:
    """`parse_report`'s report as the wire's dict: the keys the harness sent, and only those."""
    report = parse_report(stdout, nonce)
    return None if report is None else report.model_dump(exclude_unset=True)


def forged(report: dict) -> bytes:
    return REPORT_PREFIX + b"0" * 64 + b" " + json.dumps(report).encode()


def test_signed_report_is_read():
    assert parse(signed(REPORT) + b"\n", NONCE) == REPORT


def test_signed_report_without_trailing_newline_is_read():
    assert parse(signed(REPORT), NONCE) == REPORT


def test_report_among_other_output_is_read():
    stdout = b"warming up\nRBREPORT not a report\n" + signed(REPORT) + b"\ntrailing noise\n"

    assert parse(stdout, NONCE) == REPORT


FAKE = {"version": PROTOCOL_VERSION, "phase": "pytest", "returncode": 0, "records": [], "forged": True}


@pytest.mark.parametrize("stdout", [
    pytest.param(forged(FAKE), id="zero-mac"),
    pytest.param(signed(FAKE, nonce="b" * 64), id="signed-with-another-nonce"),
    pytest.param(signed(FAKE, nonce=""), id="signed-with-empty-nonce"),
    pytest.param(signed(REPORT).replace(b'"returncode":0', b'"returncode":1'), id="body-edited-after-signing"),
    pytest.param(signed(REPORT)[len(REPORT_PREFIX):], id="no-prefix"),
    pytest.param(b"  " + signed(REPORT), id="prefix-not-at-line-start"),
    pytest.param(signed(REPORT).replace(b"RBREPORT ", b"rbreport "), id="lower-case-prefix"),
    pytest.param(REPORT_PREFIX + hmac.new(NONCE.encode(), b"", hashlib.sha256).hexdigest().encode(), id="no-body"),
])
def test_unsigned_or_mis_signed_lines_are_rejected(stdout):
    assert parse(stdout, NONCE) is None


def test_signed_line_is_picked_among_forged_ones():
    stdout = b"\n".join([forged(FAKE), signed(FAKE, nonce="b" * 64), signed(REPORT), forged(FAKE)])

    assert parse(stdout, NONCE) == REPORT


@pytest.mark.parametrize("stdout", [
    pytest.param(b"", id="empty"),
    pytest.param(b"\n\n\n", id="blank-lines"),
    pytest.param(b"\x00\xff\xfe garbage \x80\n" * 100, id="binary"),
    pytest.param(b"RBREPORT", id="bare-prefix-without-space"),
    pytest.param(b"RBREPORT \n", id="bare-prefix"),
    pytest.param(b"RBREPORT  ", id="empty-mac-and-body"),
    pytest.param(b"Traceback (most recent call last):\n  ...\nMemoryError\n", id="traceback"),
])
def test_garbage_yields_no_report(stdout):
    assert parse(stdout, NONCE) is None


@pytest.mark.parametrize("body", [
    pytest.param(b"not json", id="invalid-json"),
    pytest.param(b"[1, 2, 3]", id="json-array"),
    pytest.param(b'"report"', id="json-string"),
    pytest.param(b"null", id="json-null"),
])
def test_signed_body_that_is_not_a_json_object_is_no_report(body):
    assert parse(signed(body), NONCE) is None


# -- the report's text, made safe where it enters the host ---------------------------------

def test_lone_surrogates_become_replacement_characters():
    # The harness's json.dumps escapes a lone surrogate (\\ud800); json.loads brings it back,
    # and no UTF-8 encoder (pydantic's JSON, the HTTP response) takes it.
    bad = "boom \ud800 \udfff end"
    record = {"event": "test", "nodeid": f"t.py::test[{bad}]", "name": bad, "cls": bad, "outcome": "failed",
              "message": bad, "exc_type": bad}
    raw = {"version": PROTOCOL_VERSION, "phase": "pytest", "stdout": bad, "stderr": bad, "message": bad, "recycle": bad,
           "records": [{"event": "collected", "nodeids": [record["nodeid"]]}, record],
           "syntax_error": {"file": bad, "type": bad, "message": bad}, "files": {bad: "QUJD"}, "files_omitted": [bad]}

    report = parse(signed(raw), NONCE)

    text = json.dumps(report, ensure_ascii=False)
    text.encode("utf-8")  # strict: no surrogate is left anywhere
    assert report["message"] == "boom \ufffd \ufffd end"
    assert report["records"][1]["nodeid"] == report["records"][0]["nodeids"][0] == "t.py::test[boom \ufffd \ufffd end]"
    assert report["files"] == {"boom \ufffd \ufffd end": "QUJD"}


def test_valid_text_is_kept_as_it_is():
    raw = {"version": PROTOCOL_VERSION, "phase": "pytest", "stdout": "héllo ✓ 🎉 \x00 \n", "records": []}

    assert parse(signed(raw), NONCE) == raw


@pytest.mark.parametrize("field, cap", sorted(TEXT_CAPS.items()))
def test_each_text_field_is_cut_to_its_cap(field, cap):
    value = "x" * (cap + 5)
    raw = {field: [value] if field in ("nodeids", "files_omitted") else value, "records": []}

    got = parse(signed(raw), NONCE)[field]

    got = got[0] if isinstance(got, list) else got
    assert got == "x" * cap + "... [5 more characters]"


def test_unknown_fields_have_the_default_cap_and_base64_none():
    long = "QUJD" * 100_000
    raw = {"new_field": "y" * (DEFAULT_TEXT_CAP + 1), "stdout_b64": long, "stderr_b64": long,
           "files": {"out.txt": long}, "records": []}

    report = parse(signed(raw), NONCE)

    assert report["new_field"] == "y" * DEFAULT_TEXT_CAP + "... [1 more characters]"
    assert report["stdout_b64"] == report["stderr_b64"] == report["files"]["out.txt"] == long


def test_record_text_is_cut_alike_in_a_nodeid_and_the_collected_list():
    nodeid = "t.py::test[" + "p" * 5000 + "]"
    raw = {"records": [{"event": "collected", "nodeids": [nodeid]}, {"event": "test", "nodeid": nodeid}]}

    records = parse(signed(raw), NONCE)["records"]

    assert records[0]["nodeids"] == [records[1]["nodeid"]] and len(records[1]["nodeid"]) < 1100


def test_records_of_other_shapes_are_shaped_or_dropped():
    # A pytest module's code can find the records' key (README, threat model) and sign any JSON.
    raw = {"records": [["not", "a", "record"], "text", 7, None,
                       {"event": "collected", "nodeids": ["a", ["b"], {"c": 1}, 3, "d"]},
                       {"event": "test", "nodeid": ["x"], "outcome": {"o": 1}, "exc_type": ["MemoryError"],
                        "message": 5, "name": None, "duration_s": 1.5}]}

    records = parse(signed(raw), NONCE)["records"]

    assert records == [{"event": "collected", "nodeids": ["a", "d"]},
                       {"event": "test", "nodeid": None, "outcome": None, "exc_type": None, "message": None,
                        "name": None, "duration_s": 1.5}]


@pytest.mark.parametrize("records", [{"a": 1}, "text", 3, None])
def test_records_that_are_no_list_are_none(records):
    assert parse(signed({"records": records}), NONCE)["records"] == []


def test_nesting_past_any_report_is_cut():
    raw = {"records": [], "extra": [[[[[[[["deep"]]]]]]]]}

    assert parse(signed(raw), NONCE)["extra"] == [[[[[None]]]]]


def test_a_body_nested_past_the_parser_is_no_report():
    # json.loads raises RecursionError, not ValueError, past its depth.
    assert parse(signed(b"[" * 100_000 + b"]" * 100_000), NONCE) is None
    assert parse(signed(b'{"a":' * 100_000 + b"1" + b"}" * 100_000), NONCE) is None


def test_nonces_are_fresh_and_long():
    nonces = {new_nonce() for _ in range(50)}

    assert len(nonces) == 50
    assert all(len(n) == 64 and int(n, 16) >= 0 for n in nonces)


@pytest.mark.parametrize("files, tests", [
    pytest.param({"solution.py": "def add(a, b):\n    return a + b\n"},
                 {"test_solution.py": "from solution import add\ndef test_a():\n    assert add(1, 2) == 3\n"},
                 id="ascii"),
    pytest.param({"solution.py": "GREETING = 'héllo wörld ✓ 🎉'\n", "data.txt": "ünïcode\r\n\t\\\"quoted\""},
                 {"test_solution.py": "def test_a():\n    assert '→' != '←'\n"}, id="unicode-and-escapes"),
    pytest.param({"solution.py": "BAD = '\udc80'\n"}, {"test_x.py": "def test_a(): pass\n"}, id="lone-surrogate"),
    pytest.param({}, {"test_a.py": "def test_a(): pass\n", "test_b.py": "def test_b(): pass\n"}, id="no-files"),
])
def test_encode_request_round_trip(files, tests):
    request = RunRequest(files=files, tests=tests, limits=Limits(timeout_s=2.5, output_bytes=4096))
    nonce = new_nonce()

    wire = encode_request(request, nonce)

    assert isinstance(wire, bytes)
    assert b"\n" not in wire  # one JSON document, no stray line breaks
    assert json.loads(wire) == {
        "nonce": nonce,
        "files": files,
        "tests": tests,
        "test_data": None,
        "timeout_s": 2.5,
        "output_limit_bytes": 4096,
    }


def test_encoded_request_carries_no_other_limits():
    # Memory, pids and the like are enforced by the engine, never by the container's say-so.
    wire = json.loads(encode_request(RunRequest(files={}, tests={"test_a.py": ""}), NONCE))

    assert set(wire) == {"nonce", "files", "tests", "test_data", "timeout_s", "output_limit_bytes"}
    assert wire["timeout_s"] == Limits().timeout_s
    assert wire["output_limit_bytes"] == Limits().output_bytes


def test_test_data_travels_beside_the_files():
    request = RunRequest(files={"solution.py": "x = 1"}, tests={"test_a.py": "import rbcheck"}, test_data='{"cases": [1]}')

    wire = json.loads(encode_request(request, NONCE))

    assert wire["test_data"] == '{"cases": [1]}'
    assert "cases" not in json.dumps(wire["tests"])  # the data is not a file the completion could read


PROGRAM = {"main.py": "print(input())"}


def test_program_run_carries_its_stdin_and_fetch_files():
    blob = base64.b64encode(b"\x00\xff").decode()
    request = RunRequest(files=PROGRAM, program="main.py", stdin="1 2\n", binary_files={"data/in.bin": blob},
                         fetch_files=("out.txt",), limits=Limits(timeout_s=2.0, output_bytes=4096))

    wire = json.loads(encode_request(request, NONCE))

    assert wire == {"nonce": NONCE, "files": PROGRAM, "tests": {}, "test_data": None, "timeout_s": 2.0,
                    "output_limit_bytes": 4096, "binary_files": {"data/in.bin": blob}, "program": "main.py",
                    "stdin": "1 2\n", "fetch_files": ["out.txt"]}


def test_binary_files_travel_in_a_pytest_run_too():
    request = RunRequest(files={}, tests={"test_a.py": ""}, binary_files={"a.bin": "AA=="})

    assert json.loads(encode_request(request, NONCE))["binary_files"] == {"a.bin": "AA=="}


@pytest.mark.parametrize("fields, problem", [
    pytest.param({"files": {}}, "tests .pytest modules. or a program", id="neither"),
    pytest.param({"tests": {"test_a.py": ""}, "program": "main.py"}, "a program run has no tests", id="both"),
    pytest.param({"program": "main.py", "test_data": "{}"}, "a program run has no tests", id="program-with-test-data"),
    pytest.param({"program": "other.py"}, "must be a .py file of `files`", id="program-not-a-file"),
    pytest.param({"files": {"main.txt": ""}, "program": "main.txt"}, "must be a .py file", id="program-not-python"),
    pytest.param({"tests": {"test_a.py": ""}, "stdin": "x"}, "stdin and fetch_files are for program runs",
                 id="stdin-for-tests"),
    pytest.param({"tests": {"test_a.py": ""}, "fetch_files": ("a",)}, "for program runs", id="fetch-for-tests"),
    pytest.param({"program": "main.py", "limits": Limits(output_bytes=(2 << 20) + 1)},
                 "output is capped at 2097152 bytes", id="output-over-the-report-budget"),
    pytest.param({"program": "main.py", "binary_files": {"main.py": ""}}, "given twice", id="duplicate-path"),
    pytest.param({"program": "main.py", "binary_files": {"main.py/x": ""}}, "needs a directory 'main.py'",
                 id="file-as-directory"),
    pytest.param({"program": "main.py", "binary_files": {"a": "AA==", "a/b": ""}}, "needs a directory 'a'",
                 id="binary-file-as-directory"),
    pytest.param({"program": "main.py", "binary_files": {"a.bin": "%%%"}}, "is not base64", id="bad-base64"),
    pytest.param({"program": "main.py", "binary_files": {"../a": ""}}, "must be relative", id="dot-dot"),
    pytest.param({"program": "main.py", "binary_files": {"/abs": ""}}, "must be relative", id="absolute"),
    pytest.param({"program": "main.py", "binary_files": {"a//b": ""}}, "must be relative", id="empty-part"),
    pytest.param({"program": "main.py", "binary_files": {"/".join("d" * 9): ""}}, "must be relative", id="too-deep"),
    pytest.param({"program": "main.py", "fetch_files": (".rbreport",)}, "must be relative", id="fetch-hidden"),
])
def test_run_requests_in_one_mode_with_safe_paths(fields, problem):
    with pytest.raises(pydantic.ValidationError, match=problem):
        RunRequest(**{"files": PROGRAM, **fields})


def test_program_run_allows_nested_binary_files():
    request = RunRequest(files=PROGRAM, program="main.py", binary_files={"data/sub/in.txt": "aGk=", "data/x": ""})

    assert set(request.binary_files) == {"data/sub/in.txt", "data/x"}
