"""`rewardbox.sandbox.languages`: the one table of languages, its lookups, what
a label in another language sends (its file, its steps on the wire, its
deadline), what the rewards do when its image is missing, the compile_error
verdict's reward, and docs/languages.md's table, generated from the table."""

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from rewardbox.images import REPOSITORY
from rewardbox.rewards import CodeReward, GradingPolicy
from rewardbox.rewards.logs import CRASH_VERDICTS
from rewardbox.sandbox import (
    LANGUAGES,
    ImageMissing,
    Language,
    Limits,
    Outcome,
    RunRequest,
    UnknownLanguage,
    Verdict,
    language,
)
from rewardbox.sandbox.protocol import SOLUTION_FILE, encode_request

DOC = Path(__file__).resolve().parents[2] / "docs" / "languages.md"
NAMES = ("python", "cpp", "cpp20", "java", "javascript", "go", "rust")


# --- the table --------------------------------------------------------------

def test_the_table_holds_the_planned_languages_once_each():
    assert tuple(lang.name for lang in LANGUAGES) == NAMES


@pytest.mark.parametrize("alias, name", [
    ("python", "python"), ("Python3", "python"), ("py", "python"),
    ("cpp", "cpp"), ("C++", "cpp"), ("cc", "cpp"), ("cxx", "cpp"), ("cpp17", "cpp"), ("c++17", "cpp"),
    ("cpp20", "cpp20"), ("C++20", "cpp20"),
    ("java", "java"), ("JAVA", "java"),
    ("javascript", "javascript"), ("js", "javascript"), ("node", "javascript"), ("nodejs", "javascript"),
    ("go", "go"), ("golang", "go"),
    ("rust", "rust"), ("rs", "rust"),
    (" cpp\n", "cpp"),
])
def test_an_alias_in_any_case_names_its_language(alias, name):
    assert language(alias).name == name


def test_sandboxfusion_s_names_are_aliases():
    # /run_code receives these as `language`: each must find its entry.
    for lang in LANGUAGES:
        if lang.sandboxfusion is not None:
            assert language(lang.sandboxfusion) is lang


def test_an_entry_is_its_own_language():
    cpp = language("cpp")
    assert language(cpp) is cpp


@pytest.mark.parametrize("name", ["cobol", "", "c", "python2", "typescript"])
def test_an_unknown_language_is_refused_naming_the_known_ones(name):
    with pytest.raises(UnknownLanguage) as caught:
        language(name)

    assert str(caught.value) == (f"unknown language {name!r} "
                                 "(known: cpp, cpp20, go, java, javascript, python, rust)")
    assert isinstance(caught.value, ValueError)  # a label's validator reports it as the dataset's error


def test_a_name_that_is_not_text_is_unknown():
    with pytest.raises(UnknownLanguage):
        language(3)  # type: ignore[arg-type]


def test_python_s_entry_is_what_runs_today():
    python = language("python")

    assert (python.source, python.image) == (SOLUTION_FILE, REPOSITORY)
    assert python.compile is None and python.check is None  # its syntax check is the harness's own
    assert python.run == ("python3", "-I", "-B", "{src}")
    assert python.env == {}


@pytest.mark.parametrize("name, compile_argv", [
    ("cpp", ("g++", "-std=c++17", "-O2", "-pipe", "-DONLINE_JUDGE", "-o", "main", "{src}")),
    ("cpp20", ("g++", "-std=c++20", "-O2", "-pipe", "-DONLINE_JUDGE", "-o", "main", "{src}")),
    ("rust", ("rustc", "--edition", "2021", "-O", "-C", "codegen-units=1", "-o", "main", "{src}")),
    ("go", ("go", "build", "-o", "main", "{src}")),
    ("java", ("javac", "-encoding", "UTF-8", "-proc:none", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1",
              "{src}")),
])
def test_compiled_languages_compile_with_the_decided_argv(name, compile_argv):
    lang = language(name)

    assert lang.compile == compile_argv
    assert lang.check is None
    assert lang.run == (("java", "-XX:+UseSerialGC", "-XX:MaxRAMPercentage=75", "-Xss64m", "-XX:-UsePerfData",
                         "-ea", "-DONLINE_JUDGE=true", "-cp", ".", "{class}") if name == "java" else ("./main",))


