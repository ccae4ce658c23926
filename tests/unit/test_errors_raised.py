"""Every failure class the sandbox declares is raised somewhere in the
packages: an exported exception that nothing raises (as `InvalidRequest` was)
only invites handlers for what never happens."""

import inspect
import re
from pathlib import Path

import pytest

from rewardbox.sandbox import errors

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for folder in ("sandbox", "rewards", "rewardbox", "images") for p in (ROOT / folder).rglob("*.py")]
DECLARED = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.SandboxError)]


@pytest.mark.parametrize("cls", [c for c in DECLARED if c is not errors.SandboxError], ids=lambda c: c.__name__)
def test_each_declared_failure_is_raised(cls):
    raised = re.compile(rf"raise {cls.__name__}\(")
    assert any(raised.search(path.read_text()) for path in SOURCES), f"nothing raises {cls.__name__}"
