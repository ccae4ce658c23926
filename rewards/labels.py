"""Labels: how to check a completion, as datasets ship them.

A label is a JSON object (or a JSON string of one). Its format is told by an
explicit `"kind"` or by its keys; each format turns a completion's code into a
`RunRequest`. A label that cannot be used is the dataset's fault: `LabelError`,
never a penalty for the model.
"""

import json
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

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


class MathLabel(BaseModel):
    """`"42"`, `42` or `{"answer": "\\frac{1}{2}"}`: the final answer to a math problem."""

    model_config = ConfigDict(frozen=True)

    kind: str = "math"
    answer: str

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


Label = PytestLabel | MathLabel
_KINDS: dict[str, type[BaseModel]] = {"pytest": PytestLabel, "math": MathLabel}


def parse_label(raw: Any) -> Label:
    """A label from a dataset's label column: an object, a JSON string of one,
    or a bare math answer.

    >>> parse_label('{"pytest": "def test_a(): pass"}').kind
    'pytest'
    >>> parse_label("\\\\frac{1}{2}").answer, parse_label(42).answer, parse_label('"7"').answer
    ('\\\\frac{1}{2}', '42', '7')
    >>> try:
    ...     parse_label({"kind": "nope"})
    ... except LabelError as exc:
    ...     print(exc)
    unknown label kind 'nope' (known: math, pytest)
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            if raw.lstrip().startswith(("{", "[")):
                raise LabelError(f"label is not valid JSON: {exc}") from None
            raw = {"answer": raw}  # a bare answer, e.g. \\frac{1}{2}
    if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
        raw = {"answer": raw}
    if not isinstance(raw, dict):
        raise LabelError(f"label must be a JSON object or an answer, got {type(raw).__name__}")
    kind = raw.get("kind") or _kind_from_keys(raw)
    if not isinstance(kind, str) or kind not in _KINDS:
        raise LabelError(f"unknown label kind {kind!r} (known: {', '.join(sorted(_KINDS))})"
                         if kind else f"cannot tell the label's format from its keys {sorted(raw)}")
    try:
        label = _KINDS[kind].model_validate({**raw, "kind": kind})
    except ValueError as exc:
        raise LabelError(f"bad {kind} label: {exc}") from None
    if isinstance(label, PytestLabel) and label.expected.total == 0:
        raise LabelError(f"the {kind} label holds no tests")
    return label


def _kind_from_keys(raw: dict[str, Any]) -> str | None:
    if "pytest" in raw:
        return "pytest"
    if "answer" in raw:
        return "math"
    return None
