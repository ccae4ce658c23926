"""The wire format between the host and the in-container supervisor
(images/python/harness/supervisor.py; a run's work is rbrun.py's). Pure functions, no Docker."""

import hashlib
import hmac
import json
import re
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewardbox.sandbox.errors import HarnessError
from rewardbox.sandbox.harness_protocol import harness_protocol
from rewardbox.sandbox.languages import language
from rewardbox.sandbox.models import RunRequest

_RB = harness_protocol()
PROTOCOL_VERSION: int = _RB.PROTOCOL_VERSION
READY: bytes = _RB.READY
REPORT_PREFIX: bytes = _RB.REPORT_PREFIX
WORK_DIR: str = _RB.WORK_DIR
SOLUTION_FILE: str = _RB.SOLUTION_FILE
SANDBOX_UID: int = _RB.SANDBOX_UID
SANDBOX_GID: int = _RB.SANDBOX_GID
PHASE_SYNTAX: str = _RB.PHASE_SYNTAX
PHASE_COMPILE: str = _RB.PHASE_COMPILE
COMPILE_OUTPUT_BYTES: int = _RB.COMPILE_OUTPUT_BYTES
PHASE_PYTEST: str = _RB.PHASE_PYTEST
PHASE_PROGRAM: str = _RB.PHASE_PROGRAM
PHASE_HARNESS_ERROR: str = _RB.PHASE_HARNESS_ERROR
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


class Record(BaseModel):
    """One record of the pytest child (images/python/harness/pytest_runner.py),
    as `clean_report` shapes it. The fields are the wire's keys, all optional:
    code under test can forge a record (it can find the child's key), and the
    judge drops what it cannot read rather than failing the run."""

    model_config = ConfigDict(extra="allow", frozen=True)

    event: str | None = None  # "collected", "collect_error" or "test"
    nodeid: str | None = None
    nodeids: list[str] = Field(default_factory=list)  # "collected": every test pytest found
    more: bool = False  # "collected": more such records follow (a long list goes in chunks; the judge joins them)
    name: str | None = None
    cls: str | None = None
    outcome: str | None = None
    message: str | None = None
    exc_type: str | None = None
    duration_s: Any = None  # a forged record's may be anything: the judge drops the record then
    exitstatus: Any = None  # "finished": pytest's exit status (the judge goes by the records, not by it)


class Report(BaseModel):
    """The supervisor's signed report (images/python/harness/rbrun.py;
    the pool supervisor adds "recycle", "serve_s" and "oom_killed"). Field
    names are the wire's keys; a field the harness leaves out keeps its default,
    and `model_fields_set` tells the two apart where the judge needs to."""

    model_config = ConfigDict(extra="allow", frozen=True)

    version: int
    phase: str | None = None  # one of rbprotocol.PHASES
    message: str | None = None  # a harness_error's
    harness_attacked: bool = False  # a harness_error the run caused (it changed our limits)
    not_started: bool = False  # a harness_error before the run's code started: run it again elsewhere
    records: list[Record] = Field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    output_exceeded: bool = False
    output_bytes: int = 0  # what the run wrote to stdout and stderr, counted by the harness
    duration_s: float = 0.0
    stdout: str = ""  # a pytest run's output head
    stderr: str | None = None
    rejected_records: int = 0  # records that were not signed with the child's key
    tests_modified: bool = False
    syntax_error: dict[str, Any] | None = None  # {"type", "message", ...}
    # A program run's output (base64) and the files it was asked to fetch.
    stdout_b64: str | None = None
    stderr_b64: str | None = None
    files: dict[str, Any] | None = None
    files_omitted: list[Any] | None = None
    # Another language's compile (or check) step (rbcompile.py), when it ran.
    compile: dict[str, Any] | None = None
    # The pool supervisor's: why the container is given up (None: it is reused).
    recycle: str | None = None
    serve_s: float | None = None
    oom_killed: bool = False


class WireLanguage(BaseModel):
    """How the harness compiles and runs another language's code
    (images/python/harness/rbcompile.py, rbprogram.py, rbcheck.py read it):
    the language table's argv with the source file's name filled in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    compile: list[str] | None  # run once before anything else; None: nothing to run first
    run: list[str]
    env: dict[str, str]
    compile_timeout_s: float
    compile_memory_bytes: int | None  # RLIMIT_AS of the compile step; None: the container's memory limit alone

    @classmethod
    def of(cls, request: RunRequest) -> "WireLanguage":
        """The wire's steps of `request` (`Language.first_step`, then its run)."""
        lang = language(request.language)
        source = request.source_file()
        first = lang.first_step(request.program is not None)
        return cls(name=lang.name, compile=lang.argv(first, source) if first is not None else None,
                   run=lang.argv(lang.run, source), env=dict(lang.env),
                   compile_timeout_s=request.compile_timeout_s(),
                   compile_memory_bytes=request.limits.compile_memory_bytes() if lang.bounded_compile else None)


