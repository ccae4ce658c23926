"""Requests, limits and results: frozen pydantic models, units in field names."""

import base64
import binascii
import enum
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rewardbox.sandbox.file_names import is_plain_name
from rewardbox.sandbox.languages import language

MAX_PATH_DEPTH = 8
# A program's output and fetched files come back base64 in the harness's report,
# which is at most 8 MiB (rewardbox.sandbox.protocol.MAX_REPORT_BYTES): 4/3 of 2 MiB
# fits, with room for the rest of the report.
MAX_PROGRAM_OUTPUT_BYTES = 2 << 20


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# The default run deadline of a run of N tests, when `timeout_s` is not given:
# min(MAX_DEFAULT_TIMEOUT_S, DEFAULT_TIMEOUT_S + PER_TEST_TIMEOUT_S * N). A
# correct solution whose tests take half a second each on average is never cut
# short by our default; the cap bounds what a looping one holds a container.
DEFAULT_TIMEOUT_S = 10.0
PER_TEST_TIMEOUT_S = 0.5
MAX_DEFAULT_TIMEOUT_S = 120.0


def default_timeout_s(tests: int) -> float:
    """The default run deadline of a run of `tests` tests.

    >>> default_timeout_s(0), default_timeout_s(60), default_timeout_s(10_000)
    (10.0, 40.0, 120.0)
    """
    return min(MAX_DEFAULT_TIMEOUT_S, DEFAULT_TIMEOUT_S + PER_TEST_TIMEOUT_S * max(0, tests))


