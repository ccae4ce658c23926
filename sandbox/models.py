"""Requests, limits and results: frozen pydantic models, units in field names."""

import enum
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Limits(Frozen):
    """Resource limits of one run. Defaults suit unit-test-sized problems."""

    timeout_s: float = Field(10.0, gt=0, description="wall clock for the tests, from the harness's start")
    startup_grace_s: float = Field(5.0, ge=0, description="added to timeout_s for the host's hard deadline")
    memory_mb: int = Field(512, ge=32, description="memory limit; swap is not allowed")
    cpus: float = Field(1.0, gt=0, description="CPU quota in cores")
    pids: int = Field(64, ge=8, description="processes and threads in the container")
    output_bytes: int = Field(1 << 20, ge=1024, description="stdout+stderr of the tests before the run is stopped")
    work_mb: int = Field(64, ge=1, description="size of the writable work dir (tmpfs)")
    tmp_mb: int = Field(64, ge=1, description="size of /tmp (tmpfs)")
    inodes: int = Field(4096, ge=64, description="files per tmpfs")
    open_files: int = Field(256, ge=32, description="RLIMIT_NOFILE")
    file_size_mb: int = Field(64, ge=1, description="RLIMIT_FSIZE")


class RunRequest(Frozen):
    """Files for the work dir (the completion, as `solution.py`) and the pytest
    modules to run against them."""

    files: dict[str, str]
    tests: dict[str, str] = Field(min_length=1)
    test_data: str | None = Field(None, description=(
        "data for the tests (expected values), handed to the test process in memory and never written "
        "where the completion could read it; tests read it through the harness module rbcheck"))
    limits: Limits = Limits()

    @field_validator("files", "tests")
    @classmethod
    def _plain_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _FILE_NAME.match(name) or len(name) > 128:
                raise ValueError(f"file name {name!r} must be a plain name like 'solution.py'")
        return value


class Verdict(str, enum.Enum):
    """What happened to a run, in the order the judge checks."""

    PASSED = "passed"
    FAILED = "failed"
    SYNTAX_ERROR = "syntax_error"
    IMPORT_ERROR = "import_error"
    COLLECTION_ERROR = "collection_error"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    NO_CODE = "no_code"


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"


class TestResult(Frozen):
    __test__ = False  # not a pytest class

    nodeid: str
    name: str | None = None
    cls: str | None = None
    outcome: Outcome
    duration_s: float = 0.0
    message: str | None = None
    exc_type: str | None = None


class RunResult(Frozen):
    """Everything known about one run. `tests` are the tests pytest reported;
    the grader matches them against the tests it expected."""

    verdict: Verdict
    tests: tuple[TestResult, ...] = ()
    duration_s: float = Field(0.0, description="host wall clock, container create to removal")
    test_duration_s: float = Field(0.0, description="pytest's own run time inside the container")
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    tampered: bool = Field(False, description="forged records or edited tests were detected")
    message: str = ""
