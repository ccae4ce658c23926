"""The C++ image (`rewardbox image build --language cpp`) on a real engine.

Every container here is made by the sandbox's own `DockerEngine.create`, with
the hardening of a run (read-only root, tmpfs /work and noexec /tmp, no
capabilities, no network, uid 10001, every limit): g++ compiles C++17 and
C++20 programs in /work and their binaries answer on stdin; bits/stdc++.h
comes precompiled for the sandbox's flags; the compiler cannot write
anywhere else; the image holds no setuid file. The image is built by
`make language-images` (a prerequisite of `make test`) or
`rewardbox image build --language cpp`.

A run's container mounts /work noexec today (Docker's default for a tmpfs,
which the engine keeps), so a compiled binary cannot run there: the tests
that run one use `exec_engine`, the engine's own spec with `exec` added to
/work's options and nothing else changed, until the engine mounts /work so
for compiled languages.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import docker
import pytest

from rewardbox.images import context_digest, image_tag, language_tag
from rewardbox.sandbox.engine import WORK_DIR, DockerEngine
from rewardbox.sandbox.models import Limits

TAG = language_tag("cpp")
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
    try:
        engine.require_image(TAG)
    except Exception as exc:  # a missing image is an error of the run, never a skip
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def exec_engine():
    """A DockerEngine whose containers are a run's with /work mounted exec."""
    engine = DockerEngine(retry_s=20)
    api = engine._api
    create_host_config = api.create_host_config

    def with_exec_work(**options):
        tmpfs = dict(options["tmpfs"])
        if "exec" not in tmpfs[WORK_DIR].split(","):
            tmpfs[WORK_DIR] += ",exec"
        return create_host_config(**{**options, "tmpfs": tmpfs})

    api.create_host_config = with_exec_work
    yield engine
    engine.close()


def in_sandbox(engine, script: str, *args: str, limits: Limits | None = None, timeout_s: float = 120):
    """`sh -c script sh args...` as the sandbox user in a container made like
    a run's (DockerEngine.create); (exit status, stdout, stderr)."""
    limits = limits or Limits(timeout_s=timeout_s)
    name = f"rewardbox-test-cpp-{uuid.uuid4().hex[:10]}"
    container = engine.create(TAG, limits, name, runtime=RUNTIME, gvisor=RUNTIME == "runsc",
                              command=["sh", "-c", script, "sh", *args], lifetime_s=timeout_s)
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


def test_a_cpp17_program_compiles_in_work_and_answers_on_stdin(exec_engine):
    status, out, err = in_sandbox(exec_engine, COMPILE_AND_RUN + 'id -u; find main -printf "%U\\n"; pwd',
                                  CPP17, "c++17", "4\nbob 3\nann 5\nbob 4\ncid -1\n")
    assert (status, err) == (0, "")
    assert out.splitlines() == ["ann 5", "bob 7", "cid -1", "7", "10001", "10001", "/work"]


def test_a_cpp20_program_compiles_and_answers_and_needs_cpp20(exec_engine):
    status, out, err = in_sandbox(exec_engine, COMPILE_AND_RUN, CPP20, "c++20", "1 2 3 4 5\n")
    assert (status, out, err) == (0, "18 5 span\n", "")
    status, out, err = in_sandbox(exec_engine, COMPILE_AND_RUN, CPP20, "c++17", "1\n")
    assert status == 90 and "concept" in err  # the same program is not C++17: the flag is what decides


@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_bits_stdcpp_comes_precompiled_for_the_sandboxs_flags(engine, std):
    # -H lists the headers read; a used PCH is marked "!", a rejected one "x".
    status, _, err = in_sandbox(engine, f'cd /work && printf "%s" "$1" > main.cpp && g++ -std={std} {FLAGS} -H '
                                        '-Winvalid-pch -fsyntax-only main.cpp', CPP17)
    assert status == 0, err
    assert f"! /usr/include/x86_64-linux-gnu/c++/12/bits/stdc++.h.gch/{std}.gch" in err.splitlines()


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


def test_the_image_holds_no_setuid_or_setgid_file(engine):
    status, out, err = in_sandbox(engine, "find / -xdev -perm /6000 -type f 2>/dev/null; echo done")
    assert (status, out) == (0, "done\n"), err


def test_the_packages_documentation_is_left_out_but_their_copyright(engine):
    status, out, err = in_sandbox(engine, "find /usr/share/doc /usr/share/man /usr/share/info /usr/share/locale "
                                          "-type f ! -name copyright 2>/dev/null; "
                                          "test -f /usr/share/doc/binutils/copyright && echo copyright")
    assert (status, out) == (0, "copyright\n"), err


def test_the_labels_say_what_the_image_is_built_of(engine):
    client = docker.from_env()
    try:
        config = client.api.inspect_image(TAG)["Config"]
    finally:
        client.close()
    labels = config["Labels"]
    assert (labels["rewardbox.image"], labels["rewardbox.language"]) == ("cpp", "cpp")
    assert labels["rewardbox.from"] == image_tag()
    assert labels["rewardbox.harness"] == context_digest()  # the sandbox image's, inherited
    debs = json.loads(labels["rewardbox.debs"])
    assert {"g++-12=12.2.0-14+deb12u1", "libstdc++-12-dev=12.2.0-14+deb12u1"} <= set(debs)
    assert config["User"] == "10001:10001" and config["WorkingDir"] == "/work"


def rewardbox_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rewardbox", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"rewardbox {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def test_the_build_is_up_to_date_and_the_list_shows_the_image(engine):
    again = rewardbox_cli("image", "build", "--language", "cpp")
    assert again.stdout.strip() == TAG and "up to date" in again.stderr
    rows = {line.split()[0]: line for line in rewardbox_cli("image", "list").stdout.splitlines()[1:]}
    assert f"{context_digest()} (current)" in rows[TAG] and "deb:g++-12" in rows[TAG].split()
