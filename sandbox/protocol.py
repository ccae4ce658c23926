"""The wire format between the host and the in-container supervisor
(images/python/harness/supervisor.py). Pure functions, no Docker."""

import hashlib
import hmac
import json
import re
import secrets

from rewardbox.sandbox.models import RunRequest

REPORT_PREFIX = b"RBREPORT "
# The longest report line the supervisor writes (its own MAX_REPORT_BYTES): it
# bounds the report by shedding failure messages, and fails as ours beyond that,
# so a host that reads this much beyond the output limit never mistakes our
# report for the solution's output. 10,000 tests take a few MiB.
MAX_REPORT_BYTES = 8 << 20

# The longest text kept of each report field, in characters (the rest is cut,
# and the cut said): what a person reads fits, and no field grows a result
# without bound. stdout/stderr of a pytest run are the harness's 16 KiB heads;
# a program's output and fetched files are base64 (ASCII once checked) and
# bounded by the host's read window, so they are not cut.
TEXT_CAPS = {
    "message": 4000, "stdout": 16384, "stderr": 16384, "nodeid": 1000, "nodeids": 1000, "name": 500,
    "cls": 500, "file": 500, "files_omitted": 1000, "recycle": 500, "exc_type": 200, "type": 200,
    "event": 200, "outcome": 200, "phase": 200,
}  # nodeid and nodeids alike: the judge matches one against the other
DEFAULT_TEXT_CAP = 1000
UNCAPPED = frozenset({"stdout_b64", "stderr_b64", "files"})
# A report nests four deep (report, records, a record, its nodeids); a deeper
# value is no report's and would only make cleaning recurse.
MAX_DEPTH = 6
# Fields of a per-test record the host reads as text, and the one list of text.
_RECORD_TEXT = ("event", "nodeid", "name", "cls", "outcome", "message", "exc_type")
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    if request.solution_in_process:
        wire["solution_in_process"] = True
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
            except (ValueError, RecursionError):
                return None
            return clean_report(report) if isinstance(report, dict) else None
    return None


def clean_report(report: dict) -> dict:
    """The report with every string made safe to show and serialise: lone
    surrogates (which JSON carries as \\udXXX escapes, and which no UTF-8
    encoder takes) replaced by U+FFFD, each field cut to its cap (TEXT_CAPS),
    and the per-test records shaped as the judge reads them.

    Everything the harness reports may hold the code under test's text
    (exception messages, test names, output): this is where it enters the host,
    so every `RunResult` built from a report serialises.
    """
    report = _clean(report, "", 0)
    if "records" in report:
        records = report["records"]
        report["records"] = [_record(r) for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    return report


def safe_text(text: str, cap: int | None = DEFAULT_TEXT_CAP) -> str:
    """`text` as valid UTF-8 and at most `cap` characters (plus the note of the cut)."""
    text = _SURROGATE.sub("\ufffd", text)
    if cap is not None and len(text) > cap:
        return f"{text[:cap]}... [{len(text) - cap} more characters]"
    return text


def _clean(value, field: str, depth: int):
    if isinstance(value, str):
        return safe_text(value, None if field in UNCAPPED else TEXT_CAPS.get(field, DEFAULT_TEXT_CAP))
    if isinstance(value, (list, dict)) and depth >= MAX_DEPTH:
        return None
    if isinstance(value, list):
        return [_clean(v, field, depth + 1) for v in value]
    if isinstance(value, dict):
        # A map by path (fetched files) is one field: its entries keep its cap.
        return {safe_text(str(k)): _clean(v, field if field in UNCAPPED else str(k), depth + 1)
                for k, v in value.items()}
    return value


def _record(record: dict) -> dict:
    """A record whose text fields are text or None, and whose nodeids are text:
    a forged record (a pytest module's code can find the key) must not break
    the judge with another type."""
    shaped = {k: (v if isinstance(v, str) else None) if k in _RECORD_TEXT else v for k, v in record.items()}
    if "nodeids" in shaped:
        nodeids = shaped["nodeids"]
        shaped["nodeids"] = [n for n in nodeids if isinstance(n, str)] if isinstance(nodeids, list) else []
    return shaped
