"""The `pin_cpus` setting: its value checked and written one way, and the
CPUs of the set shared out evenly among a sandbox's containers, each
replacement on the CPUs of the container it replaces."""

import pytest

from rewardbox.sandbox.cpu_pins import CpuPins, cpu_set, cpuset_cpus
from rewardbox.sandbox.errors import CpusMissing
from rewardbox.sandbox.modes import SandboxConfig
from rewardbox.settings import SettingsError, load_settings, sandbox_options


@pytest.mark.parametrize("given, written", [
    ("all", "all"), (" All ", "all"), ("0", "0"), ("3,1,2", "1-3"), ("0-3,8", "0-3,8"), ("8, 0-1 ,1-2", "0-2,8"),
    ("4-4", "4"),
])
def test_a_set_is_written_in_dockers_form(given, written):
    assert cpu_set(given) == written


@pytest.mark.parametrize("given", ["", "x", "1,", "-1", "3-1", "0-", "1.5", "٣", "0;1", "all,0"])
def test_a_set_that_is_not_one_is_an_error(given):
    with pytest.raises(ValueError, match="is not a CPU or a range of CPUs"):
        cpu_set(given)


def test_containers_are_spread_over_the_set_least_used_first():
    pins = CpuPins("all", engine_cpus=2, first=0)
    assert [pins.take(1.0) for _ in range(4)] == [(0,), (1,), (0,), (1,)]
    assert pins.pinned() == {0: 2, 1: 2}
    pins.give_back((1,))
    assert pins.take(1.0) == (1,)  # the CPU a container left, not the first
    assert pins.take(0.25) == (0,)  # a fraction of a core is still one CPU


def test_a_container_of_several_cores_gets_as_many_cpus_the_least_used():
    pins = CpuPins("0-3", engine_cpus=4, first=0)
    assert pins.take(1.0) == (0,)
    assert pins.take(2.0) == (1, 2)
    assert pins.take(1.5) == (0, 3)  # 3 is free, then 0 comes first among the CPUs used once
    assert pins.take(8.0) == (0, 1, 2, 3)  # more cores than the set: all of it
    assert pins.pinned() == {0: 3, 1: 2, 2: 2, 3: 2}


def test_a_replacement_takes_the_cpus_of_the_container_it_replaces():
    pins = CpuPins("all", engine_cpus=2, first=0)
    first, second = pins.take(1.0), pins.take(1.0)
    # The second's replacement starts while it still serves: the least used would be CPU 0.
    assert pins.take(1.0, like=second) == second == (1,)
    pins.give_back(second)
    assert pins.pinned() == {0: 1, 1: 1}
    assert first == (0,)


def test_among_cpus_used_equally_the_turn_begins_where_told_or_at_random():
    pins = CpuPins("0-3", engine_cpus=4, first=2)
    assert [pins.take(1.0) for _ in range(5)] == [(2,), (3,), (0,), (1,), (2,)]
    # Several processes pinning over one set do not all begin with its first CPU.
    assert len({CpuPins("0-63", engine_cpus=64).take(1.0) for _ in range(50)}) > 1


def test_a_set_names_only_cpus_the_engine_has():
    assert CpuPins("0-3,8", engine_cpus=9).cpus == (0, 1, 2, 3, 8)
    with pytest.raises(CpusMissing, match=r"pin_cpus '1-2': the Docker engine has 2 CPUs \(0-1\), not CPU 2"):
        CpuPins("1-2", engine_cpus=2)


def test_the_engine_is_told_the_cpus_in_its_form():
    assert cpuset_cpus((0, 1, 2, 5)) == "0-2,5"
    assert cpuset_cpus(()) is None


def test_the_setting_reaches_the_sandbox_config_written_one_way():
    settings = load_settings(flags={"pin_cpus": "1, 0"}, environ={"REWARDBOX_PIN_CPUS": "all"})
    assert (settings.pin_cpus, settings.sources["pin_cpus"]) == ("0-1", "flag --pin-cpus")
    assert sandbox_options(settings)["pin_cpus"] == "0-1"
    assert "pin_cpus" not in sandbox_options(load_settings(environ={}))
    assert SandboxConfig(pin_cpus="ALL").pin_cpus == "all"
    with pytest.raises(ValueError, match="'0-x' is not a CPU"):
        SandboxConfig(pin_cpus="0-x")
    with pytest.raises(SettingsError, match="REWARDBOX_PIN_CPUS='3-1': Value error, '3-1' is not a CPU"):
        load_settings(environ={"REWARDBOX_PIN_CPUS": "3-1"})
