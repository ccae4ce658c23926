"""The toolchain images (`rewardbox image build --language <language>`) on a real engine.

Every container here is made by the sandbox's own `DockerEngine.create`, with
the hardening of a run (read-only root, tmpfs /work and noexec /tmp, no
capabilities, no network, uid 10001) and a run's default limits (`Limits()`:
512 MB, 1 CPU, 64 processes): each language's "Theatre Square" program is
compiled (or checked) and run with the argv and environment of the sandbox's
language table, never retyped here, and answers every case; g++ compiles C++17
and C++20 programs and bits/stdc++.h comes precompiled for the sandbox's flags;
javac maps its classes from the image's class data sharing archive; Go builds
on the image's prebuilt standard library; the toolchains write only in /work
and /tmp; no image holds a setuid file; the labels list the Debian packages.
The images are built by `make language-images` (a prerequisite of `make test`)
or `rewardbox image build --language <language>`: a missing one is a failure.

The containers' /work is mounted exec (and /tmp noexec), as the sandbox asks
the engine for any image but its Python one (`exec_work`), so a compiled
binary runs from the work dir as a run's would.
"""

import json
import os
import shlex
import subprocess
import sys
import time
import uuid

import docker
import pytest

from rewardbox.images import context_digest, image_tag, language_tag
from rewardbox.images.languages import LANGUAGE_IMAGES
from rewardbox.sandbox.engine import DockerEngine
from rewardbox.sandbox.languages import Language, language
from rewardbox.sandbox.models import Limits

TAG = language_tag("cpp")
IMAGES = sorted(LANGUAGE_IMAGES)  # cpp, go, java, javascript, rust
FLAGS = "-O2 -pipe -DONLINE_JUDGE"
RUNTIME = os.environ.get("REWARDBOX_TEST_RUNTIME") or None

CPP17 = r"""
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n; cin >> n;
    map<string, long long> total;
    for (int i = 0; i < n; i++) { string name; long long x; cin >> name >> x; total[name] += x; }
    for (const auto& [name, sum] : total) cout << name << ' ' << sum << '\n';  // structured bindings: C++17
    optional<long long> best;
    for (const auto& [name, sum] : total) if (!best || sum > *best) best = sum;
    cout << best.value_or(-1) << '\n';
}
"""

CPP20 = r"""
#include <bits/stdc++.h>
template <typename T> concept Number = std::integral<T> || std::floating_point<T>;
Number auto twice(Number auto x) { return x * 2; }
int main() {
    std::vector<int> v;
    for (int x; std::cin >> x;) v.push_back(x);
    auto odd = v | std::views::filter([](int x) { return x % 2; }) | std::views::transform(twice<int>);
    long long sum = 0;
    for (int x : odd) sum += x;
    std::cout << sum << ' ' << std::ranges::max(v) << (std::span(v).size() == v.size() ? " span" : "") << '\n';
}
"""


@pytest.fixture(scope="module")
def engine():
    engine = DockerEngine(retry_s=20)
    require(engine, TAG)
    yield engine
    engine.close()


def require(engine, image: str) -> None:
    try:
        engine.require_image(image)
    except Exception as exc:  # a missing image is an error of the run, never a skip
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)


def in_sandbox(engine, script: str, *args: str, limits: Limits | None = None, timeout_s: float = 120,
               image: str = TAG):
    """`sh -c script sh args...` as the sandbox user in a container of `image`
    made like a run's (DockerEngine.create, a run's default limits); (exit
    status, stdout, stderr). `timeout_s` is the test's own patience."""
    require(engine, image)
    limits = limits or Limits()
    name = f"rewardbox-test-{image.split('/')[-1].split(':')[0]}-{uuid.uuid4().hex[:10]}"
    # exec_work: /work holds binaries to run, as the sandbox asks for any image but its Python one.
    container = engine.create(image, limits, name, runtime=RUNTIME, gvisor=RUNTIME == "runsc",
                              command=["sh", "-c", script, "sh", *args], lifetime_s=timeout_s, exec_work=True)
    try:
        channel = engine.attach(container)
        try:
            engine.start(container)
            channel.end_input()
            deadline = time.monotonic() + timeout_s
            while channel.read(deadline):
                pass
        finally:
            channel.close()
        state, killed = engine.wait(container, timeout_s)
        assert not killed
        return state.exit_code, channel.stdout.decode(), channel.stderr.decode()
    finally:
        engine.remove(container)


# Writes $1 to /work/main.cpp, compiles it with $2 (the standard), and runs it with $3 on stdin.
COMPILE_AND_RUN = f"""
cd /work && printf '%s' "$1" > main.cpp
g++ -std="$2" {FLAGS} main.cpp -o main || exit 90
printf '%s' "$3" | ./main
"""


