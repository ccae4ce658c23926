"""The lazy public names of `rewardbox` and `rewardbox.rewards.server`: one
helper (`rewardbox._lazy_exports`) gives both their `__getattr__` and `__dir__`."""

import subprocess
import sys
import types

import pytest

import rewardbox
from rewardbox import _lazy_exports


def _package(homes: dict[str, str]) -> types.ModuleType:
    package = types.ModuleType("pkg")
    package.__getattr__, package.__dir__ = _lazy_exports(vars(package), homes)
    return package


def test_a_name_loads_from_its_home_on_first_use_and_is_kept():
    package = _package({"dumps": "json"})
    assert "dumps" not in vars(package)
    import json

    assert package.dumps is json.dumps
    assert vars(package)["dumps"] is json.dumps  # the next lookup is a plain attribute


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'nothing'"):
        _ = _package({"dumps": "json"}).nothing


def test_dir_lists_the_loaded_and_the_lazy_names():
    package = _package({"dumps": "json"})
    assert {"dumps", "__name__"} <= set(dir(package))
    assert dir(package) == sorted(dir(package))


@pytest.mark.parametrize("package, name", [("rewardbox", "CorrectnessReward"),
                                           ("rewardbox.rewards.server", "ServerSettings")])
def test_both_packages_load_their_names_on_first_use(package, name):
    code = (f"import sys, {package} as p; before = {name!r} in vars(p); p.{name}; "
            f"print(before, {name!r} in vars(p), {name!r} in dir(p))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "True", "True"]


def test_the_root_s_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'rewardbox' has no attribute 'NoSuchName'"):
        _ = rewardbox.NoSuchName
