"""The languages: one table, so that a new language is one entry (and its image),
not edits across extraction, labels, the wire and the verdicts.

Each `Language` says how datasets, fences and SandboxFusion spell it (its
aliases), the file its source is written to, how it is compiled (or only
checked) and run, and the image that holds its toolchain. An argv may name
the source file (`{src}`) and, for Java, the class to run (`{class}`, the
file's stem); nothing else is substituted. Python's entry describes what runs
today: its syntax check and its runs are the harness's own (a fork of the
pooled seed stands in for its run argv), so its wire stays as it is.

The others are compiled (or checked) by the harness's compile phase in their
own image, then run (docs/languages.md).

>>> language("C++").name, language("golang").name, language("nodejs").name
('cpp', 'go', 'javascript')
>>> language("java").source_name("import java.util.*;\\npublic class Solution {\\n}\\n")
'Solution.java'
>>> language("java").source_name("class Main {}"), language("cpp").source_name("int main() {}")
('Main.java', 'main.cpp')
>>> language("java").argv(language("java").run, "Solution.java")[-1]
'Solution'
>>> try:
...     language("cobol")
... except UnknownLanguage as exc:
...     print(exc)
unknown language 'cobol' (known: cpp, cpp20, go, java, javascript, python, rust)
"""

import re
from functools import cached_property
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardbox.images import REPOSITORY as PYTHON_REPOSITORY
from rewardbox.images import language_tag
from rewardbox.sandbox.file_names import is_plain_name
from rewardbox.sandbox.harness_protocol import harness_protocol

__all__ = ["LANGUAGES", "Language", "UnknownLanguage", "default_image", "language"]

# SandboxFusion's default compile deadline (its `compile_timeout`).
DEFAULT_COMPILE_TIMEOUT_S = 10.0

Argv = tuple[str, ...]


class UnknownLanguage(ValueError):
    """A language name or alias the table does not hold."""