def test_javascript_is_checked_not_compiled():
    js = language("javascript")

    assert (js.compile, js.check) == (None, ("node", "--check", "{src}"))
    assert js.run == ("node", "--v8-pool-size=1", "--stack-size=65500", "{src}")


def test_go_builds_without_modules_on_one_thread():
    assert language("go").env == {"GO111MODULE": "off", "CGO_ENABLED": "0", "GOCACHE": "/tmp/go-cache",
                                  "GOPATH": "/tmp/go", "GOFLAGS": "-p=1", "GOMAXPROCS": "1"}


def test_each_image_is_its_toolchain_s_and_cpp20_shares_cpp_s():
    images = {lang.name: lang.image for lang in LANGUAGES}

    assert images == {"python": REPOSITORY, "cpp": "rewardbox/cpp", "cpp20": "rewardbox/cpp", "java": "rewardbox/java",
                      "javascript": "rewardbox/javascript", "go": "rewardbox/go", "rust": "rewardbox/rust"}
    # SandboxFusion's default compile_timeout; rustc optimising takes seconds on a loaded host.
    assert {lang.name: lang.compile_timeout_s for lang in LANGUAGES} == {name: 30.0 if name == "rust" else 10.0
                                                                          for name in NAMES}


@pytest.mark.parametrize("fields, message", [
    pytest.param({"aliases": ("other",)}, "hold the name", id="name-not-an-alias"),
    pytest.param({"aliases": ("x", "X")}, "lower-case", id="upper-case-alias"),
    pytest.param({"check": ("x", "--check"), "compile": ("xc",)}, "compiled or checked, not both", id="both-steps"),
])
def test_an_inconsistent_entry_is_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        Language.model_validate({"name": "x", "title": "X", "aliases": ("x",), "sandboxfusion": None, "source": "main.x",
                                 "run": ("./main",), "image": "rewardbox/x", **fields})


# --- source files and argv ----------------------------------------------------

JAVA = language("java")


@pytest.mark.parametrize("code, source", [
    pytest.param("import java.util.*;\n\npublic class Solution {\n    public static void main(String[] a) {}\n}\n",
                 "Solution.java", id="public-class"),
    pytest.param("public final class Answer {}\n", "Answer.java", id="public-final-class"),
    pytest.param("class Helper {}\npublic class Program {}\n", "Program.java", id="public-class-after-another"),
    pytest.param("class Main {\n    public static void main(String[] a) {}\n}\n", "Main.java", id="no-public-class"),
    pytest.param("class Main {\n    public class Node {}\n}\n", "Main.java", id="only-a-nested-public-class"),
    pytest.param("public class Outer {\n    public class Inner {}\n}\n", "Outer.java", id="nested-after-outer"),
    pytest.param("    public class Indented {\n        int x;\n    }\n", "Indented.java", id="all-indented"),
    pytest.param("// public class Commented {}\nclass Main {}\n", "Main.java", id="in-a-comment"),
    pytest.param("public static class Nested {}\n", "Main.java", id="static-is-never-top-level"),
    pytest.param("", "Main.java", id="empty"),
    pytest.param("public class Foo$Bar {}\n", "Foo$Bar.java", id="dollar"),
    pytest.param("public class Решение {}\n", "Решение.java", id="cyrillic"),
    pytest.param("public class _9 {}\n", "_9.java", id="underscore-digit"),
    pytest.param("public class 9Lives {}\n", "Main.java", id="not-an-identifier"),
    pytest.param(f"public class {'A' * 200} {{}}\n", "Main.java", id="longer-than-a-file-name"),
    pytest.param(f"public class {'Ж' * 127} {{}}\n", "Main.java", id="over-name-max-in-utf-8"),
])
def test_java_s_file_is_named_after_its_public_class(code, source):
    assert JAVA.source_name(code) == source
    # Whatever the name, a run of it is a valid request (a name the model refused was a lost sample).
    RunRequest(files={JAVA.source_name(code): code}, tests={}, program=JAVA.source_name(code), language="java")


@pytest.mark.parametrize("name", [n for n in NAMES if n != "java"])
def test_other_languages_keep_their_file_name(name):
    lang = language(name)
    assert lang.source_name("public class Solution {}") == lang.source


