"""`SandboxConfig`: one typed, checked set of sandbox options, made by the
settings and taken by `make_sandbox` and `LazySandbox`; the modes listed once."""

import typing

import pytest
from pydantic import ValidationError

from rewardbox.sandbox import LazySandbox, Limits
from rewardbox.sandbox.modes import MODES, SandboxConfig, make_sandbox
from rewardbox.settings import Settings, load_settings, sandbox_config


def test_the_settings_mode_is_the_modes_list():
    assert typing.get_args(Settings.model_fields["mode"].annotation) == MODES == ("pooled", "fresh", "cold")


def test_a_mistyped_option_fails_before_any_engine_is_asked():
    with pytest.raises(ValidationError, match="max_container"):
        LazySandbox(max_container=3)
    with pytest.raises(ValidationError, match="retry"):
        make_sandbox("cold", retry=5)
    with pytest.raises(ValidationError, match="max_containers"):
        LazySandbox(max_containers=0)


def test_a_config_and_keywords_are_not_mixed():
    with pytest.raises(TypeError, match="one or the other"):
        LazySandbox(SandboxConfig(), image="x")


def test_the_config_is_frozen():
    with pytest.raises(ValidationError):
        SandboxConfig().mode = "cold"  # type: ignore[misc]


def test_the_settings_make_the_config_a_lazy_sandbox_holds():
    settings = load_settings(environ={"REWARDBOX_WORKERS": "3", "REWARDBOX_MODE": "fresh", "REWARDBOX_TIMEOUT_S": "7"})
    config = sandbox_config(settings)
    assert (config.mode, config.max_containers, config.limits) == ("fresh", 3, Limits(timeout_s=7))
    box = LazySandbox(config=config)
    assert box.config is config and box.max_containers == 3 and not box.started
    # The keywords it was given, as `make_sandbox` takes them again (the CLI's stoppable sandbox does).
    assert box.options["limits"] == Limits(timeout_s=7) and "ray" not in box.options
