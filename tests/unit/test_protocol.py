"""`sandbox.protocol`: the host <-> supervisor wire format."""

import hashlib
import hmac
import json

import pytest

from sandbox import Limits, RunRequest
from sandbox.protocol import REPORT_PREFIX, encode_request, new_nonce, parse_report

NONCE = "a" * 64
REPORT = {"version": 1, "phase": "pytest", "returncode": 0, "records": [{"event": "finished", "exitstatus": 0}]}


def signed(report: dict | bytes, nonce: str = NONCE) -> bytes:
    """A report line as the supervisor writes it."""
    body = report if isinstance(report, bytes) else json.dumps(report, separators=(",", ":")).encode()
    mac = hmac.new(nonce.encode(), body, hashlib.sha256).hexdigest().encode()
    return REPORT_PREFIX + mac + b" " + body


def forged(report: dict) -> bytes:
    return REPORT_PREFIX + b"0" * 64 + b" " + json.dumps(report).encode()


def test_signed_report_is_read():
    assert parse_report(signed(REPORT) + b"\n", NONCE) == REPORT


def test_signed_report_without_trailing_newline_is_read():
    assert parse_report(signed(REPORT), NONCE) == REPORT


def test_report_among_other_output_is_read():
    stdout = b"warming up\nRBREPORT not a report\n" + signed(REPORT) + b"\ntrailing noise\n"

    assert parse_report(stdout, NONCE) == REPORT


FAKE = {"version": 1, "phase": "pytest", "returncode": 0, "records": [], "forged": True}


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
    assert parse_report(stdout, NONCE) is None


def test_signed_line_is_picked_among_forged_ones():
    stdout = b"\n".join([forged(FAKE), signed(FAKE, nonce="b" * 64), signed(REPORT), forged(FAKE)])

    assert parse_report(stdout, NONCE) == REPORT


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
    assert parse_report(stdout, NONCE) is None


@pytest.mark.parametrize("body", [
    pytest.param(b"not json", id="invalid-json"),
    pytest.param(b"[1, 2, 3]", id="json-array"),
    pytest.param(b'"report"', id="json-string"),
    pytest.param(b"null", id="json-null"),
])
def test_signed_body_that_is_not_a_json_object_is_no_report(body):
    assert parse_report(signed(body), NONCE) is None


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
