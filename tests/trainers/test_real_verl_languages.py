"""verl 0.9.1's own SandboxFusion client (`check_correctness` with
`language=`, one request per test case, each compiled and run) against
`rewardbox serve`, for every language both verl and rewardbox know: its
verdicts are the ones it reads from SandboxFusion (True/False, -2 runtime
error, -3 timeout, -4 compile error). Real containers, real toolchain images:
a missing image fails here."""

import pytest
from verl.utils.reward_score.sandbox_fusion.utils import SUPPORTED_LANGUAGES, check_correctness

from tests.trainers.conftest import rewardbox_serve

# Theatre Square (ceil(n / a) * ceil(m / a)): the second and third answers need 64 bits.
IN_OUTS = {"inputs": ["6 6 4\n", "1000000000 1000000000 1\n", "999999999 999999999 1\n"],
           "outputs": ["4\n", "1000000000000000000\n", "999999998000000001\n"]}
# language: (accepted, wrong, what verl makes of the wrong one)
PROGRAMS = {
    # Zeroed: on an empty input `cin >>` fails before it writes anything, and an uninitialised
    # a is whatever the stack held (4, not a division by zero, with Debian's g++ of 2026-12-07).
    "cpp": ("#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n    long long n = 0, m = 0, a = 0;\n"
            "    cin >> n >> m >> a;\n"
            "    cout << ((n + a - 1) / a) * ((m + a - 1) / a) << \"\\n\";\n}\n",
            "#include <iostream>\nint main() {\n    int n, m, a;\n    std::cin >> n >> m >> a;\n"
            "    std::cout << ((n + a - 1) / a) * ((m + a - 1) / a) << \"\\n\";\n}\n",  # int overflows
            [True, False, False]),
    "java": ("import java.util.*;\n\npublic class Main {\n    public static void main(String[] args) {\n"
             "        Scanner in = new Scanner(System.in);\n"
             "        long n = in.nextLong(), m = in.nextLong(), a = in.nextLong();\n"
             "        System.out.println(((n + a - 1) / a) * ((m + a - 1) / a));\n    }\n}\n",
             # a public class of another name than SandboxFusion's Main, and int arithmetic
             "import java.util.*;\n\npublic class Solution {\n    public static void main(String[] args) {\n"
             "        Scanner in = new Scanner(System.in);\n"
             "        int n = in.nextInt(), m = in.nextInt(), a = in.nextInt();\n"
             "        System.out.println(((n + a - 1) / a) * ((m + a - 1) / a));\n    }\n}\n",
             [True, False, False]),
    "nodejs": ("const [n, m, a] = require(\"fs\").readFileSync(0, \"utf8\").trim().split(/\\s+/).map(BigInt);\n"
               "console.log((((n + a - 1n) / a) * ((m + a - 1n) / a)).toString());\n",
               "const [n, m, a] = require(\"fs\").readFileSync(0, \"utf8\").trim().split(/\\s+/).map(Number);\n"
               "console.log(Math.ceil(n / a) * Math.ceil(m / a));\n",  # a double: exact for 1e18, not for the third
               [True, True, False]),
    "go": ("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar n, m, a int64\n\tfmt.Scan(&n, &m, &a)\n"
           "\tfmt.Println((n + a - 1) / a * ((m + a - 1) / a))\n}\n",
           "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar n, m, a int32\n\tfmt.Scan(&n, &m, &a)\n"
           "\tfmt.Println((n + a - 1) / a * ((m + a - 1) / a))\n}\n",  # int32 wraps
           [True, False, False]),
    "rust": ("use std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
             "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
             "    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
             "    println!(\"{}\", ((v[0] + v[2] - 1) / v[2]) * ((v[1] + v[2] - 1) / v[2]));\n}\n",
             "use std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
             "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
             "    let v: Vec<u32> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
             "    println!(\"{}\", ((v[0] + v[2] - 1) / v[2]) * ((v[1] + v[2] - 1) / v[2]));\n}\n",  # wraps under -O
             [True, False, False]),
}
DOES_NOT_COMPILE = {
    "cpp": "int main() { return undeclared_name; }\n",
    "java": "public class Main { public static void main(String[] a) { int x = undeclared_name; } }\n",
    "go": "package main\n\nimport \"fmt\"\n\nfunc main() {}\n",  # an unused import: Go's commonest compile error
    "rust": "fn main() { let x: u32 = \"a\"; }\n",
}
LOOPS = {
    "cpp": "int main() { volatile long x = 0; for (;;) x++; }\n",
    "java": "public class Main { public static void main(String[] a) { while (true) {} } }\n",
    "nodejs": "for (;;) {}\n",
    "go": "package main\n\nfunc main() {\n\tfor {\n\t}\n}\n",
    "rust": "fn main() { let mut x: u64 = 0; loop { x = std::hint::black_box(x + 1); } }\n",
}
# verl's one timeout is both the compile's and the run's: room for rustc and javac on a loaded host.
TIMEOUT = 20


