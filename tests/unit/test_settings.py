"""The settings' rules: flags over REWARDBOX_* variables over the TOML file
over the defaults, each value's source, and errors that name the key and
where its value came from (a pydantic ValidationError never reaches a user)."""

import os
from pathlib import Path

import pytest

from rewardbox.images import image_tag
from rewardbox.settings import (
    Settings,
    SettingsError,
    build_reward,
    load_settings,
    reward_spec,
    sandbox_options,
    server_settings,
)


@pytest.fixture
def toml(tmp_path):
    def write(text: str, name: str = "rewardbox.toml"):
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def test_flags_beat_the_environment_which_beats_the_file_which_beats_the_defaults(toml):
    path = toml('workers = 2\nimage = "scientific"\nmemory_mb = 256\nreward = "math"\n')
    settings = load_settings(flags={"workers": 8, "mode": None}, config=path,
                             environ={"REWARDBOX_WORKERS": "5", "REWARDBOX_IMAGE": "me/box:1"})
    assert (settings.workers, settings.image, settings.memory_mb, settings.reward, settings.mode) == (
        8, "me/box:1", 256, "math", "pooled")
    assert {key: settings.sources[key] for key in ("workers", "image", "memory_mb", "mode")} == {
        "workers": "flag --workers", "image": "env REWARDBOX_IMAGE", "memory_mb": f"file {path}", "mode": "default"}


def test_the_file_may_be_named_by_rewardbox_config_and_a_flag_names_another(toml):
    first, second = toml("workers = 3\n", "a.toml"), toml("workers = 4\n", "b.toml")
    assert load_settings(environ={"REWARDBOX_CONFIG": str(first)}).workers == 3
    assert load_settings(config=second, environ={"REWARDBOX_CONFIG": str(first)}).workers == 4


def test_settings_reads_the_environment_and_the_file_as_load_settings_does(monkeypatch, toml):
    monkeypatch.setattr(os, "environ", {"REWARDBOX_CONFIG": str(toml('workers = 3\ntimeout_s = 4\n')),
                                        "REWARDBOX_TIMEOUT_S": "6"})
    assert Settings().model_dump() == load_settings().model_dump()
    assert (Settings().workers, Settings().timeout_s) == (3, 6.0)


def test_empty_variables_are_unset_and_a_template_keeps_its_spaces():
    settings = load_settings(environ={"REWARDBOX_WORKERS": "", "REWARDBOX_IMAGE": "  ",
                                      "REWARDBOX_FEEDBACK_TEMPLATE": "\n\nUser: {feedback}\n"})
    assert (settings.workers, settings.image) == (None, "python")
    assert settings.sources["workers"] == "default"
    assert settings.feedback_template == "\n\nUser: {feedback}\n"


@pytest.mark.parametrize("environ, flags, message", [
    ({"REWARDBOX_WORKERS": "0"}, {}, "REWARDBOX_WORKERS='0': Input should be greater than or equal to 1"),
    ({"REWARDBOX_MODE": "warm"}, {}, "REWARDBOX_MODE='warm': Input should be 'pooled', 'fresh' or 'cold'"),
    ({"REWARDBOX_TIMEOUT_S": "nan"}, {}, "REWARDBOX_TIMEOUT_S='nan': Input should be a finite number"),
    ({"REWARDBOX_MEMORY_MB": "16"}, {}, "REWARDBOX_MEMORY_MB='16': Input should be greater than or equal to 32"),
    ({"REWARDBOX_MAX_HELD": "0"}, {}, "REWARDBOX_MAX_HELD='0': Input should be greater than or equal to 1"),
    ({}, {"reuse": 0}, "--reuse: input should be greater than or equal to 1, not 0"),
])
def test_a_bad_value_names_its_variable_or_flag(environ, flags, message):
    with pytest.raises(SettingsError) as error:
        load_settings(flags=flags, environ=environ)
    assert str(error.value) == message


def test_a_bad_value_in_the_file_names_the_file_and_the_key(toml):
    path = toml('workers = "many"\n')
    with pytest.raises(SettingsError) as error:
        load_settings(config=path, environ={})
    assert str(error.value) == f"settings file {path}: workers = 'many': Input should be a valid integer, " \
                               "unable to parse string as an integer"