def test_a_cpp17_program_compiles_in_work_and_answers_on_stdin(engine):
    status, out, err = in_sandbox(engine, COMPILE_AND_RUN + 'id -u; find main -printf "%U\\n"; pwd',
                                  CPP17, "c++17", "4\nbob 3\nann 5\nbob 4\ncid -1\n")
    assert (status, err) == (0, "")
    assert out.splitlines() == ["ann 5", "bob 7", "cid -1", "7", "10001", "10001", "/work"]


def test_a_cpp20_program_compiles_and_answers_and_needs_cpp20(engine):
    status, out, err = in_sandbox(engine, COMPILE_AND_RUN, CPP20, "c++20", "1 2 3 4 5\n")
    assert (status, out, err) == (0, "18 5 span\n", "")
    status, out, err = in_sandbox(engine, COMPILE_AND_RUN, CPP20, "c++17", "1\n")
    assert status == 90 and "concept" in err  # the same program is not C++17: the flag is what decides


@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_bits_stdcpp_comes_precompiled_for_the_sandboxs_flags(engine, std):
    # -H lists the headers read; a used PCH is marked "!", a rejected one "x".
    status, _, err = in_sandbox(engine, f'cd /work && printf "%s" "$1" > main.cpp && g++ -std={std} {FLAGS} -H '
                                        '-Winvalid-pch -fsyntax-only main.cpp', CPP17)
    assert status == 0, err
    assert f"! /usr/include/x86_64-linux-gnu/c++/12/bits/stdc++.h.gch/{std}.gch" in err.splitlines()


# "Theatre Square" (n m a -> ceil(n/a) * ceil(m/a)), the accepted program of each language
# (docs/notes: i23 research 6.5): the last two cases overflow 32-bit integers and doubles.
THEATRE_SQUARE = {
    "cpp": r"""
#include <bits/stdc++.h>
using namespace std;
int main() {
    long long n, m, a;
    cin >> n >> m >> a;
    cout << ((n + a - 1) / a) * ((m + a - 1) / a) << "\n";
}
""",
    "cpp20": r"""
#include <concepts>
#include <iostream>
template <std::integral T> T ceil_div(T x, T y) { return (x + y - 1) / y; }
int main() { long long n, m, a; std::cin >> n >> m >> a; std::cout << ceil_div(n, a) * ceil_div(m, a) << '\n'; }
""",
    "java": r"""
import java.io.*;
import java.util.*;

public class Main {
    public static void main(String[] args) throws IOException {
        StringTokenizer st = new StringTokenizer(new BufferedReader(new InputStreamReader(System.in)).readLine());
        long n = Long.parseLong(st.nextToken()), m = Long.parseLong(st.nextToken()), a = Long.parseLong(st.nextToken());
        System.out.println(((n + a - 1) / a) * ((m + a - 1) / a));
    }
}
""",
    "javascript": r"""
const [n, m, a] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(BigInt);
console.log((((n + a - 1n) / a) * ((m + a - 1n) / a)).toString());
""",
    "go": r"""
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	var n, m, a int64
	fmt.Fscan(bufio.NewReader(os.Stdin), &n, &m, &a)
	fmt.Println((n + a - 1) / a * ((m + a - 1) / a))
}
""",
    "rust": r"""
use std::io::{self, Read};
fn main() {
    let mut s = String::new();
    io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (n, m, a) = (v[0], v[1], v[2]);
    println!("{}", ((n + a - 1) / a) * ((m + a - 1) / a));
}
""",
}
THEATRE_CASES = {"6 6 4\n": "4", "1000000000 1000000000 1\n": "1000000000000000000",
                 "999999999 999999999 1\n": "999999998000000001", "1 1 1\n": "1"}


def compile_and_run(lang: Language, source: str, inputs, then: str = "") -> str:
    """A script that writes $1 to /work/`source`, compiles (or checks) it and runs
    it on each input with the table's argv and environment (exit 90: the compile
    failed; 91: a run did), then runs `then`."""
    env = shlex.join(["env", *(f"{key}={value}" for key, value in lang.env.items())])
    lines = [f'cd /work && printf "%s" "$1" > {shlex.quote(source)}']
    first = lang.compile or lang.check
    if first is not None:
        lines.append(f"{env} {shlex.join(Language.argv(first, source))} || exit 90")
    for given in inputs:
        lines.append(f"printf %s {shlex.quote(given)} | {env} {shlex.join(Language.argv(lang.run, source))} || exit 91")
    return "\n".join([*lines, then])


@pytest.mark.parametrize("name", sorted(THEATRE_SQUARE))
def test_each_languages_program_compiles_with_the_tables_argv_and_answers_every_case(engine, name):
    lang = language(name)
    code = THEATRE_SQUARE[name]
    status, out, err = in_sandbox(engine, compile_and_run(lang, lang.source_name(code), THEATRE_CASES, "id -u"),
                                  code, image=language_tag(lang.image.removeprefix("rewardbox/")))
    assert (status, out.splitlines()) == (0, [*THEATRE_CASES.values(), "10001"]), err


