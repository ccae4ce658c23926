"""Each request runs in its language's image, on the user's paths: the
session's sandbox (any mode, runc or gVisor) for Python and C++ side by side,
`images=` / `language_images` naming another image, a missing one unscorable
with its build command. /work executes a compiled binary only in a toolchain
image's container: Python's keeps it noexec."""

import uuid

import docker
import pytest

from rewardbox.rewards import CodeReward
from rewardbox.rewards.base import Sample
from rewardbox.sandbox import ImageMissing, RunRequest, Sandbox, Verdict
from rewardbox.sandbox.languages import default_image

CPP = '#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n'
PY = "a, b = map(int, input().split())\nprint(a + b)\n"
LABEL = {"inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42\n"]}
# A shell script written to /work and executed from there: what a compiled binary needs.
EXEC_FROM_WORK = ("import os, subprocess\nopen('run.sh', 'w').write('#!/bin/sh\\necho ran\\n')\nos.chmod('run.sh', 0o755)\n"
                  "try:\n    print(subprocess.run(['./run.sh'], capture_output=True, text=True).stdout.strip())\n"
                  "except PermissionError:\n    print('noexec')\n")


def test_python_and_cpp_samples_side_by_side_each_in_its_image(code_reward):
    completions = [f"```cpp\n{CPP}```", f"```python\n{PY}```"] * 3
    labels = [{**LABEL, "language": "cpp"}, LABEL] * 3

    outputs = code_reward.score_many(Sample(completion=c, label=label) for c, label in zip(completions, labels))

    assert [(o.reward, o.verdict) for o in outputs] == [(1.0, Verdict.PASSED)] * 6


def test_work_executes_only_in_a_toolchain_image(sandbox):
    python = sandbox.run(RunRequest(files={"main.py": EXEC_FROM_WORK}, program="main.py"))
    assert (python.verdict, python.stdout) == (Verdict.PASSED, "noexec\n")
    cpp = sandbox.run(RunRequest(files={"main.cpp": CPP}, program="main.cpp", stdin="2 3\n", language="cpp"))
    assert (cpp.verdict, cpp.stdout, cpp.compile is not None and cpp.compile.ok) == (Verdict.PASSED, "5\n", True)


@pytest.fixture
def cpp_alias():
    """The C++ image under another name, as a registry's copy would be."""
    client = docker.from_env()
    alias = f"rewardbox-test/cpp-alias:{uuid.uuid4().hex[:8]}"
    client.images.get(default_image("cpp")).tag(alias)
    yield alias
    client.images.remove(alias)
    client.close()


def test_images_names_another_image_for_a_language(cpp_alias):
    missing = f"rewardbox-test/cpp-missing:{uuid.uuid4().hex[:8]}"
    with Sandbox(max_containers=1, images={"c++": cpp_alias}) as box:
        assert box.image_for("cpp") == cpp_alias and box.image_for("cpp20") == default_image("cpp20")
        g = CodeReward(box).grade(f"```cpp\n{CPP}```", {**LABEL, "language": "cpp"})
        assert (g.reward, g.verdict) == (1.0, Verdict.PASSED)
    with Sandbox(max_containers=1, images={"cpp": missing}) as box:
        with pytest.raises(ImageMissing, match=missing):
            box.run(RunRequest(files={"main.cpp": CPP}, program="main.cpp", language="cpp"))
        g = CodeReward(box).grade(f"```cpp\n{CPP}```", {**LABEL, "language": "cpp"})
        # The dataset's need, not the model's fault: no reward, and the way to get the image.
        assert (g.reward, g.verdict) == (None, None)
        assert missing in (g.error or "") and "is not on the Docker engine" in (g.error or "")
