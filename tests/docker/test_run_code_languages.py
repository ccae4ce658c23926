"""SandboxFusion's `/run_code` in every language of the table, over a real
socket, with verl's request exactly as its client builds it
(tests/docker/test_run_code.py): compiled in the language's toolchain image
and run there. A language whose image is missing fails here (the answer is a
SandboxError naming the build command), it is never skipped."""

import json
import time

import pytest
import requests
from server import running_server
from test_run_code import HEADERS, ok, verl_call

from rewardbox.sandbox import Sandbox

# Theatre Square: ceil(n / a) * ceil(m / a), past 32 bits on this input.
INPUT, ANSWER = "1000000000 1000000000 1\n", "1000000000000000000\n"
SOLVES = {
    "cpp": "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n    long long n, m, a;\n    cin >> n >> m >> a;\n"
           "    cout << ((n + a - 1) / a) * ((m + a - 1) / a) << \"\\n\";\n}\n",
    # Concepts: C++20 only (under -std=c++17 'std::integral' has not been declared).
    "cpp20": "#include <concepts>\n#include <iostream>\ntemplate <std::integral T> T up(T x, T y) { return (x + y - 1) / y; }\n"
             "int main() { long long n, m, a; std::cin >> n >> m >> a; std::cout << up(n, a) * up(m, a) << '\\n'; }\n",
    "java": "import java.io.*;\nimport java.util.*;\n\npublic class Main {\n"
            "    public static void main(String[] args) throws IOException {\n"
            "        StringTokenizer st = new StringTokenizer(new BufferedReader(new InputStreamReader(System.in)).readLine());\n"
            "        long n = Long.parseLong(st.nextToken()), m = Long.parseLong(st.nextToken()), "
            "a = Long.parseLong(st.nextToken());\n"
            "        System.out.println(((n + a - 1) / a) * ((m + a - 1) / a));\n    }\n}\n",
    "nodejs": "const [n, m, a] = require(\"fs\").readFileSync(0, \"utf8\").trim().split(/\\s+/).map(BigInt);\n"
              "console.log((((n + a - 1n) / a) * ((m + a - 1n) / a)).toString());\n",
    "go": "package main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tvar n, m, a int64\n"
          "\tfmt.Fscan(bufio.NewReader(os.Stdin), &n, &m, &a)\n\tfmt.Println((n + a - 1) / a * ((m + a - 1) / a))\n}\n",
    "rust": "use std::io::{self, Read};\nfn main() {\n    let mut s = String::new();\n"
            "    io::stdin().read_to_string(&mut s).unwrap();\n"
            "    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            "    println!(\"{}\", ((v[0] + v[2] - 1) / v[2]) * ((v[1] + v[2] - 1) / v[2]));\n}\n",
}
COMPILED = ["cpp", "cpp20", "java", "go", "rust"]
# An undeclared name, and what each compiler says of it.
DOES_NOT_COMPILE = {
    "cpp": ("int main() { return undeclared_name; }\n", "'undeclared_name' was not declared"),
    "cpp20": ("int main() { return undeclared_name; }\n", "'undeclared_name' was not declared"),
    "java": ("public class Main { public static void main(String[] a) { int x = undeclared_name; } }\n",
             "cannot find symbol"),
    "go": ("package main\n\nfunc main() { _ = undeclared_name }\n", "undefined: undeclared_name"),
    "rust": ("fn main() { let _x = undeclared_name; }\n", "cannot find value `undeclared_name`"),
}
# Each language's uncaught error: its exit status and what it prints.
CRASHES = {
    "cpp": ('#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }\n', -6, "what():  boom"),  # abort
    "cpp20": ('#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }\n', -6, "what():  boom"),
    "java": ('public class Main { public static void main(String[] a) { throw new IllegalStateException("boom"); } }\n',
             1, "java.lang.IllegalStateException: boom"),
    "nodejs": ('throw new Error("boom");\n', 1, "Error: boom"),
    "go": ('package main\n\nfunc main() { panic("boom") }\n', 2, "panic: boom"),
    "rust": ('fn main() { panic!("boom"); }\n', 101, "panicked at"),
}
LOOPS = {
    "cpp": "int main() { volatile long x = 0; for (;;) x++; }\n",
    "cpp20": "int main() { volatile long x = 0; for (;;) x++; }\n",
    "java": "public class Main { public static void main(String[] a) { while (true) {} } }\n",
    "nodejs": "for (;;) {}\n",
    "go": "package main\n\nfunc main() {\n\tfor {\n\t}\n}\n",
    "rust": "fn main() { let mut x: u64 = 0; loop { x = std::hint::black_box(x + 1); } }\n",
}
# Every instantiation names two new types: 2^40 of them, none memoised. g++ would run for ever.
TEMPLATE_BOMB = ("template <class T, int N> struct B { static constexpr int v = B<B<T, N - 1>, N - 1>::v + B<T*, N - 1>::v; };\n"
                 "template <class T> struct B<T, 0> { static constexpr int v = 1; };\n"
                 "int main() { return B<int, 40>::v; }\n")


def compiled_ok(out: dict, language: str) -> None:
    """A compiled language's answer carries its successful compile; the others none."""
    if language in COMPILED:
        step = out["compile_result"]
        assert (step["status"], step["return_code"]) == ("Finished", 0), out
        assert step["execution_time"] > 0
    else:
        assert out["compile_result"] is None, out


@pytest.mark.parametrize("language", sorted(SOLVES))
def test_a_program_reads_stdin_and_answers(server_url, language):
    out = ok(verl_call(server_url, SOLVES[language], INPUT, language=language))

    assert out["status"] == "Success" and out["message"] == "", out
    run = out["run_result"]
    assert (run["status"], run["return_code"], run["stdout"], run["stderr"]) == ("Finished", 0, ANSWER, "")
    compiled_ok(out, language)


@pytest.mark.parametrize("language", sorted(DOES_NOT_COMPILE))
def test_code_that_does_not_compile_gets_the_compilers_message_and_no_run(server_url, language):
    code, says = DOES_NOT_COMPILE[language]
    out = ok(verl_call(server_url, code, INPUT, language=language))

    # SandboxFusion's exact shape: what verl counts as a compile error (-4).
    assert (out["status"], out["message"], out["run_result"]) == ("Failed", "", None), out
    step = out["compile_result"]
    assert step["status"] == "Finished" and step["return_code"] not in (0, None)
    assert says in (step["stderr"] + step["stdout"]).replace("\u2018", "'").replace("\u2019", "'"), step


def test_a_javascript_syntax_error_shows_at_run_as_in_sandboxfusion(server_url):
    out = ok(verl_call(server_url, "console.log(1\n", "", language="nodejs"))

    assert (out["status"], out["compile_result"]) == ("Failed", None)
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("Finished", 1) and "SyntaxError" in run["stderr"]


def test_a_compile_past_compile_timeout_is_time_limit_exceeded(server_url):
    started = time.monotonic()
    out = ok(verl_call(server_url, TEMPLATE_BOMB, "", timeout=2, language="cpp"))
    took = time.monotonic() - started

    assert (out["status"], out["message"], out["run_result"]) == ("Failed", "", None), out
    step = out["compile_result"]
    assert (step["status"], step["return_code"]) == ("TimeLimitExceeded", None)
    assert 2 <= step["execution_time"] < 2 + 2  # stopped at the deadline, not after the bomb
    assert took < 2 + 10  # within verl's own wait for it (compile + run + 10 s)


@pytest.mark.parametrize("name", ["Solution", "Main$Solver", "Решение"])
def test_java_is_named_after_its_public_class(server_url, name):
    # SandboxFusion writes Java to Main.java, where javac refuses `public class Solution`;
    # a name of `$` or another script was refused by our file names (SandboxError, a lost sample).
    code = SOLVES["java"].replace("public class Main", f"public class {name}")
    out = ok(verl_call(server_url, code, INPUT, language="java"))

    assert (out["status"], out["run_result"]["stdout"]) == ("Success", ANSWER), out


@pytest.mark.parametrize("language", sorted(CRASHES))
def test_a_runtime_error_is_failed_with_its_exit_status(server_url, language):
    code, status, says = CRASHES[language]
    out = ok(verl_call(server_url, code, "", language=language))

    assert out["status"] == "Failed", out
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("Finished", status) and says in run["stderr"], run
    compiled_ok(out, language)


def call(url: str, code: str, language: str, compile_timeout: float, run_timeout: float) -> dict:
    """verl's request with a compile deadline of its own (verl sends one value for both)."""
    body = {"compile_timeout": compile_timeout, "run_timeout": run_timeout, "code": code, "stdin": "",
            "memory_limit_MB": 1024, "language": language, "files": {}, "fetch_files": []}
    return ok(requests.post(f"{url}/run_code", headers=HEADERS, data=json.dumps(body),
                            timeout=compile_timeout + run_timeout + 10))


@pytest.mark.parametrize("language", sorted(LOOPS))
def test_an_endless_loop_is_time_limit_exceeded(server_url, language):
    out = call(server_url, LOOPS[language], language, compile_timeout=20, run_timeout=1)

    assert out["status"] == "Failed", out
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("TimeLimitExceeded", None)
    assert run["execution_time"] >= 1
    compiled_ok(out, language)


def test_a_language_whose_image_is_missing_is_a_sandbox_error_with_the_build_command():
    with Sandbox(images={"rust": "rewardbox/rust:0.0.0-missing"}, max_containers=1, sweep=False) as box, \
            running_server(box) as url:
        out = ok(verl_call(url, SOLVES["rust"], INPUT, language="rust"))

    assert (out["status"], out["run_result"], out["compile_result"]) == ("SandboxError", None, None)
    assert out["message"] == ("rewardbox could not run the code: the sandbox image rewardbox/rust:0.0.0-missing is not "
                              "on the Docker engine: run `rewardbox image build --language rust` to build it "
                              "(or pull or load it)")


@pytest.mark.parametrize("language", ["php", "csharp", "typescript"])
def test_sandboxfusions_other_languages_get_a_clear_sandbox_error(server_url, language):
    out = ok(verl_call(server_url, "<?php echo 1;", "", language=language))

    assert (out["status"], out["run_result"], out["compile_result"]) == ("SandboxError", None, None)
    assert out["message"] == (f"language '{language}' is not supported: this rewardbox server runs python (python3, py); "
                              "cpp (c++, cc, cxx, cpp17, c++17); cpp20 (c++20); java; javascript (js, node, nodejs); "
                              "go (golang); rust (rs)")


def test_no_container_or_process_left_behind(server_url, leftovers):
    call(server_url, TEMPLATE_BOMB, "cpp", compile_timeout=1, run_timeout=1)
    call(server_url, LOOPS["go"], "go", compile_timeout=20, run_timeout=1)

    assert leftovers() == {"containers": [], "processes": []}
