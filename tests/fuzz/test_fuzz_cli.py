"""(d) The CLI's line reader: `rewardbox score` on files with bad lines
(invalid UTF-8, deep JSON, non-objects, odd records) exits 0, 2 or 3, never
with an exception, and writes exactly one JSON line per non-blank input line,
in order."""

import json
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import assume, given
from hypothesis import strategies as st

from rewardbox import cli
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import configured_registry
from rewardbox.rewards.safe_json import MAX_JSON_DEPTH, json_depth
from tests.fuzz.strategies import FuzzSandbox, answers, completions, examples, json_values, jsonable, labels, prompts

# A valid record, its id the line's number (checked in the output).
records = st.fixed_dictionaries({"completion": completions | st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "user"]), "content": completions | json_values}), max_size=3)},
    optional={"label": labels.filter(jsonable), "prompt": prompts})
odd_lines = st.one_of(
    st.binary(max_size=60),  # invalid UTF-8 and control bytes
    st.sampled_from([b"\xff\xfe", b"\xef\xbb\xbf{}", b"\xed\xa0\x80", b"\xc0\xaf", b"{\"completion\": \"\xff\"}",
                     b"null", b"[]", b"42", b'"text"', b"true", b"{}", b'{"completion": null}', b'{"completion": 1e999}',
                     b"NaN", b'{"id": NaN, "completion": "x"}', b'{"id": [1], "completion": "x"}',
                     b'{"completion": "x", "completion": 3}', b"\x00", b"{" * 10_000, b"[" * 100_000 + b"]" * 100_000,
                     b'{"completion": "x", "label": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                     b'{"completion": "x", "id": ' + b"9" * 5000 + b"}"]),
    json_values.map(lambda v: json.dumps(v).encode()),
)
blank_lines = st.sampled_from([b"", b" ", b"\t", b"  \t  "])
line_kinds = st.lists(st.one_of(records.map(lambda r: ("record", r)), odd_lines.map(lambda b: ("odd", b)),
                                blank_lines.map(lambda b: ("blank", b))), max_size=8)
# The class `score` makes its sandbox with (it has changed name before).
_SANDBOX_CLASS = next(name for name in ("StoppableSandbox", "LazySandbox") if hasattr(cli, name))
_SEPARATORS = ("\r", "\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


class StubMath(Reward):
    """The math reward without its worker processes (one registry per run)."""

    name = "math"

    def score(self, sample: Sample) -> RewardOutput:
        return RewardOutput(reward=0.0, score=0.0, metadata={"verdict": "failed"})


@examples(80)
@given(lines=line_kinds, answered=st.lists(answers, min_size=1, max_size=3), final_newline=st.booleans())
def test_score_answers_every_line_in_order(lines, answered, final_newline):
    raw, expected = [], []  # expected: the id of a record line, or None for an odd one
    for number, (kind, value) in enumerate(lines, 1):
        if kind == "record":
            line = json.dumps({**value, "id": number})
            # A record nested past the line reader's limit is an odd line (answered, its id unread).
            expected.append(number if json_depth(line) <= MAX_JSON_DEPTH else None)
            raw.append(line.encode())
        else:
            raw.append(value.replace(b"\n", b"").replace(b"\r", b""))
            text = raw[-1].decode("utf-8", "replace")
            assume(not any(sep in text for sep in _SEPARATORS))  # where a "line" ends is not the question here
            if text.strip():
                expected.append(None)
    content = b"\n".join(raw) + (b"\n" if final_newline else b"")
    sandbox = FuzzSandbox(*answered)

    def registry(sandbox=None, policy=None, limits=None):
        reg = configured_registry(sandbox=sandbox, policy=policy, limits=limits)
        reg.register("math", StubMath(), replace=True)
        return reg

    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch.object(cli, _SANDBOX_CLASS, lambda **_: sandbox), \
            mock.patch.object(cli, "configured_registry", registry):
        source, out = Path(tmp, "in.jsonl"), Path(tmp, "out.jsonl")
        source.write_bytes(content)
        status = cli.main(["score", str(source), "-o", str(out), "--no-progress"])
        written = out.read_bytes().decode("utf-8") if out.exists() else ""

    assert status in (0, 2, 3)
    if status == 2:
        return  # the run could not start: nothing is scored
    results = [json.loads(line) for line in written.splitlines()]
    assert len(results) == len(expected)
    for result, sample_id in zip(results, expected):
        if sample_id is not None:
            assert result["id"] == sample_id
        assert set(result) >= {"id", "reward", "score", "verdict", "error"}