class Language(BaseModel):
    """One language: how it is spelled, written, compiled, run, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the canonical name, as labels and results carry it")
    title: str = Field(description="its name as a person writes it (in feedback to a model)")
    aliases: tuple[str, ...] = Field(description=(
        "lower-case spellings: fence tags, datasets' and SandboxFusion's names (the name included)"))
    fences: tuple[str, ...] = Field((), description=(
        "further lower-case fence tags that mark its code without naming it (C++20 is fenced as cpp)"))
    sandboxfusion: str | None = Field(description="the name SandboxFusion's /run_code uses for it, if any")
    source: str = Field(description="the file the code is written to")
    source_from: str | None = Field(None, description=(
        "a regex whose first group, when it matches the code, names the source file's stem instead "
        "(Java: a file is named after its public class)"))
    check: Argv | None = Field(None, description="a syntax check before any run, for a language not compiled")
    compile: Argv | None = Field(None, description="the compile step, run once per sample before any run")
    run: Argv = Field(description="how the program runs, once per input")
    env: dict[str, str] = Field(default_factory=dict, description="environment of the compile and the runs")
    image: str = Field(description="the repository of the image that holds the toolchain")
    compile_timeout_s: float = Field(DEFAULT_COMPILE_TIMEOUT_S, gt=0, description="the compile step's deadline")
    bounded_compile: bool = Field(False, description=(
        "the compile step runs under an address-space limit (`Limits.compile_memory_mb`), so a compiler that "
        "fills it fails as a compile error; not for compilers that reserve far more address space than they "
        "use (a JVM's javac): theirs is the container's memory limit"))
    marker: str | None = Field(None, description=(
        "a regex that, found in a completion without fenced blocks, makes the whole text its code; "
        "None: such a text is never code"))

    @model_validator(mode="after")
    def _consistent(self) -> "Language":
        if self.name not in self.aliases or any(a != a.lower() for a in (*self.aliases, *self.fences)):
            raise ValueError(f"{self.name}: the aliases must be lower-case and hold the name")
        if self.check is not None and self.compile is not None:
            raise ValueError(f"{self.name}: a language is compiled or checked, not both")
        return self

    @property
    def fence(self) -> str:
        """The tag its code is fenced with, as models write it (C++20's is `cpp`)."""
        return self.fences[0] if self.fences else self.name

    @cached_property
    def tags(self) -> frozenset[str]:
        """The fence tags that mark a block as this language's code."""
        return frozenset((*self.aliases, *self.fences))

    @cached_property
    def _marker(self) -> re.Pattern[str] | None:
        return re.compile(self.marker, re.MULTILINE) if self.marker is not None else None

    @cached_property
    def _source_from(self) -> re.Pattern[str] | None:
        return re.compile(self.source_from, re.MULTILINE) if self.source_from is not None else None

    def looks_like_code(self, text: str) -> bool:
        """Whether a completion without fenced blocks is this language's code."""
        return self._marker is not None and self._marker.search(text) is not None

    def source_name(self, code: str) -> str:
        """The file `code` is written to. Java's is named after its first
        public class at the code's least indentation (a nested one is
        indented deeper: naming the file after it would run the wrong class),
        else Main.java: javac refuses a public class in a file of another name."""
        if self._source_from is None:
            return self.source
        base = min((len(line) - len(line.lstrip(" \t")) for line in code.splitlines() if line.strip()), default=0)
        found = next((m.group(2) for m in self._source_from.finditer(code) if len(m.group(1)) == base), None)
        named = f"{found}{PurePosixPath(self.source).suffix}"
        # A name no file can have (too long) is javac's to report, against Main.java.
        return named if found and is_plain_name(named) else self.source

    def first_step(self, program_run: bool) -> Argv | None:
        """What runs once before anything else: the compile, or for a checked
        language its check before tests (a program run goes straight to its
        run, as SandboxFusion's does); None for neither."""
        return self.compile if self.compile is not None else (None if program_run else self.check)

    @staticmethod
    def argv(argv: Argv, source: str) -> list[str]:
        """`argv` for the source file `source`: `{src}` is its name, `{class}` its stem."""
        stem = PurePosixPath(source).stem
        return [arg.replace("{src}", source).replace("{class}", stem) for arg in argv]


def _image(name: str) -> str:
    return f"rewardbox/{name}"


_CPP_FLAGS = ("-O2", "-pipe", "-DONLINE_JUDGE")  # Codeforces' and Piston's; the image's precompiled header needs them exact
# Markers are bounded per line (`[ \t]`, never `\s*` across lines): one search is linear on any text.
_CPP_MARKER = r"^[ \t]*#[ \t]*include\b|\bint[ \t]+main[ \t]*\("
_JAVA_CLASS = r"(?:[^\W\d]|\$)[\w$]*"  # a Java identifier: letters of any script, digits, `_`, `$`

LANGUAGES: tuple[Language, ...] = (
    Language(
        name="python", title="Python", aliases=("python", "python3", "py"), sandboxfusion="python",
        source=harness_protocol().SOLUTION_FILE,
        # What `python3 -I -B solution.py` would do; the harness forks its pooled seed instead.
        # Its syntax check is the harness's `compile()`: a syntax_error, not a compile_error.
        run=("python3", "-I", "-B", "{src}"),
        image=PYTHON_REPOSITORY,
        # Lines only Python code starts with: a text that does not parse still counts as code when
        # one of them starts a line (its syntax error is the model's); rewardbox.rewards.extract.
        marker=r"^(def |class |import |from \S+ import |async def |@|if __name__)",
    ),
    Language(
        name="cpp", title="C++", aliases=("cpp", "c++", "cc", "cxx", "cpp17", "c++17"), sandboxfusion="cpp",
        source="main.cpp",
        compile=("g++", "-std=c++17", *_CPP_FLAGS, "-o", "main", "{src}"),
        run=("./main",),
        image=_image("cpp"),
        bounded_compile=True,  # measured: with the precompiled header it needs under 200 MB
        marker=_CPP_MARKER,
    ),
    Language(
        name="cpp20", title="C++20", aliases=("cpp20", "c++20"), fences=("cpp", "c++", "cc", "cxx"), sandboxfusion=None,
        source="main.cpp",
        compile=("g++", "-std=c++20", *_CPP_FLAGS, "-o", "main", "{src}"),
        run=("./main",),
        image=_image("cpp"),  # the same g++ as cpp's
        bounded_compile=True,
        marker=_CPP_MARKER,
    ),
    Language(
        name="java", title="Java", aliases=("java",), sandboxfusion="java",
        source="Main.java",
        # A top-level public type (modifiers but `static`, which only a nested one takes); group 1
        # is its indentation, group 2 its name.
        source_from=(rf"^([ \t]*)public[ \t]+(?:(?:final|abstract|strictfp|sealed|non-sealed)[ \t]+)*"
                     rf"(?:class|interface|enum|record)[ \t]+({_JAVA_CLASS})"),
        compile=("javac", "-encoding", "UTF-8", "-proc:none", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1",
                 "{src}"),
        # A serial GC and one compiler thread fit the pids limit; 75% of the memory limit for the heap
        # (the JVM's default is 25%) and a deep stack give contest-like room.
        run=("java", "-XX:+UseSerialGC", "-XX:MaxRAMPercentage=75", "-Xss64m", "-XX:-UsePerfData", "-ea",
             "-DONLINE_JUDGE=true", "-cp", ".", "{class}"),
        image=_image("java"),
        marker=rf"^[ \t]*(?:public[ \t]+)?(?:final[ \t]+)?class[ \t]+{_JAVA_CLASS}|\bstatic[ \t]+void[ \t]+main[ \t]*\(",
    ),
    Language(
        name="javascript", title="JavaScript", aliases=("javascript", "js", "node", "nodejs"), sandboxfusion="nodejs",
        source="main.js",
        check=("node", "--check", "{src}"),
        # V8 sizes its thread pool from the host's CPUs, not the container's pids limit.
        run=("node", "--v8-pool-size=1", "--stack-size=65500", "{src}"),
        image=_image("javascript"),
        marker=None,  # nothing tells JavaScript from prose reliably: fence it
    ),
    Language(
        name="go", title="Go", aliases=("go", "golang"), sandboxfusion="go",
        source="main.go",
        compile=("go", "build", "-o", "main", "{src}"),
        run=("./main",),
        # Go 1.19 (Debian 12) does not read the cgroup's CPU quota: one thread of work, and no module
        # lookups; its caches in /tmp, the only writable place besides the work dir.
        env={"GO111MODULE": "off", "CGO_ENABLED": "0", "GOCACHE": "/tmp/go-cache", "GOPATH": "/tmp/go",
             "GOFLAGS": "-p=1", "GOMAXPROCS": "1"},
        image=_image("go"),
        marker=r"^[ \t]*package[ \t]+main\b",
    ),
    Language(
        name="rust", title="Rust", aliases=("rust", "rs"), sandboxfusion="rust",
        source="main.rs",
        # -O as contest judges do (integer overflow then wraps instead of panicking); one codegen
        # unit keeps rustc to one thread.
        compile=("rustc", "--edition", "2021", "-O", "-C", "codegen-units=1", "-o", "main", "{src}"),
        run=("./main",),
        image=_image("rust"),
        # Optimising on one codegen unit, a 90-line program with the std collections took 2.2-2.7 s,
        # 7.5 s on a loaded 2-core host: 10 s would cut correct programs short.
        compile_timeout_s=30.0,
        marker=r"\bfn[ \t]+main[ \t]*\(",
    ),
)

_BY_ALIAS: dict[str, Language] = {alias: lang for lang in LANGUAGES for alias in lang.aliases}
if len(_BY_ALIAS) != sum(len(lang.aliases) for lang in LANGUAGES):
    raise ValueError("an alias names two languages")  # at import: the table is wrong, whatever the data


# The longest compile deadline of the table's languages (a container's expiry allows for it).
LONGEST_COMPILE_S = max(lang.compile_timeout_s for lang in LANGUAGES)


def default_image(name: str) -> str:
    """The image another language than Python runs in by default: its
    toolchain image built on the lean sandbox image (`rewardbox image build
    --language`); Python's is the sandbox's own.

    >>> default_image("cpp20") == default_image("cpp") and default_image("cpp").startswith("rewardbox/cpp:")
    True
    """
    repository = language(name).image
    if repository == PYTHON_REPOSITORY:
        raise ValueError("Python runs in the sandbox's own image")
    return language_tag(repository.removeprefix("rewardbox/"))


def language(name: "str | Language") -> Language:
    """The language named `name` or one of its aliases, in any case; raises
    `UnknownLanguage` naming the known ones."""
    if isinstance(name, Language):
        return name
    found = _BY_ALIAS.get(name.strip().lower()) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(sorted(lang.name for lang in LANGUAGES))
        raise UnknownLanguage(f"unknown language {name!r} (known: {known})")
    return found
