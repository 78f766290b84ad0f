"""check's local bounds: every number finite and within a documented range, no control characters in ids and
names, ids of a sane length, and no rejected string echoed back.

No API key is configured, so only the local part of check runs (the remote part warns and skips).
"""

from __future__ import annotations

import math

import pytest

from pulumi_together_rl import config
from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

MODEL = "Qwen/Qwen3.5-4B"
SECRET = "tk-live-0123456789abcdef0123456789abcdef"  # what a key pasted into the wrong field looks like


@pytest.fixture(autouse=True)
def no_api(monkeypatch):
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    config.reset()
    process.clear_caches()


def _resource(**inputs):
    return _ModelResourceProvider().check({}, {"base_model": MODEL, **inputs})


def _session(**inputs):
    return _TrainingSessionProvider().check({}, {"model_resources_id": "mr-1", **inputs})


def _failures(result):
    return {f.property: f.reason for f in result.failures}


def _nested(path: str, value):
    """``{"a": {"b": value}}`` for ``"a.b"``."""
    head, _, rest = path.partition(".")
    return {head: _nested(rest, value) if rest else value}


# ------------------------------------------------------------------------------------------------ numbers

# (check, field, ceiling, words the failure uses for the range)
TIMEOUTS = [
    (_resource, "create_timeout", 604800, "604800 (7 days)"),
    (_resource, "delete_timeout", 86400, "86400 (1 day)"),
    (_session, "create_timeout", 86400, "86400 (1 day)"),
    (_session, "delete_timeout", 86400, "86400 (1 day)"),
]


@pytest.mark.parametrize("check, field, ceiling, words", TIMEOUTS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308, "ceiling+1", 0, -5.0])
def test_a_timeout_must_be_finite_positive_and_at_most_its_ceiling(check, field, ceiling, words, value):
    value = ceiling + 1 if value == "ceiling+1" else value

    reasons = _failures(check(**{field: value}))

    assert set(reasons) == {field}
    assert reasons[field].startswith(f"{field}: ")
    assert "greater than 0" in reasons[field] and words in reasons[field]  # the range, whatever was wrong


@pytest.mark.parametrize("check, field, ceiling, words", TIMEOUTS)
def test_a_timeout_at_its_ceiling_or_just_above_zero_is_accepted(check, field, ceiling, words):
    for value in (float(ceiling), ceiling, 0.5):
        result = check(**{field: value})
        assert result.failures == [], (field, value)


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e300, 10000.01, 0, -1.0])
def test_max_price_per_hour_must_be_finite_positive_and_at_most_10000(value):
    reasons = _failures(_resource(max_price_per_hour=value))

    assert set(reasons) == {"max_price_per_hour"}
    assert "greater than 0" in reasons["max_price_per_hour"] and "10000" in reasons["max_price_per_hour"]


def test_max_price_per_hour_at_the_ceiling_is_accepted():
    assert _resource(max_price_per_hour=10000.0).failures == []
    assert _resource(max_price_per_hour=10000).failures == []


@pytest.mark.parametrize("value", [2**63, 65, 1e300, math.inf, math.nan, -1])
def test_num_generator_replicas_is_a_whole_number_from_0_to_64(value):
    reasons = _failures(_resource(compute_config={"num_generator_replicas": value}))

    assert set(reasons) == {"compute_config.num_generator_replicas"}
    assert "from 0 to 64" in reasons["compute_config.num_generator_replicas"]


def test_num_generator_replicas_of_64_is_accepted():
    result = _resource(compute_config={"num_generator_replicas": 64.0})
    assert result.failures == [] and result.inputs["compute_config"] == {"num_generator_replicas": 64}


@pytest.mark.parametrize(
    "key, value",
    [
        ("rank", 0),
        ("rank", 65),
        ("rank", math.inf),
        ("alpha", 0),
        ("alpha", 129),
        ("alpha", math.nan),
        ("dropout", -0.1),
        ("dropout", 1.0),
        ("dropout", math.nan),
        ("dropout", math.inf),
        ("seed", 2**53 + 2),
        ("seed", math.inf),
    ],
)
def test_every_lora_number_is_bounded(key, value):
    assert set(_failures(_session(lora_config={key: value}))) == {f"lora_config.{key}"}