VERSIONS = {  # what docs/images.md says each image holds
    "java": ("java -version 2>&1 | head -n 1", 'openjdk version "17.'),
    "javascript": ("node --version", "v18."),
    "go": ("go version", "go version go1.19."),
    "rust": ("rustc --version", "rustc 1.85."),
}


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_each_toolchain_is_the_version_documented(engine, name):
    command, wanted = VERSIONS[name]
    status, out, err = in_sandbox(engine, command, image=language_tag(name))
    assert status == 0 and out.startswith(wanted), (out, err)


def test_go_1_19_has_no_min_builtin_a_documented_limit(engine):
    go = language("go")
    code = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(min(2, 1)) }\n"
    status, _, err = in_sandbox(engine, compile_and_run(go, "main.go", []), code, image=language_tag("go"))
    assert status == 90 and "undefined: min" in err, err


# What each toolchain leaves in /work and /tmp (top level) after a compile and a run: the root is
# read-only, so these are the only places it could write, and what it writes there is known.
LEFT = {
    "cpp": ({"main", "main.cpp"}, set()),
    "java": ({"Main.class", "Main.java"}, {"hsperfdata_sandbox"}),  # javac's perf data (the runs turn it off)
    "javascript": ({"main.js"}, set()),
    "go": ({"main", "main.go"}, {"go-cache"}),  # GOCACHE; GOPATH stays unmade (GO111MODULE=off, std only)
    "rust": ({"main", "main.rs"}, set()),
}


@pytest.mark.parametrize("name", sorted(LEFT))
def test_each_toolchain_writes_only_its_files_in_work_and_tmp(engine, name):
    lang = language(name)
    code = THEATRE_SQUARE[name]
    status, out, err = in_sandbox(engine, compile_and_run(
        lang, lang.source_name(code), ["6 6 4\n"], "find /work /tmp -mindepth 1 -maxdepth 1 -printf '%h %f\\n'"),
        code, image=language_tag(name))
    assert status == 0, err
    found = {"/work": set(), "/tmp": set()}
    for line in out.splitlines()[1:]:
        folder, file = line.split(" ", 1)
        found[folder].add(file)
    assert (found["/work"], found["/tmp"]) == LEFT[name]


RECURSION = r"""
public class Main {
    static long depth(int n) { return n == 0 ? 0 : 1 + depth(n - 1); }
    public static void main(String[] args) { System.out.println(depth(Integer.parseInt(args.length > 0 ? args[0] : "100000"))); }
}
"""


def test_javas_deep_recursion_works_with_the_tables_stack_and_not_without(engine):
    java = language("java")
    run = Language.argv(java.run, "Main.java")
    without = [arg for arg in run if not arg.startswith("-Xss")]
    assert without != run  # the table raises the stack
    script = (f"cd /work && printf '%s' \"$1\" > Main.java && {shlex.join(Language.argv(java.compile, 'Main.java'))}"
              f" && {shlex.join(run)} </dev/null && {shlex.join(without)} </dev/null 2>&1 | grep -o StackOverflowError")
    status, out, err = in_sandbox(engine, script, RECURSION, image=language_tag("java"))
    assert (status, out) == (0, "100000\nStackOverflowError\n"), err


def test_javac_maps_its_classes_from_the_images_shared_archive(engine):
    # The table's compile argv with the JVM's class loading log: where javac's own classes came from.
    java = language("java")
    argv = Language.argv(java.compile, "Main.java")
    logged = [argv[0], "-J-Xlog:class+load=info:file=/tmp/classes.log", *argv[1:]]
    script = (f"cd /work && printf '%s' \"$1\" > Main.java && {shlex.join(logged)} && "
              "grep -E ' com\\.sun\\.tools\\.javac\\.(main\\.JavaCompiler|comp\\.Attr|jvm\\.Gen) ' /tmp/classes.log")
    status, out, err = in_sandbox(engine, script, THEATRE_SQUARE["java"], image=language_tag("java"))
    assert status == 0, err
    sources = {line.split(" source: ")[-1] for line in out.splitlines()}
    assert len(out.splitlines()) == 3 and sources == {"shared objects file"}, out


def test_go_builds_on_the_images_prebuilt_standard_library(engine):
    # With the table's environment and an empty GOCACHE, no package of the standard library is
    # rebuilt: not what contest code imports, nor net (Debian's build of it is cgo's, which took
    # seconds to rebuild per program, past the compile deadline under load).
    go = language("go")
    env = shlex.join(["env", *(f"{key}={value}" for key, value in go.env.items())])
    status, out, err = in_sandbox(engine, f"{env} go list -f '{{{{.ImportPath}}}} {{{{.Stale}}}}' std",
                                  image=language_tag("go"))
    assert status == 0, err
    stale = [line for line in out.splitlines() if not line.endswith(" false")]
    assert stale == [] and len(out.splitlines()) > 200, stale or out
    assert {"fmt false", "net false", "net/http false", "os/user false"} <= set(out.splitlines())