class Limits(Frozen):
    """Resource limits of one run. Defaults suit unit-test-sized problems."""

    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0, description=(
        "wall clock for the tests, from the harness's start. When not given, a run of N tests gets "
        f"min({MAX_DEFAULT_TIMEOUT_S:g}, {DEFAULT_TIMEOUT_S:g} + {PER_TEST_TIMEOUT_S:g} N) s (`for_tests`, "
        "N counted by the grader before the run); a value given is kept as it is"))
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
    compile_timeout_s: float = Field(10.0, gt=0, description=(
        "wall clock for a compiled language's compile step (or a checked one's check), before the run's "
        "own timeout_s starts; not used for Python. When not given, the language's own (`Language."
        "compile_timeout_s`: 10 s, SandboxFusion's default; Rust's 30 s); a value given is kept as it is"))
    compile_memory_mb: int | None = Field(None, ge=32, description=(
        "the address space of a compile step its language bounds (C++: `Language.bounded_compile`), so that a "
        "compiler filling it fails as a compile error (under gVisor, too, where filling the container's memory "
        "ends the container); None: memory_mb less 32 MB (gVisor's own share), at least half of it"))

    def compile_memory_bytes(self) -> int:
        """The bound of a bounded compile step.

        >>> Limits().compile_memory_bytes() == 480 << 20, Limits(memory_mb=48).compile_memory_bytes() == 24 << 20
        (True, True)
        """
        mb = self.compile_memory_mb or max(self.memory_mb - 32, self.memory_mb // 2)
        return min(mb, self.memory_mb) << 20

    def for_tests(self, tests: int) -> "Limits":
        """These limits for a run of `tests` tests: the default deadline grows
        with them (`default_timeout_s`); a `timeout_s` that was given is kept.

        >>> Limits().for_tests(60).timeout_s, Limits(timeout_s=10).for_tests(60).timeout_s
        (40.0, 10.0)
        """
        if "timeout_s" in self.model_fields_set:
            return self
        return self.model_copy(update={"timeout_s": default_timeout_s(tests)})


class RunRequest(Frozen):
    """Files for the work dir (the completion, as `solution.py`) and either the
    pytest modules to run against them, or one of the files to run as a program
    (`python3 <program>` with `stdin`, its output and exit status returned)."""

    files: dict[str, str]
    tests: dict[str, str] = Field(default_factory=dict, description="pytest modules; empty for a program run")
    test_data: str | None = Field(None, description=(
        "data for the tests (expected values), handed to the test process in memory and never written "
        "where the completion could read it; tests read it through the harness module rbcheck"))
    program: str | None = Field(None, description="run this file of `files` as a program instead of tests")
    stdin: str | None = Field(None, description="the program's standard input")
    binary_files: dict[str, str] = Field(default_factory=dict, description=(
        "more work-dir files: base64 contents by relative path (subdirectories allowed)"))
    fetch_files: tuple[str, ...] = Field((), description="work-dir paths whose contents come back in RunResult.files "
                                                         "after a program run, if they exist")
    language: str = Field("python", description=(
        "the language of `files`' code: a name or alias of rewardbox.sandbox.languages, kept as its name. "
        "Another language's request is compiled (or checked) first and runs in that language's image"))
    solution_in_process: bool = Field(False, description=(
        "pytest modules only: import the completion into the tests' own process as `solution` (the old way, "
        "hackable: README, threat model) instead of running it in a process of its own behind a stand-in module"))
    limits: Limits = Limits()

    @field_validator("files", "tests")
    @classmethod
    def _plain_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not is_plain_name(name):
                raise ValueError(f"file name {name!r} must be a plain name like 'solution.py'")
        return value

    @field_validator("language", mode="before")
    @classmethod
    def _known_language(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"language must be a name, got {type(value).__name__}")
        return language(value).name

    @field_validator("binary_files")
    @classmethod
    def _base64_by_path(cls, value: dict[str, str]) -> dict[str, str]:
        for path, content in value.items():
            _relative_path(path)
            try:
                base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"binary_files[{path!r}] is not base64") from None
        return value

    @field_validator("fetch_files")
    @classmethod
    def _fetch_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            _relative_path(path)
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> "RunRequest":
        if self.program is None:
            if not self.tests:
                raise ValueError("a run needs tests (pytest modules) or a program to run")
            if self.stdin is not None or self.fetch_files:
                raise ValueError("stdin and fetch_files are for program runs")
        else:
            if self.tests or self.test_data is not None:
                raise ValueError("a program run has no tests")
            suffix = PurePosixPath(language(self.language).source).suffix
            if self.program not in self.files or not self.program.endswith(suffix):
                raise ValueError(f"the program {self.program!r} must be a {suffix} file of `files`")
            if self.limits.output_bytes > MAX_PROGRAM_OUTPUT_BYTES:
                raise ValueError(f"a program's output is capped at {MAX_PROGRAM_OUTPUT_BYTES} bytes")
        paths = set(self.files) | set(self.binary_files)
        if len(paths) < len(self.files) + len(self.binary_files):
            raise ValueError(f"a path is given twice: {sorted(set(self.files) & set(self.binary_files))}")
        if self.language != "python":
            if self.solution_in_process:
                raise ValueError("solution_in_process is for Python code")
            self.source_file()  # there is one
        for path in self.binary_files:
            parts = path.split("/")
            clash = next(("/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i]) in paths), None)
            if clash is not None:
                raise ValueError(f"{path!r} needs a directory {clash!r}, which is also a file")
        return self


    def deadline_s(self) -> float:
        """The host's hard deadline for this run, from the container's start:
        the run's own, its grace, and a compile (or check) step's."""
        limits = self.limits
        first = self.language != "python" and language(self.language).first_step(self.program is not None)
        return limits.timeout_s + limits.startup_grace_s + (self.compile_timeout_s() if first else 0.0)

    def compile_timeout_s(self) -> float:
        """The compile step's deadline: the limits' when given, else the language's own."""
        if "compile_timeout_s" in self.limits.model_fields_set or self.language == "python":
            return self.limits.compile_timeout_s
        return language(self.language).compile_timeout_s

    def source_file(self) -> str:
        """The file that holds the code in its language: the program of a
        program run, else the one file of `files` with the language's suffix."""
        if self.program is not None:
            return self.program
        suffix = PurePosixPath(language(self.language).source).suffix
        found = [name for name in self.files if name.endswith(suffix)]
        if len(found) != 1:
            raise ValueError(f"a {self.language} run needs one {suffix} file in `files`, got {sorted(self.files)}")
        return found[0]


def _relative_path(path: str) -> str:
    """A path below the work dir: plain names joined by '/', nothing hidden, no '..'."""
    parts = path.split("/")
    if len(path) > 512 or len(parts) > MAX_PATH_DEPTH or not all(map(is_plain_name, parts)):
        raise ValueError(f"path {path!r} must be relative, made of plain names like 'data/input.txt'")
    return path


class Verdict(str, enum.Enum):
    """What happened to a run, in the order the judge checks."""

    PASSED = "passed"
    FAILED = "failed"
    SYNTAX_ERROR = "syntax_error"
    COMPILE_ERROR = "compile_error"  # a compiled language's program did not compile (rewardbox.sandbox.languages)
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


class CompileResult(Frozen):
    """A compiled language's compile step (or a checked one's check), as the
    harness ran it: its output is the compiler's, valid UTF-8, its head kept."""

    returncode: int | None = None
    timed_out: bool = False
    output_truncated: bool = Field(False, description="the compiler wrote past its output cap and was stopped")
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_truncated


class RunResult(Frozen):
    """Everything known about one run. `tests` are the tests pytest reported;
    the grader matches them against the tests it expected. Text that came from
    the container is valid UTF-8 and cut to `rewardbox.sandbox.protocol.TEXT_CAPS`."""

    verdict: Verdict
    tests: tuple[TestResult, ...] = ()
    duration_s: float = Field(0.0, description="host wall clock, container create to removal")
    test_duration_s: float = Field(0.0, description="pytest's (or the program's) own run time inside the container")
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    tampered: bool = Field(False, description="forged records or edited tests were detected")
    message: str = ""
    files: dict[str, str] = Field(default_factory=dict, description="fetch_files of a program run: base64 by path")
    compile: CompileResult | None = Field(None, description=(
        "a compiled or checked language's first step; None for Python, or when it never ran"))