@pytest.fixture(scope="module")
def run_code_url():
    with rewardbox_serve() as url:
        yield f"{url}/run_code"


def test_every_language_verl_sends_that_rewardbox_runs_is_tested():
    # verl's names for the table's languages (cpp20 has none in verl: its client refuses what is not in its list).
    assert set(PROGRAMS) == {"cpp", "java", "nodejs", "go", "rust"} <= set(SUPPORTED_LANGUAGES)


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_accepted_passes_every_case(run_code_url, language):
    results, metadata = check_correctness(run_code_url, IN_OUTS, PROGRAMS[language][0], timeout=TIMEOUT,
                                          language=language)

    assert results == [True, True, True], metadata
    assert {m["status"] for m in metadata} == {"success"}


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_wrong_fails_the_cases_it_gets_wrong(run_code_url, language):
    _, wrong, expected = PROGRAMS[language]
    results, metadata = check_correctness(run_code_url, IN_OUTS, wrong, timeout=TIMEOUT, language=language)

    assert results == expected, metadata
    assert [m["status"] for m in metadata] == ["success" if r else "wrong_answer" for r in expected]


@pytest.mark.parametrize("language, code", [("cpp", "a=b"), *sorted(DOES_NOT_COMPILE.items())],
                         ids=["verl-cpp-a=b", *sorted(DOES_NOT_COMPILE)])
def test_compile_error_is_minus_four_for_every_case(run_code_url, language, code):
    # ("cpp", "a=b") is verl's own test_integration_compile_error, run unchanged against rewardbox.
    results, metadata = check_correctness(run_code_url, {"inputs": ["input1", "input2"],
                                                         "outputs": ["output1", "output2"]}, code, language=language,
                                          timeout=TIMEOUT)

    assert results == [-4, -4], metadata
    assert metadata[0]["status"] == "compile_error" and metadata[1]["status"] == "compile_error"
    assert metadata[0]["compile_status"] == "Finished" and metadata[0]["compile_stderr"]
    assert metadata[0]["run_status"] is None


def test_a_compile_past_the_timeout_is_minus_four_compile_timeout(run_code_url):
    bomb = ("template <class T, int N> struct B { static constexpr int v = B<B<T, N - 1>, N - 1>::v + B<T*, N - 1>::v; };\n"
            "template <class T> struct B<T, 0> { static constexpr int v = 1; };\nint main() { return B<int, 40>::v; }\n")
    results, metadata = check_correctness(run_code_url, {"inputs": [""], "outputs": [""]}, bomb, timeout=2,
                                          language="cpp")

    assert results == [-4] and metadata[0]["status"] == "compile_timeout", metadata


def test_a_javascript_syntax_error_is_a_runtime_error_as_in_sandboxfusion(run_code_url):
    results, metadata = check_correctness(run_code_url, {"inputs": ["1\n"], "outputs": ["1\n"]}, "console.log(1\n",
                                          language="nodejs")

    assert results == [-2] and metadata[0]["status"] == "runtime_error", metadata
    assert "SyntaxError" in metadata[0]["stderr"]


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_a_runtime_error_is_minus_two(run_code_url, language):
    # Each program reads three numbers: on an empty input each fails in its own way.
    results, metadata = check_correctness(run_code_url, {"inputs": [""], "outputs": ["4\n"]}, PROGRAMS[language][0],
                                          timeout=TIMEOUT, language=language)

    assert results == [-2] and metadata[0]["status"] == "runtime_error", metadata
    assert metadata[0]["exit_code"] not in (0, None)


@pytest.mark.parametrize("language", sorted(LOOPS))
def test_an_endless_loop_is_minus_three(run_code_url, language):
    results, metadata = check_correctness(run_code_url, {"inputs": [""], "outputs": [""]}, LOOPS[language],
                                          timeout=5, language=language)

    assert results == [-3] and metadata[0]["status"] == "timeout", metadata
