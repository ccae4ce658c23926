"""`rewardbox.rewards.composite` and `rewardbox.rewards.registry`: weighted mixes, `@reward`, rewards by name."""

import asyncio
import pickle
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from rewardbox.rewards import registry as registry_module
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.composite import CompositeReward
from rewardbox.rewards.format import FormatReward
from rewardbox.rewards.length import LengthReward
from rewardbox.rewards.registry import FunctionReward, Registry, UnknownRewardError, register_builtins, reward, to_output

SAMPLE = Sample(id=7, completion="print(1)", label={"answer": "1"}, prompt="P", columns={"answer": "1", "level": 3})


class Fixed(Reward):
    """Always the same output; counts its calls."""

    def __init__(self, name: str, reward: float | None, score: float | None = None, **metadata):
        self.name = name
        self.output = (RewardOutput.unscorable(metadata.pop("error", "bad label"), **metadata) if reward is None
                       else RewardOutput(reward=reward, score=reward if score is None else score, metadata=metadata))
        self.calls = 0

    def score(self, sample: Sample) -> RewardOutput:
        self.calls += 1
        return self.output


class Deferred(Reward):
    """Hands out pending futures that the test completes by hand."""

    def __init__(self, name: str):
        self.name = name
        self.futures: list[Future] = []

    def submit(self, sample: Sample) -> "Future[RewardOutput]":
        future: Future[RewardOutput] = Future()
        self.futures.append(future)
        return future


def in_thread(fn, *args) -> Future:
    """Runs `fn` on a daemon thread, so that a call that blocks by mistake fails the test instead of hanging it."""
    result: Future = Future()

    def run():
        try:
            result.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return result


# --- CompositeReward


def test_weighted_sum_with_normalised_weights():
    main = Fixed("correctness", 0.5, 0.75, verdict="failed", passed=1, total=2)
    fmt = Fixed("format", 1.0, verdict="passed")
    out = CompositeReward([(main, 9), (fmt, 1)])(SAMPLE.completion)
    assert out.reward == pytest.approx(0.9 * 0.5 + 0.1 * 1.0)
    assert out.score == pytest.approx(0.9 * 0.75 + 0.1 * 1.0)
    assert out.verdict == "failed"
    assert out.metadata["weights"] == {"correctness": pytest.approx(0.9), "format": pytest.approx(0.1)}
    assert out.details()["components"] == {  # the JSON view: as before the fields were typed
        "correctness": {"reward": 0.5, "score": 0.75, "metadata": {"verdict": "failed", "passed": 1, "total": 2}},
        "format": {"reward": 1.0, "score": 1.0, "metadata": {"verdict": "passed"}},
    }


def test_negative_rewards_mix_and_score_stays_in_range():
    out = CompositeReward([(Fixed("a", -1.0, 0.0), 1), (Fixed("b", -0.5, 0.25), 3)])("x")
    assert out.reward == pytest.approx(0.25 * -1.0 + 0.75 * -0.5)
    assert out.score == pytest.approx(0.75 * 0.25)


def test_unnormalised_weights_are_used_as_given_and_the_score_clipped():
    mix = CompositeReward([(Fixed("a", 1.0), 2), (Fixed("b", 0.5), 1)], normalize=False)
    out = mix("x")
    assert out.reward == pytest.approx(2.5)
    assert out.score == 1.0
    assert out.metadata["weights"] == {"a": 2.0, "b": 1.0}
    low = CompositeReward([(Fixed("a", 0.2), 0.5)], normalize=False)("x")
    assert (low.reward, low.score) == (pytest.approx(0.1), pytest.approx(0.1))


def test_an_unscorable_component_makes_the_sample_unscorable():
    main = Fixed("correctness", None, error="label: no tests", verdict=None)
    fmt = Fixed("format", 0.0, verdict="failed")
    out = CompositeReward([(main, 0.9), (fmt, 0.1)])("x")
    assert (out.reward, out.score) == (None, None)
    assert out.metadata["error"] == "correctness: label: no tests"
    assert out.verdict is None
    assert out.components["format"].reward == 0.0
    later = CompositeReward([(Fixed("a", 1.0, verdict="passed"), 1), (Fixed("b", None, error="bad"), 1)])("x")
    assert later.reward is None and later.metadata["error"] == "b: bad" and later.verdict == "passed"


