"""Labels: how to check a completion, as datasets ship them.

A label is a JSON object (or a JSON string of one). Its format is told by an
explicit `"kind"` or by its keys; each format turns a completion's code into a
`RunRequest`. A label that cannot be used is the dataset's fault: `LabelError`,
never a penalty for the model.
"""

import json
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

from rewards.expected import ExpectedTests, expected_tests
from sandbox import Limits, RunRequest

SOLUTION_FILE = "solution.py"
TEST_FILE = "test_solution.py"


class LabelError(ValueError):
    """A label that cannot be used to grade anything."""


class PytestLabel(BaseModel):
    """`{"pytest": "<test module>"}`: the tests import the completion as `solution`."""

    model_config = ConfigDict(frozen=True)

    kind: str = "pytest"
    pytest: str

    @cached_property
    def expected(self) -> ExpectedTests:
        return expected_tests(self.pytest)

    def request(self, code: str, limits: Limits) -> RunRequest:
        return RunRequest(files={SOLUTION_FILE: code}, tests={TEST_FILE: self.pytest}, limits=limits)


Label = PytestLabel
_KINDS: dict[str, type[BaseModel]] = {"pytest": PytestLabel}


def parse_label(raw: Any) -> Label:
    """A label from a dataset's label column.

    >>> parse_label('{"pytest": "def test_a(): pass"}').kind
    'pytest'
    >>> try:
    ...     parse_label({"kind": "nope"})
    ... except LabelError as exc:
    ...     print(exc)
    unknown label kind 'nope' (known: pytest)
    """
    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise LabelError(f"label is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise LabelError(f"label must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind") or next((k for k in _KINDS if k in raw), None)
    if not isinstance(kind, str) or kind not in _KINDS:
        raise LabelError(f"unknown label kind {kind!r} (known: {', '.join(sorted(_KINDS))})"
                         if kind else f"cannot tell the label's format from its keys {sorted(raw)}")
    try:
        label = _KINDS[kind].model_validate({**raw, "kind": kind})
    except ValueError as exc:
        raise LabelError(f"bad {kind} label: {exc}") from None
    if label.expected.total == 0:
        raise LabelError(f"the {kind} label holds no tests")
    return label