def test_argv_names_the_source_and_its_class():
    assert JAVA.argv(JAVA.compile or (), "Solution.java")[-1] == "Solution.java"
    assert JAVA.argv(JAVA.run, "Solution.java")[-1] == "Solution"
    assert language("cpp").argv(language("cpp").compile or (), "main.cpp")[-3:] == ["-o", "main", "main.cpp"]


# --- fence-less completions ---------------------------------------------------

@pytest.mark.parametrize("name, text, code", [
    ("cpp", "#include <bits/stdc++.h>\nusing namespace std;\nint main() { return 0; }\n", True),
    ("cpp", "  # include <cstdio>\n", True),
    ("cpp", "int main(){}", True),
    ("cpp", "I would include a header and write main.", False),
    ("cpp20", "#include <concepts>\n", True),
    ("java", "import java.util.*;\npublic class Main {\n}\n", True),
    ("java", "class Main { public static void main(String[] a) {} }", True),
    ("java", "The main class is the answer.", False),
    ("go", "package main\n\nfunc main() {}\n", True),
    ("go", "This package is mainly prose.", False),
    ("rust", "fn main() {\n}\n", True),
    ("rust", "The fn keyword defines main functions.", False),
    ("javascript", "console.log(1);\n", False),  # never: fence it
])
def test_a_fence_less_completion_is_code_by_its_language_s_marker(name, text, code):
    assert language(name).looks_like_code(text) is code


# --- another language's run: its file, its steps, its image ----------------------

STDIO = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
CPP = "#include <cstdio>\nint main() { int a, b; scanf(\"%d %d\", &a, &b); printf(\"%d\\n\", a + b); }\n"
JAVA_ADDER = "import java.util.*;\npublic class Adder {\n  public static void main(String[] a) {}\n}\n"


