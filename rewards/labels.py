"""Labels: how to check a completion, as datasets ship them (docs/labels.md).

A label is a JSON object (or a JSON string of one), or a bare math answer. Its
format is told by an explicit `"kind"` or by its keys. Code labels turn a
completion into a `RunRequest`; a label that cannot be used is the dataset's
fault: `LabelError`, never a penalty for the model.

Only the `pytest` format runs the completion in the same process as the tests.
The generated formats (asserts, check, stdio, call) keep the completion in
processes of its own: values cross to the tests as plain data, and the expected
values travel as `test_data`, which the completion cannot read.
"""

import json
import sys
import threading
from collections import OrderedDict
from typing import Any

from pydantic import ValidationError

from rewardbox.rewards.label_formats import (
    TEST_FILE,
    AssertLabel,
    CallLabel,
    CheckLabel,
    CodeLabel,
    Label,
    LabelError,
    MathLabel,
    PytestLabel,
    StdioLabel,
)
from rewardbox.rewards.safe_json import MAX_JSON_DEPTH, JSONTooDeep, deeper_than, loads
from rewardbox.sandbox.protocol import SOLUTION_FILE

__all__ = ["LABEL_CACHE", "MAX_BARE_ANSWER_CHARS", "SOLUTION_FILE", "TEST_FILE", "AssertLabel", "CallLabel",
           "CheckLabel", "CodeLabel", "Label", "LabelCache", "LabelError", "MathLabel", "PytestLabel", "StdioLabel",
           "parse_label"]

MAX_BARE_ANSWER_CHARS = 1000

_KINDS: dict[str, type[Label]] = {
    "asserts": AssertLabel, "call": CallLabel, "check": CheckLabel, "math": MathLabel,
    "pytest": PytestLabel, "stdio": StdioLabel,
}


def parse_label(raw: Any, cache: "LabelCache | None" = None) -> Label:
    """A label from a dataset's label column: an object, a JSON string of one,
    or a bare math answer. Parsed labels are kept in `cache` (by default one
    shared by the process): a GRPO group shares one label.

    >>> parse_label('{"pytest": "def test_a(): pass"}').kind
    'pytest'
    >>> parse_label({"tests": ["assert f(1) == 2", "assert f(2) == 3"]}).expected.total
    2
    >>> parse_label({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}).kind
    'call'
    >>> parse_label("\\\\frac{1}{2}").answer, parse_label(42).answer, parse_label('"7"').answer
    ('\\\\frac{1}{2}', '42', '7')
    >>> try:
    ...     parse_label({"kind": "nope"})
    ... except LabelError as exc:
    ...     print(exc)
    unknown label kind 'nope' (known: asserts, call, check, math, pytest, stdio)
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) and deeper_than(raw, MAX_JSON_DEPTH):
        raise LabelError(f"label nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        # The label's own fields in sorted order (a group's samples share it however
        # each spelled it), what they hold as given: a dict argument's key order is
        # what a function iterating it sees.
        fields = {k: raw[k] for k in sorted(raw)} if isinstance(raw, dict) and all(isinstance(k, str) for k in raw) \
            else raw
        key = raw if isinstance(raw, str) else "\0" + json.dumps(fields)
    except (TypeError, ValueError):  # not JSON data (numpy values, say): parse it every time
        return _parse_label(raw)
    return (LABEL_CACHE if cache is None else cache).get(key)


class LabelCache:
    """Parsed labels by their text, least recently used first out, holding at
    most `max_bytes` by an estimate of each label's footprint: its text, the
    parsed fields and the generated tests, each about the text's size. Labels
    are frozen, so one object serves every sample and thread."""

    def __init__(self, max_bytes: int = 64 << 20):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._labels: OrderedDict[str, tuple[Label, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._labels)

    def get(self, key: str) -> Label:
        """The label of `key` (its text, or NUL + the JSON of a label
        object), parsed now if it is not kept; raises `LabelError`."""
        with self._lock:
            if (hit := self._labels.get(key)) is not None:
                self._labels.move_to_end(key)
                return hit[0]
        label = _parse_label(loads(key[1:]) if key.startswith("\0") else key)
        size = 3 * sys.getsizeof(key) + 1024
        with self._lock:
            if size <= self.max_bytes and key not in self._labels:
                self._labels[key] = (label, size)
                self.bytes += size
                while self.bytes > self.max_bytes:
                    self.bytes -= self._labels.popitem(last=False)[1][1]
        return label


LABEL_CACHE = LabelCache()


def _parse_label(raw: Any) -> Label:
    """The label of `raw`; any failure to read it is a `LabelError` (the
    dataset's, never the model's), whatever shape the label has."""
    try:
        return _read_label(raw)
    except LabelError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        raise LabelError(f"label cannot be read: {type(exc).__name__}: {exc}"[:2000]) from None


def _read_label(raw: Any) -> Label:
    if isinstance(raw, str):
        raw = _from_text(raw)
    if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
        raw = {"answer": raw}
    if not isinstance(raw, dict):
        raise LabelError(f"label must be a JSON object or an answer, got {type(raw).__name__}")
    raw, nulls = _without_nulls(raw)
    raw, inner_nulls = _without_nulls(_normalize(raw))  # input_output's object, merged in
    nulls |= inner_nulls
    kind = raw.get("kind") or _kind_from_keys(raw)
    if not isinstance(kind, str) or kind not in _KINDS:
        raise LabelError(f"unknown label kind {kind!r} (known: {', '.join(sorted(_KINDS))})" if kind else
                         f"cannot tell the label's format from its keys {sorted(raw)}{_null_note(nulls)}")
    try:
        label = _KINDS[kind].model_validate({**raw, "kind": kind})
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'label'}: "
                            + ("null, and required" if e["type"] == "missing" and e["loc"] and e["loc"][0] in nulls
                               else e["msg"].removeprefix("Value error, "))
                            for e in exc.errors())
        raise LabelError(f"bad {kind} label: {reasons}") from None
    if not isinstance(label, MathLabel) and label.expected.total == 0:
        raise LabelError(f"the {kind} label holds no tests")
    return label


def _without_nulls(raw: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The label without its null-valued keys, and those keys: an optional key
    that is null reads as absent. `datasets` stores a column of dicts as one
    Arrow struct, whose rows carry every key of every row, null where the row
    had none (a check label beside asserts ones gets `"tests": null`)."""
    nulls = {k for k, v in raw.items() if v is None}
    return ({k: v for k, v in raw.items() if k not in nulls} if nulls else raw), nulls