def test_components_are_all_submitted_before_any_result_is_awaited():
    slow, fast = Deferred("slow"), Deferred("fast")
    combined = in_thread(CompositeReward([(slow, 1), (fast, 1)]).submit, SAMPLE).result(timeout=5)
    assert len(slow.futures) == len(fast.futures) == 1
    assert not combined.done()
    fast.futures[0].set_result(RewardOutput(reward=1.0, score=1.0))
    assert not combined.done()
    slow.futures[0].set_result(RewardOutput(reward=0.0, score=0.0, metadata={"verdict": "timeout"}))
    assert combined.done()
    out = combined.result(timeout=0)
    assert out.reward == 0.5 and out.verdict == "timeout"


def test_score_many_submits_the_whole_batch_first():
    slow = Deferred("slow")
    mix = CompositeReward([(slow, 1), (Fixed("f", 1.0), 1)])
    outputs = in_thread(mix.score_many, [SAMPLE] * 3)
    deadline = time.monotonic() + 5
    while len(slow.futures) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(slow.futures) == 3  # all three in flight while none has a result
    for i, future in enumerate(reversed(slow.futures)):
        future.set_result(RewardOutput(reward=float(i), score=0.0))
    assert [o.reward for o in outputs.result(timeout=5)] == [1.5, 1.0, 0.5]


def test_a_failure_of_ours_propagates_after_all_components_finish():
    broken, other = Deferred("broken"), Deferred("other")
    combined = CompositeReward([(broken, 1), (other, 1)]).submit(SAMPLE)
    broken.futures[0].set_exception(RuntimeError("engine down"))
    assert not combined.done()
    other.futures[0].set_result(RewardOutput(reward=1.0, score=1.0))
    with pytest.raises(RuntimeError, match="engine down"):
        combined.result(timeout=0)


def test_duplicate_component_names_get_suffixes():
    mix = CompositeReward([(Fixed("f", 1.0), 1), (Fixed("f", 0.0), 1), (Fixed("f#2", 0.5), 1), (Fixed("f", 0.0), 1)])
    assert [key for key, _, _ in mix.components] == ["f", "f#2", "f#2#2", "f#3"]
    assert set(mix("x").components) == {"f", "f#2", "f#2#2", "f#3"}


@pytest.mark.parametrize("components, error", [
    ([], ValueError), ([(Fixed("a", 1.0), -1)], ValueError), ([(Fixed("a", 1.0), 0), (Fixed("b", 1.0), 0)], ValueError),
    ([(Fixed("a", 1.0), float("nan"))], ValueError), ([(Fixed("a", 1.0), "1")], ValueError), ([(lambda s: 1.0, 1)], TypeError),
])
def test_invalid_compositions(components, error):
    with pytest.raises(error):
        CompositeReward(components)


def test_zero_weight_component_is_still_scored_and_logged():
    zero = Fixed("z", 0.0)
    out = CompositeReward([(Fixed("a", 1.0), 1), (zero, 0)])("x")
    assert out.reward == 1.0 and zero.calls == 1 and "z" in out.components


# --- FunctionReward and @reward


def test_only_the_named_keywords_are_passed():
    seen = {}

    def f(completion, answer, id):
        seen.update(completion=completion, answer=answer, id=id)
        return 1

    assert FunctionReward(f).score(SAMPLE).reward == 1.0
    assert seen == {"completion": "print(1)", "answer": "1", "id": 7}


def test_var_keyword_receives_everything():
    seen = {}

    def f(completion, **kwargs):
        seen.update(kwargs, completion=completion)
        return 0.0

    FunctionReward(f).score(SAMPLE)
    assert seen == {"completion": "print(1)", "prompt": "P", "label": {"answer": "1"}, "sample": SAMPLE, "id": 7,
                    "answer": "1", "level": 3}


def test_columns_never_shadow_the_sample_fields():
    seen = {}
    sample = Sample(completion="real", columns={"completion": "fake", "extra": 1})
    FunctionReward(lambda completion, extra: seen.update(completion=completion, extra=extra) or 1.0).score(sample)
    assert seen == {"completion": "real", "extra": 1}


def test_keyword_only_parameters_and_defaults():
    def f(*, label, bonus=0.5):
        return float(label) + bonus

    assert FunctionReward(f)("x", label=1).reward == 1.5
    assert FunctionReward(f)("x", label=1, bonus=0.25).reward == 1.25  # a column fills a defaulted parameter


def test_a_missing_column_is_reported_by_name():
    def f(completion, difficulty):
        return 1.0

    with pytest.raises(TypeError, match=r"\['difficulty'\]"):
        FunctionReward(f)("x")


