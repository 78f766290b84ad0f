"""Settings precedence: stack config (via configure) over environment over defaults; nothing on the provider."""

from __future__ import annotations

import pytest
from pulumi.dynamic import Config, ConfigureRequest

from pulumi_together_rl import config
from pulumi_together_rl.config import DEFAULT_POLL_INTERVAL
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in ("TOGETHER_API_KEY", "TOGETHER_BASE_URL", "TOGETHER_RL_POLL_INTERVAL"):
        monkeypatch.delenv(name, raising=False)
    config.reset()
    yield
    config.reset()


def configure(raw):
    _ModelResourceProvider().configure(ConfigureRequest(Config(raw_config=raw, project_name="myproj")))


def test_stack_config_beats_the_environment(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "env-key")
    monkeypatch.setenv("TOGETHER_BASE_URL", "http://env")
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "3")
    configure(
        {"together:apiKey": "cfg-key", "together:baseUrl": "http://cfg", "together:pollInterval": "0.5"}
    )

    settings = config.current()

    assert (settings.api_key, settings.base_url, settings.poll_interval) == ("cfg-key", "http://cfg", 0.5)


def test_environment_is_used_when_the_stack_config_has_no_value(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "env-key")
    monkeypatch.setenv("TOGETHER_BASE_URL", "http://env")
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "0.02")
    configure({"together:apiKey": "", "myproj:apiKey": "not-ours"})

    settings = config.current()

    assert (settings.api_key, settings.base_url, settings.poll_interval) == ("env-key", "http://env", 0.02)


def test_defaults_without_config_or_environment():
    settings = config.current()
    assert settings.api_key is None and settings.base_url is None
    assert settings.poll_interval == DEFAULT_POLL_INTERVAL


def test_environment_is_read_when_needed_not_at_configure_time(monkeypatch):
    configure({})
    monkeypatch.setenv("TOGETHER_API_KEY", "later")
    assert config.current().api_key == "later"


def test_bad_poll_interval_warns_and_uses_the_default(monkeypatch, capsys):
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "soon")
    assert config.current().poll_interval == DEFAULT_POLL_INTERVAL
    assert "TOGETHER_RL_POLL_INTERVAL" in capsys.readouterr().err


def test_the_key_is_kept_off_the_provider_and_out_of_repr():
    provider = _ModelResourceProvider()
    provider.configure(ConfigureRequest(Config(raw_config={"together:apiKey": "s3cret"}, project_name="p")))
    assert vars(provider) == {} and provider.__getstate__() == {}
    assert "s3cret" not in repr(config.current())


def test_a_bad_poll_interval_warns_once_per_process(monkeypatch, capsys):
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "-1")
    for _ in range(3):  # every wait reads the settings
        assert config.current().poll_interval == DEFAULT_POLL_INTERVAL
    assert capsys.readouterr().err.count("warning: ignoring poll interval") == 1
