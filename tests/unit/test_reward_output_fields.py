"""`RewardOutput`'s typed fields: what every consumer reads (verdict, test
counts, duration, a composite's parts) is a field, not a metadata key; the JSON
view (`details()`) keeps the keys users saw before."""

from typing import get_type_hints

from rewardbox.rewards import CodeReward, CompositeReward, FunctionReward, RewardOutput
from rewardbox.rewards.logs import sample_logs
from rewardbox.sandbox import Outcome, Verdict

P, F = Outcome.PASSED, Outcome.FAILED
LABEL = {"pytest": "from solution import f\n\ndef test_a():\n    assert f() == 1\n\ndef test_b():\n    assert f() == 2\n"}
COMPLETION = "```python\ndef f():\n    return 1\n```"


def test_the_fields_are_declared_with_their_types():
    hints = get_type_hints(RewardOutput)
    assert hints["verdict"] == Verdict | None
    assert hints["passed"] == hints["total"] == int | None
    assert hints["duration_s"] == float | None
    assert hints["components"] == dict[str, RewardOutput]


def test_a_code_reward_fills_the_fields_and_leaves_metadata_free_form(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.FAILED, ("test_a", P), ("test_b", F), duration_s=0.25))
    out = CodeReward(sandbox=box)(COMPLETION, LABEL)
    assert out.verdict is Verdict.FAILED  # the enum, not its word
    assert (out.passed, out.total, out.duration_s) == (1, 2, 0.25)
    assert not {"verdict", "passed", "total", "duration_s"} & set(out.metadata)
    assert out.metadata["kind"] == "pytest"
    # What the CLI and the service show is unchanged: the words and numbers, flat.
    shown = out.details()
    assert (shown["verdict"], shown["passed"], shown["total"], shown["duration_s"]) == ("failed", 1, 2, 0.25)
    assert [t["outcome"] for t in shown["tests"]] == ["passed", "failed"]


def test_a_composites_parts_are_reachable_as_outputs(fake_sandbox, result):
    box = fake_sandbox(result(Verdict.PASSED, ("test_a", P), ("test_b", P), duration_s=0.5))
    length = FunctionReward(lambda completion: 0.5, name="length")
    out = CompositeReward([(CodeReward(sandbox=box), 3), (length, 1)])(COMPLETION, LABEL)
    code = out.components["code"]
    assert isinstance(code, RewardOutput)
    assert (code.verdict, code.passed, code.total, code.duration_s) == (Verdict.PASSED, 2, 2, 0.5)
    assert out.components["length"].reward == 0.5
    assert out.verdict is Verdict.PASSED and out.passed is None  # the composite's own: the first part's verdict
    assert (out.first("passed"), out.first("duration_s")) == (2, 0.5)
    assert sample_logs(out)["sandbox_latency_s"] == 0.5
    assert out.details()["components"]["code"]["metadata"]["verdict"] == "passed"


def test_outputs_built_with_metadata_keys_are_read_the_same():
    out = RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "passed", "passed": 3, "total": 3,
                                                        "duration_s": 1, "why": "ok"})
    assert (out.verdict, out.passed, out.total, out.duration_s) == (Verdict.PASSED, 3, 3, 1.0)
    assert out.metadata == {"why": "ok"}
    # A value of another type is a reward's own free-form data: it stays where it was put.
    odd = RewardOutput(reward=1.0, score=1.0, metadata={"verdict": "great", "passed": True, "total": "3"})
    assert (odd.verdict, odd.passed, odd.total) == (None, None, None)
    assert odd.metadata == {"verdict": "great", "passed": True, "total": "3"}
    assert odd.details()["verdict"] == "great"
