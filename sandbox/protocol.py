"""The wire format between the host and the in-container supervisor
(images/python/harness/supervisor.py). Pure functions, no Docker."""

import hashlib
import hmac
import json
import secrets

from sandbox.models import RunRequest

REPORT_PREFIX = b"RBREPORT "


def new_nonce() -> str:
    return secrets.token_hex(32)


def encode_request(request: RunRequest, nonce: str) -> bytes:
    """The supervisor's stdin: everything it needs, in one JSON object. The
    program-run keys appear only for a program run, so a pytest run's wire is
    what it always was."""
    wire = {
        "nonce": nonce,
        "files": request.files,
        "tests": request.tests,
        "test_data": request.test_data,
        "timeout_s": request.limits.timeout_s,
        "output_limit_bytes": request.limits.output_bytes,
    }
    if request.binary_files:
        wire["binary_files"] = request.binary_files
    if request.program is not None:
        wire.update(program=request.program, stdin=request.stdin, fetch_files=list(request.fetch_files))
    return json.dumps(wire).encode("utf-8", "surrogatepass")


def parse_report(stdout: bytes, nonce: str) -> dict | None:
    """The supervisor's report from the container's stdout, or None.

    Code under test may print lines that look like reports; only one signed
    with this run's nonce counts.
    """
    key = nonce.encode()
    for line in stdout.split(b"\n"):
        if not line.startswith(REPORT_PREFIX):
            continue
        mac, _, body = line[len(REPORT_PREFIX):].partition(b" ")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(mac, expected):
            try:
                report = json.loads(body)
            except ValueError:
                return None
            return report if isinstance(report, dict) else None
    return None
