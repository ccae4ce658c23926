"""`language_images`: where another language's code runs, from each layer of
the settings (flag, environment, TOML string or table) to the sandbox's
configuration and the sandbox's image for the language."""

import pytest

from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.languages import default_image
from rewardbox.settings import SettingsError, load_settings, sandbox_config


@pytest.mark.parametrize("flags, environ, toml", [
    pytest.param({"language_images": "C++=r/cpp:1, rs=r/rust:2"}, {}, None, id="flag"),
    pytest.param({}, {"REWARDBOX_LANGUAGE_IMAGES": "cpp=r/cpp:1,rust=r/rust:2"}, None, id="env"),
    pytest.param({}, {}, 'language_images = "cpp=r/cpp:1,rust=r/rust:2"\n', id="toml-string"),
    pytest.param({}, {}, '[language_images]\n"c++" = "r/cpp:1"\nrs = "r/rust:2"\n', id="toml-table"),
])
def test_each_layer_names_languages_images(tmp_path, flags, environ, toml):
    config = None
    if toml is not None:
        config = tmp_path / "rewardbox.toml"
        config.write_text(toml)
    settings = load_settings(flags, config=config, environ=environ)

    assert sandbox_config(settings).images == {"cpp": "r/cpp:1", "rust": "r/rust:2"}


def test_unset_languages_run_in_their_toolchain_images():
    settings = load_settings({}, environ={})
    assert settings.language_images is None
    assert "images" not in sandbox_config(settings).model_fields_set
    assert default_image("cpp20") == default_image("cpp") != default_image("rust")


@pytest.mark.parametrize("value, error", [
    ("python=r/py:1", "Python runs in `image`"),
    ("cobol=r/x:1", "unknown language 'cobol'"),
    ("cpp", "'cpp' is not `language=image`"),
    ("cpp=", "'cpp=' is not `language=image`"),
])
def test_a_bad_entry_is_an_error_naming_the_flag(value, error):
    with pytest.raises(SettingsError, match="--language-images") as caught:
        load_settings({"language_images": value}, environ={})
    assert error in str(caught.value)


def test_the_sandbox_config_checks_its_images_too():
    assert SandboxConfig(images={"Go": "r/go:1"}).images == {"go": "r/go:1"}
    with pytest.raises(ValueError, match="Python runs in `image`"):
        SandboxConfig(images={"py": "r/py:1"})
