"""(b) Parsing a label raises nothing but `LabelError`, whatever the label, in
bounded time per byte."""

import inspect

from hypothesis import given

from rewardbox.rewards import labels as label_module
from rewardbox.rewards.labels import LabelError, MathLabel, parse_label
from tests.fuzz.strategies import CpuTimer, examples, label_budget_s, labels


@examples(250)
@given(raw=labels)
def test_parse_label_raises_only_label_error(raw):
    label = None
    with CpuTimer() as timer:
        try:
            label = parse_uncached(raw)
        except LabelError as exc:
            assert str(exc)

    assert timer.elapsed <= label_budget_s(raw), f"{timer.elapsed:.3f} s CPU to parse the label"
    if label is not None:
        assert label.kind in ("pytest", "asserts", "check", "stdio", "call", "math")
        if not isinstance(label, MathLabel):
            assert label.expected.total > 0


def parse_uncached(raw):
    """`parse_label` without the process's label cache (a hit would hide the
    time a parse takes, and make a slow label fail only once)."""
    if "cache" in inspect.signature(parse_label).parameters and hasattr(label_module, "LabelCache"):
        return parse_label(raw, cache=label_module.LabelCache())
    return parse_label(raw)