def _null_note(nulls: set[str]) -> str:
    return f" (null, read as absent: {', '.join(sorted(map(str, nulls)))})" if nulls else ""


def _from_text(text: str) -> Any:
    try:
        return loads(text)
    except JSONTooDeep as exc:
        raise LabelError(f"label is not usable JSON: {exc}") from None
    except ValueError as exc:
        stripped = text.strip()
        if stripped.startswith(("{", "[")) or not stripped:
            raise LabelError(f"label is not valid JSON: {exc}") from None
        if "####" in stripped:
            return stripped  # a GSM8K answer: its reasoning, then "#### 72"
        if "\n" in stripped or len(stripped) > MAX_BARE_ANSWER_CHARS:
            raise LabelError(f"label is not valid JSON, nor a short answer: {exc}") from None
        return stripped  # a bare answer, e.g. \frac{1}{2}


def _normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """Other datasets' spellings of our formats."""
    if "input_output" in raw:  # APPS, TACO: a JSON string of {"inputs", "outputs", "fn_name"?}
        inner = raw["input_output"]
        if isinstance(inner, str):
            try:
                inner = loads(inner)
            except ValueError as exc:
                raise LabelError(f"input_output is not valid JSON: {exc}") from None
        if not isinstance(inner, dict):
            raise LabelError("input_output must be an object")
        raw = {**{k: v for k, v in raw.items() if k != "input_output"}, **inner}
    if "test_cases" in raw and "inputs" not in raw:  # open-r1 verification_info
        raw = _from_open_r1(raw)
    if "test_list" in raw and "tests" not in raw:  # MBPP's own columns
        imports, setup_code = raw.get("test_imports") or [], raw.get("test_setup_code") or ""  # None: absent (datasets)
        if not (isinstance(imports, list) and all(isinstance(i, str) for i in imports) and isinstance(setup_code, str)):
            raise LabelError("test_imports must be a list of strings and test_setup_code a string")
        setup = "\n".join([*imports, setup_code]).strip()
        raw = {"tests": raw["test_list"], "setup": setup, **{k: v for k, v in raw.items() if k == "kind"}}
    if "input" in raw and "output" in raw and isinstance(raw["input"], list) and "inputs" not in raw:
        raw = {**raw, "inputs": raw["input"], "outputs": raw["output"]}  # CodeContests-style singular keys
    return raw


def _from_open_r1(raw: dict[str, Any]) -> dict[str, Any]:
    cases = raw["test_cases"]
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise LabelError("test_cases must be a list of objects")
    types = {"stdin_stdout" if c.get("type") is None else c["type"] for c in cases}  # None: an Arrow struct's gap
    if types != {"stdin_stdout"}:
        raise LabelError(f"test case types {sorted(map(str, types))} are not supported (only stdin_stdout)")
    # The language goes to the stdio label, which knows the languages (an unknown one is a LabelError there).
    options: dict[str, Any] = {k: raw[k] for k in ("case_timeout_s", "float_tolerance", "compare", "language")
                               if k in raw}
    return {"kind": "stdio", "inputs": [c.get("input") for c in cases], "outputs": [c.get("output") for c in cases],
            **options}


def _kind_from_keys(raw: dict[str, Any]) -> str | None:
    if "pytest" in raw:
        return "pytest"
    if "fn_name" in raw and "inputs" in raw:
        return "call"
    if "inputs" in raw and "outputs" in raw:
        return "stdio"
    if "test" in raw and "entry_point" in raw:
        return "check"
    if "tests" in raw:
        return "asserts"
    if "answer" in raw:
        return "math"
    return None