@pytest.mark.parametrize("label, completion, source, code, run", [
    pytest.param({**STDIO, "language": "cpp"}, f"```cpp\n{CPP}```", "main.cpp", CPP, ["./main"], id="stdio-cpp"),
    pytest.param({"language": "c++", "test_cases": [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"}]},
                 f"```c++\n{CPP}```", "main.cpp", CPP, ["./main"], id="open-r1-cpp"),
    pytest.param({**STDIO, "language": "Java"}, f"```java\n{JAVA_ADDER}```", "Adder.java", JAVA_ADDER,
                 ["java", "-XX:+UseSerialGC", "-XX:MaxRAMPercentage=75", "-Xss64m", "-XX:-UsePerfData", "-ea",
                  "-DONLINE_JUDGE=true", "-cp", ".", "Adder"], id="stdio-java-public-class"),
])
def test_another_language_s_program_is_sent_in_its_file_with_its_run(fake_sandbox, result, label, completion, source,
                                                                      code, run):
    box = fake_sandbox(result(Verdict.PASSED, ("test_case_0", Outcome.PASSED)))

    g = CodeReward(sandbox=box).grade(completion, label)

    assert (g.reward, g.verdict) == (1.0, Verdict.PASSED)
    [request] = box.requests
    assert (request.language, request.files, request.source_file()) == (language(label["language"]).name,
                                                                         {source: code}, source)
    data = json.loads(request.test_data or "")
    assert (data["run"], data["env"], data["mode"]) == (run, {}, "stdio")  # the harness keeps no table
    wire = json.loads(encode_request(request, "n"))["language"]
    assert wire["run"] == run and wire["compile"][-1] == source and wire["compile_timeout_s"] == 10.0


def test_a_checked_language_s_check_runs_before_tests_but_not_before_a_program():
    tests = RunRequest(files={"main.js": "x"}, tests={"test_a.py": ""}, language="node")
    program = RunRequest(files={"main.js": "x"}, program="main.js", language="js")
    assert json.loads(encode_request(tests, "n"))["language"]["compile"] == ["node", "--check", "main.js"]
    assert json.loads(encode_request(program, "n"))["language"]["compile"] is None  # as SandboxFusion: none
    assert tests.deadline_s() == program.deadline_s() + 10.0


def test_python_s_wire_carries_no_language():
    request = RunRequest(files={SOLUTION_FILE: "x = 1"}, tests={"test_a.py": ""})
    assert "language" not in json.loads(encode_request(request, "n"))
    assert request.deadline_s() == 15.0


@pytest.mark.parametrize("request_args, error", [
    ({"files": {"main.py": "x"}, "program": "main.py", "language": "cpp"}, "must be a .cpp file"),
    ({"files": {"a.cpp": "x", "b.cpp": "y"}, "tests": {"test_a.py": ""}, "language": "cpp"}, "one .cpp file"),
    ({"files": {"main.go": "x"}, "tests": {"test_a.py": ""}, "language": "cobol"}, "unknown language 'cobol'"),
    ({"files": {"main.rs": "x"}, "tests": {"test_a.py": ""}, "language": "rust", "solution_in_process": True},
     "for Python code"),
])
def test_a_request_in_another_language_is_checked(request_args, error):
    with pytest.raises(ValueError, match=error):
        RunRequest(**request_args)


def test_a_language_whose_image_is_missing_is_unscorable_never_a_penalty(fake_sandbox):
    missing = ImageMissing("the sandbox image rewardbox/rust:x is not on the Docker engine: run `rewardbox image "
                           "build --language rust` to build it")
    box = fake_sandbox(missing, missing)

    reward = CodeReward(sandbox=box)
    g = reward.grade("```rust\nfn main() {}\n```", {**STDIO, "language": "Rust"})

    assert (g.reward, g.score, g.verdict, g.error) == (None, None, None, str(missing))
    assert reward("```rust\nfn main() {}\n```", {**STDIO, "language": "rs"}).reward is None  # never a penalty


def test_a_missing_python_image_is_still_our_failure(fake_sandbox):
    box = fake_sandbox(ImageMissing("no image"))
    with pytest.raises(ImageMissing):
        CodeReward(sandbox=box).grade("```python\nprint(3)\n```", STDIO)


def test_a_python_stdio_label_still_runs(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.PASSED, ("test_case_0", Outcome.PASSED)))

    g = CodeReward(sandbox=box)("```python\nprint(sum(map(int, input().split())))\n```", {**STDIO, "language": "py"})

    assert (g.reward, g.verdict) == (1.0, Verdict.PASSED)
    [request] = box.requests
    assert request.files == {SOLUTION_FILE: "print(sum(map(int, input().split())))\n"}


# --- compile_error: a crash ---------------------------------------------------

def test_a_compile_error_earns_the_crash_penalty_unless_overridden():
    assert Verdict("compile_error") is Verdict.COMPILE_ERROR
    assert GradingPolicy().reward(Verdict.COMPILE_ERROR, passed=0, total=4) == -1.0
    assert GradingPolicy(crash_reward=-0.7).reward(Verdict.COMPILE_ERROR, passed=0, total=4) == -0.7
    policy = GradingPolicy.model_validate({"verdict_rewards": {"compile_error": -0.2}})
    assert policy.reward(Verdict.COMPILE_ERROR, passed=0, total=4) == -0.2
    assert policy.reward(Verdict.SYNTAX_ERROR, passed=0, total=4) == -1.0
    assert "compile_error" in CRASH_VERDICTS  # extra_logs' crash rate counts it


def test_the_grading_doc_has_the_compile_error_row():
    rows = (DOC.parent / "grading.md").read_text().splitlines()
    assert any(row.startswith("| ") and row.endswith("| -1.0 | `compile_error` |") for row in rows)


# --- docs/languages.md ----------------------------------------------------------

def _cell(argv: tuple[str, ...] | None) -> str:
    return f"`{' '.join(argv)}`" if argv else "—"


def languages_table() -> str:
    """The table docs/languages.md shows, from `LANGUAGES`."""
    rows = ["| name | aliases | SandboxFusion | source file | compile (or check) | run | environment | image |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for lang in LANGUAGES:
        aliases = ", ".join(f"`{a}`" for a in lang.aliases)
        if lang.fences:
            aliases += "; fenced also " + ", ".join(f"`{t}`" for t in lang.fences)
        source = f"`{lang.source}`" + (" or `<public class>.java`" if lang.source_from else "")
        step = _cell(lang.compile) if lang.compile else (f"check: {_cell(lang.check)}" if lang.check else "—")
        env = " ".join(f"`{k}={v}`" for k, v in lang.env.items()) or "—"
        rows.append(f"| {lang.name} | {aliases} | {lang.sandboxfusion or '—'} | {source} | {step} | "
                    f"{_cell(lang.run)} | {env} | `{lang.image}` |")
    return "\n".join(rows) + "\n"


def markers_list() -> str:
    return "".join(f"- {lang.name}: " + (f"`{lang.marker}`" if lang.marker else "none: only a fenced block is code")
                   + "\n" for lang in LANGUAGES)


def generated(doc: str, name: str) -> str:
    found = re.search(rf"<!-- {name}: generated[^>]*-->\n\n(.*?)\n<!-- end of {name} -->", doc, re.DOTALL)
    assert found, f"docs/languages.md has no generated {name} block"
    return found.group(1)


def test_the_doc_s_table_is_the_module_s():
    assert generated(DOC.read_text(), "table") == languages_table()


def test_the_doc_s_markers_are_the_module_s():
    assert generated(DOC.read_text(), "markers") == markers_list()


def test_the_doc_s_table_is_checked(monkeypatch):
    # The comparison can fail: a changed entry no longer matches the doc.
    changed = language("rust").model_copy(update={"compile": ("rustc", "main.rs")})
    monkeypatch.setattr(f"{__name__}.LANGUAGES", tuple(changed if lang.name == "rust" else lang for lang in LANGUAGES))
    assert generated(DOC.read_text(), "table") != languages_table()


def test_a_stdio_label_without_a_language_takes_the_reward_s(fake_sandbox, result):
    box = fake_sandbox(*[result(Verdict.PASSED, ("test_case_0", Outcome.PASSED))] * 3)
    reward = CodeReward(sandbox=box, language="C++")

    reward.grade(f"```cpp\n{CPP}```", STDIO)  # APPS/TACO rows name no language: the reward's
    reward.grade("```python\nprint(3)\n```", {**STDIO, "language": "python"})  # a label's own wins
    reward.grade(f"```cpp\n{CPP}```", {"input_output": {"inputs": ["1 2\n"], "outputs": ["3\n"]}})

    assert [r.language for r in box.requests] == ["cpp", "python", "cpp"]
    assert CodeReward(sandbox=box).language == "python"
    with pytest.raises(UnknownLanguage):
        CodeReward(sandbox=box, language="cobol")


def test_a_bounded_compile_gets_an_address_space_limit_on_the_wire():
    def wire(lang, source, **limits):
        request = RunRequest(files={source: "x"}, program=source, language=lang, limits=Limits(**limits))
        return json.loads(encode_request(request, "n"))["language"]

    assert wire("cpp", "main.cpp")["compile_memory_bytes"] == 480 << 20  # memory_mb less gVisor's share
    assert wire("cpp20", "main.cpp", memory_mb=1024, compile_memory_mb=300)["compile_memory_bytes"] == 300 << 20
    assert wire("cpp", "main.cpp", memory_mb=256, compile_memory_mb=4096)["compile_memory_bytes"] == 256 << 20
    assert wire("java", "Main.java")["compile_memory_bytes"] is None  # a JVM reserves more than it uses


def test_each_language_s_title_and_fence_are_what_a_model_reads():
    assert {lang.name: (lang.title, lang.fence) for lang in LANGUAGES} == {
        "python": ("Python", "python"), "cpp": ("C++", "cpp"), "cpp20": ("C++20", "cpp"), "java": ("Java", "java"),
        "javascript": ("JavaScript", "javascript"), "go": ("Go", "go"), "rust": ("Rust", "rust")}


def test_the_compile_deadline_is_the_language_s_unless_given():
    def request(lang, source, **limits):
        return RunRequest(files={source: "x"}, program=source, language=lang, limits=Limits(**limits))

    assert request("rust", "main.rs").compile_timeout_s() == 30.0
    assert request("cpp", "main.cpp").compile_timeout_s() == 10.0
    assert request("rust", "main.rs", compile_timeout_s=5).compile_timeout_s() == 5.0  # given: kept
    wire = json.loads(encode_request(request("rust", "main.rs"), "n"))["language"]
    assert wire["compile_timeout_s"] == 30.0
    assert request("rust", "main.rs").deadline_s() == 10.0 + 5.0 + 30.0
