"""The README's Python snippets run as a pip user would paste them.

The first ```python block of README.md, and the one of its "Other languages"
section (a C++ program), are each run as a script in a fresh interpreter
(this test's virtualenv), from a directory outside the checkout, and must
print the reward their comment promises, leaving no container behind.
"""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The snippet promises, in its last line's comment, what it prints.
PRINTED = "1.0 passed"
# "A ten-line Python snippet" (issue 19): room for blank lines, not for a tutorial.
MAX_LINES = 12


def first_python_block(markdown: str, section: str | None = None) -> str:
    """The body of the first fenced block tagged `python` (in `section`, a `## ` heading, when given)."""
    if section is not None:
        markdown = markdown.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"^```python\n(.*?)^```$", markdown, re.MULTILINE | re.DOTALL)
    assert match, "README.md holds no ```python block"
    return match.group(1)


def test_first_python_block_is_found_without_the_fences():
    text = "intro\n```console\n$ rewardbox\n```\n```python\nprint(1)\n```\n```python\nprint(2)\n```\n"
    assert first_python_block(text) == "print(1)\n"


@pytest.mark.parametrize("section", [None, "Other languages"])
def test_the_readme_snippet_scores_one_completion(tmp_path, section):
    snippet = first_python_block((ROOT / "README.md").read_text(), section)
    assert len(snippet.splitlines()) <= MAX_LINES, snippet
    assert re.search(r"^from rewardbox import ", snippet, re.MULTILINE), "the snippet imports the public API"
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    # The user's settings must not change what the snippet promises.
    env = {key: value for key, value in os.environ.items() if not key.startswith("REWARDBOX_")}
    process = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, f"the snippet failed:\n{stderr}"
    assert stdout.strip() == PRINTED, f"stdout: {stdout!r}\nstderr: {stderr}"
    owner = f"{socket.gethostname()}:{process.pid}:"
    client = docker.from_env()
    try:
        left = [c["Id"][:12] for c in client.api.containers(all=True, filters={"label": "rewardbox"})
                if (c.get("Labels") or {}).get("rewardbox.owner", "").startswith(owner)]
    finally:
        client.close()
    assert left == [], f"the snippet left containers behind: {left}"
