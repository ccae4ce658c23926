"""The public names: every name a package lists in `__all__` resolves, none is
listed twice, and `rewardbox` (the one import a user needs) offers every public
name of the sandbox and of the rewards, from its home there."""

import importlib

import pytest

PACKAGES = ("rewardbox", "rewardbox.sandbox", "rewardbox.rewards", "rewardbox.adapters")
# The subpackages whose public names `rewardbox` re-exports (the adapters are
# imported by name, `rewardbox.adapters.trl` and so on: each pulls in its trainer's types).
REEXPORTED = ("rewardbox.sandbox", "rewardbox.rewards")


def unresolved(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    return [name for name in module.__all__ if not hasattr(module, name)]


def duplicated(module_name: str) -> list[str]:
    names = importlib.import_module(module_name).__all__
    return sorted({name for name in names if names.count(name) > 1})


@pytest.mark.parametrize("module_name", PACKAGES)
def test_every_listed_name_resolves(module_name):
    assert unresolved(module_name) == []


@pytest.mark.parametrize("module_name", PACKAGES)
def test_no_name_is_listed_twice(module_name):
    assert duplicated(module_name) == []


@pytest.mark.parametrize("module_name", REEXPORTED)
def test_rewardbox_offers_the_subpackage_s_names(module_name):
    import rewardbox

    sub = importlib.import_module(module_name)
    missing = sorted(set(sub.__all__) - set(rewardbox.__all__))
    assert missing == []
    for name in sub.__all__:
        assert getattr(rewardbox, name) is getattr(sub, name), name


def test_a_broken_name_is_caught(monkeypatch):
    # The checks above can fail: a listed name that does not resolve, or a twin.
    sandbox = importlib.import_module("rewardbox.sandbox")
    monkeypatch.setattr(sandbox, "__all__", [*sandbox.__all__, "NoSuchName", "Limits"])
    assert unresolved("rewardbox.sandbox") == ["NoSuchName"]
    assert duplicated("rewardbox.sandbox") == ["Limits"]