def test_the_compiler_writes_only_in_work_and_tmp(engine):
    script = """
cd /work && printf 'int main() { return 0; }\\n' > ok.cpp
for out in /work/ok /tmp/ok /ok /usr/local/bin/ok /opt/rewardbox/ok /etc/ok /usr/include/ok /var/tmp/ok; do
  if g++ ok.cpp -o "$out" 2>/dev/null; then echo "$out wrote"; else echo "$out refused"; fi
done
touch /usr/bin/g++ 2>/dev/null && echo "g++ touched" || echo "g++ untouched"
/tmp/ok 2>/dev/null && echo "ran from /tmp" || echo "/tmp is noexec"
"""
    status, out, _ = in_sandbox(engine, script)
    assert status == 0
    assert out.splitlines() == ["/work/ok wrote", "/tmp/ok wrote", "/ok refused", "/usr/local/bin/ok refused",
                                "/opt/rewardbox/ok refused", "/etc/ok refused", "/usr/include/ok refused",
                                "/var/tmp/ok refused", "g++ untouched", "/tmp is noexec"]


def test_the_root_filesystem_is_read_only_even_where_the_toolchain_lives(engine):
    status, out, _ = in_sandbox(engine, "grep -E '^[^ ]+ / ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1; "
                                        "find /usr/lib/gcc/x86_64-linux-gnu/12 -maxdepth 0 -printf '%u %M\\n'")
    assert status == 0
    assert out.splitlines() == ["ro", "root drwxr-xr-x"]


@pytest.mark.parametrize("name", IMAGES)
def test_the_image_holds_no_setuid_or_setgid_file(engine, name):
    status, out, err = in_sandbox(engine, "find / -xdev -perm /6000 -type f 2>/dev/null; echo done",
                                  image=language_tag(name))
    assert (status, out) == (0, "done\n"), err


def test_the_packages_documentation_is_left_out_but_their_copyright(engine):
    status, out, err = in_sandbox(engine, "find /usr/share/doc /usr/share/man /usr/share/info /usr/share/locale "
                                          "-type f ! -name copyright 2>/dev/null; "
                                          "test -f /usr/share/doc/binutils/copyright && echo copyright")
    assert (status, out) == (0, "copyright\n"), err


# Each toolchain's own packages as the label lists them (name=version): the version asked for.
TOOLCHAIN_DEBS = {
    "cpp": ("g++-12=12.2.0-14+deb12u1", "libstdc++-12-dev=12.2.0-14+deb12u1"),
    "java": ("openjdk-17-jdk-headless=17.", "openjdk-17-jre-headless=17.", "ca-certificates-java="),
    "javascript": ("nodejs=18.", "libnode108=18."),
    "go": ("golang-1.19-go=1.19.", "golang-1.19-src=1.19.", "golang-go="),
    "rust": ("rustc-web=1.85.", "libstd-rust-web-dev=1.85.", "gcc="),  # gcc: rustc links with cc
}


@pytest.mark.parametrize("name", IMAGES)
def test_the_labels_say_what_the_image_is_built_of(engine, name):
    tag = language_tag(name)
    require(engine, tag)
    client = docker.from_env()
    try:
        config = client.api.inspect_image(tag)["Config"]
    finally:
        client.close()
    labels = config["Labels"]
    assert (labels["rewardbox.image"], labels["rewardbox.language"]) == (name, name)
    assert labels["rewardbox.from"] == image_tag()
    assert labels["rewardbox.harness"] == context_digest()  # the sandbox image's, inherited
    debs = json.loads(labels["rewardbox.debs"])
    assert all(any(deb.startswith(wanted) for deb in debs) for wanted in TOOLCHAIN_DEBS[name]), debs
    assert config["User"] == "10001:10001" and config["WorkingDir"] == "/work"


def rewardbox_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rewardbox", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"rewardbox {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.parametrize("name", IMAGES)
def test_the_build_is_up_to_date_and_the_list_shows_the_image(engine, name):
    tag = language_tag(name)
    again = rewardbox_cli("image", "build", "--language", name)
    assert again.stdout.strip() == tag and "up to date" in again.stderr
    rows = {line.split()[0]: line for line in rewardbox_cli("image", "list").stdout.splitlines()[1:]}
    assert f"{context_digest()} (current)" in rows[tag]
    assert {f"deb:{package}" for package in LANGUAGE_IMAGES[name].packages} <= set(rows[tag].split())