def test_an_unknown_key_in_the_file_is_an_error_with_the_likely_one(toml):
    path = toml("wrokers = 2\n")
    with pytest.raises(SettingsError, match=rf"settings file {path}: unknown key 'wrokers' \(did you mean 'workers'\?\)"):
        load_settings(config=path, environ={})
    with pytest.raises(SettingsError, match="unknown key 'sandbox'.*keys: image, mode"):
        load_settings(config=toml("[sandbox]\nimage = 'x'\n"), environ={})


def test_a_missing_or_broken_file_is_an_error_naming_it(tmp_path, toml):
    with pytest.raises(SettingsError, match=f"settings file {tmp_path}/none.toml .*: cannot read it: No such file"):
        load_settings(environ={"REWARDBOX_CONFIG": str(tmp_path / "none.toml")})
    path = toml("workers = = 2\n")
    with pytest.raises(SettingsError, match=f"settings file {path}: not TOML: "):
        load_settings(config=path, environ={})


def test_the_image_is_a_variant_name_or_a_reference():
    assert load_settings(environ={}).image_tag == image_tag("python")
    assert load_settings(environ={"REWARDBOX_IMAGE": "scientific"}).image_tag == image_tag("scientific")
    assert load_settings(environ={"REWARDBOX_IMAGE": "nosuch:1"}).image_tag == "nosuch:1"


def test_the_sandbox_options_follow_the_settings():
    settings = load_settings(environ={"REWARDBOX_WORKERS": "3", "REWARDBOX_TIMEOUT_S": "7", "REWARDBOX_RUNTIME": "runsc"})
    options = sandbox_options(settings, default_workers=16)
    assert options == {"mode": "pooled", "image": image_tag(), "runtime": "runsc", "retry_s": 60.0, "max_containers": 3,
                       "reuse": 1000, "limits": settings.limits}
    assert options["limits"].timeout_s == 7.0
    # Unset: the caller's default (the CLI's CPU count; a trainer process, the sandbox's 4); on Ray, each node's CPUs.
    assert sandbox_options(load_settings(environ={}), default_workers=16)["max_containers"] == 16
    assert "max_containers" not in sandbox_options(load_settings(environ={}))
    assert "max_containers" not in sandbox_options(load_settings(environ={"REWARDBOX_RAY": "auto"}), default_workers=16)
    assert "limits" not in sandbox_options(load_settings(environ={"REWARDBOX_MODE": "cold"}))


def test_an_unset_timeout_still_grows_with_the_tests():
    assert load_settings(environ={}).limits.for_tests(60).timeout_s == 40.0
    assert load_settings(environ={"REWARDBOX_TIMEOUT_S": "5"}).limits.for_tests(60).timeout_s == 5.0


@pytest.mark.parametrize("reward, weight, spec", [
    ("correctness", 0.0, "correctness"),
    ("correctness", 0.1, "correctness=0.9,format_one_code_block=0.1"),
    ("correctness=1,length=1", 0.5, "correctness=0.25,length=0.25,format_one_code_block=0.5"),
])
def test_the_format_weight_mixes_into_the_reward(reward, weight, spec):
    assert reward_spec(load_settings({"reward": reward, "format_weight": weight}, environ={})) == spec


def test_unusable_reward_weights_name_where_the_reward_came_from(toml):
    path = toml('reward = "correctness=-1"\n')
    with pytest.raises(SettingsError, match=rf"settings file {path}: reward = 'correctness=-1': weight of 'correctness'"):
        build_reward(load_settings(config=path, environ={}))


def test_the_service_takes_its_queue_sizes_and_default_reward_from_the_settings():
    service = server_settings(load_settings(environ={"REWARDBOX_MAX_WAITING": "7", "REWARDBOX_MAX_HELD": "9",
                                                     "REWARDBOX_REWARD": "math"}))
    assert (service.max_waiting_samples, service.max_held_samples, service.default_reward) == (7, 9, "math")


def test_every_key_is_in_the_settings_table_and_the_configuration_page():
    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for key in Settings.model_fields:
        variable = f"REWARDBOX_{key.upper()}"
        assert f"| {key} | {variable} |" in (Settings.__doc__ or ""), key
        assert f"| `{key}` | `{variable}` |" in page, key