def test_positional_only_parameters_are_refused():
    def f(completion, /):
        return 1.0

    with pytest.raises(TypeError, match="positional-only"):
        FunctionReward(f)


@pytest.mark.parametrize("value, reward, score", [
    (0.25, 0.25, 0.25), (1, 1.0, 1.0), (0, 0.0, 0.0), (-1, -1.0, 0.0), (3.0, 3.0, 1.0), (True, 1.0, 1.0),
    ({"reward": -0.5}, -0.5, 0.0), ({"reward": 2, "score": 0.4}, 2.0, 0.4), ({"reward": 0.5, "score": 0}, 0.5, 0.0),
])
def test_return_values(value, reward, score):
    out = FunctionReward(lambda completion: value)("x")
    assert (out.reward, out.score) == (reward, score)
    assert type(out.reward) is float and type(out.score) is float


def test_dict_extras_become_metadata():
    out = to_output({"reward": 1.0, "verdict": "passed", "why": "ok", "token_rewards": [0.0, 1.0]})
    assert out.metadata == {"why": "ok"} and out.verdict == "passed" and out.token_rewards == [0.0, 1.0]


def test_no_reward_returns():
    assert FunctionReward(lambda completion: None)("x").metadata["error"] == "the reward function returned None"
    out = to_output({"reward": None, "error": "label has no answer", "kind": "math"})
    assert (out.reward, out.score) == (None, None)
    assert out.metadata == {"error": "label has no answer", "kind": "math"}


def test_reward_output_passes_through():
    given = RewardOutput(reward=0.3, score=0.9, metadata={"k": 1})
    assert FunctionReward(lambda completion: given)("x") is given


@pytest.mark.parametrize("value, error", [
    ("1.0", TypeError), ([1.0], TypeError), ({"score": 1.0}, ValueError), (float("nan"), ValueError),
    (float("inf"), ValueError), ({"reward": 1.0, "score": 1.5}, ValueError), ({"reward": "high"}, TypeError),
])
def test_bad_return_values_raise(value, error):
    with pytest.raises(error):
        FunctionReward(lambda completion: value)("x")


def test_sync_exceptions_propagate():
    def broken(completion):
        raise ZeroDivisionError("bug in the reward")

    fr = FunctionReward(broken)
    with pytest.raises(ZeroDivisionError):
        fr("x")
    with pytest.raises(ZeroDivisionError):
        fr.submit(SAMPLE).result(timeout=5)


def _loop_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"reward-{name}"]


def test_async_function_runs_on_a_lazily_started_private_loop():
    loop_threads = []

    async def check_answer(completion, answer):
        await asyncio.sleep(0)
        loop_threads.append(threading.current_thread().name)
        return {"reward": float(completion == answer), "checked": True}

    fr = FunctionReward(check_answer, name="async-probe")
    assert fr.is_async and not _loop_threads("async-probe")
    out = fr("1", answer="1")
    assert (out.reward, out.metadata) == (1.0, {"checked": True})
    assert loop_threads == ["reward-async-probe"] and len(_loop_threads("async-probe")) == 1
    fr.close()
    assert not _loop_threads("async-probe")
    assert fr("2", answer="1").reward == 0.0  # restarted on demand
    fr.close()


def test_sync_function_starts_no_loop():
    fr = FunctionReward(lambda completion: 1.0, name="sync-probe")
    fr("x")
    assert not _loop_threads("sync-probe")


def test_async_exceptions_propagate_through_the_future():
    async def broken(completion):
        await asyncio.sleep(0)
        raise KeyError("bug")

    fr = FunctionReward(broken)
    with pytest.raises(KeyError):
        fr.submit(SAMPLE).result(timeout=5)
    with pytest.raises(KeyError):
        fr("x")
    fr.close()


def test_async_batch_runs_concurrently():
    in_flight, peak = [0], [0]

    async def slow(completion):
        in_flight[0] += 1  # all on one loop thread: no lock needed
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.2)
        in_flight[0] -= 1
        return 1.0

    fr = FunctionReward(slow)
    start = time.monotonic()
    outputs = fr.score_many([Sample(completion=str(i)) for i in range(20)])
    elapsed = time.monotonic() - start
    assert [o.reward for o in outputs] == [1.0] * 20
    assert peak[0] == 20
    assert elapsed < 2.0  # loose: sequential would take 4 s
    fr.close()