class WireRequest(BaseModel):
    """The supervisor's request (images/python/harness/rbrun.py's read_request reads it).
    Field names are the wire's keys, in the wire's order; the optional ones are
    sent only when set, so a pytest run's wire is what it always was."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nonce: str
    files: dict[str, str]
    tests: dict[str, str]
    test_data: str | None
    timeout_s: float
    output_limit_bytes: int
    binary_files: dict[str, str] = Field(default_factory=dict)  # sent when there are any
    solution_in_process: bool = False  # sent when True
    # A program run's (sent for one only).
    program: str | None = None
    stdin: str | None = None
    fetch_files: list[str] = Field(default_factory=list)
    # Another language than Python (sent for one only): its steps, filled in for this run.
    language: WireLanguage | None = None

    @classmethod
    def of(cls, request: RunRequest, nonce: str) -> "WireRequest":
        optional: dict[str, object] = {}
        if request.language != "python":
            optional["language"] = WireLanguage.of(request)
        if request.binary_files:
            optional["binary_files"] = request.binary_files
        if request.solution_in_process:
            optional["solution_in_process"] = True
        if request.program is not None:
            optional.update(program=request.program, stdin=request.stdin, fetch_files=list(request.fetch_files))
        return cls.model_validate({
            "nonce": nonce, "files": request.files, "tests": request.tests, "test_data": request.test_data,
            "timeout_s": request.limits.timeout_s, "output_limit_bytes": request.limits.output_bytes, **optional})

    def encode(self) -> bytes:
        # json.dumps rather than pydantic's JSON: its separators, and code's lone
        # surrogates carried through as they always were.
        return json.dumps(self.model_dump(exclude_unset=True)).encode("utf-8", "surrogatepass")


def new_nonce() -> str:
    return secrets.token_hex(32)


def encode_request(request: RunRequest, nonce: str) -> bytes:
    """The supervisor's stdin: everything it needs, in one JSON object (`WireRequest`)."""
    return WireRequest.of(request, nonce).encode()


def parse_report(stdout: bytes, nonce: str) -> Report | None:
    """The supervisor's report from the container's stdout, or None.

    Code under test may print lines that look like reports; only one signed
    with this run's nonce counts. A signed report is the harness's own: one of
    another protocol version or shape is a failure of ours (HarnessError).
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
            return validate_report(clean_report(report)) if isinstance(report, dict) else None
    return None


def validate_report(report: dict[str, Any]) -> Report:
    """The cleaned report as a `Report`; HarnessError for another protocol
    version (a stale or foreign image) or a shape this host does not read."""
    if report.get("version") != PROTOCOL_VERSION:
        raise HarnessError(f"the sandbox harness speaks protocol version {report.get('version')!r}, "
                           f"this host {PROTOCOL_VERSION}: rebuild the image (rewardbox image build)")
    try:
        return Report.model_validate(report)
    except ValidationError as exc:
        raise HarnessError(f"the sandbox harness sent a malformed report: {exc}") from None


def clean_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report with every string made safe to show and serialise: lone
    surrogates (which JSON carries as \\udXXX escapes, and which no UTF-8
    encoder takes) replaced by U+FFFD, each field cut to its cap (TEXT_CAPS),
    and the per-test records shaped as the judge reads them.

    Everything the harness reports may hold the code under test's text
    (exception messages, test names, output): this is where it enters the host,
    so every `RunResult` built from a report serialises.
    """
    cleaned = _clean(report, "", 0)
    # A dict stays a dict at depth 0 (only deeper ones become None).
    assert isinstance(cleaned, dict)
    report = cleaned
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


def _clean(value: object, field: str, depth: int) -> object:
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


def _record(record: dict[str, object]) -> dict[str, object]:
    """A record whose text fields are text or None, and whose nodeids are text:
    a forged record (a pytest module's code can find the key) must not break
    the judge with another type."""
    shaped = {k: (v if isinstance(v, str) else None) if k in _RECORD_TEXT else v for k, v in record.items()}
    if "nodeids" in shaped:
        nodeids = shaped["nodeids"]
        shaped["nodeids"] = [n for n in nodeids if isinstance(n, str)] if isinstance(nodeids, list) else []
    return shaped