@pytest.mark.parametrize("value", [299, 86401, math.inf, math.nan])
def test_inactive_timeout_is_bounded(value):
    assert set(_failures(_resource(inactive_timeout=value))) == {"inactive_timeout"}


# ----------------------------------------------------------------------------------- control characters

CONTROLS = {
    "NUL": "\x00",
    "ESC (ANSI colour)": "\x1b[31m",
    "ANSI clear screen": "\x1b[2J",
    "newline": "\n",
    "carriage return": "\r",
    "tab": "\t",
    "backspace": "\x08",
    "DEL": "\x7f",
    "C1 NEL": "\x85",
    "C1 CSI": "\x9b",
    "line separator": "\u2028",
}

# (check, property path, a valid value the control character is put into)
STRING_FIELDS = [
    (_resource, "adopt_id", "2f6c1d5e-93c1-4b8e-a1b0-6c1f0e9d7a42"),
    (_resource, "base_model", "Acme/Model-7B"),  # not an example the hints give
    (_resource, "base_weights_ref", "together://ml_Zq9x"),
    (_session, "adopt_id", "ts-8f3a"),
    (_session, "model_resources_id", "mr-2f6c1d5e"),
    (_session, "resume_from_checkpoint_id", "ckpt-01"),
    (_session, "display_name", "gsm8k run"),
    *[
        (_session, f"metadata.wandb.{key}", "grpo")
        for key in ("entity", "project", "group", "run_id", "run_name")
    ],
    (_session, "metadata.wandb.url", "https://wandb.ai/team/grpo/runs/1"),
]


@pytest.mark.parametrize("check, path, valid", STRING_FIELDS)
@pytest.mark.parametrize("control", list(CONTROLS.values()), ids=list(CONTROLS))
def test_control_characters_are_rejected_in_ids_and_names_without_echoing_the_value(
    check, path, valid, control
):
    assert check(**_nested(path, valid)).failures == []  # the value itself is fine
    bad = valid + control + SECRET

    reasons = _failures(check(**_nested(path, bad)))

    assert set(reasons) == {path}
    assert reasons[path].startswith(f"{path}: ") and "control characters are not allowed" in reasons[path]
    assert SECRET not in reasons[path] and valid not in reasons[path].removeprefix(f"{path}: ")
    assert control not in reasons[path]


def test_a_display_name_with_ordinary_unicode_is_accepted():
    result = _session(display_name="Lauf für gsm8k — ε=0.1 ✓")
    assert result.failures == [] and result.inputs["display_name"] == "Lauf für gsm8k — ε=0.1 ✓"


# ------------------------------------------------------------------------------------------- id lengths


@pytest.mark.parametrize(
    "check, path",
    [
        (_resource, "adopt_id"),
        (_session, "adopt_id"),
        (_session, "model_resources_id"),
        (_session, "resume_from_checkpoint_id"),
        (_resource, "base_model"),
    ],
)
def test_ids_longer_than_256_characters_are_rejected_without_echoing_them(check, path):
    assert check(**{path: "a" * 256}).failures == []
    long_id = SECRET * 8  # 320 characters

    reasons = _failures(check(**{path: long_id}))

    assert set(reasons) == {path}
    # The failure's own words, not only the hint's (which also says "at most 256 characters").
    assert reasons[path].startswith(
        f"{path}: string should have at most 256 characters (got a string of 320 "
    )
    assert SECRET[:12] not in reasons[path]


@pytest.mark.parametrize(
    "check, path", [(_resource, "adopt_id"), (_session, "adopt_id"), (_session, "model_resources_id")]
)
@pytest.mark.parametrize("bad", ["mr/../../admin", "a\\b", "..", "."])
def test_an_id_that_would_change_the_request_path_is_rejected_locally(check, path, bad):
    # The client refuses such an id before sending anything (an exception, not a check failure), so check
    # must catch it first and name the field.
    reasons = _failures(check(**{path: bad}))

    assert set(reasons) == {path}
    assert "must be one id" in reasons[path]
    if len(bad) > 2:  # "." and ".." are in the explanation itself
        assert bad not in reasons[path]


def test_a_display_name_over_128_characters_is_refused_in_characters():
    reasons = _failures(_session(display_name="x" * 129))

    assert reasons["display_name"].startswith(
        "display_name: string should have at most 128 characters (got a"
    )