def test_async_reward_from_inside_a_running_loop_and_many_threads():
    async def half(completion):
        await asyncio.sleep(0.01)
        return 0.5

    fr = FunctionReward(half)

    async def caller():  # a sync call from code that already runs an event loop
        return fr("x").reward

    assert asyncio.run(caller()) == 0.5
    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(lambda i: fr(str(i)).reward, range(64))) == [0.5] * 64
    fr.close()


def test_async_callable_objects_and_sync_wrappers_are_awaited():
    class Judge:
        async def __call__(self, completion):
            return 0.75

    async def inner():
        return 0.25

    assert FunctionReward(Judge(), name="judge").is_async
    assert FunctionReward(Judge(), name="judge")("x").reward == 0.75
    wrapper = FunctionReward(lambda completion: inner(), name="wrapper")
    assert not wrapper.is_async and wrapper("x").reward == 0.25
    wrapper.close()


async def _picklable(completion):
    return 1.0


def test_function_reward_pickles_after_use():
    fr = FunctionReward(_picklable)
    assert fr("x").reward == 1.0
    clone = pickle.loads(pickle.dumps(fr))
    assert clone("y").reward == 1.0 and clone.name == "_picklable"
    fr.close()
    clone.close()


def test_decorator_forms_register_in_lower_case():
    registry = Registry()

    @reward(registry=registry)
    def Plain(completion):
        return 1.0

    @reward(name="Named_Reward", registry=registry)
    async def whatever(completion, label):
        return 0.5

    assert isinstance(Plain, FunctionReward) and Plain.name == "Plain"
    assert registry.names() == ["named_reward", "plain"]
    assert registry.get("PLAIN") is Plain and registry.get(" named_reward ") is whatever
    assert whatever("x", label=None).reward == 0.5
    assert Plain.func(completion="x") == 1.0  # the plain function stays reachable
    whatever.close()


def test_bare_decorator_uses_the_default_registry():
    @reward
    def test_registry_default_probe(completion):
        return 0.0

    assert registry_module.get("Test_Registry_Default_Probe") is test_registry_default_probe
    assert "test_registry_default_probe" in registry_module.names()


def _twin_factory():
    def twin(completion):
        return 1.0
    return twin


def test_redefinition_replaces_but_a_different_function_is_refused():
    registry = Registry()
    first = reward(_twin_factory(), registry=registry)
    second = reward(_twin_factory(), registry=registry)  # same module and qualified name: a re-run
    assert registry.get("twin") is second is not first

    def other(completion):
        return 0.0

    with pytest.raises(ValueError, match="already registered"):
        reward(other, name="twin", registry=registry)
    third = reward(other, name="TWIN", registry=registry, replace=True)
    assert registry.get("twin") is third


# --- Registry


def test_register_and_get_are_case_insensitive():
    registry = Registry()
    fixed = Fixed("mine", 1.0)
    registry.register("Mine", fixed)
    assert registry.get("MINE") is fixed and registry.get("mine") is fixed
    assert "mInE" in registry and "other" not in registry
    with pytest.raises(ValueError, match="already registered"):
        registry.register("mine", Fixed("x", 0.0))
    registry.register("MINE", Fixed("x", 0.0), replace=True)
    assert registry.get("mine") is not fixed


def test_factories_run_once_and_lazily():
    registry = Registry()
    built = []

    def factory():
        built.append(1)
        time.sleep(0.05)  # widen the window for a race
        return Fixed("lazy", 1.0)

    registry.register("lazy", factory)
    assert registry.names() == ["lazy"] and built == []
    with ThreadPoolExecutor(8) as pool:
        rewards = list(pool.map(lambda _: registry.get("Lazy"), range(8)))
    assert built == [1]
    assert all(r is rewards[0] for r in rewards)


def test_a_reward_class_is_a_factory():
    registry = Registry()
    registry.register("length", LengthReward)
    assert isinstance(registry.get("length"), LengthReward)


def test_a_factory_must_build_a_reward():
    registry = Registry()
    registry.register("bad", lambda: 1.0)
    with pytest.raises(TypeError, match="not a Reward"):
        registry.get("bad")
    with pytest.raises(TypeError):
        registry.register("worse", 1.0)


@pytest.mark.parametrize("name", ["", "  ", "a b", "a=b", "a,b", "a#2"])
def test_invalid_names(name):
    with pytest.raises(ValueError, match="invalid reward name"):
        Registry().register(name, Fixed("x", 1.0))


