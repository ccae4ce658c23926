"""`rewardbox score` on programs in other languages, through the real command
and real containers: a label's `language`, the `--language` default for rows
that name none (APPS/TACO), a compile error's verdict and message, and a
language's image named by `--language-images`."""

import json
import subprocess
import sys

import pytest

CPP = ('#include <bits/stdc++.h>\nusing namespace std;\nint main(){long long n,m,a;cin>>n>>m>>a;'
       'cout<<((n+a-1)/a)*((m+a-1)/a)<<"\\n";}\n')
WRONG = ('#include <iostream>\nint main(){int n,m,a;std::cin>>n>>m>>a;'
         'std::cout<<((n+a-1)/a)*((m+a-1)/a)<<"\\n";}\n')
BROKEN = "int main() { std::cout << 1 }\n"
CASES = {"inputs": ["6 6 4\n", "1000000000 1000000000 1\n", "999999999 999999999 1\n", "1 1 1\n"],
         "outputs": ["4\n", "1000000000000000000\n", "999999998000000001\n", "1\n"]}


def rows(label_language: str | None) -> list[dict]:
    label = {**CASES, **({"language": label_language} if label_language else {})}
    return [{"id": name, "completion": f"```cpp\n{code}```", "label": label}
            for name, code in (("accepted", CPP), ("wrong", WRONG), ("broken", BROKEN))]


def score(tmp_path, records: list[dict], *args: str) -> list[dict]:
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = subprocess.run([sys.executable, "-m", "rewardbox.cli", "score", str(path), "--no-progress", "-j", "2",
                           *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("label_language, args", [
    pytest.param("c++", (), id="the-label-s-language"),
    pytest.param(None, ("--language", "cpp"), id="the-default-for-rows-naming-none"),
])
def test_cpp_programs_are_graded_by_their_cases(tmp_path, label_language, args):
    by_id = {r["id"]: r for r in score(tmp_path, rows(label_language), *args)}

    assert {k: (r["reward"], r["verdict"]) for k, r in by_id.items()} == {
        "accepted": (1.0, "passed"), "wrong": (0.5, "failed"), "broken": (-1.0, "compile_error")}
    # The compiler's own message, its quotes as g++ writes them under C.UTF-8.
    assert by_id["broken"]["message"].startswith("the compiler exited with status 1: main.cpp:")
    assert "\u2018cout\u2019 is not a member of \u2018std\u2019" in by_id["broken"]["message"]


def test_without_a_language_a_cpp_program_is_no_python_code(tmp_path):
    by_id = {r["id"]: r for r in score(tmp_path, rows(None))}
    assert {r["verdict"] for r in by_id.values()} == {"no_code"}  # a ```cpp block is never Python's


def test_a_language_image_named_but_missing_leaves_the_rows_unscored(tmp_path):
    by_id = {r["id"]: r for r in score(tmp_path, rows("cpp"), "--language-images", "cpp=rewardbox-test/absent:0")}
    assert {(r["reward"], r["verdict"]) for r in by_id.values()} == {(None, None)}
    assert all("rewardbox-test/absent:0 is not on the Docker engine" in r["error"] for r in by_id.values())
