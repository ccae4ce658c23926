"""The service's session settings (max_sessions, session_idle_s,
session_lifetime_s, warm_sessions) through every layer of the settings
into `ServerSettings`, as `rewardbox serve` makes them. The real command:
tests/docker/test_session_service.py."""

import pytest

from rewardbox.settings import SettingsError, load_settings, server_settings


def test_each_key_reaches_the_service_from_flag_env_and_file(tmp_path):
    config = tmp_path / "rewardbox.toml"
    config.write_text("max_sessions = 5\nsession_idle_s = 40\nwarm_sessions = 1\nsession_lifetime_s = 70\n")
    settings = load_settings({"max_sessions": 2}, config=config,
                             environ={"REWARDBOX_SESSION_LIFETIME_S": "90", "REWARDBOX_MAX_SESSIONS": "3"})
    served = server_settings(settings)
    assert (served.max_sessions, served.session_idle_s, served.session_lifetime_s, served.warm_sessions) == \
        (2, 40, 90, 1)
    assert settings.sources["max_sessions"] == "flag --max-sessions"
    assert settings.sources["session_lifetime_s"] == "env REWARDBOX_SESSION_LIFETIME_S"
    assert settings.sources["warm_sessions"] == f"file {config}"


def test_the_defaults_are_the_service_s():
    served = server_settings(load_settings(environ={}))
    assert (served.max_sessions, served.session_idle_s, served.session_lifetime_s, served.warm_sessions) == \
        (64, 300, 3600, 0)


@pytest.mark.parametrize(("variable", "value"), [("REWARDBOX_WARM_SESSIONS", "-1"), ("REWARDBOX_MAX_SESSIONS", "0"),
                                                 ("REWARDBOX_SESSION_IDLE_S", "0"),
                                                 ("REWARDBOX_SESSION_LIFETIME_S", "inf")])
def test_a_value_the_service_cannot_use_names_its_variable(variable, value):
    with pytest.raises(SettingsError, match=variable):
        load_settings(environ={variable: value})