def test_unknown_names_list_the_known_ones():
    registry = Registry()
    registry.register("alpha", Fixed("alpha", 1.0))
    registry.register("beta", Fixed("beta", 1.0))
    for error in (KeyError, ValueError):
        with pytest.raises(error, match=r"unknown reward 'gamma'; known: alpha, beta"):
            registry.get("gamma")
    with pytest.raises(UnknownRewardError, match="known: none"):
        Registry().get("x")


@pytest.fixture
def mixable() -> Registry:
    registry = Registry()
    registry.register("correctness", Fixed("correctness", 0.5, 0.75, verdict="failed"))
    registry.register("format", Fixed("format", 1.0, verdict="passed"))
    return registry


def test_resolve_a_single_name(mixable):
    assert mixable.resolve(" Correctness ") is mixable.get("correctness")


@pytest.mark.parametrize("spec, weights", [
    ("correctness=0.9,format=0.1", {"correctness": 0.9, "format": 0.1}),
    (" Correctness = 9 , FORMAT = 1 ", {"correctness": 0.9, "format": 0.1}),
    ("correctness,format", {"correctness": 0.5, "format": 0.5}),
    ("correctness=3,format", {"correctness": 0.75, "format": 0.25}),
    ("correctness=2", {"correctness": 1.0}),
    ("format=1,format=1", {"format": 0.5, "format#2": 0.5}),
])
def test_resolve_a_composition(mixable, spec, weights):
    mix = mixable.resolve(spec)
    assert isinstance(mix, CompositeReward)
    assert {key: w for key, _, w in mix.components} == pytest.approx(weights)


def test_resolved_composition_scores(mixable):
    out = mixable.resolve("correctness=0.9,format=0.1")("x")
    assert out.reward == pytest.approx(0.55) and out.score == pytest.approx(0.775)
    assert out.verdict == "failed"


@pytest.mark.parametrize("spec, error, match", [
    ("", UnknownRewardError, "unknown reward ''"),
    ("correctness=high", ValueError, "weight of 'correctness' is not a number: 'high'"),
    ("correctness=", ValueError, "weight of 'correctness' is not a number"),
    ("correctness=0.5,,format=0.5", ValueError, "no name"),
    ("=1", ValueError, "no name"),
    ("correctness=0.5,nope=0.5", UnknownRewardError, "unknown reward 'nope'; known: correctness, format"),
    ("correctness=-1,format=2", ValueError, "finite number >= 0"),
    ("correctness=0,format=0", ValueError, "must not all be 0"),
    ("correctness=nan", ValueError, "finite number"),
])
def test_resolve_errors(mixable, spec, error, match):
    with pytest.raises(error, match=match):
        mixable.resolve(spec)


def test_builtins():
    registry = Registry()
    register_builtins(registry)
    assert registry.names() == ["code", "correctness", "format_one_code_block", "format_think_answer", "length", "math"]
    think = registry.get("FORMAT_THINK_ANSWER")
    assert isinstance(think, FormatReward) and think.name == "format_think_answer"
    assert think("<think>a</think><answer>b</answer>").reward == 1.0
    assert registry.get("format_one_code_block")("```\nx\n```").reward == 1.0
    assert isinstance(registry.get("length"), LengthReward)
    mix = registry.resolve("format_think_answer=0.5,format_one_code_block=0.5")
    assert mix("<think>a</think>\n<answer>\n```\nx\n```\n</answer>").reward == 1.0
    assert mix("<think>a</think>\n<answer>x</answer>").reward == 0.5
    assert set(registry_module.names()) >= {"format_one_code_block", "format_think_answer", "length"}


def test_configured_registry_builds_code_rewards_lazily_and_falls_back_to_the_default():
    from rewardbox.rewards.code import CodeReward
    from rewardbox.rewards.correctness import CorrectnessReward
    from rewardbox.rewards.policy import GradingPolicy
    from rewardbox.rewards.registry import configured_registry, default_registry

    policy = GradingPolicy(timeout_reward=-0.25)
    registry = configured_registry(sandbox=None, policy=policy)
    correctness = registry.get("correctness")
    assert isinstance(correctness, CorrectnessReward)
    assert correctness.code is registry.get("code")  # one bound on containers
    assert isinstance(correctness.code, CodeReward) and correctness.code.policy == policy
    assert not correctness.code.sandbox.started  # no engine touched until a sample is scored
    assert registry.get("length") is not default_registry.get("length")

    @reward(name="only_in_default")
    def only_in_default(completion):
        return 1.0

    try:
        assert registry.get("only_in_default") is only_in_default
        assert "only_in_default" in registry.names()
    finally:
        default_registry._entries.pop("only_in_default")
